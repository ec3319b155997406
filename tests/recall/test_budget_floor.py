"""A budget too small for any compact handle is told the smallest budget that fits one,
not what the full item costs."""

from __future__ import annotations

import pytest

from wiki_memory.core.memory import Memory
from wiki_memory.recall.tokens import count_item

pytestmark = pytest.mark.fast

TEXT = (
    "---\ntitle: How do we rotate the signing keys for the staging cluster without downtime\n"
    "---\nRotate the staging signing keys with the two-phase script: publish the new key, "
    "wait one hour for caches, then retire the old key and confirm the health checks.\n"
)


def test_needs_tokens_is_the_smallest_budget_that_fits_a_handle(mem: Memory) -> None:
    mem.write_page("projects/p/notes/rotate.md", TEXT.encode(), user="alice", message="w")
    full = mem.recall("rotate signing keys", budget_tokens=4000).items[0]
    tiny = mem.recall("rotate signing keys", budget_tokens=5)
    assert tiny.items == []
    need = tiny.needs_tokens
    assert need is not None and need < 60, need
    assert need < count_item(full)
    assert mem.recall("rotate signing keys", budget_tokens=need - 1).items == []
    fits = mem.recall("rotate signing keys", budget_tokens=need)
    assert fits.items and fits.items[0]["compact"] is True
