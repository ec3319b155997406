"""Small truths of the brief: the last reply as plain text, the recall line in the
words of the face that asked, and a handoff addressed to a harness listed as waiting
when no session asks."""

from __future__ import annotations

import pytest
from support import as_user

from wiki_memory.core.brief import build_brief
from wiki_memory.core.memory import Memory

pytestmark = pytest.mark.fast


def _session(m: Memory, last: str) -> None:
    m.write_page(
        "projects/proj/sessions/2026-11-10-task-abcdef01.md",
        (
            "---\ntype: session\nid: ses_1\ntitle: Task\nproject: proj\nharness: codex\n"
            "session_id: s1\nuser: bob\nstarted: 2026-11-10T10:00:00Z\nstatus: ended\n---\n\n"
            f"# Task\n\n## Summary\n\n- **Goal:** task\n- **Last reply:** {last}\n"
        ).encode(),
        user="alice",
        message="w",
    )


def test_last_reply_is_plain_text(mem: Memory) -> None:
    _session(mem, "Fixed `round_half_even` in `billing.py`.")
    text = build_brief(mem, as_user(mem, "alice"), project="proj")["text"]
    assert 'last reply: "Fixed round_half_even in billing.py."' in text


def test_mcp_brief_names_the_memory_recall_tool(mem: Memory) -> None:
    _session(mem, "done")
    mcp = build_brief(mem, as_user(mem, "alice"), project="proj", face="mcp")["text"]
    assert "memory_recall" in mcp and "wiki-memory recall" not in mcp
    cli = build_brief(mem, as_user(mem, "alice"), project="proj")["text"]
    assert "wiki-memory recall" in cli


def test_brief_without_a_session_lists_a_handoff_to_a_harness_as_waiting(mem: Memory) -> None:
    svc = mem.handoffs
    h = svc.create(
        as_user(svc, "alice"), project="proj", title="Port the parser", harness="cli", to="codex"
    )
    other = svc.create(
        as_user(svc, "alice"), project="proj", title="For bob only", harness="cli", to="user:bob"
    )
    res = build_brief(mem, as_user(mem, "alice"), project="proj", harness="cli")
    waiting = [p["id"] for p in res["parts"] if p["kind"] == "waiting"]
    assert h["id"] in waiting
    assert other["id"] not in waiting
