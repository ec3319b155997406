"""The Starlette app: the ``/v1`` JSON API over the core Memory service.

Every route but ``/v1/health`` needs ``Authorization: Bearer <token>`` (scheme
case-insensitive); a missing and a wrong token get the same 401 body. Tokens are
never read from the query string. The access log (``logs/access.log``) records
method, path, status and time, with every query-string value replaced by ``REDACTED``.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from wiki_memory.audit import AuditLog, dumps
from wiki_memory.auth import TokenStore
from wiki_memory.core import pins
from wiki_memory.core.forget import forget_page
from wiki_memory.core.memory import Memory
from wiki_memory.core.pages import page_text_for_write
from wiki_memory.core.purge import purge_page
from wiki_memory.core.recaller import MAX_BUDGET_TOKENS
from wiki_memory.core.remember import remember as remember_note
from wiki_memory.core.sessions import sha256
from wiki_memory.diskfull import is_disk_full
from wiki_memory.errors import (
    BadRequest,
    Conflict,
    DiskFull,
    MethodNotAllowed,
    NotFound,
    PreconditionRequired,
    UserNameTwin,
    WikiMemoryError,
    rule_for,
)
from wiki_memory.harness.outbox import OutboxDrainer
from wiki_memory.hosts import AllowedHosts, allowed_hosts
from wiki_memory.identity import CALLER, Identity
from wiki_memory.mcp import app as mcp_app
from wiki_memory.server import handoffs as handoff_api
from wiki_memory.server.access import AccessLogMiddleware
from wiki_memory.server.hsts import HstsMiddleware
from wiki_memory.server.http import (
    ApiError,
    _int,
    _str,
    body_project,
    json_body,
    parse_json,
    read_body,
    read_json,
)
from wiki_memory.web import views as web
from wiki_memory.web.replies import spooled

OPEN_PATHS = {"/v1/health"}
#: page replies built at once (``GET /v1/pages/{path}``)
PAGE_BUILDS = 2
#: threads that run the captures of longer lists (each waits for its group's fsync there)
CAPTURE_THREADS = 16
#: most events of a request captured on the event loop itself (the fsync awaited) ...
INLINE_EVENTS = 4
#: ... and most bytes of its body: sanitizing 1 MiB takes the loop 0.5-0.75 s, which
#: every other request would wait for (a bench observation is about 0.6 KB)
INLINE_BYTES = 16 * 1024
UNAUTHORIZED = {"error": "unauthorized", "message": "a valid bearer token is required"}


def error_response(request: Request, exc: Exception) -> Response:
    """THE mapping from an error to an HTTP answer, registered once for the whole app.

    Under ``/v1`` (and for the API's errors anywhere) the answer is the JSON of
    :meth:`wiki_memory.errors.WikiMemoryError.body` with the status :data:`TABLE` gives;
    a router 404/405 becomes ``not_found``/``method_not_allowed`` JSON there. Outside
    ``/v1`` and ``/mcp`` a router error is the web view's HTML page. A ValueError a
    library raised is a 400 ``bad_request``; an OSError saying the disk is full is a 507
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
        err = BadRequest(str(exc) or type(exc).__name__)
    return JSONResponse(err.body(), rule_for(err).status, headers=err.headers or None)


def client_gone(request: Request, exc: Exception) -> Response:
    """A client that went away before its request body was read whole (the guard cuts
    slow bodies: docs/team-server.md): nobody reads the answer, so nothing is logged
    but the access line (499, as nginx names it)."""
    return Response(status_code=499)


def list_reply(results: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The per-item entries of a list's reply to ``POST /v1/observations`` (docs/api.md)
    and how many items were refused. An accepted item is ``{"status": 202, "id",
    "duplicate", "session_key"}``; a refused one is ``{"status": <the status the error
    would have alone>, "error", "message", "field"?, ...}`` from the one error table."""
    items: list[dict[str, Any]] = []
    refused = 0
    for r in results:
        err = r.get("refused")
        if isinstance(err, WikiMemoryError):
            items.append({"status": rule_for(err).status, **err.body()})
            refused += 1
        else:
            items.append({"status": 202, **r})
    return items, refused


def face_of(path: str) -> str:
    """The face a request path belongs to: ``mcp``, ``http`` (``/v1``) or ``web``."""
    if path.startswith("/mcp"):
        return "mcp"
    if path == "/v1" or path.startswith("/v1/"):
        return "http"
    return "web"


class AuthMiddleware:
    """Bearer-token authentication for every HTTP path outside :data:`OPEN_PATHS`.

    On success the token's user is put in ``scope["state"]["user"]`` and its
    :class:`~wiki_memory.identity.Identity` (role, grants, token id, face) in
    ``scope["state"]["identity"]`` and :data:`~wiki_memory.identity.CALLER`. The token is
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
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.enabled = enabled
        #: where an attempt with a revoked token is written (user and token id known)
        self.audit = audit

    def _public(self, path: str) -> bool:
        return (
            path in OPEN_PATHS
            or path in web.PUBLIC_PATHS
            or path.startswith(web.PUBLIC_PREFIXES or ("\0",))
        )

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
                CALLER.set(state["identity"])
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
        if ident is None and face == "web":
            # the web view: a signed session cookie also counts (never for /v1 or /mcp)
            user = web.user_from_cookie(scope, self.tokens)
            if user is None:
                await web.unauthorized(scope)(scope, receive, send)
                return
            tid = (state.get("web_session") or {}).get("t")
            ident = self.tokens.identity_of(user) or Identity(user, grants={})
            ident = replace(ident, token_id=str(tid) if tid else None)
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
        CALLER.set(ident)
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
            err = ApiError(421, "wrong_host", msg)
            resp = JSONResponse(err.body(), 421)
        await resp(scope, receive, send)


Handler = Callable[[Request], Awaitable[Response]]


def create_app(memory: Memory, tokens: TokenStore, *, manage_memory: bool = False) -> ASGIApp:
    """The ASGI app for one Memory. With ``manage_memory`` the app's lifespan starts and
    stops the Memory (the ``serve`` command); tests may manage it themselves."""
    limit = memory.settings.max_body_bytes
    page_builds = asyncio.Semaphore(PAGE_BUILDS)

    async def health(request: Request) -> Response:
        commits = memory.commit_status(detail=False)
        return JSONResponse(
            {
                "ok": commits["ok"],
                "version": _version(),
                "commits": commits,
                "watcher": memory.watcher_alive(),
            }
        )

    # capture's own threads: a plain executor hop costs the event loop less per request
    # than anyio's (capacity limiter, cancel scope); the request waits there for its
    # fsync, so there are enough threads for concurrent requests to share one
    capture_pool = ThreadPoolExecutor(CAPTURE_THREADS, thread_name_prefix="wiki-capture")

    capturer = memory.capturer

    async def observations(request: Request) -> Response:
        raw = await read_body(request, limit)
        body = json_body(raw)
        user = request.state.user
        if len(raw) <= INLINE_BYTES and (not isinstance(body, list) or len(body) <= INLINE_EVENTS):
            # a few events: their CPU work here, on the loop, costs less than a hop to a
            # thread and back; only the fsync is waited for elsewhere
            result = await capturer.capture_async(body, user, raw)
        else:
            ctx = contextvars.copy_context()  # the caller's identity goes along
            result = await asyncio.get_running_loop().run_in_executor(
                capture_pool, ctx.run, memory.capture, body, user, raw
            )
        if isinstance(body, list):
            items, refused = list_reply(result)
            return JSONResponse({"accepted": items, "refused": refused}, 207 if refused else 202)
        r = result[0]
        return JSONResponse({"id": r["id"], "duplicate": r["duplicate"]}, 202)

    async def recall(request: Request) -> Response:
        body = await read_json(request, limit)
        if not isinstance(body, dict):
            raise ApiError(400, "bad_request", "a JSON object is expected", field="body")
        if body.get("query") is None:
            raise ApiError(400, "bad_request", "query is required (a string)", field="query")
        query = _str(body, "query") or ""
        budget = _int(
            body, "budget_tokens", memory.settings.default_budget_tokens, 0, MAX_BUDGET_TOKENS
        )
        cursor = _int(body, "cursor", 0, 0, MAX_BUDGET_TOKENS)
        project = await run_in_threadpool(
            body_project, memory, body, request.state.user, required=False
        )
        kinds = body.get("kinds")  # [] allows no kind; a wrong type is a 400 from Filters
        if kinds is None and isinstance(body.get("kind"), str):
            kinds = [body["kind"]]
        res = await run_in_threadpool(
            memory.recall,
            query,
            project=project,
            budget_tokens=budget,
            kinds=kinds,
            cursor=cursor,
            user=request.state.user,
            tags=body.get("tags"),
            since=body.get("since"),
            until=body.get("until"),
            as_of=body.get("as_of"),
            now=body.get("now"),
        )
        return JSONResponse(res.to_json())

    async def expand(request: Request) -> Response:
        body = await read_json(request, limit)
        if not isinstance(body, dict):
            raise ApiError(400, "bad_request", "a JSON object is expected", field="body")
        ids = body.get("ids")
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ApiError(400, "bad_request", "ids must be a list of strings", field="ids")
        budget = _int(
            body, "budget_tokens", memory.settings.default_budget_tokens, 0, MAX_BUDGET_TOKENS
        )
        res = await run_in_threadpool(memory.expand, ids, budget, request.state.user)
        return JSONResponse(res)

    async def pages(request: Request) -> Response:
        q = request.query_params
        res = await run_in_threadpool(
            memory.list_pages,
            project=q.get("project") or None,
            kind=q.get("kind") or None,
            since=q.get("since") or None,
            limit=_int(dict(q), "limit", 100, 1, 1000),
            offset=_int(dict(q), "offset", 0),
            user=request.state.user,
        )
        return JSONResponse({"pages": res})

    async def page(request: Request) -> Response:
        path = request.path_params["path"]
        q = request.query_params
        # a reply holds a few copies of its content while it is built: bounded how
        # many are built at once (docs/team-server.md, slow readers)
        async with page_builds:
            res = await run_in_threadpool(
                memory.read_page,
                path,
                _int(dict(q), "cursor", 0),
                _int(dict(q), "max_bytes", 64 * 1024, 1, 4 * 1024 * 1024),
                request.state.user,
            )
            return spooled(JSONResponse(res))

    async def put_page(request: Request) -> Response:
        """``PUT /v1/pages/{path}``: write a whole page with a compare-and-set (docs/api.md)."""
        raw = await read_body(request, limit)
        if request.headers.get("content-type", "").startswith("application/json"):
            body = parse_json(raw)
            if not isinstance(body, dict) or not isinstance(body.get("text"), str):
                raise ApiError(400, "bad_request", "text must be a string", field="text")
            text = body["text"]
        else:
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise ApiError(400, "bad_request", "the page must be UTF-8", field="body") from None
        path, data, redacted = page_text_for_write(request.path_params["path"], text)
        if_match = (request.headers.get("if-match") or "").strip()
        create_only = request.headers.get("if-none-match", "").strip() == "*" or not if_match
        if if_match == "*":
            raise ApiError(400, "bad_request", "If-Match needs the page's hash", field="If-Match")
        expected = if_match.removeprefix("W/").strip('"') or None
        user = request.state.user or memory.owner
        try:
            res = await run_in_threadpool(
                memory.write_page,
                path,
                data,
                user=user,
                message=f"Write {path}",
                expected_hash=expected,
                create_only=create_only,
                who=user,
            )
        except Conflict as exc:
            # only ever for a page the caller may see: the scope rule answers 404 first
            cur = exc.current_hash
            if not if_match and request.headers.get("if-none-match") is None:
                raise PreconditionRequired(
                    f"{path} exists: send If-Match with its hash to replace it", hash=cur
                ) from None
            raise ApiError(412, "conflict", str(exc), hash=cur) from None
        digest = res.value or sha256(data)
        status = 201 if expected is None and res.value is not None else 200
        path = res.paths[0] if res.paths else path  # the existing file's own spelling
        return JSONResponse(
            {"path": path, "hash": digest, "redacted": redacted},
            status,
            headers={"ETag": f'"{digest}"'},
        )

    async def remember(request: Request) -> Response:
        """``POST /v1/remember``: save a note in ``projects/<project>/notes/`` (docs/api.md)."""
        body = await read_json(request, limit)
        if not isinstance(body, dict):
            raise ApiError(400, "bad_request", "a JSON object is expected", field="body")
        # every field is checked by the core (BadRequest naming the field)
        text: Any = body.get("text")
        project: Any = body.get("project")
        if project is None or isinstance(project, str):
            project = await run_in_threadpool(
                body_project, memory, body, request.state.user, required=True, op="page.write"
            )
        res = await run_in_threadpool(
            remember_note,
            memory,
            text,
            project=project,
            title=body.get("title"),
            tags=body.get("tags"),
            user=request.state.user or memory.owner,
            harness=body.get("harness"),
            session_id=body.get("session_id"),
        )
        return JSONResponse(res, 201)

    async def reindex(request: Request) -> Response:
        n = await run_in_threadpool(memory.reindex, request.state.user)
        return JSONResponse({"pages": n})

    async def pin(request: Request) -> Response:
        """``POST /v1/admin/pin``: ``{"path", "pinned": bool}`` (owner and admins)."""
        body = await read_json(request, limit)
        if not isinstance(body, dict) or not isinstance(body.get("path"), str):
            raise ApiError(400, "bad_request", "path must be a string", field="path")
        pinned = body.get("pinned", True)
        if not isinstance(pinned, bool):
            raise ApiError(400, "bad_request", "pinned must be true or false", field="pinned")
        res = await run_in_threadpool(
            pins.set_pinned, memory, body["path"], pinned, request.state.user
        )
        return JSONResponse(res)

    async def forget(request: Request) -> Response:
        """``POST /v1/forget``: ``{"path"}``; any caller who may write the page
        (docs/operations.md)."""
        body = await read_json(request, limit)
        if not isinstance(body, dict) or not isinstance(body.get("path"), str):
            raise ApiError(400, "bad_request", "path must be a string", field="path")
        res = await run_in_threadpool(forget_page, memory, body["path"], request.state.user)
        return JSONResponse(res)

    async def purge(request: Request) -> Response:
        """``POST /v1/admin/purge``: ``{"path", "text"?}`` (owner and admins;
        docs/operations.md)."""
        body = await read_json(request, limit)
        if not isinstance(body, dict) or not isinstance(body.get("path"), str):
            raise ApiError(400, "bad_request", "path must be a string", field="path")
        text = body.get("text")
        if text is not None and not isinstance(text, str):
            raise ApiError(400, "bad_request", "text must be a string", field="text")
        res = await run_in_threadpool(purge_page, memory, body["path"], request.state.user, text)
        return JSONResponse(res)

    async def sync(request: Request) -> Response:
        """``POST /v1/admin/sync``: ``{"remote"?, "after_purge"?, "accept_deletions"?, "rewrite_hub"?}``;
        ``{"reports": [...], "status": {...}}`` (docs/operations.md, "Sync")."""
        body = await read_json(request, limit)
        if not isinstance(body, dict):
            raise ApiError(400, "bad_request", "the body must be an object")
        remote = body.get("remote")
        if remote is not None and not isinstance(remote, str):
            raise ApiError(400, "bad_request", "remote must be a string", field="remote")
        flags = {k: body.get(k, False) for k in ("after_purge", "accept_deletions", "rewrite_hub")}
        for key in [k for k, v in flags.items() if not isinstance(v, bool)]:
            raise ApiError(400, "bad_request", f"{key} must be a boolean", field=key)
        who = request.state.user
        reports = await run_in_threadpool(lambda: memory.sync.sync(remote, who=who, **flags))
        status = await run_in_threadpool(memory.sync.status)
        return JSONResponse({"reports": [r.to_json() for r in reports], "status": status})

    async def audit(request: Request) -> Response:
        """``GET /v1/audit?user=&since=&limit=``: the audit log (owner and admins)."""
        q = request.query_params
        lines = await run_in_threadpool(
            pins.read_audit,
            memory,
            request.state.user,
            q.get("user") or None,
            q.get("since") or None,
            _int(dict(q), "limit", 1000, 1, 100_000),
        )
        return Response(dumps({"lines": lines}), media_type="application/json")

    @asynccontextmanager
    async def lifespan(app: Starlette):  # type: ignore[no-untyped-def]
        drainer = None
        if manage_memory:
            await run_in_threadpool(memory.start)
            # the hooks of this data directory queue here while the server is away
            drainer = OutboxDrainer(
                memory.settings.data_dir,
                lambda events: memory.capture(events, memory.owner),
                memory.settings.outbox_drain_seconds,
            )
            drainer.start()
        try:
            async with mcp_app.lifespan(memory):
                yield
        finally:
            await run_in_threadpool(capture_pool.shutdown)
            capturer.close()
            if drainer is not None:
                await run_in_threadpool(drainer.stop)
            if manage_memory:
                await run_in_threadpool(memory.stop)

    routes = [
        Route("/v1/health", health, methods=["GET"]),
        Route("/v1/observations", observations, methods=["POST"]),
        Route("/v1/recall", recall, methods=["POST"]),
        Route("/v1/expand", expand, methods=["POST"]),
        Route("/v1/pages", pages, methods=["GET"]),
        Route("/v1/pages/{path:path}", page, methods=["GET"]),
        Route("/v1/pages/{path:path}", put_page, methods=["PUT"]),
        Route("/v1/remember", remember, methods=["POST"]),
        Route("/v1/admin/reindex", reindex, methods=["POST"]),
        Route("/v1/admin/pin", pin, methods=["POST"]),
        Route("/v1/forget", forget, methods=["POST"]),
        Route("/v1/admin/purge", purge, methods=["POST"]),
        Route("/v1/admin/sync", sync, methods=["POST"]),
        Route("/v1/audit", audit, methods=["GET"]),
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
    return AccessLogMiddleware(
        HstsMiddleware(
            HostCheckMiddleware(
                AuthMiddleware(app, tokens, enabled=memory.settings.auth, audit=memory.audit),
                allowed_hosts(memory.settings),
            )
        )
    )


def _version() -> str:
    from wiki_memory import __version__

    return __version__
