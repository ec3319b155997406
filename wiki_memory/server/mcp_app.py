"""The MCP face: streamable HTTP mounted at ``/mcp``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wiki_memory.core import Memory
    from wiki_memory.server.auth import TokenStore


def routes(memory: Memory, tokens: TokenStore) -> list[Any]:
    """The Starlette routes of this face (none yet)."""
    del memory, tokens
    return []


@contextlib.asynccontextmanager
async def lifespan(memory: Memory) -> AsyncIterator[None]:
    """Runs for the life of the app (the MCP session manager goes here)."""
    del memory
    yield
