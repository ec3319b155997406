"""The MCP face over streamable HTTP, at ``/mcp`` (see ``docs/mcp.md``).

- ``/mcp`` itself answers (a plain route, not a mount whose inner path is ``/``: that
  would answer ``POST /mcp`` with a redirect that MCP clients do not follow); ``/mcp/``
  answers too.
- The app's ``AuthMiddleware`` checks the bearer token before a request gets here (401
  without one, as on ``/v1``). The token's user is handed to the SDK as the session's
  owner, so a session opened with one user's token cannot be used with another's.
- The SDK's session manager runs in the app's lifespan (:func:`lifespan`), a fresh one
  each time the app starts.
- DNS-rebinding protection: the app checks the Host header on every route
  (:mod:`wiki_memory.hosts`, the ``allowed_hosts`` setting); the SDK is told the same
  names, so its own Host and Origin check agrees.
"""

from __future__ import annotations

import contextlib
import logging
import weakref
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from wiki_memory.hosts import allowed_hosts

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    from wiki_memory.auth import TokenStore
    from wiki_memory.config import Settings
    from wiki_memory.core.memory import Memory

log = logging.getLogger("wiki_memory.mcp")

METHODS = ["GET", "POST", "DELETE"]

_faces: weakref.WeakKeyDictionary[Memory, McpEndpoint] = weakref.WeakKeyDictionary()


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """The SDK's Host/Origin check for this server's bind address (see the module doc)."""
    from mcp.server.transport_security import TransportSecuritySettings

    allowed = allowed_hosts(settings)
    if allowed.any_host:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts: list[str] = []
    origins: list[str] = []
    for name in allowed.entries():
        has_port = name.rsplit(":", 1)[-1].isdigit() and not name.endswith("]")
        for v in [name] if has_port else [name, f"{name}:*"]:
            if v not in hosts:
                hosts.append(v)
        for scheme in ("http", "https"):
            for v in [f"{scheme}://{name}"] + ([] if has_port else [f"{scheme}://{name}:*"]):
                if v not in origins:
                    origins.append(v)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


class McpEndpoint:
    """The ASGI endpoint at ``/mcp``: hands each request to the current session manager."""

    def __init__(self, memory: Memory) -> None:
        from wiki_memory.mcp.tools import build_server

        self.memory = memory
        self.server: MCPServer = build_server(memory)
        self.manager: StreamableHTTPSessionManager | None = None

    def new_manager(self) -> StreamableHTTPSessionManager:
        """A session manager for one run of the app (the SDK allows one ``run()`` each)."""
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
        from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

        settings = self.memory.settings
        return StreamableHTTPSessionManager(
            app=self.server._lowlevel_server,
            json_response=True,
            security_settings=transport_security(settings),
            # a page_write carries up to max_body_bytes of text plus JSON escaping
            max_request_body_size=max(DEFAULT_MAX_REQUEST_BODY_SIZE, 2 * settings.max_body_bytes),
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        user = (scope.get("state") or {}).get("user")
        if user and "user" not in scope:
            from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
            from mcp.server.auth.provider import AccessToken

            scope["user"] = AuthenticatedUser(
                AccessToken(token="", client_id=str(user), subject=str(user), scopes=[])
            )
        manager = self.manager
        if manager is None:
            resp = JSONResponse(
                {"error": "unavailable", "message": "the MCP endpoint is not running"},
                503,
                headers={"Retry-After": "1"},
            )
            await resp(scope, receive, send)
            return
        await manager.handle_request(scope, receive, send)


def routes(memory: Memory, tokens: TokenStore) -> list[Any]:
    """``/mcp`` and ``/mcp/`` (GET, POST, DELETE); the bearer check is the app's."""
    del tokens  # AuthMiddleware guards /mcp with the same tokens as /v1
    endpoint = McpEndpoint(memory)
    _faces[memory] = endpoint
    return [
        Route("/mcp", endpoint, methods=METHODS),
        Route("/mcp/", endpoint, methods=METHODS),
    ]


@contextlib.asynccontextmanager
async def lifespan(memory: Memory) -> AsyncIterator[None]:
    """Runs the SDK's session manager for the life of the app."""
    endpoint = _faces.get(memory)
    if endpoint is None:
        yield
        return
    manager = endpoint.new_manager()
    async with manager.run():
        endpoint.manager = manager
        try:
            yield
        finally:
            endpoint.manager = None
