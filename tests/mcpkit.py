"""The official MCP SDK client over streamable HTTP, against the app in this process or a
server process alike: ``mcp_connect(srv)`` opens the SDK's ``Client`` on ``srv``'s
``/mcp`` with the owner's token (or ``headers``).

With an ``appkit.AppServer`` the client's HTTP requests go through the app itself (the
same routes, auth middleware, MCP session manager and tools as ``wiki-memory serve``
runs, in the app's own event loop), with no process, port or socket; with a
``serverproc.ServerProcess`` over a real connection. The client runs in the caller's
event loop (``asyncio.run``), so a test may call ``srv.post``/``srv.get`` between MCP
calls as it does against a process. Keep a real process where the process is the point
(the stdio bridge, which finds the server through its ``server.json``; an installed
entry; signals)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
import httpx2
from appkit import AppServer


class AppTransport(httpx2.AsyncBaseTransport):
    """An ``httpx2`` transport that answers each request with a started ``AppServer``'s
    app, run in the app's own event loop (its ``TestClient`` portal) from a worker
    thread, so the caller's loop and the app's stay apart. The client address is
    loopback, as ``AppServer``'s own client is."""

    def __init__(self, srv: AppServer) -> None:
        portal = srv.client.portal
        assert portal is not None, "start() the AppServer first"
        self._portal = portal
        self._asgi = httpx2.ASGITransport(app=srv.client.app, client=("127.0.0.1", 50000))

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        await request.aread()  # the body as bytes: readable from the app's loop
        response: httpx2.Response = await anyio.to_thread.run_sync(
            self._portal.call,
            self._asgi.handle_async_request,
            request,
            abandon_on_cancel=True,
        )
        return response


def mcp_http_client(
    srv: Any, headers: dict[str, str] | None = None, timeout: float = 120
) -> httpx2.AsyncClient:
    """An ``httpx2.AsyncClient`` sending ``headers`` (default: the owner's token) to
    ``srv``: through the app for an ``AppServer``, over the network for a process."""
    h = srv.headers if headers is None else headers
    if isinstance(srv, AppServer):
        return httpx2.AsyncClient(
            transport=AppTransport(srv), base_url=srv.url, headers=h, timeout=timeout
        )
    return httpx2.AsyncClient(headers=h, timeout=timeout)


@asynccontextmanager
async def mcp_connect(
    srv: Any, headers: dict[str, str] | None = None, **client_kw: Any
) -> AsyncIterator[Any]:
    """The SDK's ``Client`` on ``srv``'s ``/mcp`` over streamable HTTP (``client_kw``:
    ``mode``, ``client_info``, ... as ``mcp.Client`` takes them)."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with mcp_http_client(srv, headers) as hc:
        t = streamable_http_client(srv.url + "/mcp", http_client=hc)
        async with Client(t, **client_kw) as c:
            yield c
