"""The installed hook's drainer against a real server that judges a list item by item
(docs/hooks.md, step 4; docs/api.md, ``POST /v1/observations``): a batch holding one bad
event goes in one request, the good events are accepted, the bad one is dropped and
counted with its own status, and nothing is sent twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hookkit import HOOKS, hook_env, installed_command, outbox_dir, pending, run_hook, wait_idle
from serverproc import ServerProcess
from support import access_lines, wait_for

pytestmark = pytest.mark.process


def _event(i: int, **over: Any) -> dict[str, Any]:
    ev: dict[str, Any] = {
        "harness": "claude-code",
        "event": "UserPromptSubmit",
        "session_id": "hook-list-1",
        "project": "hooklist",
        "project_from": "explicit",
        "cwd": "/home/dev/hooklist",
        "event_id": f"hook-list-{i}",
        "payload": {"prompt": f"remember marker{i}word"},
    }
    ev.update(over)
    return ev


def test_a_batch_with_one_bad_event_is_settled_event_by_event(tmp_path: Path) -> None:
    data = tmp_path / "srv"
    with ServerProcess(data) as srv:
        client = tmp_path / "client"
        env = hook_env(client, srv.url, WIKI_MEMORY_TOKEN=srv.token)
        cmd = installed_command("claude-code", client, "UserPromptSubmit")
        ob = HOOKS.Outbox(str(outbox_dir(client)))
        # three events wait in the outbox (the server was away); the second is one the
        # server refuses (an earlier hook's bug: a session id with spaces)
        ob.write(_event(1))
        ob.write(_event(2, session_id="not a valid id"))
        ob.write(_event(3))
        work = tmp_path / "work"
        work.mkdir()
        payload = {
            "hook_event_name": "UserPromptSubmit",
            "session_id": "hook-list-1",
            "cwd": str(work),
            "prompt": "remember marker4word",
        }
        r = run_hook(cmd, payload, env)
        assert r.rc == 0, r
        wait_idle(client)
        assert wait_for(lambda: pending(client) == [], timeout=30)
        dropped = [
            json.loads(x) for x in (outbox_dir(client) / "dropped.jsonl").read_text().splitlines()
        ]
        assert [(d["reason"], d["status"], d["event_id"]) for d in dropped] == [
            ("rejected", 400, "hook-list-2")
        ]
        posts = access_lines(data, "POST /v1/observations")
        # one request carried all four; no event was sent again one by one
        assert len(posts) == 1 and " 207 " in posts[0], posts
        for word in ("marker1word", "marker3word", "marker4word"):
            found = srv.post("/v1/recall", {"query": word, "budget_tokens": 2000}).json()
            assert found["total"] >= 1, word
        assert srv.post("/v1/recall", {"query": "marker2word"}).json()["total"] == 0
