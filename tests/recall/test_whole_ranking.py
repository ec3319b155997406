"""Queries with few matches are ranked whole (``rank.FULL_RANK``), and the reply's
``total`` and ``omitted`` count what the near-duplicate rules leave out at any depth.

The optimized path against the plain one (setting ``recall_plain``) for the queries ranked
whole, on the corpus ``bench/recall.py`` generates (a small size) and on one LoCoMo
conversation (skipped when /work/shared/data lacks it): following cursors from 0 to the
end, both give the same items in the same order, the same ``omitted``, ``total`` and
``next_cursor``, for the bench's queries and for random ones (Hypothesis).

Why no pool stops early for these queries (docs/ranking.md, "Why every match, not an
exact pool"): a near-duplicate far down the fused order is left out of ``total``, so a
reply's count depends on every match having gone through the filter.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import REPO, as_user, make_memory, shared_path, wait_for

from wiki_memory.core.memory import Memory
from wiki_memory.core.recaller import Recaller
from wiki_memory.recall import rank
from wiki_memory.recall.candidate import order_key

sys.path.insert(0, str(Path(REPO) / "bench"))

import locomo  # noqa: E402
import recall as recall_bench  # noqa: E402

pytestmark = pytest.mark.slow

PAGES = 240
"""Pages of the bench's corpus here (its queries match from a few to a few hundred
sections: every one ranked whole)."""


def _recaller(m: Memory, plain: bool) -> Recaller:
    return Recaller(m._sources, m.scope, replace(m.settings, recall_plain=plain), m.audit_read)


def _walk(r: Recaller, query: str, budget: int, **kw: Any) -> list[dict[str, Any]]:
    """Every page from cursor 0 while there is a next one."""
    pages = []
    cursor = 0
    for _ in range(5000):
        res = r.recall(
            query, budget_tokens=budget, cursor=cursor, user=r.scope.named("alice"), **kw
        ).to_json()
        pages.append(res)
        if res["next_cursor"] is None:
            return pages
        cursor = res["next_cursor"]
    raise AssertionError("the cursors never ended")


def _same_walks(m: Memory, query: str, budget: int, **kw: Any) -> list[dict[str, Any]]:
    a = _walk(_recaller(m, False), query, budget, **kw)
    b = _walk(_recaller(m, True), query, budget, **kw)
    assert a == b, (query, budget, kw)
    ids = [i["id"] for p in a for i in p["items"]]
    assert len(ids) == len(set(ids)) == a[0]["total"], "every match once"
    return a


@pytest.fixture(scope="module")
def bench_corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Memory, list[str]]]:
    """The bench's generated pages (``PAGES`` of them) and its queries."""
    root = tmp_path_factory.mktemp("benchcorpus")
    vocab = recall_bench.vocabulary(random.Random(recall_bench.SEED))
    titles = recall_bench.generate(root / "gen", PAGES, vocab)
    files = {
        p.relative_to(root / "gen").as_posix(): p.read_text(encoding="utf-8")
        for p in (root / "gen").rglob("*.md")
    }
    m = make_memory(root / "data", files=files)
    yield m, recall_bench.queries(vocab, titles, 20)
    m.stop()


def test_bench_queries_ranked_whole_same_on_both_paths(bench_corpus) -> None:
    m, qs = bench_corpus
    walked = 0
    for q in qs:
        found = rank.ranked(m._sources, q, who=as_user(m, "alice"))
        assert found.whole, q  # the path this file checks
        for budget in (1000, 20_000):
            walked += len(_same_walks(m, q, budget))
    assert walked > 3 * len(qs)  # cursors were followed, not only first pages


WORDS = st.sampled_from(
    recall_bench.vocabulary(random.Random(recall_bench.SEED))[:400]
    + ["what", "did", "we", "the", "E1042", "getValue", "part", "see"]
)


