"""``wiki-memory recall``'s table: one row per page with its matching entries under it,
titles cut at a word, and compact handles shown with their own named fields."""

from __future__ import annotations

import pytest

from wiki_memory.cli.recall_table import cut_words, render

pytestmark = pytest.mark.fast

SES = "projects/shop/sessions/2026-11-30-refund-timeout-5b1c0a2e.md"
TITLE = "Why does the refund endpoint time out under load for EU customers"


def _item(anchor: str, score: float, snippet: str) -> dict[str, object]:
    return {
        "id": f"sec_{anchor}",
        "path": SES,
        "anchor": f"{SES}#{anchor}",
        "title": TITLE,
        "kind": "session",
        "score": score,
        "snippet": snippet,
    }


def test_one_row_per_page_with_its_entries_under_it() -> None:
    res = {
        "items": [
            _item("^t6", 0.9, "the refund timeout is the gateway's 30 s"),
            _item("Summary", 0.8, "Goal: refund timeout"),
            _item("^t3", 0.5, "raised the timeout"),
        ],
        "used_tokens": 200,
        "budget_tokens": 1000,
        "omitted": 0,
    }
    out = render(res).splitlines()
    rows = [ln for ln in out if ln.startswith(" 1 ") or ln.startswith(" 2 ")]
    assert len(rows) == 1, out
    assert SES in rows[0]
    assert any("#^t6: the refund timeout" in ln for ln in out)
    assert any("#Summary: Goal" in ln for ln in out)
    assert any("#^t3: raised" in ln for ln in out)
    # the title is cut at a word, never mid-word
    assert "Why does the refund endpoint time out under load…" in rows[0]


def test_compact_handles_name_their_fields() -> None:
    res = {
        "items": [{"id": "sec_abc123", "title": TITLE, "snippet": "refund", "compact": True}],
        "used_tokens": 50,
        "budget_tokens": 60,
        "omitted": 3,
    }
    out = render(res).splitlines()
    assert out[1].split() == ["#", "title", "id"]
    assert "sec_abc123" in out[2] and "kind" not in "\n".join(out) and "score" not in out[1]


def test_cut_words() -> None:
    assert cut_words("alpha beta gamma delta", 12) == "alpha beta…"
    assert cut_words("short", 12) == "short"


def test_a_contradicted_note_is_marked_and_long_kinds_keep_the_columns() -> None:
    """Both sides of a contradiction carry a line naming the other; a kind longer than
    the header (``agent-file``) widens the column, so every score starts in one column."""
    note = {"path": "projects/shop/notes/db.md", "title": "Primary database", "kind": "note"}
    other = {"path": "projects/shop/notes/db-move.md", "title": "Database move", "kind": "note"}
    res = {
        "items": [
            {**note, "id": "a", "score": 0.9, "snippet": "PostgreSQL 15",
             "contradicts": [other["path"]]},
            {**other, "id": "b", "score": 0.8, "snippet": "MySQL 8", "contradicts": [note["path"]]},
            {"path": "AGENTS.md", "id": "c", "title": "Agents", "kind": "agent-file",
             "score": 0.123, "snippet": "conventions"},
        ],
        "used_tokens": 90,
        "budget_tokens": 1000,
        "omitted": 0,
    }  # fmt: skip
    out = render(res).splitlines()
    assert f"    ! contradicts {other['path']}" in out
    assert f"    ! contradicts {note['path']}" in out
    rows = [ln for ln in out if ln[:2].strip().isdigit()]
    assert len(rows) == 3
    ends = {
        ln.index(score) + len(score)
        for ln, score in zip(rows, ("0.90", "0.80", "0.12"), strict=True)
    }
    assert len(ends) == 1, out  # the score column is aligned
