"""Collapsed is not lost (docs/knowledge.md): near-duplicate pages are grouped under one
item that counts and names them, every one of them is reached once by following the
cursors, and a word naming an environment keeps two near-identical facts apart."""

from __future__ import annotations

from typing import Any

import pytest
from support import make_memory

from wiki_memory.core.memory import Memory
from wiki_memory.recall import rank

DUP = "Run make ship to deploy the okapi service; never push to prod by hand."


def walk(m: Memory, query: str, budget: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor: int | None = 0
    while cursor is not None:
        res = m.recall(query, budget_tokens=budget, cursor=cursor, user="alice")
        assert res.total == len(items) + len(res.items) + res.omitted
        items += res.items
        cursor = res.next_cursor
    return items


@pytest.mark.fast
def test_five_near_duplicate_pages_show_one_item_with_a_count_and_a_walk_reaches_all(tmp_path):
    files = {
        f"notes/d{i}.md": f"# Deploy {i}\n\n{DUP}{' Really.' if i % 2 else ''}\n" for i in range(5)
    }
    files["notes/other.md"] = "# Other\n\nThe okapi service logs to the shared bucket.\n"
    m = make_memory(tmp_path / "data", files=files)
    try:
        first = m.recall("okapi deploy", budget_tokens=100_000, user="alice")
        kept = [i for i in first.items if i.get("collapsed")]
        assert len(kept) == 1, first.items
        group = {kept[0]["path"], *kept[0]["collapsed_paths"]}
        assert kept[0]["collapsed"] == 4 and group == {f"notes/d{i}.md" for i in range(5)}
        # every page counts in total, the grouped ones after the others, marked
        assert first.total == 6
        order = [i["path"] for i in first.items]
        grouped = [i for i in first.items if i.get("collapsed_into")]
        assert len(grouped) == 4 and {i["collapsed_into"] for i in grouped} == {kept[0]["anchor"]}
        assert order.index("notes/other.md") < order.index(grouped[0]["path"])
        # a walk of small pages reaches every page exactly once
        ids = {i["id"]: i["path"] for i in first.items}
        for budget in (60, 120, 300):
            got = [ids[i["id"]] for i in walk(m, "okapi deploy", budget)]
            assert sorted(got) == sorted([*group, "notes/other.md"]), (budget, got)
    finally:
        m.stop()


@pytest.mark.fast
def test_an_environment_word_keeps_two_facts_apart_and_a_rewording_still_groups(tmp_path):
    r1 = "Run `make ship` to deploy; never push to prod by hand."
    files = {
        "notes/r1.md": f"# R1\n\n{r1}\n",
        "notes/r5.md": "# R5\n\nTo deploy, run make ship. Never push to prod by hand.\n",
        "notes/r7.md": f"# R7\n\n{r1.replace('prod', 'staging')}\n",
    }
    m = make_memory(tmp_path / "data", files=files)
    try:
        res = m.recall("how do we deploy", budget_tokens=100_000, user="alice")
        top = [i for i in res.items if not i.get("collapsed_into")]
        assert sorted(i["path"] for i in top) == ["notes/r1.md", "notes/r7.md"], res.items
        assert res.total == 3
    finally:
        m.stop()
    assert not rank.near_duplicate(
        set(r1.lower().split()), set(r1.replace("prod", "staging").lower().split())
    )
