"""Signing in to the web view: the session cookie, its key, the forms' CSRF checks, and
the ``/login`` and ``/logout`` handlers (docs/web.md, "Signing in").

``POST /login`` with a token (the same tokens as the API) sets ``wm_session``, an
HttpOnly, ``SameSite=Strict`` cookie signed with HMAC-SHA256 (key in
``auth/web-cookie.key``, 0600, made by :func:`load_key`), expiring after
:data:`SESSION_SECONDS`, holding the user and the token's id: a request with it is
accepted only while that token still exists for that user (:func:`user_from_cookie`), so
revoking the token ends the session. The form is protected against cross-site posts by a
double-submit token (cookie + hidden field) and the ``Origin`` and ``Sec-Fetch-Site``
headers. ``POST /logout`` refuses the session's nonce until it expires. With
``web_local_owner`` (off by default) a loopback server lets requests from loopback in as
the local owner without a token. :func:`unauthorized` is what a request without a
sign-in gets.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import Scope

from wiki_memory.hosts import is_loopback
from wiki_memory.identity import Identity
from wiki_memory.web.context import (
    CONTEXTS,
    SECURITY_HEADERS,
    WebFace,
    b64,
    html_page,
    logout_csrf,
)

if TYPE_CHECKING:
    from wiki_memory.auth import TokenStore

#: paths anyone may fetch without signing in
PUBLIC_PATHS: frozenset[str] = frozenset({"/login", "/logout"})
PUBLIC_PREFIXES: tuple[str, ...] = ("/static/",)

SESSION_COOKIE = "wm_session"
CSRF_COOKIE = "wm_csrf"
#: how long a sign-in lasts (seconds)
SESSION_SECONDS = 12 * 3600
KEY_FILE = "web-cookie.key"
MAX_FORM_BYTES = 8 * 1024


def load_key(auth_dir: Path) -> bytes:
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


# --------------------------------------------------------------------------- the cookie


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _sign(key: bytes, payload: str) -> str:
    return b64(hmac.new(key, b"wm-session-1." + payload.encode("ascii"), "sha256").digest())


def make_session_cookie(key: bytes, user: str, token_id: str, now: float | None = None) -> str:
    """A signed session value ``<payload>.<sig>``: payload = base64url of
    ``{"u": user, "t": token id, "e": expiry epoch s, "n": nonce}``."""
    exp = int((time.time() if now is None else now) + SESSION_SECONDS)
    body = {"u": user, "t": token_id, "e": exp, "n": secrets.token_urlsafe(12)}
    payload = b64(json.dumps(body, separators=(",", ":")).encode("utf-8"))
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
    return bool(host) and is_loopback(str(host))


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


# --------------------------------------------------------------------------- the door


def user_from_cookie(scope: Scope, tokens: TokenStore) -> str | None:
    """The signed-in user of a browser request, or None.

    From the ``wm_session`` cookie when its signature is good, it has not expired or been
    signed out, and the token it was made from still exists for that user. Else, with the
    ``web_local_owner`` setting on a loopback server, a request from a loopback address
    naming a loopback ``Host`` is the local owner. Puts the session payload (if any) in
    ``scope["state"]["web_session"]``.
    """
    ctx = CONTEXTS.get(tokens)
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


# --------------------------------------------------------------------------- the forms


class SignIn:
    """The ``/login`` and ``/logout`` handlers of one app."""

    def __init__(self, ctx: WebFace) -> None:
        self.ctx = ctx

    async def login(self, request: Request) -> Response:
        nxt = _safe_next(request.query_params.get("next"))
        if request.method == "POST":
            return await self._login_post(request)
        return self._login_form(request, nxt, 200, None)

    def _login_form(self, request: Request, nxt: str, status: int, error: str | None) -> Response:
        """The sign-in page (``error`` shown above the form) with a fresh CSRF token in
        its form and in the cookie beside it."""
        token = secrets.token_urlsafe(24)
        resp = html_page(
            self.ctx,
            request,
            "login.html",
            status,
            title="Sign in",
            csrf=token,
            next=nxt,
            error=error,
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
        """The form of a request that carries no token yet (sign-in, sign-out): at most
        :data:`MAX_FORM_BYTES`, refused at once when its ``Content-Length`` says more;
        None when too large or not UTF-8."""
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_FORM_BYTES:
            return None
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
            return html_page(self.ctx, request, "error.html", 413, title="Too large", message="")
        nxt = _safe_next(form.get("next"))
        cookie = request.cookies.get(CSRF_COOKIE, "")
        field_token = form.get("csrf", "")
        if (
            self._cross_site(request)
            or not cookie
            or not field_token
            or not hmac.compare_digest(cookie.encode(), field_token.encode())
        ):
            error = "The sign-in form expired or came from another site. Try again."
            return self._login_form(request, nxt, 403, error)
        token_text = form.get("token", "").strip()
        user = self.ctx.tokens.user_for(token_text) if token_text else None
        if user is None:
            return self._login_form(request, nxt, 401, "That token is not valid.")
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
            return html_page(self.ctx, request, "logout.html", title="Sign out")
        form = await self._read_form(request) or {}
        if data is not None:
            good = form.get("csrf", "") and hmac.compare_digest(
                form.get("csrf", "").encode(), logout_csrf(self.ctx.key, data).encode()
            )
            if not good or self._cross_site(request):
                request.scope.setdefault("state", {})["web_session"] = data
                request.state.user = data["u"]
                return html_page(self.ctx, request, "logout.html", 403, title="Sign out")
            now = time.time()
            with self.ctx._lock:
                self.ctx.signed_out = {n: e for n, e in self.ctx.signed_out.items() if e > now}
                self.ctx.signed_out[str(data.get("n"))] = float(data["e"])
        resp = RedirectResponse("/login", 303)
        resp.headers.update(SECURITY_HEADERS)
        if data is not None:
            resp.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
        return resp


@dataclass(frozen=True)
class CookieSignIn:
    """The web face's sign-in, as the authentication backend the server's
    ``AuthMiddleware`` asks for a request of this face that carries no bearer token:
    the paths anyone may open (:data:`PUBLIC_PATHS`, :data:`PUBLIC_PREFIXES`), the
    caller a signed session cookie names, and what a browser without one gets."""

    open_paths: frozenset[str] = PUBLIC_PATHS
    open_prefixes: tuple[str, ...] = PUBLIC_PREFIXES

    def identity(self, scope: Scope, tokens: TokenStore) -> Identity | None:
        """The signed-in caller (:func:`user_from_cookie`) with the role and grants the
        token store holds now and the id of the token the sign-in was made with; None
        without a valid sign-in."""
        user = user_from_cookie(scope, tokens)
        if user is None:
            return None
        tid = (scope.get("state", {}).get("web_session") or {}).get("t")
        ident = tokens.identity_of(user) or Identity(user, grants={})
        return replace(ident, token_id=str(tid) if tid else None)

    def refuse(self, scope: Scope) -> Response:
        """What a request without a valid sign-in gets (:func:`unauthorized`)."""
        return unauthorized(scope)
