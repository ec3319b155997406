"""A topic page's items weigh less than the entries that say the words (the fusion's
``topic`` factor, docs/ranking.md "Topic pages"): the page only links those entries, so
the entry itself comes first and the topic page after it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support import as_user, make_memory

from wiki_memory.recall import rank
from wiki_memory.recall.weights import Weights

pytestmark = pytest.mark.fast

T0 = 1_700_000_000
SESSIONS = [
    ["I went to the Pride Parade with Melanie.", "The flaky test failed."],
    ["Melanie liked the Pride Parade photos.", "It fails again."],
    ["The support group met today.", "Still failing."],
]


def end_session(mem: Any, sid: str, day: int, texts: list[str]) -> str:
    events: list[dict[str, Any]] = [
        {
            "harness": "locomo",
            "event": "UserPromptSubmit",
            "session_id": sid,
            "project": "atlas",
            "event_id": f"{sid}-{i}",
            "ts": T0 + day * 86_400 + 5 * i,
            "payload": {"prompt": text, "speaker": "Caroline"},
        }
        for i, text in enumerate(texts)
    ]
    events.append(
        {
            "harness": "locomo",
            "event": "SessionEnd",
            "session_id": sid,
            "project": "atlas",
            "event_id": f"{sid}-end",
            "ts": T0 + day * 86_400 + 5 * len(texts),
            "payload": {"reason": "other"},
        }
    )
    key = mem.capture(events, as_user(mem, "alice"))[0]["session_key"]
    mem.writer.flush()
    return str(mem.spool.sessions[key].state["path"])


def kinds(mem: Any, query: str, tuning: dict[str, float] | None = None) -> list[str]:
    found = rank.ranked(mem._sources, rank.RecallQuery(query, project="atlas"), tuning=tuning)
    return [found.item(i)["kind"] for i in range(min(5, len(found)))]


def test_the_entries_that_say_a_topic_come_before_its_topic_page(tmp_path: Path) -> None:
    mem = make_memory(tmp_path, topic_pages=True)
    try:
        for i, texts in enumerate(SESSIONS):
            end_session(mem, f"s{i}", i, texts)
        assert Weights().topic < 1.0
        shown = kinds(mem, "Pride Parade")
        assert shown[:3] == ["session", "session", "topic"]
        # at full weight the topic page, whose title is the query, took first place
        assert kinds(mem, "Pride Parade", {"topic": 1.0})[0] == "topic"
        # at 0 a topic page is no item at all
        assert "topic" not in kinds(mem, "Pride Parade", {"topic": 0.0})
    finally:
        mem.stop()
