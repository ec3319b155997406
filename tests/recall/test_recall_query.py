"""A recall's question is one frozen value (RecallQuery) a face builds once: recall gives
the same pages for it as for the same fields written as keywords, refuses the fields
written twice, and the ranking's weights are typed (Weights) with the names a benchmark
may tune."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from support import as_user, make_memory

from wiki_memory.core.recaller import RecallResult
from wiki_memory.recall.query import RecallQuery
from wiki_memory.recall.weights import TUNABLE, WEIGHTS, Weights

pytestmark = pytest.mark.fast

FILES = {
    f"projects/p/notes/n{i}.md": f"---\ntags: [ops]\n---\n# Note {i}\n\nthe okapi gateway {i} "
    + "and more words " * i
    + "\n"
    for i in range(12)
}


def test_a_recall_query_pages_as_its_keywords_do(tmp_path: Path) -> None:
    m = make_memory(tmp_path / "data", files=FILES)
    try:
        q = RecallQuery("okapi gateway", project="p", tags=["ops"], budget_tokens=300)
        by_query = m.recall(q, user=as_user(m, "alice"))
        by_words = m.recall(
            "okapi gateway", project="p", tags=["ops"], budget_tokens=300, user=as_user(m, "alice")
        )
        # each first page starts a walk of its own: the cursors differ in the walk number
        assert _page(by_query) == _page(by_words)
        assert by_query.items and by_query.next_cursor is not None
        nxt = dataclasses.replace(q, cursor=by_query.next_cursor)
        second = m.recall(nxt, user=as_user(m, "alice"))
        again = m.recall(
            "okapi gateway",
            project="p",
            tags=["ops"],
            budget_tokens=300,
            cursor=by_words.next_cursor,
            user=as_user(m, "alice"),
        )
        assert _page(second) == _page(again) and second.items
        assert {i["id"] for i in second.items}.isdisjoint(i["id"] for i in by_query.items)
    finally:
        m.stop()


def _page(res: RecallResult) -> dict[str, object]:
    return {k: v for k, v in res.to_json().items() if k != "next_cursor"}


def test_fields_given_beside_a_recall_query_are_refused(mem) -> None:
    with pytest.raises(TypeError):
        mem.recall(RecallQuery("okapi"), project="p")
    with pytest.raises(dataclasses.FrozenInstanceError):
        RecallQuery("okapi").cursor = 3  # type: ignore[misc]


def test_weights_are_typed_and_tuning_names_are_checked() -> None:
    w = Weights()
    assert w.fusion() == {**WEIGHTS, "topic": w.topic} and w.all_words == WEIGHTS["all-words"]
    assert Weights.tuned({"all-words": 0, "cap": 0}).all_words == 0.0
    assert set(TUNABLE) >= set(WEIGHTS)
    for bad in ("all_words", "nonsense"):
        with pytest.raises(ValueError, match="unknown tuning name"):
            Weights.tuned({bad: 1})
