"""A tool output the hook already cut, cut again on the page: the page's marker says the
whole amount left out (the hook's part included) and the output's original size."""

from __future__ import annotations

import pytest

from wiki_memory.wiki.compiler import clip_bytes

pytestmark = pytest.mark.fast

HOOK_MARK = "\n[... truncated by wiki-memory hook: {omitted} of {total} characters left out ...]\n"


def test_the_page_marker_counts_the_hooks_cut_too() -> None:
    line = "x" * 79 + "\n"
    kept = line * 3000  # 240,000 characters the hook kept
    text = kept[:180_000] + HOOK_MARK.format(omitted=366_683, total=606_683) + kept[180_000:]
    out = clip_bytes(text, 8192)
    assert "366,683 characters by the hook" in out
    assert "606,683 characters" in out


def test_a_plain_cut_keeps_its_marker() -> None:
    out = clip_bytes("y" * 100_000, 8192)
    assert "bytes cut …]" in out and "hook" not in out
