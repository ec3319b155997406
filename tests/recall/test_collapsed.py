"""Collapsed is not lost (docs/knowledge.md): near-duplicate pages are grouped under one
item that counts and names them, every one of them is reached once by following the
cursors, and a word naming an environment keeps two near-identical facts apart."""

from __future__ import annotations

from typing import Any

import pytest
from support import as_user, make_memory

from wiki_memory.core.memory import Memory
from wiki_memory.recall import rank

DUP = "Run make ship to deploy the okapi service; never push to prod by hand."


def walk(m: Memory, query: str, budget: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor: int | None = 0
    while cursor is not None:
        res = m.recall(query, budget_tokens=budget, cursor=cursor, user=as_user(m, "alice"))
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
        first = m.recall("okapi deploy", budget_tokens=100_000, user=as_user(m, "alice"))
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
        res = m.recall("how do we deploy", budget_tokens=100_000, user=as_user(m, "alice"))
        top = [i for i in res.items if not i.get("collapsed_into")]
        assert sorted(i["path"] for i in top) == ["notes/r1.md", "notes/r7.md"], res.items
        assert res.total == 3
    finally:
        m.stop()
    assert not rank.near_duplicate(
        set(r1.lower().split()), set(r1.replace("prod", "staging").lower().split())
    )


def near(i: int) -> str:
    return f"# Near {i}\n\nThe zebu pasture gate closes at dusk; feed the zebu herd hay first.\n"


def distinct(i: int) -> str:
    extra = " ".join(f"w{i}x{j}" for j in range(8))
    return f"# Distinct {i}\n\nzebu note {extra}\n"


@pytest.mark.fast
def test_a_walk_over_near_identical_and_distinct_notes_reaches_each_once(tmp_path):
    files = {f"notes/n{i:02d}.md": near(i) for i in range(40)}
    files |= {f"notes/d{i:02d}.md": distinct(i) for i in range(40)}
    m = make_memory(tmp_path / "data", files=files)
    try:
        full = m.recall("zebu", budget_tokens=1_000_000, user=as_user(m, "alice"))
        assert full.total == 80
        kept = [i for i in full.items if i.get("collapsed")]
        assert len(kept) == 1 and kept[0]["collapsed"] == 39
        for budget in (150, 700):
            got = [i["path"] for i in walk(m, "zebu", budget)]
            assert sorted(got) == sorted(files), budget
    finally:
        m.stop()


@pytest.mark.fast
def test_a_cursor_belongs_to_its_query_and_a_changing_wiki_repeats_nothing(tmp_path):
    from wiki_memory.core.forget import forget_page
    from wiki_memory.errors import BadRequest

    files = {f"notes/n{i:02d}.md": near(i) for i in range(40)}
    files |= {f"notes/d{i:02d}.md": distinct(i) for i in range(40)}
    m = make_memory(tmp_path / "data", files=files)
    try:
        first = m.recall("zebu", budget_tokens=300, user=as_user(m, "alice"))
        assert first.next_cursor is not None and first.next_cursor >= 1 << 24
        with pytest.raises(BadRequest) as exc:
            m.recall(
                "pasture", budget_tokens=300, cursor=first.next_cursor, user=as_user(m, "alice")
            )
        assert exc.value.field == "cursor"
        with pytest.raises(BadRequest):  # the same words with another filter
            m.recall(
                "zebu",
                project="p",
                budget_tokens=300,
                cursor=first.next_cursor,
                user=as_user(m, "alice"),
            )
        seen = [i["anchor"] for i in first.items]
        cursor = first.next_cursor
        pages = 1
        changed = False
        while cursor is not None:
            if pages == 2:  # mid-walk: 5 pages added, 3 forgotten (some returned, some not)
                for i in range(5):
                    m.write_page(
                        f"notes/new{i}.md",
                        distinct(100 + i).encode(),
                        user="alice",
                        message="add",
                        create_only=True,
                    )
                m.writer.flush()
                for p in (first.items[0]["path"], "notes/d39.md", "notes/n39.md"):
                    forget_page(m, p, as_user(m, "alice"))
            res = m.recall("zebu", budget_tokens=300, cursor=cursor, user=as_user(m, "alice"))
            changed |= res.changed
            seen += [i["anchor"] for i in res.items]
            cursor, pages = res.next_cursor, pages + 1
        assert changed and pages > 3
        assert len(seen) == len(set(seen)), [a for a in seen if seen.count(a) > 1]
        # every page there from start to end was reached
        stayed = set(files) - {first.items[0]["path"], "notes/d39.md", "notes/n39.md"}
        assert stayed <= {a.split("#")[0] for a in seen}
    finally:
        m.stop()


@pytest.mark.fast
def test_a_page_asked_for_again_is_the_same_page(tmp_path):
    files = {f"notes/d{i:02d}.md": distinct(i) for i in range(30)}
    m = make_memory(tmp_path / "data", files=files)
    try:
        first = m.recall("zebu", budget_tokens=300, user=as_user(m, "alice"))
        second = m.recall(
            "zebu", budget_tokens=300, cursor=first.next_cursor, user=as_user(m, "alice")
        )
        third = m.recall(
            "zebu", budget_tokens=300, cursor=second.next_cursor, user=as_user(m, "alice")
        )
        assert third.items
        # a retry, or a browser going back a page: the same items, the same next cursor
        again = m.recall(
            "zebu", budget_tokens=300, cursor=first.next_cursor, user=as_user(m, "alice")
        )
        assert [i["id"] for i in again.items] == [i["id"] for i in second.items]
        assert again.next_cursor == second.next_cursor
    finally:
        m.stop()
