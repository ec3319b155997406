"""Precise edits through the MCP tool ``page_edit`` in process (the SDK's real Client against
the MCPServer, as the owner): appends and checklist items spliced into a section, an
``edit_id`` retried answers the first result, ``replace_section`` with a stale or missing
hash answers the current one, and appends from several clients at once, each retried,
while a person keeps saving another section (docs/api.md "Precise edits")."""

from __future__ import annotations

import asyncio
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from dulwich.repo import Repo

from wiki_memory.core.memory import Memory
from wiki_memory.mcp.tools import build_server
from wiki_memory.wiki.merge import replace_if_unchanged
from wiki_memory.wiki.page import parse_page
from wiki_memory.wiki.sections import find_section, section_hash

PAGE = "projects/demo/decisions.md"
TEXT = """---
title: Decisions
---
# Decisions

## Log

- 2026-01-01 chose postgres

## Person

counter: 0

## Todo

- [ ] write the runbook
- [x] pick a database

Closing words.
"""


def text_of(res: Any) -> str:
    return "\n".join(c.text for c in res.content if c.type == "text")


def seed(mem: Memory) -> Path:
    full = mem.wiki_dir / PAGE
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_text(TEXT, encoding="utf-8")
    return full


def calls(mem: Memory, todo: list[dict[str, Any]]) -> list[Any]:
    from mcp import Client

    async def main() -> list[Any]:
        async with Client(build_server(mem)) as c:
            return [await c.call_tool("page_edit", args) for args in todo]

    return asyncio.run(main())


def head_text(mem: Memory, path: str) -> str:
    repo = Repo(str(mem.wiki_dir))
    try:
        tree = repo[repo[repo.head()].tree]  # type: ignore[attr-defined]
        _mode, sha = tree.lookup_path(repo.object_store.__getitem__, path.encode())
        return repo[sha].data.decode("utf-8")  # type: ignore[attr-defined]
    finally:
        repo.close()


def test_append_item_and_retry_with_the_same_edit_id(mem: Memory) -> None:
    full = seed(mem)
    a, again, item, page_end = calls(
        mem,
        [
            {
                "op": "append",
                "path": PAGE,
                "section": "Log",
                "text": "- 01-02 chose redis",
                "edit_id": "e1",
            },
            {
                "op": "append",
                "path": PAGE,
                "section": "Log",
                "text": "- 01-02 chose redis",
                "edit_id": "e1",
            },
            {"op": "item", "path": PAGE, "section": "todo", "text": "rotate the keys"},
            {"op": "append", "path": PAGE, "text": "PS."},
        ],
    )
    for r in (a, again, item, page_end):
        assert not r.is_error, text_of(r)
    assert again.structured_content["repeated"] is True
    assert again.structured_content["hash"] == a.structured_content["hash"]
    now = full.read_text(encoding="utf-8")
    assert now.count("chose redis") == 1
    assert "- 2026-01-01 chose postgres\n- 01-02 chose redis\n\n## Person" in now
    assert "- [x] pick a database\n- [ ] rotate the keys\n\nClosing words." in now
    assert now.endswith("Closing words.\nPS.\n")
    assert head_text(mem, PAGE) == now  # committed before the call answered


def test_replace_section_answers_the_current_hash_when_stale_or_missing(mem: Memory) -> None:
    full = seed(mem)
    current = section_hash(TEXT, find_section(TEXT, "Todo"))
    missing, stale = calls(
        mem,
        [
            {"op": "replace_section", "path": PAGE, "section": "Todo", "text": "- [ ] x"},
            {
                "op": "replace_section",
                "path": PAGE,
                "section": "Todo",
                "text": "- [ ] x",
                "hash": "0" * 64,
            },
        ],
    )
    assert missing.is_error and text_of(missing).startswith("precondition_required:")
    assert current in text_of(missing)
    assert stale.is_error and text_of(stale).startswith("conflict:"), text_of(stale)
    assert current in text_of(stale)
    assert full.read_text(encoding="utf-8") == TEXT
    (ok,) = calls(
        mem,
        [
            {
                "op": "replace_section",
                "path": PAGE,
                "section": "todo",
                "text": "- [ ] only this\n",
                "hash": current,
            }
        ],
    )
    assert not ok.is_error, text_of(ok)
    now = full.read_text(encoding="utf-8")
    assert now.endswith("## Todo\n- [ ] only this\n")
    assert "counter: 0" in now and "chose postgres" in now
    assert ok.structured_content["section_hash"] == section_hash(now, find_section(now, "Todo"))


