"""Hooks pinned to their memory (C44) and quick to give up when it is away (C45).

The installed command is run as a harness started elsewhere would run it: through
``sh -c``, with an environment that does not name the data directory (or names another
one), against a real ``wiki-memory serve``, a refused port and a black hole that counts
the connections it is offered."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from clikit import run_in_process
from hookkit import free_port, run_hook, wait_until
from serverproc import ServerProcess

from wiki_memory.harness.outbox import HOOK_SCRIPT as HOOK

pytestmark = pytest.mark.process


def harness_env(tmp: Path, **extra: str) -> dict[str, str]:
    """A login shell's environment without any WIKI_MEMORY_* variable (a GUI-started
    harness), HOME in ``tmp``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WIKI_MEMORY_", "XDG_"))}
    env["HOME"] = str(tmp / "home")
    env.update(extra)
    return env


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``wiki-memory ARGS...`` in ``env``, in this process (installing and diagnosing are
    checked by what they write and say; the installed hooks run as processes)."""
    return run_in_process(list(args), env)


def our_command(settings: Path, event: str) -> str:
    cfg = json.loads(settings.read_text())
    for group in cfg["hooks"][event]:
        for h in group["hooks"]:
            if "wiki_memory_hook" in h["command"]:
                return str(h["command"])
    raise AssertionError(f"no wiki-memory handler for {event} in {settings}")


def repo(tmp: Path, name: str) -> Path:
    d = tmp / "code" / name
    (d / ".git").mkdir(parents=True, exist_ok=True)
    return d


def prompt(session: str, cwd: Path, text: str) -> dict[str, Any]:
    return {
        "session_id": session,
        "cwd": str(cwd),
        "hook_event_name": "UserPromptSubmit",
        "prompt": text,
    }


def test_c44_hooks_stay_pinned_to_the_data_dir_they_were_installed_for(tmp_path: Path) -> None:
    team = tmp_path / "wm-team"
    claude_dir = tmp_path / "home" / ".claude-work"
    codex_dir = tmp_path / "home" / ".codex-work"
    install_env = harness_env(
        tmp_path,
        WIKI_MEMORY_HOME=str(team),
        CLAUDE_CONFIG_DIR=str(claude_dir),
        CODEX_HOME=str(codex_dir),
    )
    with ServerProcess(team):
        for agent in ("claude-code", "codex"):
            r = cli(install_env, "install-hooks", "--agent", agent, "--apply")
            assert r.returncode == 0, r.stderr
            assert f"pinned:  {team}" in r.stdout
        # only the profile's files changed; the default ones were never created
        assert (claude_dir / "settings.json").is_file() and (codex_dir / "hooks.json").is_file()
        assert not (tmp_path / "home" / ".claude").exists()
        assert not (tmp_path / "home" / ".codex").exists()
        atlas = repo(tmp_path, "atlas")
        # shell 2: no WIKI_MEMORY_HOME; then another tool's CLAUDE_ENV_FILE export
        elsewhere = tmp_path / "elsewhere"
        for i, extra in enumerate(({}, {"WIKI_MEMORY_HOME": str(elsewhere)})):
            env = harness_env(tmp_path, **extra)
            for agent, settings in (
                ("claude-code", claude_dir / "settings.json"),
                ("codex", codex_dir / "hooks.json"),
            ):
                cmd = our_command(settings, "UserPromptSubmit")
                r = run_hook(
                    cmd, prompt(f"sess-044{i}-{agent}", atlas, "rename the retry flag"), env
                )
                assert r.rc == 0 and r.stderr == b"", r
        assert outbox_events(team) == []  # everything was delivered
        spooled = list((team / "spool").glob("*.jsonl"))
        assert len(spooled) == 4, spooled
    # the server is stopped: the next event lands in the pinned data dir's outbox
    cmd = our_command(claude_dir / "settings.json", "UserPromptSubmit")
    r = run_hook(cmd, prompt("sess-0441", atlas, "one more"), harness_env(tmp_path))
    assert r.rc == 0
    assert [e["payload"]["prompt"] for e in outbox_events(team)] == ["one more"]
    assert not elsewhere.exists()
    assert not (tmp_path / "home" / ".local" / "share" / "wiki-memory").exists()

    # doctor names what each hook points to, and flags a hook pinned elsewhere
    other = tmp_path / "wm-other"
    r = cli(install_env, "--data-dir", str(other), "install-hooks", "--agent", "claude-code")
    assert f"was pinned to {team}, now {other}" in r.stdout, r.stdout
    r = cli(
        install_env, "--data-dir", str(other), "install-hooks", "--agent", "claude-code", "--apply"
    )
    assert r.returncode == 0
    profile_env = {**harness_env(tmp_path), "CLAUDE_CONFIG_DIR": str(claude_dir)}
    profile_env["CODEX_HOME"] = str(codex_dir)
    doc = cli(profile_env, "--data-dir", str(team), "doctor")
    assert f"claude-code: {claude_dir / 'settings.json'} -> {other}" in doc.stdout, doc.stdout
    assert f"codex: {codex_dir / 'hooks.json'} -> {team}" in doc.stdout
    assert f"points to another store: {other}" in doc.stdout
    assert "1 event(s) queued" in doc.stdout


def outbox_events(data_dir: Path) -> list[dict[str, Any]]:
    d = data_dir / "outbox"
    if not d.is_dir():
        return []
    names = sorted(n for n in os.listdir(d) if n.endswith(".json") and n[:1].isdigit())
    out = []
    for n in names:  # the server's drain may remove a file between the listing and the read
        try:
            out.append(json.loads((d / n).read_text()))
        except FileNotFoundError:
            continue
    return out


class CountingHole:
    """A port that accepts every connection, counts it, and never answers."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(128)
        self.sock.settimeout(0.2)
        self.accepted = 0
        self.held: list[socket.socket] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            self.held.append(conn)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        for c in self.held:
            c.close()
        self.sock.close()


