"""Every match reachable. Following recall cursors returns every matching item
exactly once, over random corpora, budgets and page sizes, more than 50 matches
included: in the core (many examples), and through the server's ``POST /v1/recall`` and
MCP ``memory_recall`` (the official SDK client over streamable HTTP), against the app in
this process (``appkit``, ``mcpkit``).

The property, for any budget: the pages, in order, are the ranking without a gap or a
repeat; each page fits its budget; ``omitted`` counts every match after the page; and the
paging only stops early when the next match alone is over the budget (``needs_tokens``
says what it costs). With a budget at least that of the largest item, every match comes
back.
"""

from __future__ import annotations

import asyncio
import random
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from appkit import AppServer, http
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcpkit import mcp_connect
from support import make_memory

from wiki_memory.core.memory import Memory
from wiki_memory.core.recaller import MAX_BUDGET_TOKENS, read_cursor
from wiki_memory.recall.tokens import count_item

WORDS = (
    "alpha beta gamma delta kappa lambda sigma omega river stone cloud ember frost "
    "harbor meadow copper violet amber quartz falcon lantern orchard prism tundra"
).split()


def corpus(wiki: Path, project: str, word: str, seed: int, pages: int, size: int) -> None:
    """``pages`` notes in ``projects/<project>/notes``, each naming ``word`` in one to
    three sections of about ``size`` random words (distinct text: no near-duplicates)."""
    rng = random.Random(seed)
    folder = wiki / "projects" / project / "notes"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for i in range(pages):
        sections = []
        for j in range(rng.randint(1, 3)):
            body = " ".join(rng.choice(WORDS) + str(rng.randint(0, 9999)) for _ in range(size))
            sections.append(f"## Part {j}\n\n{word} {body} {word}-{i}-{j}\n")
        (folder / f"n{i:03d}.md").write_text(
            f"---\ntitle: Note {i} {rng.choice(WORDS)}\n---\n\n" + "\n".join(sections),
            encoding="utf-8",
        )


def follow(page: Callable[[int], dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Any]]:
    """Call ``page(cursor)`` from 0 while it gives a ``next_cursor``: (items, pages)."""
    items: list[dict[str, Any]] = []
    pages: list[Any] = []
    cursor = 0
    for _ in range(10_000):
        res = page(cursor)
        pages.append(res)
        items += res["items"]
        if res["next_cursor"] is None:
            return items, pages
        # a walk cursor: the rank of the next match, after this page's run (core.recaller)
        assert read_cursor(res["next_cursor"])[2] == res["cursor"] + len(res["items"])
        assert read_cursor(cursor)[2] == res["cursor"] and res["items"]
        cursor = res["next_cursor"]
    raise AssertionError("the cursors never ended")


def check(items: list[dict[str, Any]], pages: list[Any], budget: int, ranked: list[str]) -> None:
    """The property (module docstring) against the full ranking ``ranked`` (ids)."""
    ids = [str(i["id"]) for i in items]
    assert len(ids) == len(set(ids)), "a match came back twice"
    assert ids == ranked[: len(ids)], "the pages are not the ranking in order"
    seen = 0
    for res in pages:
        assert res["total"] == len(ranked)
        assert sum(count_item(i) for i in res["items"]) == res["used_tokens"] <= budget
        seen += len(res["items"])
        assert res["omitted"] == len(ranked) - seen
    last = pages[-1]
    if len(ids) < len(ranked):
        # stopped early: only because the next match alone is over the budget
        assert last["items"] == [] and last["needs_tokens"] is not None
        assert last["needs_tokens"] > budget
    else:
        assert last["omitted"] == 0


def ranking(memory: Memory, word: str, project: str) -> list[str]:
    res = memory.recall(word, project=project, budget_tokens=MAX_BUDGET_TOKENS)
    assert res.next_cursor is None and res.omitted == 0
    return [str(i["id"]) for i in res.items]


# -- the core: many examples ------------------------------------------------------------------