def test_unknown_section_and_missing_page_are_named(mem: Memory) -> None:
    seed(mem)
    bad, gone = calls(
        mem,
        [
            {"op": "append", "path": PAGE, "section": "Nope", "text": "x"},
            {"op": "append", "path": "projects/demo/nosuch.md", "text": "x"},
        ],
    )
    assert bad.is_error and text_of(bad).startswith("bad_request: no section 'Nope'")
    assert "Log" in text_of(bad)
    assert gone.is_error and text_of(gone) == "not_found: no such page: projects/demo/nosuch.md"


@pytest.mark.slow
def test_concurrent_appends_retried_while_a_person_saves_another_section(mem: Memory) -> None:
    """5 clients append 10 lines each to ``## Log``, every call sent twice with the same
    edit_id (a retry after a lost answer); meanwhile a person re-reads the file, changes
    the counter line of ``## Person`` and saves, about every 0.1 s. The person's save is
    a compare-and-swap (an editor that saves over a file it read earlier loses whatever
    anyone wrote in between: not what is tested here). Every append lands exactly once,
    the person's last change is there, and no conflict marks."""
    full = seed(mem)
    stop = threading.Event()
    saved = {"n": 0}

    def person() -> None:
        n = 0
        while not stop.is_set():
            cur = full.read_bytes()
            new = re.sub(rb"counter: \d+", b"counter: %d" % (n + 1), cur)
            if replace_if_unchanged(full, new, cur):
                n += 1
                saved["n"] = n
            stop.wait(0.1)

    errors: list[str] = []

    def client(i: int) -> None:
        todo = []
        for j in range(10):
            args = {
                "op": "append",
                "path": PAGE,
                "section": "Log",
                "text": f"- entry c{i}-{j}",
                "edit_id": f"c{i}-{j}",
            }
            todo += [args, args]
        for r in calls(mem, todo):
            if r.is_error:
                errors.append(text_of(r))

    p = threading.Thread(target=person)
    p.start()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    stop.set()
    p.join(10)
    assert not errors, errors[:3]
    now = full.read_text(encoding="utf-8")
    for i in range(5):
        for j in range(10):
            assert now.count(f"- entry c{i}-{j}\n") == 1, (i, j)
    assert saved["n"] >= 1
    assert f"counter: {saved['n']}\n" in now
    assert "<<<<<<<" not in now and ">>>>>>>" not in now
    log = now[now.index("## Log") : now.index("## Person")]
    assert log.count("- entry ") == 50
    mem.writer.flush()
    assert head_text(mem, PAGE).count("- entry ") == 50


def test_a_move_to_another_folder_rewrites_only_links_that_spell_the_folder(
    mem: Memory,
) -> None:
    wiki = mem.wiki_dir
    pages = {
        "projects/demo/plan.md": "# Plan\n",
        "projects/demo/a.md": "See [[plan]] and [[Plan#Plan]].\n",
        "projects/demo/b.md": "See [[projects/demo/plan|the plan]].\n",
    }
    for rel, text in pages.items():
        (wiki / rel).parent.mkdir(parents=True, exist_ok=True)
        (wiki / rel).write_text(text, encoding="utf-8")
    mem.reindex()
    (res,) = calls(
        mem, [{"op": "rename", "path": "projects/demo/plan.md", "new_path": "projects/ops/plan.md"}]
    )
    assert not res.is_error, text_of(res)
    assert res.structured_content["rewritten"] == ["projects/demo/b.md"]
    assert (wiki / "projects/demo/a.md").read_text() == pages["projects/demo/a.md"]
    assert (wiki / "projects/demo/b.md").read_text() == "See [[projects/ops/plan|the plan]].\n"
    assert (wiki / "projects/ops/plan.md").read_text() == "# Plan\n"  # same name: no alias
    back = {b["src_path"] for b in mem.index.backlinks("projects/ops/plan.md")}
    assert back == {"projects/demo/a.md", "projects/demo/b.md"}


def test_an_edit_moves_the_pages_updated_time_and_adds_none_where_there_was_none(
    mem: Memory,
) -> None:
    """An old note edited today counts as changed today (recall's since, the web view's
    "changed"); a page that keeps no ``updated`` is not given one."""
    dated = "projects/demo/dated.md"
    (mem.wiki_dir / dated).parent.mkdir(parents=True, exist_ok=True)
    (mem.wiki_dir / dated).write_text(
        "---\ntitle: Dated\nupdated: 2020-01-01T00:00:00Z\n---\n# Dated\n\nOld line.\n"
    )
    seed(mem)
    r, plain = calls(
        mem,
        [
            {"op": "append", "path": dated, "text": "New line."},
            {"op": "append", "path": PAGE, "text": "PS."},
        ],
    )
    assert not r.is_error and not plain.is_error, (text_of(r), text_of(plain))
    meta = parse_page((mem.wiki_dir / dated).read_bytes(), dated).metadata
    assert str(meta["updated"])[:4] >= "2026", meta
    assert "updated" not in parse_page((mem.wiki_dir / PAGE).read_bytes(), PAGE).metadata
