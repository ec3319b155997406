"""The Starlette app: composes the ``/v1`` JSON API (:mod:`wiki_memory.server.api`), the
handoff routes, the MCP endpoint and the web view over one core Memory, with the
middleware (auth, allowed hosts, HSTS, the access log), the lifespan and the one
exception handler.

Every route but ``/v1/health`` needs ``Authorization: Bearer <token>`` (scheme
case-insensitive); a missing and a wrong token get the same 401 body. Tokens are
never read from the query string. The access log (``logs/access.log``) records
method, path, status and time, with every query-string value replaced by ``REDACTED``.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Protocol

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from wiki_memory.audit import AuditLog
from wiki_memory.auth import TokenStore
from wiki_memory.core.memory import Memory
from wiki_memory.diskfull import is_disk_full
from wiki_memory.errors import (
    BadRequest,
    DiskFull,
    MethodNotAllowed,
    NotFound,
    UserNameTwin,
    WikiMemoryError,
    WrongHost,
    rule_for,
)
from wiki_memory.harness.outbox import OutboxDrainer
from wiki_memory.hosts import AllowedHosts, allowed_hosts
from wiki_memory.identity import Identity
from wiki_memory.mcp import app as mcp_app
from wiki_memory.server import agentfiles as agentfile_api
from wiki_memory.server import api, looplag
from wiki_memory.server import handoffs as handoff_api
from wiki_memory.server.accesslog import AccessLogMiddleware
from wiki_memory.server.api import CAPTURE_THREADS, PAGE_BUILDS
from wiki_memory.server.hsts import HstsMiddleware
from wiki_memory.web import views as web
from wiki_memory.web.session import CookieSignIn

log = logging.getLogger("wiki_memory.server")

OPEN_PATHS = {"/v1/health", "/health"}
UNAUTHORIZED = {"error": "unauthorized", "message": "a valid bearer token is required"}


def error_response(request: Request, exc: Exception) -> Response:
    """THE mapping from an error to an HTTP answer, registered once for the whole app.

    Under ``/v1`` (and for the API's errors anywhere) the answer is the JSON of
    :meth:`wiki_memory.errors.WikiMemoryError.body` with the status :data:`TABLE` gives;
    a router 404/405 becomes ``not_found``/``method_not_allowed`` JSON there. Outside
    ``/v1`` and ``/mcp`` a router error is the web view's HTML page. A ValueError no core
    operation typed is a 400 ``bad_request`` naming the ``body``, its text in the log
    (:func:`untyped`); an OSError saying the disk is full is a 507
    ``disk_full`` (noted in the Memory's disk state)."""
    path = request.url.path
    api_path = path == "/v1" or path.startswith(("/v1/", "/mcp"))
    if isinstance(exc, HTTPException):
        if not api_path:
            return web.error_page(request, exc.status_code)
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(web.allowed_methods(request))
            err: WikiMemoryError = MethodNotAllowed(
                f"{request.method} is not allowed on {path}", headers=headers
            )
        elif exc.status_code == 404:
            err = NotFound(f"no such route: {path}")
        else:
            err = WikiMemoryError(str(exc.detail))
            return JSONResponse(err.body(), exc.status_code, headers=headers)
    elif isinstance(exc, WikiMemoryError):
        err = exc
    elif isinstance(exc, OSError):
        if not is_disk_full(exc):
            raise exc  # a bug or a broken disk: a 500 with its traceback in the log
        request.app.state.memory.health.disk.failed(exc, "data directory")
        err = DiskFull()
    else:
        err = untyped(exc, path)
    return JSONResponse(err.body(), rule_for(err).status, headers=err.headers or None)


def untyped(exc: Exception, where: str) -> BadRequest:
    """The 400 for a ValueError that no core operation turned into a typed error naming
    its field (a gap: every bad value has a code and a field, docs/api.md "Errors"). Its
    text is a library's, not the client's: it goes to the server log with the
    traceback, and the client is told which part of the request to check."""
    log.warning("an untyped %s reached %s: %s", type(exc).__name__, where, exc, exc_info=exc)
    return BadRequest(
        "a value in the request could not be used (the server log names it)", field="body"
    )


def client_gone(request: Request, exc: Exception) -> Response:
    """A client that went away before its request body was read whole (the guard cuts
    slow bodies: docs/team-server.md): nobody reads the answer, so nothing is logged
    but the access line (499, as nginx names it)."""
    return Response(status_code=499)


def face_of(path: str) -> str:
    """The face a request path belongs to: ``mcp``, ``http`` (``/v1``) or ``web``."""
    if path.startswith("/mcp"):
        return "mcp"
    if path == "/v1" or path.startswith("/v1/"):
        return "http"
    return "web"


class FaceSignIn(Protocol):
    """A face's own way to sign in, asked by :class:`AuthMiddleware` for a request of
    that face with no bearer token (the web's: :class:`wiki_memory.web.session.CookieSignIn`)."""

    @property
    def open_paths(self) -> frozenset[str]: ...

    @property
    def open_prefixes(self) -> tuple[str, ...]: ...

    def identity(self, scope: Scope, tokens: TokenStore) -> Identity | None: ...

    def refuse(self, scope: Scope) -> ASGIApp: ...


class AuthMiddleware:
    """Bearer-token authentication for every HTTP path outside :data:`OPEN_PATHS`.

    On success the token's user is put in ``scope["state"]["user"]`` and its
    :class:`~wiki_memory.identity.Identity` (role, grants, token id, face) in
    ``scope["state"]["identity"]``: built once here, it is the caller every route hands
    to the core (:func:`wiki_memory.server.http.caller`). The token is
    looked up at every request (the store re-reads its file when it changed), so a
    revocation binds the next request on every face, open MCP sessions and web cookies
    included.
    """

    def __init__(
        self,
        app: ASGIApp,
        tokens: TokenStore,
        enabled: bool = True,
        audit: AuditLog | None = None,
        sign_ins: Mapping[str, FaceSignIn] | None = None,
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.enabled = enabled
        #: where an attempt with a revoked token is written (user and token id known)
        self.audit = audit
        #: per face, its own way to sign in when no bearer token came (the web's cookie)
        self.sign_ins = dict(sign_ins or {})
        self.open_paths = set(OPEN_PATHS).union(*(b.open_paths for b in self.sign_ins.values()))
        self.open_prefixes = tuple(p for b in self.sign_ins.values() for p in b.open_prefixes)

    def _public(self, path: str) -> bool:
        return path in self.open_paths or path.startswith(self.open_prefixes or ("\0",))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        state = scope.setdefault("state", {})
        face = face_of(path)
        if self._public(path) or not self.enabled:
            state["user"] = None if self.enabled else self.tokens.owner_name()
            if state["user"] is not None:
                state["identity"] = Identity(state["user"], role="owner", face=face)
            await self.app(scope, receive, send)
            return
        ident: Identity | None = None
        presented = ""
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                scheme, _, tok = value.decode("latin-1").strip().partition(" ")
                if scheme.lower() == "bearer" and tok.strip():
                    presented = tok.strip()
                    ident = self.tokens.identity_for(presented)
                break
        if ident is None and presented:
            twin = self.tokens.twin_for(presented)
            if twin is not None:
                if self.audit is not None:
                    self.audit.record(
                        Identity(twin[0], token_id=twin[1], face=face),
                        "request",
                        f"{scope.get('method')} {path}",
                        "user_name_twin",
                        twin_of=twin[2],
                    )
                err = UserNameTwin(
                    f"the user name {twin[0]!r} equals the older user {twin[2]!r} after "
                    "folding case and width; the data directory's owner must revoke this token"
                )
                resp = JSONResponse(err.body(), 401, headers={"WWW-Authenticate": "Bearer"})
                await resp(scope, receive, send)
                return
        if ident is None and presented and self.audit is not None:
            gone = self.tokens.revoked_for(presented)
            if gone is not None:
                self.audit.record(
                    Identity(gone[0], token_id=gone[1], face=face),
                    "request",
                    f"{scope.get('method')} {path}",
                    "revoked_token",
                )
        sign_in = self.sign_ins.get(face)
        if ident is None and sign_in is not None:
            # the face's own sign-in (the web's signed cookie; never for /v1 or /mcp)
            ident = sign_in.identity(scope, self.tokens)
            if ident is None:
                await sign_in.refuse(scope)(scope, receive, send)
                return
        if ident is None:
            resp = JSONResponse(UNAUTHORIZED, 401, headers={"WWW-Authenticate": "Bearer"})
            await resp(scope, receive, send)
            return
        agent = ""
        for name, value in scope.get("headers", []):
            if name == b"user-agent":
                agent = value.decode("latin-1")[:200]
        client = scope.get("client")
        address = str(client[0]) if client else ""
        ident = replace(ident, face=face, agent=agent, address=address)
        state["user"] = ident.user
        state["identity"] = ident
        await self.app(scope, receive, send)


class HostCheckMiddleware:
    """Answers 421 to a request whose ``Host`` header names none of this server's
    addresses (:mod:`wiki_memory.hosts`), before authentication and on every route:
    ``wrong_host`` JSON under ``/v1`` and ``/mcp``, a plain page on the web view."""

    def __init__(self, app: ASGIApp, allowed: AllowedHosts) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.allowed.any_host:
            await self.app(scope, receive, send)
            return
        host = ""
        for name, value in scope.get("headers", []):
            if name == b"host":
                host = value.decode("latin-1")
                break
        if self.allowed.allows(host):
            await self.app(scope, receive, send)
            return
        msg = (
            f"this server does not answer to the Host {host!r}: add it to the setting "
            "allowed_hosts (WIKI_MEMORY_ALLOWED_HOSTS) if it is one of its names"
        )
        resp: Response
        if face_of(scope.get("path", "")) == "web":
            resp = Response(
                f"421 Misdirected Request: {msg}\n", 421, media_type="text/plain; charset=utf-8"
            )
        else:
            err = WrongHost(msg)
            resp = JSONResponse(err.body(), 421)
        await resp(scope, receive, send)


Handler = Callable[[Request], Awaitable[Response]]


def create_app(memory: Memory, tokens: TokenStore, *, manage_memory: bool = False) -> ASGIApp:
    """The ASGI app for one Memory. With ``manage_memory`` the app's lifespan starts and
    stops the Memory (the ``serve`` command); tests may manage it themselves."""
    # capture's own threads: a plain executor hop costs the event loop less per request
    # than anyio's (capacity limiter, cancel scope); the request waits there for its
    # fsync, so there are enough threads for concurrent requests to share one
    capture_pool = ThreadPoolExecutor(CAPTURE_THREADS, thread_name_prefix="wiki-capture")

    @asynccontextmanager
    async def lifespan(app: Starlette):  # type: ignore[no-untyped-def]
        drainer = None
        if manage_memory:
            await run_in_threadpool(memory.start)
            # what the start built (the index's and the spool's state, the modules; the
            # MCP tools' schemas join later, wiki_memory.mcp.app) lives as long as the
            # server: kept out of the collector's full passes, which walked all of it
            # (60-100 ms of CPU at 20,000 pages) holding the interpreter's lock, a stall
            # of the event loop each time
            gc.collect()
            gc.freeze()
            # the hooks of this data directory queue here while the server is away
            drainer = OutboxDrainer(
                memory.settings.data_dir,
                lambda events: memory.capture(events, memory.scope.local_owner),
                memory.settings.outbox_drain_seconds,
            )
            drainer.start()
        try:
            async with mcp_app.lifespan(memory), looplag.watched():
                yield
        finally:
            await run_in_threadpool(capture_pool.shutdown)
            memory.capturer.close()
            if drainer is not None:
                await run_in_threadpool(drainer.stop)
            if manage_memory:
                await run_in_threadpool(memory.stop)

    routes = [
        *api.ROUTES,
        *agentfile_api.ROUTES,
        *handoff_api.routes(memory),
        *mcp_app.routes(memory, tokens),
        *web.routes(memory, tokens),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={
            HTTPException: error_response,
            WikiMemoryError: error_response,
            ValueError: error_response,
            ClientDisconnect: client_gone,
            OSError: error_response,  # a full disk: 507 disk_full (others re-raised: 500)
        },
    )
    app.state.memory = memory
    app.state.capture_pool = capture_pool
    # a reply holds a few copies of its content while it is built: bounded how many are
    # built at once (docs/team-server.md, slow readers)
    app.state.page_builds = asyncio.Semaphore(PAGE_BUILDS)
    return AccessLogMiddleware(
        HstsMiddleware(
            HostCheckMiddleware(
                AuthMiddleware(
                    app,
                    tokens,
                    enabled=memory.settings.auth,
                    audit=memory.audit,
                    sign_ins={"web": CookieSignIn()},
                ),
                allowed_hosts(memory.settings),
            )
        )
    )
