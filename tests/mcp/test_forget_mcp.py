"""A forgotten page through a real server (docs/knowledge.md, "Forget means gone from
every path"): the MCP tools over streamable HTTP with the official SDK client, the HTTP
API and the CLI going through the running server. ``page_read`` of its exact path is a
``forgotten`` tool error without its text, ``GET /v1/pages`` a 410, the CLI's recall finds
nothing of it; ``forget PATH#^tN`` from the CLI forgets one session entry, and a further
event of that session does not bring its text back."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest
from clikit import run_cli_here
from serverproc import ServerProcess
from support import wait_for
from test_knowledge_mcp import mcp, text_of

pytestmark = pytest.mark.process

WORD = "pangolinquartz"
SAID = "narwhalsaffron"


def event(prompt: str | None = None, reply: str | None = None) -> dict[str, Any]:
    payload: dict[str, Any] = {"session_id": "s-9", "cwd": "/w/atlas"}
    if prompt is not None:
        payload.update(hook_event_name="UserPromptSubmit", prompt=prompt)
    else:
        payload.update(hook_event_name="Stop", last_assistant_message=reply)
    return {"harness": "claude-code", "project": "atlas", "payload": payload}


def test_forgotten_text_reaches_no_face_of_a_real_server(tmp_path: Any) -> None:
    data = tmp_path / "data"
    (data / "wiki" / "projects" / "atlas").mkdir(parents=True)
    srv = ServerProcess(data, env={"WIKI_MEMORY_COMMIT_DELAY_SECONDS": "0.05"}).start()
    try:

        async def remember_and_forget() -> tuple[str, Any, Any]:
            async with mcp(srv) as c:
                note = {"text": f"The {WORD} relay is on.", "project": "atlas", "title": "Relay"}
                res = await c.call_tool("memory_remember", note)
                path = str(res.structured_content["path"])
                forgot = await c.call_tool("page_forget", {"path": path})
                read = await c.call_tool("page_read", {"path": path})
                recall = await c.call_tool("memory_recall", {"query": WORD})
                return path, (forgot, read), recall

        path, (forgot, read), recall = asyncio.run(remember_and_forget())
        assert not forgot.is_error, text_of(forgot)
        assert read.is_error and text_of(read).startswith("forgotten:")
        assert f"The {WORD}" not in json.dumps(read.model_dump(mode="json"))
        assert recall.structured_content["items"] == []
        r = httpx.get(srv.url + "/v1/pages/" + path, headers=srv.headers, timeout=30)
        assert r.status_code == 410 and r.json()["error"] == "forgotten" and WORD not in r.text
        out = run_cli_here(data, "recall", WORD)
        assert out.returncode == 0, out.stderr
        assert f"The {WORD}" not in out.stdout and path not in out.stdout

        # one entry of a session, forgotten from the CLI through the server
        for ev in (event(f"Keep the {SAID} flag"), event(reply="kept")):
            r = httpx.post(srv.url + "/v1/observations", json=ev, headers=srv.headers)
            assert r.status_code in (200, 202), r.text
        sessions = data / "wiki" / "projects" / "atlas" / "sessions"
        page = wait_for(lambda: next(iter(sessions.glob("*.md")), None), 30, "a session page")
        wait_for(lambda: SAID in page.read_text(encoding="utf-8"), 30, "the prompt on its page")
        rel = page.relative_to(data / "wiki").as_posix()
        text = page.read_text(encoding="utf-8")
        block = text[text.index(f"Keep the {SAID}") :].split("\n^", 1)[1].split("\n", 1)[0]
        out = run_cli_here(data, "forget", f"{rel}#^{block}")
        assert out.returncode == 0 and f"forgot {rel}#^{block}" in out.stdout, out.stderr
        assert SAID not in page.read_text(encoding="utf-8")
        for ev in (event("And one more"), event(reply="done")):
            r = httpx.post(srv.url + "/v1/observations", json=ev, headers=srv.headers)
            assert r.status_code in (200, 202), r.text
        wait_for(lambda: "And one more" in page.read_text(encoding="utf-8"), 30, "the new event")
        time.sleep(0.2)
        assert SAID not in page.read_text(encoding="utf-8")
        rec = httpx.post(
            srv.url + "/v1/recall", json={"query": SAID}, headers=srv.headers, timeout=30
        )
        assert rec.json()["items"] == []
    finally:
        srv.stop()
