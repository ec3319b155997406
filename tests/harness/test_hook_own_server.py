"""A hook sends only to its own server: the one its data directory's live ``server.json``
names. A stopped store is "away" (the outbox keeps the event), never a default port or
the port it used before, whatever listens there now.

The installed command is run as a harness runs it (``sh -c``, an environment without
any ``WIKI_MEMORY_*``), against real ``wiki-memory serve`` processes and stand-in
listeners that record every request they get."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hookkit import StubServer, free_port, run_hook, wait_until
from serverproc import ServerProcess

pytestmark = [pytest.mark.process, pytest.mark.slow]

#: the address hooks fell back to when server.json was missing
OLD_DEFAULT_PORT = 8765


def harness_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WIKI_MEMORY_", "XDG_"))}
    env["HOME"] = str(tmp / "home")
    env.update(extra)
    return env


def our_command(settings: Path, event: str) -> str:
    for group in json.loads(settings.read_text())["hooks"][event]:
        for h in group["hooks"]:
            if "wiki_memory_hook" in h["command"]:
                return str(h["command"])
    raise AssertionError(f"no wiki-memory handler for {event}")


def tool_event(cwd: Path, n: int) -> dict[str, Any]:
    return {
        "session_id": "sess-own",
        "cwd": str(cwd),
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_use_id": f"toolu_own_{n}",
        "tool_input": {"command": f"echo ownmarker{n}"},
        "tool_response": {"stdout": f"ownmarker{n}", "stderr": ""},
    }


def outbox(data: Path) -> list[dict[str, Any]]:
    """The queued events, oldest first; a file a running server delivers (and removes)
    between the listing and the read is no longer queued, so it is left out."""
    d = data / "outbox"
    names = sorted(n for n in os.listdir(d) if n[:1].isdigit()) if d.is_dir() else []
    kept = []
    for n in names:
        try:
            kept.append(json.loads((d / n).read_text()))
        except FileNotFoundError:
            continue
    return kept


def listeners(*ports: int) -> list[StubServer]:
    """Recording stand-ins on ``ports``; one whose port is taken on this shared machine
    (by a developer's own server, say) is left out."""
    out = []
    for port in ports:
        try:
            out.append(StubServer(port=port).__enter__())
        except OSError:
            continue
    return out


def test_a_stopped_store_on_another_port_is_away_and_gets_its_events_after_a_restart(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    work = tmp_path / "code" / "atlas"
    (work / ".git").mkdir(parents=True)
    first = ServerProcess(data, port=free_port()).start()
    try:
        r = subprocess.run(
            [sys.executable, "-m", "wiki_memory.cli.main", "install-hooks", "--agent"]
            + ["claude-code", "--apply"],
            env=harness_env(tmp_path, WIKI_MEMORY_HOME=str(data)),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
        settings = tmp_path / "home" / ".claude" / "settings.json"
        post, start = our_command(settings, "PostToolUse"), our_command(settings, "SessionStart")
        env = harness_env(tmp_path)
        assert run_hook(post, tool_event(work, 1), env).rc == 0
        assert outbox(data) == []  # delivered to its server while it runs
    finally:
        first.stop()  # a clean stop removes server.json
    assert not (data / "server.json").exists()

    # Something else now listens on the stopped store's port and on the old default one.
    stand_ins = listeners(first.port, OLD_DEFAULT_PORT)
    assert stand_ins and stand_ins[0].port == first.port
    try:
        r = run_hook(post, tool_event(work, 2), env)
        assert (r.rc, r.stdout) == (0, b""), r
        assert b"no server running on" in r.stderr
        r = run_hook(start, {"session_id": "sess-own", "cwd": str(work), "source": "resume",
                             "hook_event_name": "SessionStart"}, env)  # fmt: skip
        ctx = json.loads(r.stdout)["hookSpecificOutput"]["additionalContext"]
        assert ctx.startswith("wiki-memory: memory server not running"), ctx
        assert "2 events queued" in ctx
        # A server.json left by a kill -9 names a pid that is gone; one whose pid now
        # belongs to another process records another start time: both are away too.
        stale = {"address": first.url, "started": 0, "listening": True}
        for n, info in ((4, {"pid": 2**30}), (5, {"pid": os.getpid(), "process_start": "1"})):
            (data / "server.json").write_text(json.dumps(stale | info))
            assert run_hook(post, tool_event(work, n), env).rc == 0
        assert all(s.requests == [] for s in stand_ins), [s.requests for s in stand_ins]
    finally:
        for s in stand_ins:
            s.__exit__()
    kept = outbox(data)
    assert [e["event"] for e in kept] == [
        "PostToolUse",
        "SessionStart",
        "PostToolUse",
        "PostToolUse",
    ]

    # The store comes back on another port: its outbox arrives, and new events go there.
    (data / "server.json").unlink()
    port = free_port()
    while port in (first.port, OLD_DEFAULT_PORT):
        port = free_port()
    with ServerProcess(data, port=port) as second:
        assert wait_until(lambda: outbox(data) == [], 30), outbox(data)
        assert run_hook(post, tool_event(work, 9), env).rc == 0
        assert outbox(data) == []

        def found(marker: str) -> bool:
            r = second.post("/v1/recall", {"query": marker, "budget_tokens": 2000})
            return r.status_code == 200 and marker in r.text

        for n in (2, 4, 5, 9):
            assert wait_until(lambda n=n: found(f"ownmarker{n}"), 30), n
