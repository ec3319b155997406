"""The read-only web view: server-rendered pages under ``/`` (see docs/web.md).

Routes (all ``GET``/``HEAD`` but the two forms): ``/`` (projects with their latest
sessions and open handoffs), ``/p/<project>`` (sessions, notes and handoffs, newest first,
paged), ``/pages`` (every page, paged), ``/page/<path>`` (a page rendered from markdown),
``/page/<path>/history`` (its git log; ``?rev=<sha>`` shows that commit's diff,
``&view=version`` the page as it was), ``/search?q=`` (recall's results), ``/handoffs`` (by
state), ``/session/<id>`` (a session page by its page id, harness session id or short
id), ``/login`` (``GET`` form, ``POST`` sign-in), ``/logout`` (``POST``), ``/static/...``.

Nothing here writes to ``wiki/`` or git: handlers only read files, the index and git
objects. Safety: templates escape every value (Jinja2 autoescape), markdown is rendered
with ``html=False`` (:mod:`wiki_memory.web.render`), every response carries a
Content-Security-Policy that allows no script at all, and page paths go through
:func:`wiki_memory.wiki.paths.resolve` (the API's guard).

Sign-in: ``POST /login`` with a token (the same tokens as the API) sets ``wm_session``, an
HttpOnly, ``SameSite=Strict`` cookie signed with HMAC-SHA256 (key in
``auth/web-cookie.key``, 0600), expiring after :data:`SESSION_SECONDS`, holding the user and
the token's id: a request with it is accepted only while that token still exists for that
user, so revoking the token ends the session. The form is protected against cross-site
posts by a double-submit token (cookie + hidden field) and the ``Origin`` and
``Sec-Fetch-Site`` headers. With ``web_local_owner`` (off by default) a loopback server lets
requests from loopback in as the local owner without a token.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import ipaddress
import json
import os
import re
import secrets
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import parse_qsl, urlencode

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import Scope

from wiki_memory.errors import NotFound
from wiki_memory.identity import Identity
from wiki_memory.index.store import SearchError, is_indexable
from wiki_memory.web import render as web_render
from wiki_memory.web.render import (
    RenderCache,
    Resolver,
    Target,
    fragment_for,
    page_url,
    render_markdown,
    render_value,
    targets_fingerprint,
)
from wiki_memory.wiki.page import ParsedPage, parse_page
from wiki_memory.wiki.paths import PathRefused, clean_rel

if TYPE_CHECKING:
    from wiki_memory.auth import TokenStore
    from wiki_memory.core.memory import Memory

#: paths anyone may fetch without signing in
PUBLIC_PATHS: frozenset[str] = frozenset({"/login", "/logout"})
#: the route that answers every other GET with the view's 404 page
CATCH_ALL = "/{rest:path}"
PUBLIC_PREFIXES: tuple[str, ...] = ("/static/",)

SESSION_COOKIE = "wm_session"
CSRF_COOKIE = "wm_csrf"
#: how long a sign-in lasts (seconds)
SESSION_SECONDS = 12 * 3600
#: how many tokens recall may spend on one search page (cl100k tokens)
SEARCH_BUDGET_TOKENS = 8000
PAGE_SIZE = 25
KEY_FILE = "web-cookie.key"
MAX_FORM_BYTES = 8 * 1024

#: every response of the view carries these (no script may run at all: no script-src)
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-store",
}

HANDOFF_STATES = ("offered", "open", "claimed", "done", "cancelled", "expired")
_REV_RE = re.compile(r"[0-9a-f]{7,40}")
_SES_RE = re.compile(r"ses_([0-9a-f]{16})")
_SHORT_RE = re.compile(r"[0-9a-f]{8}")


def template_dir() -> Path:
    """Where the Jinja2 templates (and ``static/``) are: ``wiki_memory/templates`` in an
    installed package (a copy made by the build) or in a checkout (a symlink to the
    top-level ``templates/``), else the checkout's ``templates/`` itself."""
    here = Path(__file__).resolve().parents[1]
    for cand in (here / "templates", here.parent / "templates"):
        if (cand / "base.html").is_file():
            return cand
    raise FileNotFoundError("the web view's templates are missing (wiki_memory/templates)")


# --------------------------------------------------------------------------- context


