"""What every part of the web view shares: one app's context, its templates and static
files, and the HTML answers that are not a page of the wiki.

Owns :class:`WebFace` (the core, the tokens, the cookie key, the Jinja2 environment, the
static files, the render cache and the signed-out nonces of one app) and the registry
:data:`CONTEXTS` the middleware finds it in; :func:`template_dir`; the Jinja2
environment (autoescape on, the ``when`` filter, ``page_url`` and ``anchor_url``);
:data:`SECURITY_HEADERS` (a Content-Security-Policy that allows no script at all) and
:func:`html_page`, which fills a template and adds them; the router's own error pages
(:func:`error_page`, :func:`allowed_methods`, :data:`CATCH_ALL`) and the static file
handler. Sign-in lives in :mod:`wiki_memory.web.session`, the page handlers in
:mod:`wiki_memory.web.views` (see docs/web.md).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import threading
import weakref
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from wiki_memory.core.quoting import show
from wiki_memory.web.links import crumbs, folder_url, fragment_for, page_url, tag_url
from wiki_memory.web.render import RenderCache

if TYPE_CHECKING:
    from wiki_memory.auth import TokenStore
    from wiki_memory.core.memory import Memory

#: the route that answers every other GET with the view's 404 page
CATCH_ALL = "/{rest:path}"

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

#: the files under ``templates/static/`` the view serves, with their content types
STATIC_FILES = (
    ("web.css", "text/css; charset=utf-8"),
    ("favicon.svg", "image/svg+xml"),
)


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
class WebFace:
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
        """``{(token id, user)}`` of every live token, re-read when tokens.json changes
        (a user-name twin's tokens are not live: :meth:`wiki_memory.auth.TokenStore.twins`)."""
        path = self.tokens.tokens_path
        try:
            st = path.stat()
            stamp: Any = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = None
        cached = self._token_ids
        if cached is not None and cached[0] == stamp and stamp is not None:
            return cached[1]
        twins = self.tokens.twins()
        ids = frozenset((r.token_id, r.user) for r in self.tokens.list() if r.user not in twins)
        self._token_ids = (stamp, ids)
        return ids


#: tokens store → the context of the app serving it (the middleware looks it up)
CONTEXTS: weakref.WeakKeyDictionary[Any, WebFace] = weakref.WeakKeyDictionary()


def load_static(tdir: Path) -> tuple[dict[str, tuple[bytes, str]], str]:
    """The static files under ``tdir/static`` (name → (bytes, content type)) and a short
    hash of them all (the version the templates put in the stylesheet's URL)."""
    static: dict[str, tuple[bytes, str]] = {}
    for name, ctype in STATIC_FILES:
        p = tdir / "static" / name
        if p.is_file():
            static[name] = (p.read_bytes(), ctype)
    version = hashlib.sha256(b"".join(v[0] for v in static.values())).hexdigest()[:10]
    return static, version


def make_env(tdir: Path) -> Environment:
    """The Jinja2 environment of the templates in ``tdir`` (every value escaped, and
    every invisible or bidi character of it shown as ``<U+XXXX>``: :func:`_visible`)."""
    env = Environment(
        loader=FileSystemLoader(str(tdir)),
        autoescape=True,
        finalize=_visible,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = _when
    env.globals["page_url"] = page_url
    env.globals["anchor_url"] = _anchor_url
    env.globals["folder_url"] = folder_url
    env.globals["tag_url"] = tag_url
    env.globals["crumbs"] = crumbs
    return env


def _visible(value: Any) -> Any:
    """What a template prints, with stored text's invisible and layout characters (a
    U+202E that would reverse a title, zero-width spaces) shown as ``<U+XXXX>``
    (:func:`wiki_memory.core.quoting.show`); rendered HTML keeps its line breaks and tabs."""
    if isinstance(value, Markup):
        shown = show(str(value), keep="\t\n\r")
        return value if shown == value else Markup(shown.replace("<U+", "&lt;U+"))
    if isinstance(value, str):
        return show(value)
    return value


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


# --------------------------------------------------------------------------- HTML answers


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def logout_csrf(key: bytes, session: dict[str, Any]) -> str:
    """The token the *Sign out* form of a signed-in page carries (bound to the session's
    nonce, so it is good for that session only)."""
    return b64(hmac.new(key, b"logout." + str(session.get("n")).encode(), "sha256").digest())[:32]


def html_page(
    ctx: WebFace,
    request: Request,
    template: str,
    status: int = 200,
    headers: dict[str, str] | None = None,
    **values: Any,
) -> HTMLResponse:
    """``template`` filled with ``values`` (plus the reader, the sign-out token and the
    path) as an HTML response with :data:`SECURITY_HEADERS` and ``headers``."""
    user = getattr(request.state, "user", None)
    session = request.scope.get("state", {}).get("web_session")
    values.setdefault("title", "wiki-memory")
    values.setdefault("q", "")
    html = ctx.env.get_template(template).render(
        user=user,
        logout_csrf=logout_csrf(ctx.key, session) if session else None,
        path=request.url.path,
        **values,
    )
    resp = HTMLResponse(html, status)
    resp.headers.update(SECURITY_HEADERS)
    if headers:
        resp.headers.update(headers)
    return resp


def static_file(ctx: WebFace, request: Request) -> Response:
    """``GET /static/<name>``: one of :data:`STATIC_FILES` (cached a day), else 404."""
    found = ctx.static.get(request.path_params["name"])
    if found is None:
        resp = Response("not found", 404, media_type="text/plain")
    else:
        resp = Response(found[0], media_type=found[1])
    resp.headers.update(SECURITY_HEADERS)
    if found is not None:
        resp.headers["Cache-Control"] = "public, max-age=86400"
    return resp


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


def no_route(ctx: WebFace, request: Request) -> Response:
    """Any GET no other route takes (:data:`CATCH_ALL`): the view's 404 page; under
    ``/v1`` and ``/mcp`` the API's JSON 404 or 405 instead."""
    path = request.url.path
    if path.startswith(("/v1/", "/mcp")) or path == "/v1":
        # the API's JSON 404 or 405 (a POST-only route asked with GET), from the app's
        # one error handler
        raise StarletteHTTPException(405 if allowed_methods(request) else 404)
    return html_page(ctx, request, "error.html", 404, title="Not found", message="No such page.")


def error_page(request: Request, status: int) -> Response:
    """The web view's HTML page for a router error (404, 405) outside ``/v1``."""
    messages = {404: ("Not found", "No such page."), 405: ("Not allowed", "Not allowed here.")}
    title, message = messages.get(status, ("Error", "Something went wrong."))
    for ctx in list(CONTEXTS.values()):
        return html_page(ctx, request, "error.html", status, title=title, message=message)
    resp = HTMLResponse(f"<!doctype html><title>{title}</title><p>{message}</p>", status)
    resp.headers.update(SECURITY_HEADERS)
    return resp