@pytest.mark.parametrize("state", ["black-hole", "refused"])
def test_100_hook_calls_skip_the_network_and_the_server_drains_them_when_back(
    tmp_path: Path, state: str
) -> None:
    data = tmp_path / "data"
    port = free_port()
    (data).mkdir(parents=True)
    # the data directory's server is alive (this process stands in for it) and named
    # this port, where nothing answers or a black hole waits
    (data / "server.json").write_text(
        json.dumps({"pid": os.getpid(), "address": f"http://127.0.0.1:{port}"})
    )
    env = harness_env(tmp_path, WIKI_MEMORY_HOME=str(data))
    r = cli(env, "install-hooks", "--agent", "claude-code", "--apply")
    assert r.returncode == 0, r.stderr
    settings = tmp_path / "home" / ".claude" / "settings.json"
    post_cmd = our_command(settings, "PostToolUse")
    start_cmd = our_command(settings, "SessionStart")
    run_env = harness_env(tmp_path, WIKI_MEMORY_HOOK_BACKOFF_SECONDS="600")
    atlas = repo(tmp_path, "atlas")
    hole = CountingHole(port) if state == "black-hole" else None
    contexts: list[str] = []
    last_start = 0.0  # when the last SessionStart hook had returned
    try:
        for i in range(100):
            if i % 10 == 0:
                # identical payloads within one second are one event by design (the same
                # hook installed twice, docs/hooks.md): start each resume in a second
                # after the one the last start ended in (its nine tool calls took most)
                time.sleep(max(0.0, int(last_start) + 1.01 - time.time()))
                payload: dict[str, Any] = {
                    "session_id": "sess-away",
                    "cwd": str(atlas),
                    "hook_event_name": "SessionStart",
                    "source": "startup" if i == 0 else "resume",
                }
                r = run_hook(start_cmd, payload, run_env)
                last_start = time.time()
                ctx = json.loads(r.stdout)["hookSpecificOutput"]["additionalContext"]
                contexts.append(ctx)
            else:
                payload = {
                    "session_id": "sess-away",
                    "cwd": str(atlas),
                    "hook_event_name": "PostToolUse",
                    "tool_name": "Bash",
                    "tool_use_id": f"toolu_{i:03d}",
                    "tool_input": {"command": f"echo marker-{i:03d}"},
                    "tool_response": {"stdout": f"marker-{i:03d}", "stderr": ""},
                }
                r = run_hook(post_cmd, payload, run_env)
                assert r.stdout == b""
            assert r.rc == 0, r
            if hole is not None and i == 0:
                first = hole.accepted
        if hole is not None:
            assert first == 1  # the first call's delivery, which timed out
            assert hole.accepted == 1  # none of the 99 others opened a connection
    finally:
        if hole is not None:
            hole.close()
    # SessionStart said so, with the count of waiting events
    assert contexts[0].startswith("wiki-memory: memory server unreachable since ")
    for k, ctx in enumerate(contexts[1:], start=1):
        assert "unreachable since" in ctx and f"; {10 * k + 1} events queued;" in ctx, ctx
    assert len(outbox_events(data)) == 100
    # the server comes back on its data directory: it sends the outbox into itself
    with ServerProcess(data, port=port) as srv:
        assert wait_until(lambda: not outbox_events(data), 60, 0.25), len(outbox_events(data))
        srv.post(
            "/v1/observations",
            {
                "harness": "claude-code",
                "event": "SessionEnd",
                "session_id": "sess-away",
                "project": "atlas",
                "payload": {"reason": "other"},
            },
        )

        def page() -> str | None:
            pages = srv.get("/v1/pages?project=atlas&kind=session").json()["pages"]
            for p in pages:
                full = srv.get("/v1/pages/" + p["path"]).json()
                if full["metadata"].get("status") == "ended":
                    return str(full["content"])
            return None

        assert wait_until(lambda: page() is not None, 30, 0.25)
        text = (page() or "").split("## Timeline", 1)[-1]
    for i in range(100):
        if i % 10:
            assert text.count(f"echo marker-{i:03d}") == 1, i
    assert text.count("session start") == 10
    # and the hooks take the network again at once
    assert not (data / "outbox" / ".unreachable").exists()


