"""The access log (``logs/access.log``): one line per request, every value from the
request redacted and escaped (docs/team-server.md, "The audit log")."""

from __future__ import annotations

import json
import logging
import time
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wiki_memory.audit import escape
from wiki_memory.capture.sanitize import redact_text

__all__ = ["AccessLogMiddleware", "access_log"]

access_log = logging.getLogger("wiki_memory.access")


class AccessLogMiddleware:
    """Logs one line per request: method, path (secrets redacted), every query key and
    value replaced by ``REDACTED`` (never a token, wherever it was put), status, time, the caller's user and token id, and
    the ``User-Agent``. Every value taken from the request is escaped
    (:func:`wiki_memory.audit.escape`): a newline in a path or header is written ``\\n``
    and never starts a line."""

    #: most distinct strings whose redaction is remembered (paths and agents repeat)
    CACHE_SIZE = 512

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._redacted: dict[tuple[str, int | None], str] = {}

    def redacted(self, value: str, cut: int | None = None) -> str:
        """``value`` with secrets redacted, cut to ``cut`` characters after redaction, and
        escaped for a log line. Answers for values up to 1,024 characters are kept (the
        last :attr:`CACHE_SIZE` distinct ones), since every request of a hook sends the
        same path and ``User-Agent`` and the sanitizer is deterministic."""
        key = (value, cut)
        out = self._redacted.get(key)
        if out is None:
            out = escape(redact_text(value)[0][:cut])
            if len(value) <= 1024:
                if len(self._redacted) >= self.CACHE_SIZE:
                    self._redacted.clear()
                self._redacted[key] = out
        return out

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = {"code": 0}

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            qs = scope.get("query_string", b"").decode("latin-1")
            # keys too: a client may put a secret where a key goes (``?ghp_...``)
            n = len(parse_qsl(qs, keep_blank_values=True))
            red = "&".join(["REDACTED=REDACTED"] * n)
            ident = (scope.get("state") or {}).get("identity")
            agent = ""
            for name, value in scope.get("headers", []):
                if name == b"user-agent":
                    agent = value.decode("latin-1")
            access_log.info(
                "%s %s%s %s %.1fms user=%s token=%s agent=%s",
                escape(str(scope.get("method"))),
                self.redacted(str(scope.get("path", ""))),
                f"?{escape(red)}" if red else "",
                status["code"],
                (time.perf_counter() - start) * 1000,
                escape(ident.user) if ident is not None else "-",
                (ident.token_id or "-") if ident is not None else "-",
                json.dumps(self.redacted(agent, 200)),
            )