@dataclass
class _Web:
    """What the view of one app needs: the core, the tokens, the cookie key, templates."""

    memory: Memory
    tokens: TokenStore
    key: bytes
    env: Environment
    static: dict[str, tuple[bytes, str]]
    static_version: str
    cache: RenderCache = field(default_factory=RenderCache)
    #: session nonces signed out (until they expire): nonce → expiry (epoch s)
    signed_out: dict[str, float] = field(default_factory=dict)
    _token_ids: tuple[Any, frozenset[tuple[str, str]]] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def settings(self) -> Any:
        return self.memory.settings

    def token_ids(self) -> frozenset[tuple[str, str]]:
        """``{(token id, user)}`` of every live token, re-read when tokens.json changes."""
        path = self.tokens.tokens_path
        try:
            st = path.stat()
            stamp: Any = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = None
        cached = self._token_ids
        if cached is not None and cached[0] == stamp and stamp is not None:
            return cached[1]
        ids = frozenset((r.token_id, r.user) for r in self.tokens.list())
        self._token_ids = (stamp, ids)
        return ids


_CONTEXTS: weakref.WeakKeyDictionary[Any, _Web] = weakref.WeakKeyDictionary()


def _load_key(auth_dir: Path) -> bytes:
    """The cookie-signing key (32 random bytes), created 0600 on first use."""
    path = auth_dir / KEY_FILE
    auth_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        data = path.read_bytes()
        if len(data) >= 32:
            return data[:64]
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC, 0o600)
    key = secrets.token_bytes(32)
    with os.fdopen(fd, "wb") as f:
        f.write(key)
        f.flush()
        os.fsync(f.fileno())
    return key


def _make_env(tdir: Path) -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(tdir)),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = _when
    env.globals["page_url"] = page_url
    env.globals["anchor_url"] = _anchor_url
    return env


def _when(value: Any) -> str:
    """``2026-11-30T10:01:02Z`` → ``2026-11-30 10:01 UTC``; epoch seconds too; else as is."""
    if value is None or value == "":
        return ""
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%d %H:%M UTC")
    s = str(value)
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return s
    if dt.tzinfo is None:
        return dt.strftime("%Y-%m-%d %H:%M")
    return dt.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _anchor_url(anchor: str) -> str:
    """``path#Heading`` / ``path#^t12`` / ``path`` → the view's URL for it."""
    path, _, frag = anchor.partition("#")
    return page_url(path, fragment_for(frag) if frag else None)


# --------------------------------------------------------------------------- visibility


# Who may see a page is the core's scope rule (wiki_memory.core.scope / wiki_memory.identity):
# index rows are filtered by the index for the reader, files are read through the rule.


# --------------------------------------------------------------------------- sign-in


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _sign(key: bytes, payload: str) -> str:
    return _b64(hmac.new(key, b"wm-session-1." + payload.encode("ascii"), "sha256").digest())


def make_session_cookie(key: bytes, user: str, token_id: str, now: float | None = None) -> str:
    """A signed session value ``<payload>.<sig>``: payload = base64url of
    ``{"u": user, "t": token id, "e": expiry epoch s, "n": nonce}``."""
    exp = int((time.time() if now is None else now) + SESSION_SECONDS)
    body = {"u": user, "t": token_id, "e": exp, "n": secrets.token_urlsafe(12)}
    payload = _b64(json.dumps(body, separators=(",", ":")).encode("utf-8"))
    return f"{payload}.{_sign(key, payload)}"


def read_session_cookie(key: bytes, value: str, now: float | None = None) -> dict[str, Any] | None:
    """The payload of a valid, unexpired session value, else None (never raises)."""
    payload, sep, sig = value.partition(".")
    if not sep or not payload or len(value) > 1024:
        return None
    try:
        if not hmac.compare_digest(_sign(key, payload), sig):
            return None
        data = json.loads(_unb64(payload))
    except (ValueError, UnicodeError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("u"), str):
        return None
    if not isinstance(data.get("e"), int) or data["e"] <= (time.time() if now is None else now):
        return None
    return data


