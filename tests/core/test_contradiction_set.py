"""The labelled set of contradictions (docs/knowledge.md, "Contradictions: the labelled
set"), written before any detector so that no rule is tuned to it unseen: 80 pairs of
notes, 40 that contradict and 40 hard ones that do not; every category with at least 4
pairs; 20 pairs in a different style (terse chat notes, other languages) kept apart from
tuning. The detector's precision and recall are measured on it."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

SET = Path(__file__).parent / "data" / "contradictions.jsonl"
CATEGORIES = {"numbers", "versions", "dates", "paths", "products", "negation"}


def pairs() -> list[dict[str, object]]:
    return [json.loads(line) for line in SET.read_text(encoding="utf-8").splitlines() if line]


def test_the_set_has_the_shape_it_is_measured_by() -> None:
    rows = pairs()
    assert len(rows) == 80 and len({r["id"] for r in rows}) == 80
    labels = collections.Counter(r["label"] for r in rows)
    assert labels == {"contradiction": 40, "compatible": 40}
    held = [r for r in rows if r["split"] == "heldout"]
    assert len(held) == 20
    assert {r["label"] for r in held} == {"contradiction", "compatible"}
    per_category = collections.Counter(r["category"] for r in rows)
    assert set(per_category) == CATEGORIES
    assert min(per_category.values()) >= 4
    for r in rows:
        for side in ("a", "b"):
            page = r[side]
            assert isinstance(page, dict) and page["title"] and page["text"], r["id"]
        if r["label"] == "compatible":
            assert r.get("kind"), f"{r['id']}: a non-contradiction says what kind it is"
