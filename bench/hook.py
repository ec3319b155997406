"""Wall time of one hook run, as a harness pays it.

Runs the hook program (``python -S hooks/wiki_memory_hook.py --harness claude-code``,
event JSON on stdin) against:

- a live ``wiki-memory serve`` on a temporary data directory: PostToolUse payloads
  of 1 KB, 100 KB and 2 MiB (``--runs`` each, default 200);
- a refused port and a black-hole port (a socket that accepts and never answers),
  ``--fail-runs`` each (default 20), with an empty outbox before every run so that
  each run pays the failed send (the worst case);
- ``--headless`` copies (default 20) of a Claude Code SessionStart started at once on a
  refused port and a fresh data directory (case C45's headless run, as that many
  ``claude -p`` jobs would), beside as many ``python -S -c pass`` started at once: the
  wall time until the last exits, the drainers that ran, and the processes left 5 s later;
- the same two, as a real outage: ``--away-runs`` calls in a row (default 100), one
  SessionStart in ten, the outbox kept: the first call pays the failed send and
  starts the back-off, the others skip the network (their p95 is reported apart);

beside ``python -c pass``, ``python -S -c pass`` and ``python -S`` importing the
sanitizer (``wiki_memory.capture.sanitize``, which the hook loads) on the same interpreter
in the same run. Prints p50/p95 in milliseconds and the ratio to ``python -c pass``.

    python bench/hook.py [--runs 200] [--fail-runs 20] [--away-runs 100] [--headless 20]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
HOOK = REPO / "hooks" / "wiki_memory_hook.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def payload(size: int, i: int) -> bytes:
    base: dict[str, Any] = {
        "session_id": f"bench-{size}",
        "transcript_path": "/home/dev/.claude/projects/demo/bench.jsonl",
        "cwd": "/home/dev/demo",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_use_id": f"toolu_bench_{size}_{i}",
        "tool_input": {"command": "make test", "description": "run the tests"},
        "tool_response": {"stdout": "", "stderr": "", "interrupted": False},
    }
    pad = size - len(json.dumps(base))
    line = "test_module.py::test_case PASSED [ 42%]\n"
    base["tool_response"]["stdout"] = (line * (pad // len(line) + 1))[: max(pad, 0)]
    return json.dumps(base).encode()


def start_payload(i: int) -> bytes:
    return json.dumps(
        {
            "session_id": "bench-away",
            "cwd": "/home/dev/demo",
            "hook_event_name": "SessionStart",
            "source": "startup" if i == 0 else "resume",
        }
    ).encode()


def away_targets(env: dict[str, str]) -> list[tuple[str, dict[str, str], Any]]:
    """``(label, environment, closer)`` for a refused port and a black hole."""
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(1024)
    return [
        ("refused", dict(env, WIKI_MEMORY_URL=f"http://127.0.0.1:{free_port()}"), lambda: None),
        (
            "black hole",
            dict(env, WIKI_MEMORY_URL=f"http://127.0.0.1:{hole.getsockname()[1]}"),
            hole.close,
        ),
    ]


def timed(argv: list[str], data: bytes, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(
        argv, input=data, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{argv} exited {p.returncode}")
    return dt


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


class Server:
    def __init__(self, data: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, WIKI_MEMORY_HOME=str(data))
        self.log = open(data.parent / "server.stderr", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "wiki_memory.cli.main",
                "--data-dir",
                str(data),
                "serve",
                "--port",
                str(self.port),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
        )
        end = time.monotonic() + 60
        while time.monotonic() < end:
            try:
                with urllib.request.urlopen(self.url + "/v1/health", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise SystemExit("the server did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


def own_processes_with(marker: str) -> list[int]:
    """Pids of this user's processes whose environment holds ``marker`` (Linux /proc)."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(d))
        except OSError:
            continue
    return found


def at_once(argv: list[str], data: bytes, envs: list[dict[str, str]]) -> float:
    """Start one process per environment at once; seconds until the last has exited."""
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=e,
        )
        for e in envs
    ]
    for p in procs:
        assert p.stdin is not None
        p.stdin.write(data)
        p.stdin.close()
    for p in procs:
        if p.wait() != 0:
            raise SystemExit(f"{argv} exited {p.returncode}")
    return time.perf_counter() - t0