def _cookies(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in scope.get("headers", []):
        if name == b"cookie":
            for part in value.decode("latin-1").split(";"):
                k, sep, v = part.strip().partition("=")
                if sep and k not in out:
                    out[k] = v
    return out


def _header(scope: Scope, name: bytes) -> str | None:
    for k, v in scope.get("headers", []):
        if k == name:
            return str(v.decode("latin-1"))
    return None


def _loopback(host: str | None) -> bool:
    if not host:
        return False
    h = host.strip("[]")
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def _host_is_loopback_name(host_header: str | None) -> bool:
    """The ``Host`` header names loopback (guards the owner flag against DNS rebinding)."""
    if not host_header:
        return False
    h = host_header.strip()
    if h.startswith("["):
        h = h[1 : h.find("]")] if "]" in h else h
    else:
        h = h.rsplit(":", 1)[0] if h.count(":") == 1 else h
    return _loopback(h)


def user_from_cookie(scope: Scope, tokens: TokenStore) -> str | None:
    """The signed-in user of a browser request, or None.

    From the ``wm_session`` cookie when its signature is good, it has not expired or been
    signed out, and the token it was made from still exists for that user. Else, with the
    ``web_local_owner`` setting on a loopback server, a request from a loopback address
    naming a loopback ``Host`` is the local owner. Puts the session payload (if any) in
    ``scope["state"]["web_session"]``.
    """
    ctx = _CONTEXTS.get(tokens)
    if ctx is None:
        return None
    value = _cookies(scope).get(SESSION_COOKIE)
    if value:
        data = read_session_cookie(ctx.key, value)
        if (
            data is not None
            and data.get("n") not in ctx.signed_out
            and (str(data.get("t")), data["u"]) in ctx.token_ids()
        ):
            scope.setdefault("state", {})["web_session"] = data
            return str(data["u"])
    if getattr(ctx.settings, "web_local_owner", False):
        client = scope.get("client")
        if (
            _loopback(ctx.settings.host)
            and client
            and _loopback(str(client[0]))
            and _host_is_loopback_name(_header(scope, b"host"))
        ):
            return ctx.tokens.owner_name()
    return None


def unauthorized(scope: Scope) -> Response:
    """What a browser request without a valid sign-in gets: ``GET``/``HEAD`` are sent to
    ``/login?next=<the path>`` (303); anything else gets a 401 page."""
    if scope.get("method") in ("GET", "HEAD"):
        target = scope.get("path", "/")
        qs = scope.get("query_string", b"").decode("latin-1")
        if qs:
            target += "?" + qs
        nxt = "" if target == "/" else "?" + urlencode({"next": target})
        resp: Response = RedirectResponse("/login" + nxt, 303)
    else:
        resp = HTMLResponse(
            "<!doctype html><title>Sign in</title><p>Sign in first: <a href=/login>/login</a>",
            401,
        )
    resp.headers.update(SECURITY_HEADERS)
    return resp


def _safe_next(value: str | None) -> str:
    """A local path to go to after sign-in (never another site): else ``/``."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    if any(ord(c) < 32 for c in value):
        return "/"
    return value


# --------------------------------------------------------------------------- routes


def routes(memory: Memory, tokens: TokenStore) -> list[Any]:
    """The Starlette routes of the web view (registers its context for the middleware).

    Creates ``auth/web-cookie.key`` on first use; nothing else is written."""
    tdir = template_dir()
    static: dict[str, tuple[bytes, str]] = {}
    for name, ctype in (
        ("web.css", "text/css; charset=utf-8"),
        ("favicon.svg", "image/svg+xml"),
    ):
        p = tdir / "static" / name
        if p.is_file():
            static[name] = (p.read_bytes(), ctype)
    version = hashlib.sha256(b"".join(v[0] for v in static.values())).hexdigest()[:10]
    ctx = _Web(
        memory=memory,
        tokens=tokens,
        key=_load_key(tokens.auth_dir),
        env=_make_env(tdir),
        static=static,
        static_version=version,
    )
    ctx.env.globals["static_version"] = version
    _CONTEXTS[tokens] = ctx
    v = _View(ctx)
    return [
        Route("/", v.home, methods=["GET"]),
        Route("/login", v.login, methods=["GET", "POST"]),
        Route("/logout", v.logout, methods=["GET", "POST"]),
        Route("/static/{name}", v.static_file, methods=["GET"]),
        Route("/p/{project}", v.project, methods=["GET"]),
        Route("/pages", v.all_pages, methods=["GET"]),
        Route("/page/{path:path}", v.page, methods=["GET"]),
        Route("/search", v.search, methods=["GET"]),
        Route("/handoffs", v.handoffs, methods=["GET"]),
        Route("/session/{sid}", v.session, methods=["GET"]),
        # last: any other GET gets the view's 404 page (with its security headers)
        Route(CATCH_ALL, v.no_route, methods=["GET"]),
    ]


def allowed_methods(request: Request) -> list[str]:
    """The methods the app's routes accept on this request's path (the web view's
    catch-all GET route left out), sorted: the ``Allow`` header of a 405."""
    out: set[str] = set()
    for route in request.app.router.routes:
        regex = getattr(route, "path_regex", None)
        methods = getattr(route, "methods", None)
        if regex is None or not methods or getattr(route, "path", "") == CATCH_ALL:
            continue
        if regex.match(request.url.path):
            out.update(methods)
    return sorted(out)


def error_page(request: Request, status: int) -> Response:
    """The web view's HTML page for a router error (404, 405) outside ``/v1``."""
    messages = {404: ("Not found", "No such page."), 405: ("Not allowed", "Not allowed here.")}
    title, message = messages.get(status, ("Error", "Something went wrong."))
    for ctx in list(_CONTEXTS.values()):
        return _View(ctx)._html(request, "error.html", status, title=title, message=message)
    resp = HTMLResponse(f"<!doctype html><title>{title}</title><p>{message}</p>", status)
    resp.headers.update(SECURITY_HEADERS)
    return resp


def _fetch(
    memory: Memory, who: Identity, project: str | None, kind: str | None, limit: int, offset: int
) -> Any:
    return memory.list_pages(project=project, kind=kind, limit=limit, offset=offset, user=who)


class _NotFound(Exception):
    pass


class _View:
    """The handlers. Sync handlers run in Starlette's thread pool (one index connection
    per thread)."""

    def __init__(self, ctx: _Web) -> None:
        self.ctx = ctx
        self.memory = ctx.memory
        self.resolver_cls = Resolver

    # -- helpers -----------------------------------------------------------------------

    def _html(
        self,
        request: Request,
        template: str,
        status: int = 200,
        headers: dict[str, str] | None = None,
        **values: Any,
    ) -> HTMLResponse:
        user = getattr(request.state, "user", None)
        session = request.scope.get("state", {}).get("web_session")
        values.setdefault("title", "wiki-memory")
        values.setdefault("q", "")
        html = self.ctx.env.get_template(template).render(
            user=user,
            logout_csrf=self._logout_csrf(session) if session else None,
            path=request.url.path,
            **values,
        )
        resp = HTMLResponse(html, status)
        resp.headers.update(SECURITY_HEADERS)
        if headers:
            resp.headers.update(headers)
        return resp

    def _not_found(self, request: Request, message: str = "No such page.") -> HTMLResponse:
        return self._html(request, "error.html", 404, title="Not found", message=message)

    def _logout_csrf(self, session: dict[str, Any]) -> str:
        return _b64(
            hmac.new(self.ctx.key, b"logout." + str(session.get("n")).encode(), "sha256").digest()
        )[:32]

    def _user(self, request: Request) -> Identity:
        """The reader as the scope rule sees them (a signed-out reader never gets here;
        an unknown one sees only shared pages)."""
        u = getattr(request.state, "user", None)
        who = self.memory.scope.identity("" if u is None else str(u))
        assert who is not None
        return who

    def _visible_rows(
        self,
        user: Identity,
        fetch: Callable[[int, int], list[dict[str, Any]]],
        offset: int,
        want: int,
        keep: Callable[[dict[str, Any]], bool] = lambda r: True,
    ) -> tuple[list[dict[str, Any]], int | None]:
        """Up to ``want`` visible rows from raw offset ``offset`` on; and the raw offset
        of the next page (None at the end). Hidden rows never count towards a page."""
        out: list[dict[str, Any]] = []
        raw = offset
        batch = max(want * 2, 50)
        while len(out) < want:
            rows = fetch(batch, raw)
            for i, row in enumerate(rows):
                if keep(row):
                    out.append(row)
                    if len(out) == want:
                        nxt = raw + i + 1
                        more = fetch(1, nxt)
                        return out, (nxt if more else None)
            if len(rows) < batch:
                return out, None
            raw += len(rows)
        return out, None

    def _projects(self) -> list[str]:
        d = self.memory.wiki_dir / "projects"
        try:
            names = [
                e.name
                for e in os.scandir(d)
                if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")
            ]
        except OSError:
            names = []
        return sorted(names)

    @staticmethod
    def _offset(request: Request, name: str) -> int:
        try:
            return max(0, min(10**7, int(request.query_params.get(name, "0"))))
        except ValueError:
            return 0

    def no_route(self, request: Request) -> Response:
        path = request.url.path
        if path.startswith(("/v1/", "/mcp")) or path == "/v1":
            # the API's JSON 404 or 405 (a POST-only route asked with GET), from the app's
            # one error handler
            raise StarletteHTTPException(405 if allowed_methods(request) else 404)
        return self._not_found(request, "No such page.")

    # -- sign-in -----------------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        nxt = _safe_next(request.query_params.get("next"))
        if request.method == "POST":
            return await self._login_post(request)
        token = secrets.token_urlsafe(24)
        resp = self._html(
            request,
            "login.html",
            title="Sign in",
            csrf=token,
            next=nxt,
            error=None,
        )
        self._set_csrf_cookie(request, resp, token)
        return resp

    def _set_csrf_cookie(self, request: Request, resp: Response, token: str) -> None:
        resp.set_cookie(
            CSRF_COOKIE,
            token,
            max_age=3600,
            path="/login",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )

    def _cross_site(self, request: Request) -> bool:
        site = request.headers.get("sec-fetch-site")
        if site and site not in ("same-origin", "none"):
            return True
        origin = request.headers.get("origin")
        if origin and origin != "null":
            host = request.headers.get("host", "")
            if origin.split("://", 1)[-1] != host:
                return True
        elif origin == "null":
            return True
        return False

    async def _read_form(self, request: Request) -> dict[str, str] | None:
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM_BYTES:
                return None
        try:
            return dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True))
        except UnicodeDecodeError:
            return None

    async def _login_post(self, request: Request) -> Response:
        form = await self._read_form(request)
        if form is None:
            return self._html(request, "error.html", 413, title="Too large", message="")
        nxt = _safe_next(form.get("next"))
        cookie = request.cookies.get(CSRF_COOKIE, "")
        field_token = form.get("csrf", "")
        if (
            self._cross_site(request)
            or not cookie
            or not field_token
            or not hmac.compare_digest(cookie.encode(), field_token.encode())
        ):
            token = secrets.token_urlsafe(24)
            resp = self._html(
                request,
                "login.html",
                403,
                title="Sign in",
                csrf=token,
                next=nxt,
                error="The sign-in form expired or came from another site. Try again.",
            )
            self._set_csrf_cookie(request, resp, token)
            return resp
        token_text = form.get("token", "").strip()
        user = self.ctx.tokens.user_for(token_text) if token_text else None
        if user is None:
            token = secrets.token_urlsafe(24)
            resp = self._html(
                request,
                "login.html",
                401,
                title="Sign in",
                csrf=token,
                next=nxt,
                error="That token is not valid.",
            )
            self._set_csrf_cookie(request, resp, token)
            return resp
        token_id = hashlib.sha256(token_text.encode("utf-8")).hexdigest()[:8]
        value = make_session_cookie(self.ctx.key, user, token_id)
        done = RedirectResponse(nxt, 303)
        done.headers.update(SECURITY_HEADERS)
        done.set_cookie(
            SESSION_COOKIE,
            value,
            max_age=SESSION_SECONDS,
            path="/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        done.delete_cookie(CSRF_COOKIE, path="/login")
        return done

    async def logout(self, request: Request) -> Response:
        """``POST /logout`` with the page's ``csrf`` field signs out (the cookie is dropped
        and its nonce refused until it expires); ``GET`` shows a confirmation form."""
        data = None
        value = request.cookies.get(SESSION_COOKIE)
        if value:
            data = read_session_cookie(self.ctx.key, value)
        if request.method == "GET":
            if data is None:
                resp: Response = RedirectResponse("/login", 303)
                resp.headers.update(SECURITY_HEADERS)
                return resp
            request.scope.setdefault("state", {})["web_session"] = data
            request.state.user = data["u"]
            return self._html(request, "logout.html", title="Sign out")
        form = await self._read_form(request) or {}
        if data is not None:
            good = form.get("csrf", "") and hmac.compare_digest(
                form.get("csrf", "").encode(), self._logout_csrf(data).encode()
            )
            if not good or self._cross_site(request):
                request.scope.setdefault("state", {})["web_session"] = data
                request.state.user = data["u"]
                return self._html(request, "logout.html", 403, title="Sign out")
            now = time.time()
            with self.ctx._lock:
                self.ctx.signed_out = {n: e for n, e in self.ctx.signed_out.items() if e > now}
                self.ctx.signed_out[str(data.get("n"))] = float(data["e"])
        resp = RedirectResponse("/login", 303)
        resp.headers.update(SECURITY_HEADERS)
        if data is not None:
            resp.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
        return resp

    def static_file(self, request: Request) -> Response:
        found = self.ctx.static.get(request.path_params["name"])
        if found is None:
            resp = Response("not found", 404, media_type="text/plain")
        else:
            resp = Response(found[0], media_type=found[1])
        resp.headers.update(SECURITY_HEADERS)
        if found is not None:
            resp.headers["Cache-Control"] = "public, max-age=86400"
        return resp

    # -- lists -------------------------------------------------------------------------

    def home(self, request: Request) -> Response:
        user = self._user(request)
        projects = []
        for name in self._projects():
            sessions, _ = self._visible_rows(
                user, functools.partial(_fetch, self.memory, user, name, "session"), 0, 5
            )
            waiting, _ = self._visible_rows(
                user,
                functools.partial(_fetch, self.memory, user, name, "handoff"),
                0,
                5,
                keep=lambda r: (r.get("meta") or {}).get("status") in ("open", "offered"),
            )
            latest = self.memory.list_pages(project=name, limit=1, user=user)
            projects.append(
                {
                    "name": name,
                    "sessions": sessions,
                    "handoffs": waiting,
                    "updated": latest[0]["updated"] if latest else None,
                }
            )
        projects.sort(key=lambda p: p["updated"] or "", reverse=True)
        recent, _ = self._visible_rows(
            user, lambda lim, off: self.memory.list_pages(limit=lim, offset=off, user=user), 0, 15
        )
        return self._html(
            request, "home.html", title="wiki-memory", projects=projects, recent=recent
        )

    def project(self, request: Request) -> Response:
        user = self._user(request)
        name = request.path_params["project"]
        try:
            if "/" in name or clean_rel(name) != name:
                raise PathRefused("not a project name")
        except PathRefused:
            return self._not_found(request, "No such project.")
        exists = (self.memory.wiki_dir / "projects" / name).is_dir() or bool(
            self.memory.list_pages(project=name, limit=1, user=user)
        )
        if not exists:
            return self._not_found(request, "No such project.")
        lists = {}
        for key, kind, keep in (
            ("handoffs", "handoff", None),
            ("sessions", "session", None),
            ("notes", None, lambda r: r.get("kind") not in ("session", "handoff")),
        ):
            off = self._offset(request, key)

            def fetch(lim: int, o: int, kind: str | None = kind) -> list[dict[str, Any]]:
                return self.memory.list_pages(
                    project=name, kind=kind, limit=lim, offset=o, user=user
                )

            rows, nxt = self._visible_rows(
                user, fetch, off, PAGE_SIZE, keep=keep or (lambda r: True)
            )
            more = None
            if nxt is not None:
                q = dict(request.query_params)
                q[key] = str(nxt)
                more = "?" + urlencode(q)
            first = None
            if off:
                q = dict(request.query_params)
                q.pop(key, None)
                first = "?" + urlencode(q) if q else request.url.path
            lists[key] = {"rows": rows, "more": more, "first": first}
        return self._html(request, "project.html", title=name, project=name, lists=lists)

    def all_pages(self, request: Request) -> Response:
        user = self._user(request)
        off = self._offset(request, "offset")
        rows, nxt = self._visible_rows(
            user, lambda lim, o: self.memory.list_pages(limit=lim, offset=o, user=user), off, 50
        )
        return self._html(
            request,
            "pages.html",
            title="All pages",
            rows=rows,
            more=f"?offset={nxt}" if nxt is not None else None,
            first="/pages" if off else None,
        )

    def handoffs(self, request: Request) -> Response:
        user = self._user(request)
        project = request.query_params.get("project") or None
        rows, _ = self._visible_rows(
            user,
            lambda lim, off: self.memory.list_pages(
                project=project, kind="handoff", limit=lim, offset=off, user=user
            ),
            0,
            2000,
        )
        groups: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            status = str((r.get("meta") or {}).get("status") or "open")
            groups.setdefault(status, []).append(r)
        order = [s for s in HANDOFF_STATES if s in groups] + sorted(
            s for s in groups if s not in HANDOFF_STATES
        )
        return self._html(
            request,
            "handoffs.html",
            title="Handoffs",
            groups=[(s, groups[s]) for s in order],
            project=project,
            total=len(rows),
        )

    # -- search ------------------------------------------------------------------------

    def search(self, request: Request) -> Response:
        user = self._user(request)
        q = request.query_params.get("q", "").strip()[:500]
        project = request.query_params.get("project") or None
        items: list[dict[str, Any]] = []
        error = None
        omitted = 0
        if q:
            try:
                res = self.memory.recall(
                    q, project=project, budget_tokens=SEARCH_BUDGET_TOKENS, user=user
                )
            except SearchError:
                error = "The search engine failed; try again in a moment."
            else:  # recall filtered by the reader before ranking
                omitted = res.omitted
                items = list(res.items)
        return self._html(
            request,
            "search.html",
            200 if error is None else 503,
            title=f"Search: {q}" if q else "Search",
            q=q,
            project=project or "",
            items=items,
            error=error,
            omitted=omitted,
        )

    # -- pages -------------------------------------------------------------------------

    def _read(self, user: Identity, rel: str) -> bytes:
        """The bytes of a ``.md`` page the reader may see, through the core's scope rule
        (no symlink on the way, a single-link regular file); else _NotFound."""
        if not is_indexable(rel):
            raise _NotFound(rel)
        try:
            return self.memory.scope.read(user, rel).data
        except (NotFound, PathRefused):
            raise _NotFound(rel) from None

    def _targets(self, user: Identity, rel: str, links: Iterable[Any]) -> dict[str, Target]:
        resolver = self.resolver_cls(self.memory.index, user)
        return resolver.resolve_many(rel, [lk.target for lk in links if lk.target])

    def _parsed(self, rel: str, raw: bytes, digest: str) -> ParsedPage:
        """``parse_page`` of the bytes, cached by their hash (it is most of a page view)."""
        key = ("parsed", rel, digest)
        parsed = self.ctx.cache.get(key)
        if parsed is None:
            parsed = parse_page(raw, rel)
            self.ctx.cache.put(key, parsed, len(raw))
        return cast(ParsedPage, parsed)

    def _render_page(self, user: Identity, rel: str, raw: bytes) -> dict[str, Any]:
        """Everything the page template shows of one page's bytes."""
        digest = hashlib.sha256(raw).hexdigest()
        parsed = self._parsed(rel, raw, digest)
        targets = self._targets(user, rel, parsed.links)
        key = ("html", rel, digest, targets_fingerprint(targets))
        html = self.ctx.cache.get(key)
        if html is None:
            resolver = self.resolver_cls(self.memory.index, user)

            def lazy(target: str) -> Target:
                return resolver.resolve_many(rel, [target]).get(
                    web_render.link_key(target), Target(None)
                )

            rendered = render_markdown(parsed.body, rel, targets, lazy)
            html = rendered.html
            if rendered.cacheable:
                self.ctx.cache.put(key, html)
        meta = parsed.metadata if isinstance(parsed.metadata, dict) else {}
        props = [(str(k), Markup(render_value(v, rel, targets))) for k, v in meta.items()]
        return {
            "rel": rel,
            "meta": meta,
            "page_title": parsed.title or str(meta.get("title") or rel.rsplit("/", 1)[-1]),
            "props": props,
            "body": Markup(html),
            "diagnostics": [d.as_dict() for d in parsed.diagnostics],
            "kind": str(meta.get("type") or "page"),
        }

    def _backlinks(self, user: Identity, rel: str) -> list[dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        # the core's link graph as this reader sees it (the scope rule resolves each link)
        for link in self.memory.page_links(rel, user)["backlinks"]:
            src = link["path"]
            if src == rel or src in out:
                continue
            meta = self.memory.index.page_meta(src, user)
            if meta is None:
                continue
            out[src] = {"path": src, "title": meta.get("title") or src, "kind": meta.get("kind")}
        return sorted(out.values(), key=lambda b: (str(b["title"]).casefold(), b["path"]))

    def _page_view(self, request: Request, rel: str, via_session: str | None = None) -> Response:
        user = self._user(request)
        try:
            raw = self._read(user, rel)
        except _NotFound:
            # a session the reader may not see answers like one that does not exist
            return self._not_found(request, "No such session." if via_session else "No such page.")
        meta_row = self.memory.index.page_meta(rel, user)
        view = self._render_page(user, rel, raw)
        m = view["meta"]
        source = request.query_params.get("view") == "source"
        project = m.get("project") or (meta_row or {}).get("project")
        return self._html(
            request,
            "page.html",
            title=view["page_title"],
            view=view,
            source=raw.decode("utf-8", "replace") if source else None,
            backlinks=self._backlinks(user, rel),
            project=str(project) if project else None,
            via_session=via_session,
            version=None,
        )

    def page(self, request: Request) -> Response:
        path = request.path_params["path"]
        history = path.endswith("/history") and path.removesuffix("/history").endswith(".md")
        if history:
            path = path.removesuffix("/history")
        try:
            rel = clean_rel(path)
        except PathRefused as exc:
            return self._html(
                request, "error.html", 400, title="Path refused", message=f"Path refused: {exc}"
            )
        if history:
            return self._history(request, rel)
        return self._page_view(request, rel)

    def _history(self, request: Request, rel: str) -> Response:
        user = self._user(request)
        try:
            raw = self._read(user, rel)
        except _NotFound:
            return self._not_found(request)
        parsed = self._parsed(rel, raw, hashlib.sha256(raw).hexdigest())
        try:  # only versions the reader may see (a page may have been personal once)
            commits = self.memory.page_history(rel, user, limit=200)
        except (NotFound, PathRefused):
            return self._not_found(request)
        rev = request.query_params.get("rev", "")
        selected = None
        diff_lines: list[tuple[str, str]] = []
        version = None
        if rev:
            if not _REV_RE.fullmatch(rev):
                return self._not_found(request, "No such version.")
            selected = next((c for c in commits if c.sha.startswith(rev)), None)
            if selected is None:
                return self._not_found(request, "No such version of this page.")
            if request.query_params.get("view") == "version":
                try:
                    old = self.memory.page_version(rel, selected.sha, user)
                except NotFound:
                    return self._not_found(request, "No such version of this page.")
                if old is None:
                    version = {"missing": True}
                else:
                    version = self._render_page(user, rel, old)
                    version["missing"] = False
            else:
                try:
                    text = self.memory.page_diff(rel, selected.sha, user)
                except NotFound:
                    return self._not_found(request, "No such version of this page.")
                for line in text.splitlines():
                    if line.startswith(("+++", "---", "diff ", "index ", "new file", "deleted")):
                        cls = "meta"
                    elif line.startswith("@@"):
                        cls = "hunk"
                    elif line.startswith("+"):
                        cls = "add"
                    elif line.startswith("-"):
                        cls = "del"
                    else:
                        cls = "ctx"
                    diff_lines.append((cls, line))
        return self._html(
            request,
            "history.html",
            title=f"History: {parsed.title or rel}",
            rel=rel,
            page_title=parsed.title or rel,
            commits=commits,
            selected=selected,
            diff_lines=diff_lines,
            version=version,
        )

    # -- sessions ----------------------------------------------------------------------

    def _session_path(self, user: Identity, sid: str) -> str | None:
        """The page of a session named by its page id (``ses_<16 hex>``), its short id
        (8 hex, as in the file name) or the harness's session id."""
        sessions = self.memory.spool.sessions
        m = _SES_RE.fullmatch(sid)
        prefix = m.group(1) if m else (sid if _SHORT_RE.fullmatch(sid) else None)
        if prefix:
            for key, info in list(sessions.items()):
                if key.startswith(prefix) and info.state.get("path"):
                    return str(info.state["path"])
            for p in sorted(
                (self.memory.wiki_dir / "projects").glob(f"*/sessions/*-{prefix[:8]}.md")
            ):
                rel = p.relative_to(self.memory.wiki_dir).as_posix()
                meta = self.memory.index.page_meta(rel, user)
                if m is None or (meta and (meta.get("id") == sid)):
                    return rel
            return None
        matches = [
            info
            for info in list(sessions.values())
            if info.session_id == sid and info.state.get("path")
        ]
        matches.sort(key=lambda i: (i.user != user.user, -i.started))
        return str(matches[0].state["path"]) if matches else None

    def session(self, request: Request) -> Response:
        sid = request.path_params["sid"]
        rel = self._session_path(self._user(request), sid)
        if rel is None:
            return self._not_found(request, "No such session.")
        try:
            rel = clean_rel(rel)
        except PathRefused:
            return self._not_found(request, "No such session.")
        return self._page_view(request, rel, via_session=sid)
