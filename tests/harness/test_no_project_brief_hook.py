"""A session with no project (a harness started in a folder outside any repository) through
the installed hook and a real server: the unfinished work it leaves is its user's personal
handoff, and the next such session's SessionStart brief offers it, with that user's earlier
sessions with no project; a resume of it says it is shorter and keeps the offer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hookkit import free_port, hook_env, installed_command, run_hook, wait_until
from serverproc import ServerProcess
from support import shared_path

pytestmark = [pytest.mark.process, pytest.mark.slow]


def send(cmds: dict[str, str], tmp: Path, env: dict[str, str], event: str, **fields: Any) -> str:
    """Run the installed Claude Code hook for ``event``; its printed context ("" if none)."""
    if event not in cmds:
        cmds[event] = installed_command("claude-code", tmp, event)
    payload = json.loads(shared_path("data", "hooks", "claude-code", f"{event}.json").read_text())
    payload.update(fields)
    r = run_hook(cmds[event], payload, env, timeout=30)
    assert r.rc == 0, r
    if event != "SessionStart":
        return ""
    return str(json.loads(r.stdout)["hookSpecificOutput"]["additionalContext"])


def test_a_session_with_no_project_is_briefed_with_its_own_handoff(tmp_path: Path) -> None:
    data = tmp_path / "data"
    scratch = tmp_path / "scratch"  # no repository, no .wiki-memory.toml above it
    scratch.mkdir()
    with ServerProcess(data, port=free_port()).start() as srv:
        env = hook_env(tmp_path, srv.url)
        cmds: dict[str, str] = {}
        here = {"cwd": str(scratch)}
        send(cmds, tmp_path, env, "SessionStart", session_id="home-1", source="startup", **here)
        send(
            cmds,
            tmp_path,
            env,
            "UserPromptSubmit",
            session_id="home-1",
            prompt="tidy my dotfiles and then the shell history",
            **here,
        )
        send(
            cmds,
            tmp_path,
            env,
            "PostToolUse",
            session_id="home-1",
            tool_use_id="toolu_home_1",
            tool_name="Bash",
            tool_input={"command": "ls ~/.config"},
            tool_response={"stdout": "nvim\nfish", "stderr": ""},
            **here,
        )
        send(cmds, tmp_path, env, "SessionEnd", session_id="home-1", reason="exit", **here)

        def personal() -> list[dict[str, Any]]:
            return [
                h
                for h in srv.get("/v1/handoffs").json()["handoffs"]
                if h["path"].startswith("people/")
            ]

        assert wait_until(lambda: personal(), 30), srv.get("/v1/handoffs").text
        (h,) = personal()
        assert h["project"] is None and h["visibility"] == "personal"
        session_page = h["session_page"]
        # the server's first count of tokens loads its encoding, longer than the hook's
        # 1 s wait for a brief on a loaded machine: a recall loads it first
        assert srv.post("/v1/recall", {"query": "dotfiles"}).status_code == 200

        ctx = send(
            cmds, tmp_path, env, "SessionStart", session_id="home-2", source="startup", **here
        )
        assert ctx.startswith("## Memory brief: no project"), ctx
        assert h["id"] in ctx and "offered" in ctx and "handoff claim" in ctx, ctx
        assert f"source: {session_page}" in ctx, ctx
        assert 'recall "<words>"`' in ctx and "--project" not in ctx, ctx
        offered = srv.get(f"/v1/handoffs/{h['id']}").json()["handoff"]
        assert offered["status"] == "offered"
        assert offered["offered_to"]["session"] == "home-2"

        again = send(
            cmds, tmp_path, env, "SessionStart", session_id="home-2", source="resume", **here
        )
        assert "Session resumed" in again and h["id"] in again, again
