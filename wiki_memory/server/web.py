"""The read-only web view (server-rendered pages under ``/``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse, Response
from starlette.types import Scope

if TYPE_CHECKING:
    from wiki_memory.core import Memory
    from wiki_memory.server.auth import TokenStore

#: paths anyone may fetch without signing in
PUBLIC_PATHS: frozenset[str] = frozenset()
PUBLIC_PREFIXES: tuple[str, ...] = ()


def routes(memory: Memory, tokens: TokenStore) -> list[Any]:
    """The Starlette routes of this face (none yet)."""
    del memory, tokens
    return []


def user_from_cookie(scope: Scope, tokens: TokenStore) -> str | None:
    """The signed-in user of a browser request, from its session cookie (none yet)."""
    del scope, tokens
    return None


def unauthorized(scope: Scope) -> Response:
    """What a browser request without a valid sign-in gets."""
    del scope
    return JSONResponse(
        {"error": "unauthorized", "message": "a valid bearer token is required"},
        401,
        headers={"WWW-Authenticate": "Bearer"},
    )
