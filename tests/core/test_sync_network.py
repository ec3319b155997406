"""The network never blocks the memory (docs/operations.md, "A remote that never
answers"; case C65): a remote that accepts the connection and never answers makes
``sync`` fail within its deadline with each remote's cause (exit 7 from the CLI), delays
no other remote and no request, and shutdown kills the network step at once, leaving no
child process."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from support import make_memory, run_cli

from wiki_memory.errors import Unavailable
from wiki_memory.wiki import replicate as rp

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(shutil.which("git") is None, reason="needs stock git"),
]

SHORT = {
    "sync_connect_timeout_seconds": 1.0,
    "sync_progress_timeout_seconds": 1.0,
    "sync_timeout_seconds": 3.0,
}


class BlackHole:
    """A local TCP listener that accepts every connection and never writes a byte."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.fixture
def hole():
    h = BlackHole()
    yield h
    h.close()


def children(pids: set[int]) -> set[int]:
    """The pids of ``pids`` still alive (zombies count as gone)."""
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(pid)
    return alive


def test_c65_a_remote_that_never_answers_fails_in_time_and_delays_nothing(
    tmp_path, stop_after, hole
):
    good = tmp_path / "hub.git"
    subprocess.run(["git", "init", "-q", "--bare", str(good)], check=True)
    m = make_memory(tmp_path / "d", files={"projects/p/index.md": "# p\n"}, **SHORT)
    stop_after(m)
    rp.add_remote(m.wiki_dir, "a-git", f"git://127.0.0.1:{hole.port}/x")
    rp.add_remote(m.wiki_dir, "b-http", f"http://127.0.0.1:{hole.port}/x")
    rp.add_remote(m.wiki_dir, "c-good", str(good))
    errors: list[Exception] = []
    took: list[float] = []

    def run() -> None:
        t0 = time.monotonic()
        try:
            m.sync.sync()
        except Exception as exc:  # noqa: BLE001 - checked below
            errors.append(exc)
        took.append(time.monotonic() - t0)

    t = threading.Thread(target=run)
    t.start()
    slowest = 0.0
    i = 0
    while t.is_alive():
        t0 = time.monotonic()
        rel = f"projects/p/notes/n{i}.md"
        (m.wiki_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (m.wiki_dir / rel).write_text(f"# n{i}\n")
        m._commit_hand_edits_now([rel])
        slowest = max(slowest, time.monotonic() - t0)
        i += 1
        time.sleep(0.05)
    t.join()
    assert slowest < 1.0, slowest
    assert took[0] < 3.0 * 2 + 5  # fetch deadline per remote, remotes side by side
    assert len(errors) == 1 and isinstance(errors[0], Unavailable)
    msg = str(errors[0])
    assert "a-git" in msg and "b-http" in msg and "c-good" not in msg
    # the good remote was not held up by the hung ones
    assert (
        subprocess.run(
            ["git", "-C", str(good), "rev-parse", "main"], capture_output=True
        ).returncode
        == 0
    )
    st = m.sync.status()["remotes"]
    assert st["a-git"]["failing_since"] and st["c-good"]["failing_since"] is None
    assert not m.sync.net._procs


def test_c65_shutdown_within_10_s_with_a_hung_fetch_leaves_no_child(tmp_path, hole):
    m = make_memory(
        tmp_path / "d",
        files={"projects/p/index.md": "# p\n"},
        sync_progress_timeout_seconds=120.0,
        sync_timeout_seconds=600.0,
    )
    rp.add_remote(m.wiki_dir, "hung", f"git://127.0.0.1:{hole.port}/x")
    seen: set[int] = set()
    t = threading.Thread(target=lambda: pytest.raises(Unavailable, m.sync.sync), daemon=True)
    t.start()
    deadline = time.monotonic() + 10
    while not m.sync.net._procs and time.monotonic() < deadline:
        time.sleep(0.05)
    seen.update(p.pid for p in m.sync.net._procs)
    assert seen
    time.sleep(0.5)
    t0 = time.monotonic()
    m.stop()
    t.join(10)
    assert time.monotonic() - t0 < 10 and not t.is_alive()
    assert not children(seen)


def test_c65_sync_by_hand_exits_7_within_the_deadline_naming_the_cause(tmp_path, hole):
    data = tmp_path / "d"
    m = make_memory(data, files={"projects/p/index.md": "# p\n"})
    rp.add_remote(m.wiki_dir, "hung", f"http://127.0.0.1:{hole.port}/x")
    m.stop()
    env = {f"WIKI_MEMORY_{k.upper()}": str(v) for k, v in SHORT.items()}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        t0 = time.monotonic()
        r = run_cli(data, "sync", timeout=60)
        took = time.monotonic() - t0
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert r.returncode == 7, r.stdout + r.stderr
    assert "hung" in r.stderr and took < 3.0 + 15
    out = run_cli(data, "status")
    assert '"failing_since": "20' in out.stdout


def test_c65_ssh_that_would_prompt_and_a_name_that_does_not_resolve_fail_at_once(
    tmp_path, stop_after, hole
):
    if shutil.which("ssh") is None:
        pytest.skip("needs the ssh program")
    m = make_memory(tmp_path / "d", files={"projects/p/index.md": "# p\n"}, **SHORT)
    stop_after(m)
    # an ssh server that never sends its banner, and a host name that cannot resolve
    rp.add_remote(m.wiki_dir, "r3", f"ssh://git@127.0.0.1:{hole.port}/x.git")
    rp.add_remote(m.wiki_dir, "r4", "git://no-such-host.invalid/x")
    t0 = time.monotonic()
    with pytest.raises(Unavailable) as err:
        m.sync.sync()
    assert time.monotonic() - t0 < 3.0 + 5
    assert "r3" in str(err.value) and "r4" in str(err.value)
    t0 = time.monotonic()
    with pytest.raises(Unavailable):
        m.sync.sync("r4")
    assert time.monotonic() - t0 < 3.0


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from ``/proc/<pid>/task/*/children``)."""
    out: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        for f in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                kids = [int(x) for x in f.read_text().split()]
            except OSError:
                continue
            for k in kids:
                if k not in out:
                    out.add(k)
                    todo.append(k)
    return children(out)


@pytest.mark.serial
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc")
def test_c65_a_real_server_answers_every_request_within_1_s_while_sync_hangs(tmp_path, hole):
    """Through a real server: health, recall and page writes keep answering within the
    1 s the contract allows while ``sync`` against a remote that never answers runs; the
    sync exits non-zero within its deadline; SIGTERM during a second hung sync ends the
    server within 10 s with no child left."""
    from serverproc import ServerProcess

    data = tmp_path / "d"
    m = make_memory(data, files={"projects/p/index.md": "# p\n"})
    rp.add_remote(m.wiki_dir, "hung", f"git://127.0.0.1:{hole.port}/x")
    m.stop()
    progress = 12.0  # the deadline that ends a hung fetch: longer than the 10 s shutdown bound
    limits = {
        "sync_connect_timeout_seconds": 2.0,
        "sync_progress_timeout_seconds": progress,
        "sync_timeout_seconds": 30.0,
    }
    env = {f"WIKI_MEMORY_{k.upper()}": str(v) for k, v in limits.items()}
    srv = ServerProcess(data, env=env).start()
    try:
        import httpx

        slowest: dict[str, float] = {}
        client = httpx.Client(base_url=srv.url, headers=srv.headers, timeout=30)

        def timed(kind: str, fn) -> None:
            t0 = time.monotonic()
            r = fn()
            took = time.monotonic() - t0
            assert r.status_code < 300, (kind, r.status_code, r.text)
            slowest[kind] = max(slowest.get(kind, 0.0), took)

        sync = subprocess.Popen(
            [*run_cli_argv(data), "sync"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "WIKI_MEMORY_HOME": str(data)},
        )
        t0 = time.monotonic()
        i = 0
        while sync.poll() is None and time.monotonic() - t0 < 60:
            timed("health", lambda: client.get("/v1/health"))
            timed("recall", lambda: client.post("/v1/recall", json={"query": "n1 notes"}))
            rel = f"projects/p/notes/n{i}.md"
            timed(
                "write",
                lambda rel=rel: client.put(
                    f"/v1/pages/{rel}",
                    content=b"# note\n\nwritten while sync hangs\n",
                    headers={"If-None-Match": "*", "Content-Type": "text/markdown"},
                ),
            )
            i += 1
            time.sleep(0.05)
        out, err = sync.communicate(timeout=30)
        took = time.monotonic() - t0
        print(f"sync took {took:.1f} s; {i} rounds; slowest per kind: {slowest}")
        assert sync.returncode == 7, out + err
        assert "hung" in err and took < progress + 10
        assert i >= 10 and all(v < 1.0 for v in slowest.values()), slowest
        # a second hung sync, then SIGTERM while its network child waits
        again = subprocess.Popen(
            [*run_cli_argv(data), "sync"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "WIKI_MEMORY_HOME": str(data)},
        )
        assert srv.proc is not None
        seen: set[int] = set()
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            seen = descendants(srv.proc.pid)
            time.sleep(0.05)
        assert seen, "the sync's network step never started a child"
        time.sleep(0.5)
        t0 = time.monotonic()
        srv.stop(timeout=30)
        stopped = time.monotonic() - t0
        print(f"shutdown took {stopped:.1f} s with a hung fetch")
        assert stopped < 10 and stopped < progress, stopped
        assert not children(seen), children(seen)
        assert again.wait(timeout=30) != 0
        client.close()
    finally:
        if srv.proc is not None and srv.proc.poll() is None:
            srv.kill()


def run_cli_argv(data: Path) -> list[str]:
    """The command line ``run_cli`` runs, for a CLI call left running in the background."""
    import sys

    return [sys.executable, "-m", "wiki_memory.cli.main", "--data-dir", str(data)]