@settings(
    max_examples=10,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(words=st.lists(WORDS, min_size=1, max_size=6), budget=st.sampled_from([1000, 4000]))
def test_random_queries_same_on_both_paths(bench_corpus, words: list[str], budget: int) -> None:
    m, _qs = bench_corpus
    _same_walks(m, " ".join(words), budget)


def test_total_counts_a_near_duplicate_left_out_far_down(tmp_path: Path) -> None:
    """A page repeating one of its own sections deep in the fused order (below 100 other
    matches): the copy is no item, ``total`` is one less than the matching sections, and
    the cursors end there. A ranking that stopped above the copy could not know it."""
    rng = random.Random(5)
    filler = [f"w{i}" for i in range(300)]
    files = {}
    for i in range(150):
        words = " ".join(rng.choice(filler) for _ in range(6))
        files[f"notes/n{i:03d}.md"] = (
            f"---\ntitle: Note {i}\n---\n# Note {i}\n\n## Part\n\nzircon {words}\n"
        )
    long = " ".join(rng.choice(filler) for _ in range(120))
    files["notes/copy.md"] = (
        "---\ntitle: Copy\n---\n# Copy\n\n"
        f"## First\n\nzircon {long}\n\n## Second\n\nzircon {long} again\n"
    )
    m = make_memory(tmp_path / "data", files=files)
    try:
        found = rank.ranked(m._sources, "zircon", who=as_user(m, "alice"))
        assert found.whole
        fused = sorted((c for c in found._ranker.cands.values() if c.score > 0), key=order_key)
        shown = {found.key(i) for i in range(len(found))}
        left = [i for i, c in enumerate(fused) if f"{c.key[0]}#{c.key[1]}" not in shown]
        assert len(left) == 1 and left[0] >= 100, left  # the copy, far down
        pages = _same_walks(m, "zircon", 1000)
        assert pages[0]["total"] == 151  # 152 sections hold the word; the copy is none
        assert pages[-1]["next_cursor"] is None and pages[-1]["omitted"] == 0
    finally:
        m.stop()


def locomo_events(conv: Any) -> list[dict[str, Any]]:
    """One conversation as ``bench/locomo.py`` posts it, for ``Memory.capture``."""
    out: list[dict[str, Any]] = []
    for n, turns in conv.sessions.items():
        sid = locomo.session_key(conv, n)
        base = conv.dates[n]
        for i, t in enumerate(turns):
            out.append(
                {
                    "harness": "locomo",
                    "event": "UserPromptSubmit",
                    "session_id": sid,
                    "project": conv.sample_id,
                    "event_id": f"{sid}-{t.dia_id}",
                    "ts": base + locomo.TURN_SECONDS * i,
                    "payload": {"prompt": t.text, "speaker": t.speaker, "dia_id": t.dia_id},
                }
            )
        out.append(
            {
                "harness": "locomo",
                "event": "SessionEnd",
                "session_id": sid,
                "project": conv.sample_id,
                "event_id": f"{sid}-end",
                "ts": base + locomo.TURN_SECONDS * len(turns),
                "payload": {"reason": "other"},
            }
        )
    return out


def test_locomo_questions_ranked_whole_same_on_both_paths(tmp_path: Path) -> None:
    data = shared_path("data", "locomo", "locomo7-dev.json")  # skips when absent
    conv = locomo.load(data, 2)[1]  # conv-30, the smallest conversation
    m = make_memory(tmp_path / "data")
    try:
        m.capture(locomo_events(conv), as_user(m, "alice"))
        wait_for(
            lambda: len(m.list_pages(kind="session")) == len(conv.sessions),
            120,
            "every session page compiled",
        )
        now = locomo.now_of(conv)
        questions = [str(qa["question"]) for qa in conv.qa if int(qa["category"]) != 5]
        for q in questions[::8]:
            question = rank.RecallQuery(q, project=conv.sample_id, now=now)
            found = rank.ranked(m._sources, question, who=as_user(m, "alice"))
            assert found.whole, q
            _same_walks(m, q, 4000, project=conv.sample_id, now=now)
    finally:
        m.stop()
