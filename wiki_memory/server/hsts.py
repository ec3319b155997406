"""``Strict-Transport-Security`` on every answer given over TLS (docs/team-server.md,
"TLS"): a browser that once reached the server over ``https://`` never falls back to
plain HTTP for that name, so a token or a session cookie is not sent in clear to whoever
answers on port 80 or on the same port without TLS."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["HSTS", "HstsMiddleware"]

#: one year; no ``includeSubDomains``: a LAN name's neighbours are not this server's
HSTS = b"max-age=31536000"


class HstsMiddleware:
    """Adds :data:`HSTS` to every HTTP answer whose request came over TLS (uvicorn's
    ``scheme`` is ``https``: TLS in the server, or a trusted proxy that forwarded it)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("scheme") != "https":
            await self.app(scope, receive, send)
            return

        async def send_hsts(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(k.lower() == b"strict-transport-security" for k, _ in headers):
                    headers.append((b"strict-transport-security", HSTS))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_hsts)
