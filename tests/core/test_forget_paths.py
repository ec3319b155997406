"""Forget means gone from every path, in process: a forgotten page's words leave the
index, expand returns nothing of it (HTTP and MCP), links to it (from a page and from a
handoff) read as forgotten instead of leading to it, it is nobody's backlink any more,
the audit line names what and who but not the text; and forgetting by a query lists
first (a dry run, HTTP and CLI) and forgets only on confirmation."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from appkit import AppServer
from support import as_user

from wiki_memory.cli.main import main as cli_main
from wiki_memory.identity import Identity

pytestmark = pytest.mark.fast

TARGET = "projects/p/notes/Staging secrets.md"
HUB = "projects/p/notes/hub.md"
WORD = "xylophonic"
OLD = "projects/p/notes/old.md"


def _seed(m: Any) -> str:
    owner = m.owner
    m.write_page(
        TARGET,
        f"# Staging secrets\n\nThe {WORD} vault key lives in [[hub]].\n".encode(),
        user=owner,
        message="seed",
    )
    m.write_page(
        HUB, b"# Hub\n\nSee [[Staging secrets]] for the vault.\n", user=owner, message="seed"
    )
    m.write_page(
        OLD,
        f"---\nstate: superseded\nsuperseded_by: {TARGET}\n---\n# Old\n\nOld key.\n".encode(),
        user=owner,
        message="seed",
    )
    h = m.handoffs.create(
        as_user(m, owner),
        project="p",
        title="Rotate the key",
        where_we_left_off="Read [[Staging secrets]].",
    )
    return str(h["path"])


def _mcp_expand(m: Any, ids: list[str]) -> Any:
    from mcp import Client

    from wiki_memory.mcp.tools import build_server

    async def main() -> Any:
        async with Client(build_server(m)) as c:
            return await c.call_tool("memory_expand", {"ids": ids})

    return asyncio.run(main())


def test_a_forgotten_page_is_gone_from_every_path(tmp_path: Path) -> None:
    with AppServer(tmp_path / "data") as srv:
        m = srv.memory
        assert m is not None
        handoff = _seed(m)
        who = Identity(m.owner)
        rec = srv.post("/v1/recall", {"query": WORD, "budget_tokens": 4000}).json()
        ids = [it["id"] for it in rec["items"] if it["path"] == TARGET]
        assert ids, rec
        assert [b["src_path"] for b in m.index.backlinks(HUB, who)] == [TARGET]
        before = [o["status"] for o in m.index.outlinks(HUB, who) if o["target"]]
        assert before == ["resolved"]

        r = srv.post("/v1/forget", {"path": TARGET})
        assert r.status_code == 200 and r.json()["changed"] is True, r.text

        # its words leave the index; recall finds nothing of it
        assert m.index.sections_of(TARGET) == []
        assert srv.post("/v1/recall", {"query": WORD, "budget_tokens": 4000}).json()["items"] == []
        # expand, by the old id or by the path, returns nothing of it (HTTP and MCP)
        for asked in (ids, [TARGET]):
            ex = srv.post("/v1/expand", {"ids": asked, "budget_tokens": 4000}).json()
            assert ex["items"] == [] and ex["missing"] == asked, ex
            res = _mcp_expand(m, asked)
            assert WORD not in json.dumps(res.model_dump(mode="json"))
        # links read as forgotten; it is nobody's backlink any more
        outs = [o for o in m.index.outlinks(HUB, who) if o["target"]]
        assert [(o["status"], o["path"]) for o in outs] == [("forgotten", None)]
        assert m.index.backlinks(HUB, who) == []
        # a supersession naming it by its path is broken as "forgotten", for any reader
        for reader in (who, None):
            assert m.index.chains(reader).broken[OLD] == ("forgotten", TARGET)
        c = srv.sign_in()
        for page in (HUB, handoff):
            html = c.get(srv.url + "/page/" + page).text
            assert 'class="wikilink forgotten"' in html, page
            assert "Staging%20secrets" not in html and WORD not in html, page
        # the record: what and who, not the content
        lines = (tmp_path / "data" / "logs" / "audit.jsonl").read_text().splitlines()
        rec_line = [json.loads(x) for x in lines if '"forget"' in x][-1]
        assert TARGET in json.dumps(rec_line) and m.owner in json.dumps(rec_line)
        assert WORD not in json.dumps(rec_line)


def test_forget_by_query_lists_first_then_forgets_on_confirmation(tmp_path: Path) -> None:
    with AppServer(tmp_path / "data") as srv:
        m = srv.memory
        assert m is not None
        both = ["projects/p/notes/a.md", "projects/p/notes/b.md"]
        for path in both:
            m.write_page(path, b"# N\n\nThe zebu ranch feed.\n", user="alice", message="w")
        m.write_page("projects/p/notes/c.md", b"# C\n\nA zebu alone.\n", user="alice", message="w")
        bad = srv.post("/v1/forget", {"query": "zebu", "path": both[0]})
        assert bad.status_code == 400 and bad.json()["field"] == "query"
        assert srv.post("/v1/forget", {"query": "  "}).status_code == 400

        dry = srv.post("/v1/forget", {"query": "zebu ranch"}).json()
        assert dry["dry_run"] is True and dry["forgotten"] == []
        assert sorted(p["path"] for p in dry["pages"]) == both  # c.md holds one word only
        assert len(m.list_pages(project="p", user=as_user(m, m.owner))) == 3  # nothing changed

        done = srv.post("/v1/forget", {"query": "zebu ranch", "dry_run": False}).json()
        assert sorted(done["forgotten"]) == both
        found = srv.post("/v1/recall", {"query": "zebu", "budget_tokens": 4000}).json()
        assert [it["path"] for it in found["items"]] == ["projects/p/notes/c.md"]


def test_cli_forget_by_query_dry_run_then_yes(tmp_path: Path, capsys: Any) -> None:
    data = tmp_path / "data"
    wiki = data / "wiki" / "projects" / "p" / "notes"
    wiki.mkdir(parents=True)
    (wiki / "a.md").write_text("# A\n\nThe gnu paddock.\n")
    (wiki / "b.md").write_text("# B\n\nA gnu only.\n")
    base = ["--data-dir", str(data), "forget", "--query", "gnu paddock"]
    assert cli_main(base + ["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would forget: projects/p/notes/a.md" in out and "b.md" not in out
    assert "state: forgotten" not in (wiki / "a.md").read_text()
    assert cli_main(base) == 2  # neither --dry-run nor --yes: nothing is forgotten
    assert "--dry-run" in capsys.readouterr().err
    assert cli_main(base + ["--yes"]) == 0
    assert "forgot: projects/p/notes/a.md" in capsys.readouterr().out
    assert "state: forgotten" in (wiki / "a.md").read_text()
    assert "state: forgotten" not in (wiki / "b.md").read_text()