def test_c45_session_start_says_when_memory_is_away(tmp_path: Path) -> None:
    """S1 refused, S2 black hole, S3 a host name that does not resolve, S4 a brief that
    takes 5 s: the context is one line saying so, stderr one warning, exit 0."""
    from hookkit import BlackHole, StubServer

    payload = {
        "session_id": "sess-0450",
        "cwd": str(repo(tmp_path, "atlas")),
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    slow = StubServer(brief="late brief").__enter__()
    handle = slow.handle

    def slow_brief(path: str, body: Any, auth: str | None) -> tuple[int, Any]:
        if path == "/v1/brief":
            slow.stop_event.wait(5)
        return handle(path, body, auth)

    slow.handle = slow_brief  # type: ignore[method-assign]
    hole = BlackHole()
    states = {
        "S1": (f"http://127.0.0.1:{free_port()}", "memory server unreachable since"),
        "S2": (hole.url, "memory server unreachable since"),
        "S3": ("http://memory.invalid:8765", "memory server unreachable since"),
        "S4": (slow.url, "brief unavailable (the server did not answer in time)"),
    }
    try:
        for name, (url, said) in states.items():
            data = tmp_path / name
            cmd = f"{sys.executable} -S {HOOK} --harness claude-code --data-dir {data} --url {url}"
            r = run_hook(cmd, payload, harness_env(tmp_path))
            assert r.rc == 0, (name, r)
            ctx = json.loads(r.stdout)["hookSpecificOutput"]["additionalContext"]
            assert ctx.startswith("wiki-memory: ") and said in ctx, (name, ctx)
            assert len(r.stderr.decode().strip().splitlines()) == 1, (name, r)
            if name != "S4":
                assert "1 event queued" in ctx, (name, ctx)
                assert outbox_events(data)[0]["event"] == "SessionStart"
    finally:
        hole.__exit__()
        slow.__exit__()
    # S4's event was delivered; the brief alone was late
    assert [e["event"] for e in slow.stored.values()] == ["SessionStart"]
