"""Forget means gone, end to end (docs/knowledge.md, "Forget means gone from every
path"), through the server's app in process, the official MCP client, the web view and
the CLI: a note other pages and a handoff link to is forgotten, and no face returns its
text (an exact-path read answers ``410 forgotten``), links show it as forgotten, its
unique words match nothing in the index; one timeline entry of a session is forgotten on
its own; ``forget --query`` lists first (a dry run), then forgets on confirmation."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from appkit import AppServer
from support import as_user

from wiki_memory.cli.main import main as cli_main
from wiki_memory.identity import Identity

pytestmark = pytest.mark.fast

NOTE = "projects/p/notes/Vault key.md"
HUB = "projects/p/notes/hub.md"
WORD = "quetzalfennel"  # only the note holds it
SAID = "marmosetquill"  # only one prompt of the session holds it


def _mcp(m: Any, tool: str, args: dict[str, Any]) -> tuple[bool, str]:
    """One tool call through the official MCP client: (is an error, everything it said)."""
    from mcp import Client

    from wiki_memory.mcp.tools import build_server

    async def main() -> Any:
        async with Client(build_server(m)) as c:
            return await c.call_tool(tool, args)

    res = asyncio.run(main())
    return bool(res.is_error), json.dumps(res.model_dump(mode="json"), ensure_ascii=False)


def _session(m: Any) -> str:
    """A session of two prompts, the second holding SAID; its page."""

    def ev(event: str, **fields: Any) -> dict[str, Any]:
        payload = {"hook_event_name": event, "session_id": "s-1", "cwd": "/w/p", **fields}
        return {"harness": "claude-code", "project": "p", "payload": payload}

    for e in (
        ev("UserPromptSubmit", prompt="Check the deploy of the staging stack"),
        ev("Stop", last_assistant_message="deploy checked"),
        ev("UserPromptSubmit", prompt=f"Store the {SAID} notes in the wiki"),
        ev("Stop", last_assistant_message="stored"),
    ):
        m.capture(e, as_user(m, m.owner))
    m.writer.flush()
    return str(next(iter(m.spool.sessions.values())).state["path"])


def _words_found(m: Any, word: str) -> set[str]:
    return {h.path for h in m.index.query(word, limit=50, mode="or")}


def test_forget_a_linked_note_and_one_entry_then_by_query_on_every_face(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with AppServer(data) as srv:
        m = srv.memory
        assert m is not None
        owner = m.owner
        m.write_page(NOTE, f"# Vault key\n\nThe {WORD} key.\n".encode(), user=owner, message="s")
        session = _session(m)
        text = (m.wiki_dir / session).read_text(encoding="utf-8")
        at = text.index(f"Store the {SAID}")
        entry = re.search(r"^\^(t\d+)$", text[at:], re.M)
        assert entry is not None
        block = entry[1]
        stem = session.removesuffix(".md")
        m.write_page(
            HUB,
            f"# Hub\n\nSee [[Vault key]] and [[{stem}#^{block}]].\n".encode(),
            user=owner,
            message="s",
        )
        h = m.handoffs.create(
            as_user(m, owner), project="p", title="Rotate", where_we_left_off="[[Vault key]]"
        )
        assert _words_found(m, WORD) == {NOTE}

        # -- forget the note (HTTP) ------------------------------------------------------
        r = srv.post("/v1/forget", {"path": NOTE})
        assert r.status_code == 200 and r.json()["changed"] is True, r.text
        # its words match nothing in the index
        assert _words_found(m, WORD) == set() and m.index.sections_of(NOTE) == []
        # HTTP: the exact path answers 410 forgotten, naming the page, without its text
        g = srv.get("/v1/pages/" + NOTE)
        assert g.status_code == 410, g.text
        body = g.json()
        assert body["error"] == "forgotten" and body["path"] == NOTE
        assert body["forgotten_by"] == owner and len(body["hash"]) == 64
        assert WORD not in g.text
        rec = srv.post("/v1/recall", {"query": WORD, "budget_tokens": 4000}).json()
        assert rec["items"] == []
        ex = srv.post("/v1/expand", {"ids": [NOTE], "budget_tokens": 4000}).json()
        assert ex["items"] == [] and WORD not in json.dumps(ex)
        # MCP: page_read is an error naming the code, recall and expand hold nothing of it
        err, said = _mcp(m, "page_read", {"path": NOTE})
        assert err and "forgotten:" in said and WORD not in said
        for tool, args in (
            ("memory_recall", {"query": WORD}),
            ("memory_expand", {"ids": [NOTE]}),
            ("page_list", {"project": "p"}),
        ):
            assert f"The {WORD} key" not in _mcp(m, tool, args)[1], tool  # the query, only
        # links show it as forgotten (the index, HTTP and the web view)
        who = Identity(owner)
        outs = [(o["status"], o["target"]) for o in m.index.outlinks(HUB, who) if o["target"]]
        assert ("forgotten", "Vault key") in outs
        hub = srv.get("/v1/pages/" + HUB).json()
        assert [lk["status"] for lk in hub["links"]] == ["forgotten", "resolved"]
        c = srv.sign_in()
        page = c.get(srv.url + "/page/" + NOTE)
        assert page.status_code == 410 and "Forgotten" in page.text and WORD not in page.text
        history = c.get(srv.url + f"/page/{NOTE}/history").text
        rev = re.search(r"rev=([0-9a-f]{7,40})", history)
        assert rev is not None
        old = c.get(srv.url + f"/page/{NOTE}/history?rev={rev[1]}&view=version")
        assert old.status_code == 410 and WORD not in old.text
        for linking in (HUB, h["path"]):
            html = c.get(srv.url + "/page/" + linking).text
            assert 'class="wikilink forgotten"' in html and WORD not in html, linking
        assert f"The {WORD} key" not in c.get(srv.url + "/search", params={"q": WORD}).text

        # -- forget one timeline entry (MCP) ---------------------------------------------
        assert _words_found(m, SAID) == {session}
        err, said = _mcp(m, "page_forget", {"path": f"{session}#^{block}"})
        assert not err and f"#^{block} is forgotten" in said, said
        assert _words_found(m, SAID) == set()
        assert srv.post("/v1/recall", {"query": SAID}).json()["items"] == []
        read = srv.get("/v1/pages/" + session)
        assert read.status_code == 200 and SAID not in read.text
        assert "forgotten entry" in read.json()["content"]
        assert f"^{block}" in read.json()["content"]
        links = srv.get("/v1/pages/" + HUB).json()["links"]
        assert (links[1]["status"], links[1]["path"], links[1]["fragment_found"]) == (
            "resolved",
            session,
            True,
        )
        assert SAID not in c.get(srv.url + "/page/" + session).text

        # the owner brings the note back by writing it without state: forgotten
        back = f"# Vault key\n\nThe {WORD} key, still valid.\n".encode()
        put = srv.client.put(
            srv.url + "/v1/pages/" + NOTE,
            content=back,
            headers={**srv.headers, "If-Match": f'"{body["hash"]}"'},
        )
        assert put.status_code == 200, put.text
        assert srv.get("/v1/pages/" + NOTE).status_code == 200
        assert _words_found(m, WORD) == {NOTE}

    # -- forget --query: a dry run lists, then --yes forgets (the CLI, on the data dir) ------
    base = ["--data-dir", str(data), "forget", "--query", f"{WORD} key"]
    assert cli_main([*base, "--dry-run"]) == 0
    assert "state: forgotten" not in (data / "wiki" / NOTE).read_text(encoding="utf-8")
    assert cli_main([*base, "--yes"]) == 0
    assert "state: forgotten" in (data / "wiki" / NOTE).read_text(encoding="utf-8")