@pytest.fixture(scope="module")
def core(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    m = make_memory(tmp_path_factory.mktemp("paging") / "data")
    yield m
    m.stop()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 10**6),
    pages=st.integers(0, 120),
    size=st.integers(3, 60),
    budget=st.integers(0, 6000),
)
def test_core_cursors_return_every_match_once(core: Memory, seed, pages, size, budget) -> None:
    corpus(core.wiki_dir, "prop", "zebrafish", seed, pages, size)
    core.reindex()
    ranked = ranking(core, "zebrafish", "prop")
    assert len(ranked) >= pages  # every page matches (one item or more each)
    items, res = follow(
        lambda c: core.recall("zebrafish", project="prop", budget_tokens=budget, cursor=c).to_json()
    )
    check(items, res, budget, ranked)
    whole = core.recall("zebrafish", project="prop", budget_tokens=MAX_BUDGET_TOKENS).items
    if budget >= max((count_item(i) for i in whole), default=0):
        assert [str(i["id"]) for i in items] == ranked
        assert [str(i["id"]) for i in items] == ranked


def test_more_than_fifty_matches_and_any_budget_up_to_two_billion(core: Memory) -> None:
    corpus(core.wiki_dir, "many", "axolotl", 7, 52, 4)
    core.reindex()
    res = core.recall("axolotl", project="many", budget_tokens=2_000_000_000)
    assert res.total >= 52 and len(res.items) == res.total and res.omitted == 0
    small = core.recall("axolotl", project="many", budget_tokens=300)
    assert small.omitted == small.total - len(small.items) > 0


# -- HTTP and MCP, through the app in this process ----------------------------------------------------------


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    s = AppServer(tmp_path_factory.mktemp("paging-srv") / "data").start()
    yield s
    s.stop()


def http_page(srv: AppServer, word: str, budget: int) -> Callable[[int], dict[str, Any]]:
    def page(cursor: int) -> dict[str, Any]:
        r = srv.post(
            "/v1/recall",
            {"query": word, "project": "prop", "budget_tokens": budget, "cursor": cursor},
        )
        assert r.status_code == 200, r.text
        out: dict[str, Any] = r.json()
        return out

    return page


def mcp_follow(srv: AppServer, word: str, budget: int) -> tuple[list[Any], list[Any]]:
    async def main() -> tuple[list[Any], list[Any]]:
        async with mcp_connect(srv) as c:
            items: list[Any] = []
            pages: list[Any] = []
            cursor = 0
            while True:
                r = await c.call_tool(
                    "memory_recall",
                    {"query": word, "project": "prop", "budget_tokens": budget, "cursor": cursor},
                )
                assert not r.is_error, r.content
                sc = r.structured_content
                pages.append(sc)
                items += sc["items"]
                if sc["next_cursor"] is None:
                    return items, pages
                cursor = sc["next_cursor"]

    return asyncio.run(main())


@pytest.mark.slow
@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 10**6),
    pages=st.integers(0, 90),
    size=st.integers(3, 80),
    budget=st.integers(0, 4000),
)
def test_http_and_mcp_cursors_return_every_match_once(
    srv: AppServer, seed, pages, size, budget
) -> None:
    corpus(srv.data_dir / "wiki", "prop", "quagga", seed, pages, size)
    assert srv.post("/v1/admin/reindex", {}).status_code == 200
    whole = srv.post(
        "/v1/recall", {"query": "quagga", "project": "prop", "budget_tokens": MAX_BUDGET_TOKENS}
    ).json()
    ranked = [str(i["id"]) for i in whole["items"]]
    assert whole["total"] == len(ranked) >= pages and whole["next_cursor"] is None
    items, res = follow(http_page(srv, "quagga", budget))
    check(items, res, budget, ranked)
    m_items, m_pages = mcp_follow(srv, "quagga", budget)
    check(m_items, m_pages, budget, ranked)
    assert m_items == items[: len(m_items)]


@pytest.mark.slow
def test_http_budget_limits(srv: AppServer) -> None:
    ok = srv.post("/v1/recall", {"query": "x", "budget_tokens": 2_000_000_000})
    assert ok.status_code == 200, ok.text
    over = srv.post("/v1/recall", {"query": "x", "budget_tokens": 2_000_000_001})
    assert over.status_code == 400 and over.json()["field"] == "budget_tokens"
    neg = http(srv).post(
        srv.url + "/v1/recall", json={"query": "x", "cursor": -1}, headers=srv.headers
    )
    assert neg.status_code == 400 and neg.json()["field"] == "cursor"
