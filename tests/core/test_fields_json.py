"""The JSON of the core's result records is every field, in order, as it is: a recall
page and a sync report carry every field a face may show, and a field added to either
reaches its JSON without a second list to keep in step."""

from __future__ import annotations

import dataclasses

import pytest

from wiki_memory.core.fieldsjson import fields_json
from wiki_memory.core.recaller import RecallResult
from wiki_memory.core.sync import SyncReport


def test_a_recall_page_shows_every_field_in_order_and_shares_its_items():
    items = [{"path": "notes/a.md", "tags": ["x"]}]
    res = RecallResult(items=items, used_tokens=12, budget_tokens=400, omitted=3, total=4)
    out = res.to_json()
    assert list(out) == [f.name for f in dataclasses.fields(RecallResult)]
    assert out == {
        "items": items,
        "used_tokens": 12,
        "budget_tokens": 400,
        "omitted": 3,
        "total": 4,
        "cursor": 0,
        "next_cursor": None,
        "needs_tokens": None,
        "changed": False,
        "complete": True,
    }
    assert out["items"] is items  # shallow: nothing is copied on the way to the face


def test_a_sync_report_shows_every_field_in_order():
    rep = SyncReport(remote="origin", action="pushed", pushed=True, conflicts={"a.md": "b.md"})
    assert rep.to_json() == {
        "remote": "origin",
        "action": "pushed",
        "pushed": True,
        "conflicts": {"a.md": "b.md"},
        "remote_gc": None,
        "refused": [],
        "error": None,
        "notes": {},
    }


def test_only_a_record_has_fields():
    with pytest.raises(TypeError, match="dataclass instance"):
        fields_json({"a": 1})
    with pytest.raises(TypeError, match="dataclass instance"):
        fields_json(SyncReport)
