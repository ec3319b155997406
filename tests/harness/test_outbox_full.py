"""The hook when its own outbox's file system is full and no server runs (step 4 of the
shared failure case C63): the hook exits 0 and SessionStart still prints the note that
the server is not running; the event it could not keep is named as lost on standard
error; the outbox holds only whole events (no temporary fragment); once space returns
and a server runs, the next hook run sends what was queued before."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hookkit import hook_env, installed_command, outbox_dir, pending, run_hook, wait_idle
from serverproc import ServerProcess
from smallfs import fill, small_fs
from support import wait_for

pytestmark = pytest.mark.process


def prompt(text: str) -> dict[str, str]:
    return {"hook_event_name": "UserPromptSubmit", "session_id": "s-full",
            "cwd": "/home/u/proj", "prompt": text}  # fmt: skip


def test_c63_a_full_outbox_keeps_whole_events_and_the_hook_goes_on(tmp_path: Path) -> None:
    env = hook_env(tmp_path)
    box = outbox_dir(tmp_path)
    with small_fs(box, size_mb=1):
        # server down: the events wait in the outbox
        cmd = installed_command("claude-code", tmp_path, "UserPromptSubmit")
        for i in range(2):
            run = run_hook(cmd, prompt(f"queued walrus {i}"), env)
            assert run.rc == 0, run
        assert len(pending(tmp_path)) == 2
        filler = fill(box)
        run = run_hook(cmd, prompt("unkept walrus"), env)
        assert run.rc == 0, run
        assert b"the outbox cannot keep this event" in run.stderr, run
        start = installed_command("claude-code", tmp_path, "SessionStart")
        payload = {"hook_event_name": "SessionStart", "session_id": "s-full",
                   "cwd": "/home/u/proj", "source": "startup"}  # fmt: skip
        run = run_hook(start, payload, env)
        assert run.rc == 0, run
        assert b"memory server not running" in run.stdout, run
        assert b"2 events queued" in run.stdout, run
        # whole events only: every file there reads as JSON, no temporary fragment
        names = sorted(os.listdir(box))
        assert not [n for n in names if n.startswith(".tmp-")], names
        for n in names:
            if n.endswith(".json"):
                json.loads((box / n).read_bytes())
        assert [e["payload"]["prompt"] for e in pending(tmp_path)] == [
            "queued walrus 0",
            "queued walrus 1",
        ]
        filler.unlink()  # space returns
        srv = ServerProcess(tmp_path / "data").start()
        try:
            sent = installed_command(
                "claude-code",
                tmp_path,
                "UserPromptSubmit",
                url=srv.url,
                token_file=tmp_path / "data" / "auth" / "owner.token",
            )
            run = run_hook(sent, prompt("after space returned walrus"), env)
            assert run.rc == 0, run
            wait_idle(tmp_path)
            wait_for(lambda: pending(tmp_path) == [], 30, "the outbox drained")
            for q in ("queued walrus 0", "queued walrus 1", "after space returned walrus"):
                r = srv.post("/v1/recall", {"query": q})
                assert r.status_code == 200, r.text
                assert q in json.dumps(r.json()), (q, r.json())
        finally:
            srv.stop()
