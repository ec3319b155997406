"""The MCP face over streamable HTTP, at ``/mcp`` (see ``docs/mcp.md``).

- ``/mcp`` itself answers (a plain route, not a mount whose inner path is ``/``: that
  would answer ``POST /mcp`` with a redirect that MCP clients do not follow); ``/mcp/``
  answers too.
- The app's ``AuthMiddleware`` checks the bearer token before a request gets here (401
  without one, as on ``/v1``). The token's user is handed to the SDK as the session's
  owner, so a session opened with one user's token cannot be used with another's.
- The SDK and the tool server are loaded on the first request to ``/mcp`` (importing
  the SDK is about 0.6 s of CPU, most of a server's start-up; a server that is never
  asked over MCP never pays it, and starts in under half the time). That request waits
  for the load; the event loop does not (it runs in a worker thread). The SDK's session
  manager then runs in the app's lifespan (:func:`lifespan`) until the app stops, a
  fresh one each time the app starts.
- DNS-rebinding protection: the app checks the Host header on every route
  (:mod:`wiki_memory.hosts`, the ``allowed_hosts`` setting); the SDK is told the same
  names, so its own Host and Origin check agrees.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import weakref
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup, TaskStatus
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
    """The ASGI endpoint at ``/mcp``: hands each request to the session manager, which
    the first request starts (see the module doc). Between the app's start and stop
    (:func:`lifespan`) a request is served; outside it, answered 503 ``unavailable``."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.server: MCPServer | None = None
        self.manager: StreamableHTTPSessionManager | None = None
        self._group: TaskGroup | None = None
        self._stop: anyio.Event | None = None
        self._starting: anyio.Lock | None = None

    def new_manager(self, server: MCPServer) -> StreamableHTTPSessionManager:
        """A session manager for one run of the app (the SDK allows one ``run()`` each)."""
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
        from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

        settings = self.memory.settings
        return StreamableHTTPSessionManager(
            app=server._lowlevel_server,
            json_response=True,
            security_settings=transport_security(settings),
            # a page_write carries up to max_body_bytes of text plus JSON escaping
            max_request_body_size=max(DEFAULT_MAX_REQUEST_BODY_SIZE, 2 * settings.max_body_bytes),
        )

    def open(self, group: TaskGroup) -> None:
        """The app has started: the session manager may run in ``group`` from now on."""
        self._group, self._stop, self._starting = group, anyio.Event(), anyio.Lock()

    def close(self) -> None:
        """The app is stopping: no new request is served, and the running session
        manager (if any) stops, ending its sessions."""
        self._group = None
        if self._stop is not None:
            self._stop.set()

    async def running(self) -> StreamableHTTPSessionManager | None:
        """The running session manager, started (with the SDK and the tool server loaded,
        once) when this is the first request since the app started; None when the app is
        not running."""
        if self.manager is not None or self._group is None or self._starting is None:
            return self.manager
        async with self._starting:
            group = self._group
            if self.manager is None and group is not None:
                if self.server is None:
                    self.server = await anyio.to_thread.run_sync(_build_server, self.memory)
                if self._group is group:  # else the app began to stop during the load
                    await group.start(self._serve, self.new_manager(self.server))
        return self.manager

    async def _serve(
        self,
        manager: StreamableHTTPSessionManager,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        assert self._stop is not None
        stop = self._stop
        async with manager.run():
            self.manager = manager
            task_status.started()
            try:
                await stop.wait()
            finally:
                self.manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        manager = await self.running()
        if manager is None:
            resp = JSONResponse(
                {"error": "unavailable", "message": "the MCP endpoint is not running"},
                503,
                headers={"Retry-After": "1"},
            )
            await resp(scope, receive, send)
            return
        user = (scope.get("state") or {}).get("user")
        if user and "user" not in scope:
            from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
            from mcp.server.auth.provider import AccessToken

            scope["user"] = AuthenticatedUser(
                AccessToken(token="", client_id=str(user), subject=str(user), scopes=[])
            )
        await manager.handle_request(scope, receive, send)


def _build_server(memory: Memory) -> MCPServer:
    """The tool server over ``memory`` (imports the SDK: run in a worker thread). The SDK's
    modules and the tools' schemas live as long as the server, so they join what the
    app's start kept out of the collector's full passes (``gc.freeze``; see
    ``wiki_memory.server.app``), after one full collection so that no garbage is kept
    with them: about 20 ms, the only pause of the event loop the load makes (59,000
    objects, most of them the SDK's, walked once instead of at every later full pass)."""
    from wiki_memory.mcp.tools import build_server

    server = build_server(memory)
    gc.collect()
    gc.freeze()
    return server


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
    """The life of the app for the MCP face: its session manager, once the first request
    has started it, runs in this block's task group and stops when the block ends."""
    endpoint = _faces.get(memory)
    if endpoint is None:
        yield
        return
    async with anyio.create_task_group() as group:
        endpoint.open(group)
        try:
            yield
        finally:
            endpoint.close()