def headless(py: str, hook: list[str], env: dict[str, str], tmp: Path, n: int) -> list[str]:
    """Case C45's headless run: ``n`` SessionStarts at once on a refused port, one fresh
    data directory shared by all (as ``n`` ``claude -p`` jobs in one project would)."""
    data = tmp / "headless"
    data.mkdir()
    marker = f"WIKI_MEMORY_HOME={data}"
    url = f"http://127.0.0.1:{free_port()}"
    envs = [dict(env, WIKI_MEMORY_HOME=str(data), WIKI_MEMORY_URL=url) for _ in range(n)]
    floor = at_once([py, "-S", "-c", "import sys; sys.stdin.read()"], b"", envs)
    wall = at_once(hook, start_payload(0), envs)
    seen = set(own_processes_with(marker))
    time.sleep(5)
    left = own_processes_with(marker)
    queued = (
        len([p for p in (data / "outbox").rglob("*.json")]) if (data / "outbox").exists() else 0
    )
    return [
        f"headless: {n} SessionStarts at once on a refused port: {wall * 1000:.0f} ms wall "
        f"(floor, {n} x python -S at once: {floor * 1000:.0f} ms; {wall / floor:.2f}x); "
        f"{len(seen)} process(es) running at exit (drainers), {len(left)} left after 5 s; "
        f"{queued} file(s) in the outbox"
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--fail-runs", type=int, default=20)
    ap.add_argument("--away-runs", type=int, default=100)
    ap.add_argument("--headless", type=int, default=20)
    args = ap.parse_args()
    py = sys.executable
    tmp = Path(tempfile.mkdtemp(prefix="wm-bench-hook-"))
    data = tmp / "data"
    data.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WIKI_MEMORY_")}
    env["WIKI_MEMORY_HOME"] = str(data)
    hook = [py, "-S", str(HOOK), "--harness", "claude-code"]
    rows: list[tuple[str, int, list[float]]] = []
    notes: list[str] = []
    try:
        # Warm the bytecode caches once.
        timed([py, "-c", "pass"], b"", env)
        timed(hook, payload(1000, -1), dict(env, WIKI_MEMORY_URL=f"http://127.0.0.1:{free_port()}"))
        shutil.rmtree(data / "outbox", ignore_errors=True)
        if args.headless:
            notes += headless(py, hook, env, tmp, args.headless)

        rows.append(
            (
                "python -c pass",
                args.runs,
                [timed([py, "-c", "pass"], b"", env) for _ in range(args.runs)],
            )
        )
        rows.append(
            (
                "python -S -c pass",
                args.runs,
                [timed([py, "-S", "-c", "pass"], b"", env) for _ in range(args.runs)],
            )
        )
        # what the hook pays for the sanitizer's table (moved here from the time bound of
        # tests/capture/test_sanitize.py::test_import_is_stdlib_only; that test bounds the modules)
        imp = f"import sys; sys.path.insert(0, {str(REPO)!r}); import wiki_memory.capture.sanitize"
        rows.append(
            (
                "python -S, import sanitizer",
                args.runs,
                [timed([py, "-S", "-c", imp], b"", env) for _ in range(args.runs)],
            )
        )

        srv = Server(data)
        try:
            live = dict(env, WIKI_MEMORY_URL=srv.url)
            for size, label in ((1000, "1 KB"), (100_000, "100 KB"), (2 * 1024 * 1024, "2 MiB")):
                xs = [timed(hook, payload(size, i), live) for i in range(args.runs)]
                rows.append((f"hook, live server, {label}", args.runs, xs))
            left = [n for n in os.listdir(data / "outbox") if n.endswith(".json")]
            if left:
                print(f"warning: {len(left)} event(s) left in the outbox", file=sys.stderr)
        finally:
            srv.stop()

        refused = dict(env, WIKI_MEMORY_URL=f"http://127.0.0.1:{free_port()}")
        xs = []
        for i in range(args.fail_runs):
            shutil.rmtree(data / "outbox", ignore_errors=True)
            xs.append(timed(hook, payload(1000, 10_000 + i), refused))
        rows.append(("hook, refused port, 1 KB", args.fail_runs, xs))

        hole = socket.socket()
        hole.bind(("127.0.0.1", 0))
        hole.listen(1024)
        black = dict(
            env,
            WIKI_MEMORY_URL=f"http://127.0.0.1:{hole.getsockname()[1]}",
            WIKI_MEMORY_HOOK_DRAIN_REQUEST_SECONDS="1",
        )
        xs = []
        try:
            for i in range(args.fail_runs):
                shutil.rmtree(data / "outbox", ignore_errors=True)
                xs.append(timed(hook, payload(1000, 20_000 + i), black))
        finally:
            hole.close()
        rows.append(("hook, black-hole port, 1 KB", args.fail_runs, xs))

        # A real outage: the server away for 100 calls in a row, one SessionStart in
        # ten; the first call pays the failed send, the others find the back-off and
        # go straight to the outbox (SessionStart composes its line from it).
        for label, port_env, closer in away_targets(env):
            shutil.rmtree(data / "outbox", ignore_errors=True)
            xs = []
            try:
                for i in range(args.away_runs):
                    data_i = start_payload(i) if i % 10 == 0 else payload(1000, 30_000 + i)
                    xs.append(timed(hook, data_i, port_env))
            finally:
                closer()
            rows.append((f"away, {label}, first call", 1, xs[:1]))
            rows.append((f"away, {label}, calls 2-{args.away_runs}", len(xs) - 1, xs[1:]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    floor = pct(rows[0][2], 0.95)
    print(f"interpreter: {py} (Python {sys.version.split()[0]}), {os.cpu_count()} CPUs")
    print(f"{'case':<36} {'runs':>5} {'p50 ms':>8} {'p95 ms':>8} {'p95/floor':>10}")
    for name, n, xs in rows:
        p50, p95 = pct(xs, 0.5) * 1000, pct(xs, 0.95) * 1000
        print(f"{name:<36} {n:>5} {p50:>8.1f} {p95:>8.1f} {p95 / (floor * 1000):>9.2f}x")
    print("floor = p95 of `python -c pass`; target: the live 1 KB p95 within 1.5x of it")
    for line in notes:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
