"""HTTP routes for handoffs (``/v1/handoffs``) and the brief (``/v1/brief``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wiki_memory.core import Memory


def routes(memory: Memory) -> list[Any]:
    """The Starlette routes of this face (none yet)."""
    del memory
    return []
