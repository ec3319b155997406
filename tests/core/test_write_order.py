"""A write is judged before its body is scanned (DESIGN.md invariant 13), on the faces
that run in-process: a capture by a reader, the MCP tool ``page_write`` into another
user's folder. The scanner is replaced by one that fails the test if it sees the text."""

from __future__ import annotations

from typing import Any

import pytest
from support import as_user, hook_event

import wiki_memory.core.capture as core_capture
import wiki_memory.mcp.page_tools as page_tools
from wiki_memory.core.memory import Memory
from wiki_memory.errors import CaptureRefused, NotFound
from wiki_memory.identity import Identity
from wiki_memory.mcp.common import Caller
from wiki_memory.mcp.tools import MemoryTools

pytestmark = pytest.mark.fast

BODY = "the long body nobody may scan " * 100


def test_a_refused_capture_is_never_scanned(mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    real = core_capture.redact_obj

    def watch(obj: Any, *a: Any) -> Any:
        seen.append(obj)
        return real(obj, *a)

    monkeypatch.setattr(core_capture, "redact_obj", watch)
    reader = Identity("rita", role="reader", grants={"proj": "read"})
    ev = hook_event("PostToolUse", tool_output=BODY)
    with pytest.raises(CaptureRefused):
        mem.capture(ev, reader)
    assert seen and all(BODY not in str(s) for s in seen)  # only the short fields
    # a list: the refused event's payload is not scanned, the allowed one's is
    seen.clear()
    allowed = Identity("mo", role="member", grants={"proj": "write"})
    out = mem.capture([ev, hook_event("PostToolUse", "s-2", tool_output="ok")], allowed)
    assert [("refused" in r) for r in out] == [False, False]
    assert any(BODY in str(s) for s in seen)


def test_page_write_into_another_users_folder_is_refused_unscanned(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_scan(text: str) -> Any:
        raise AssertionError("scanned before the right to write was decided")

    monkeypatch.setattr(page_tools, "redact_page_text", no_scan)
    tools = MemoryTools(mem)
    with pytest.raises(NotFound):
        alice = Caller("alice", as_user(mem, "alice"), "h", "s", None)
        tools.page_write("people/bob/notes.md", BODY, None, alice)
