"""Recall's optimized path against the plain one, and never over budget.

The setting ``recall_plain`` switches recall between the plain path (the pool's lists by
the full SQL queries that join every match with its page; every match after the pool read
into Python and the pool's candidates left out there) and the optimized one (the pool's
lists from FTS5 alone first; the matches after the pool counted and read page by page in
SQL). On one fixed corpus, larger than the
pool so that both the pool and what follows it are reached: compiled session pages
(timeline entries with context), a running session (spool items), notes with near-duplicate
sections, headings without text, tags, aliases and links. For many queries, filters and
budgets, both paths give the same pages when following cursors from 0 to the end: the same
items in the same order, the same ``omitted``, ``total``, ``used_tokens``,
``next_cursor`` and ``needs_tokens``.

Invariant 5 (docs/api.md, "Recall"): every reply, re-counted item by item with the real
tokenizer, holds at most ``budget_tokens`` (and exactly ``used_tokens``), over random
queries, budgets and cursors, on both paths.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import as_user, make_memory, wait_for

from wiki_memory.core.memory import Memory
from wiki_memory.core.recaller import Recaller
from wiki_memory.recall import rank
from wiki_memory.recall.tokens import count_item

WORDS = (
    "harbor meadow copper violet amber quartz falcon lantern orchard prism tundra river "
    "stone cloud ember frost signal anchor beacon cipher delta glacier mosaic nectar"
).split()
COMMON = "deploy"  # in most sections: far more matches than the pool holds


def _text(rng: random.Random, n: int) -> str:
    return " ".join(
        rng.choice(WORDS) + (str(rng.randint(0, 99)) if rng.random() < 0.2 else "")
        for _ in range(n)
    )


def _files() -> dict[str, str]:
    rng = random.Random(24)
    files: dict[str, str] = {}
    for i in range(90):
        project = f"p{i % 3}"
        meta = [f"title: {rng.choice(WORDS).title()} {COMMON} notes {i}"]
        if i % 4 == 0:
            meta.append(f"tags: [{rng.choice(WORDS)}, area/{i % 5}]")
        if i % 7 == 0:
            meta.append(f"aliases: [{rng.choice(WORDS)} handbook {i}]")
        meta.append(f"updated: 2026-{1 + i % 12:02d}-{1 + i % 27:02d}")
        body = [f"# Notes {i}", ""]
        shared = _text(rng, 12)
        for s in range(3):
            body += [f"## Part {s} {rng.choice(WORDS)}", ""]
            if s == 1 and i % 5 == 0:
                # a near-duplicate of the first part, and a heading with no text under it
                body += [f"{COMMON} {shared} again", "", "## Empty heading", ""]
                continue
            word = COMMON if rng.random() < 0.8 else rng.choice(WORDS)
            body += [f"{word} {shared if s == 0 else _text(rng, rng.randint(5, 25))}", ""]
        body.append(f"See [[{rng.choice(WORDS).title()} {COMMON} notes {rng.randrange(90)}]].")
        files[f"projects/{project}/notes/n{i:03d}.md"] = (
            "---\n" + "\n".join(meta) + "\n---\n" + ("\n".join(body) + "\n")
        )
    return files


def _events(session: str, project: str, turns: int, seed: int, end: bool) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for t in range(turns):
        prompt = f"{COMMON if t % 2 == 0 else rng.choice(WORDS)} {_text(rng, rng.randint(4, 14))}?"
        out.append(
            {
                "harness": "chat",
                "event": "UserPromptSubmit",
                "session_id": session,
                "project": project,
                "ts": 1_780_000_000 + seed * 1000 + t,
                "payload": {"prompt": prompt, "speaker": "Alice" if t % 2 else "Bob"},
            }
        )
    if end:
        out.append(
            {
                "harness": "chat",
                "event": "SessionEnd",
                "session_id": session,
                "project": project,
                "ts": 1_780_000_000 + seed * 1000 + turns,
            }
        )
    return out


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    m = make_memory(tmp_path_factory.mktemp("fast") / "data", files=_files())
    events: list[dict[str, Any]] = []
    for k in range(3):
        events += _events(f"s{k}", f"p{k}", 30, k, end=True)
    events += _events("live", "p0", 12, 9, end=False)  # a running session: spool items
    m.capture(events, as_user(m, "alice"))
    wait_for(lambda: len(m.list_pages(kind="session")) == 3, 30, "3 session pages compiled")
    yield m
    m.stop()


@pytest.fixture(autouse=True)
def _pool_always(monkeypatch: pytest.MonkeyPatch) -> None:
    """This corpus is smaller than :data:`rank.FULL_RANK` matches: the tests of the pool
    rank a pool whatever the number of matches (the rule's own tests set it back)."""
    monkeypatch.setattr(rank, "FULL_RANK", 0)


def _recaller(m: Memory, plain: bool) -> Recaller:
    """A recaller of ``m`` with the setting ``recall_plain`` as given."""
    return Recaller(m._sources, m.scope, replace(m.settings, recall_plain=plain), m.audit_read)


def _walk(
    r: Recaller, query: str, budget: int, most: int = 5000, **kw: Any
) -> list[dict[str, Any]]:
    """Every page from cursor 0 while there is a next one (at most ``most`` pages)."""
    pages = []
    cursor = 0
    for _ in range(most):
        res = r.recall(
            query, budget_tokens=budget, cursor=cursor, user=as_user(r, "alice"), **kw
        ).to_json()
        pages.append(res)
        if res["next_cursor"] is None or len(pages) == most:
            return pages
        cursor = res["next_cursor"]
    raise AssertionError("the cursors never ended")


QUERIES: list[tuple[str, dict[str, Any]]] = [
    (COMMON, {}),
    (f"{COMMON} harbor", {}),
    ("harbor copper falcon", {}),
    (f"what did we {COMMON} about the glacier river", {}),
    ("Amber deploy notes 12", {}),
    (COMMON, {"project": "p1"}),
    (f"{COMMON} cipher", {"kinds": ["session"]}),
    (f"{COMMON} mosaic", {"tags": "area"}),
    (f"{COMMON} beacon", {"since": "2026-03-01", "until": "2026-08-31"}),
    ("handbook", {}),
    ("nothingmatchesthis", {}),
]


@pytest.mark.parametrize("query,filters", QUERIES)
def test_optimized_and_plain_give_the_same_pages(mem: Memory, query: str, filters: dict) -> None:
    fast, plain = _recaller(mem, False), _recaller(mem, True)
    for budget in (0, 1000, 20_000):
        a = _walk(fast, query, budget, **filters)
        b = _walk(plain, query, budget, **filters)
        assert a == b, (query, filters, budget)


def test_same_pages_with_compact_handles(mem: Memory) -> None:
    """A budget too small for the first item: compact handles, a few per page (the first
    25 pages)."""
    a = _walk(_recaller(mem, False), f"{COMMON} harbor", 120, most=25)
    b = _walk(_recaller(mem, True), f"{COMMON} harbor", 120, most=25)
    assert a == b
    assert any(i.get("compact") for p in a for i in p["items"])


def test_the_corpus_reaches_past_the_pool(mem: Memory) -> None:
    """The comparison above means something: the common word's matches go past the ranked
    pool, and the pages after it are reached by the cursors."""
    found = rank.ranked(mem._sources, COMMON)
    assert len(found._cands) > 0 and found._tail is not None
    assert len(found._tail) > rank.POOL
    pages = _walk(_recaller(mem, False), COMMON, 1000)
    ids = [i["id"] for p in pages for i in p["items"]]
    assert len(ids) == len(set(ids)) == pages[0]["total"]
    # after the pool come the other matches, by bm25, score 0
    tail = [i for p in pages for i in p["items"]][len(found._cands) :]
    assert tail and all(i["score"] == 0 for i in tail)


def _ids(found: rank.Ranked) -> list[str]:
    return [found.item(i)["id"] for i in range(len(found))]


def test_few_matches_are_ranked_whole(mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """At most FULL_RANK matches: no pool, and the order is the whole ranking's (every
    match through the fusion, as with no pool at all), items and scores alike."""
    monkeypatch.setattr(rank, "FULL_RANK", 1000)
    for query in (COMMON, f"{COMMON} harbor", "harbor copper falcon"):
        for plain in (False, True):
            found = rank.ranked(mem._sources, query, plain=plain)
            whole = rank._rank(mem._sources, query, rank.Filters(), rank.NO_LIMIT)
            assert found._tail is None
            assert len(found) == len(whole) > 0
            assert [found.item(i) for i in range(len(found))] == [
                whole.item(i) for i in range(len(whole))
            ]


def test_the_pool_starts_past_full_rank_matches(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool is ranked exactly when the caller's own-text matches are more than
    FULL_RANK: at the count itself every match is ranked, one below it a pool."""
    from wiki_memory.index import tail

    r = rank.ranked(mem._sources, COMMON)
    assert r._tail is not None  # FULL_RANK 0 here
    n = tail.count_own(mem.index, COMMON, rank.Filters())
    assert n > rank.POOL
    monkeypatch.setattr(rank, "FULL_RANK", n)
    assert rank.ranked(mem._sources, COMMON)._tail is None
    monkeypatch.setattr(rank, "FULL_RANK", n - 1)
    pooled = rank.ranked(mem._sources, COMMON)
    assert pooled._tail is not None and len(pooled._tail) > 0
    assert len(set(_ids(pooled))) == len(pooled)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    words=st.lists(st.sampled_from([*WORDS, COMMON, "notes", "again"]), min_size=1, max_size=5),
    budget=st.integers(0, 4000),
    cursor=st.integers(0, 400),
    plain=st.booleans(),
)
def test_replies_never_exceed_their_budget_recounted(
    mem: Memory, words: list[str], budget: int, cursor: int, plain: bool
) -> None:
    res = _recaller(mem, plain).recall(" ".join(words), budget_tokens=budget, cursor=cursor)
    recounted = sum(count_item(i) for i in res.items)
    assert recounted == res.used_tokens <= budget
    assert res.omitted == res.total - res.cursor - len(res.items) >= 0


def test_a_repeated_heading_is_one_match_in_the_pool_and_after_it(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages that repeat a heading (two ``## Notes``) have two sections with one id: the
    reply lists that id once, past the pool as in it, so ``total`` is the same whether the
    matches are ranked whole or pooled (a reply listed it twice past the pool, the second
    with text that ``expand`` of its id does not give)."""
    files = {
        f"notes/n{i:03d}.md": f"# N{i}\n\n## Notes\n\nzebra first {i}\n\n## Notes\n\n"
        f"zebra second {i} other words here\n"
        for i in range(150)
    }
    m = make_memory(tmp_path / "data", files=files)
    try:
        totals = []
        for full_rank in (0, 1000):  # pooled (the pool holds 100 a list), then whole
            monkeypatch.setattr(rank, "FULL_RANK", full_rank)
            for plain in (False, True):
                pages = _walk(_recaller(m, plain), "zebra", 100_000)
                ids = [i["id"] for p in pages for i in p["items"]]
                assert len(ids) == len(set(ids)) == pages[0]["total"], (full_rank, plain)
                totals.append(pages[0]["total"])
        assert totals == [150] * 4
    finally:
        m.stop()


def test_walking_a_long_tail_in_one_reply_reads_it_a_few_times(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A budget that holds every match reads the tail in growing chunks (each read sorts
    every match in SQLite): a handful of reads, not one per 32 rows."""
    from wiki_memory.index import tail

    calls: list[int] = []
    real = tail.own_sections

    def counting(*a: Any, **kw: Any) -> Any:
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(tail, "own_sections", counting)
    res = _recaller(mem, False).recall(COMMON, budget_tokens=2_000_000, user=as_user(mem, "alice"))
    tail_len = res.total - len(rank.ranked(mem._sources, COMMON)._cands)
    assert tail_len > 4 * rank.TAIL_CHUNK
    assert res.next_cursor is None and len(res.items) == res.total
    assert len(calls) <= 1 + (tail_len // rank.TAIL_CHUNK).bit_length()
