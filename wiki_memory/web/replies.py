"""Large replies sent from a temporary file, a bounded piece at a time (docs/team-server.md,
"Slow and half-open clients").

A reply is built whole (a page's JSON, a page view's HTML) and then waits for its reader.
Kept in memory, fifty readers of a 2 MiB page that read one byte a second held fifty
copies of it. :func:`spooled` turns a built :class:`~starlette.responses.Response` of more
than :data:`SPOOL_OVER` bytes into one whose body is written to an unlinked-when-done
temporary file (owner-only) and sent :data:`CHUNK` bytes at a time: uvicorn's flow control
waits for the reader between pieces, so a slow reader holds one piece of memory and no
file descriptor (the file is opened for each piece), and the guard's write timeout drops
a reader that stops."""

from __future__ import annotations

import os
import tempfile

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

__all__ = ["CHUNK", "SPOOL_OVER", "spooled"]

#: replies over this many bytes are sent from a file
SPOOL_OVER = 256 * 1024
#: bytes sent at a time
CHUNK = 64 * 1024


class _Spooled(Response):
    """A built response whose body is sent from a temporary file (see the module doc)."""

    def __init__(self, built: Response) -> None:  # no Response.__init__: nothing to render
        self.status_code = built.status_code
        self.background = built.background
        self.raw_headers = list(built.raw_headers)
        self.body = built.body
        built.body = b""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = self.body
        size = len(body)
        fd, name = tempfile.mkstemp(prefix="wiki-memory-reply-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(body)
            self.body = body = b""
            await send(
                {
                    "type": "http.response.start",
                    "status": self.status_code,
                    "headers": self.raw_headers,
                }
            )
            offset = 0
            while offset < size:
                with open(name, "rb") as f:
                    f.seek(offset)
                    piece = f.read(CHUNK)
                if not piece:  # pragma: no cover - the file is ours alone
                    raise OSError(f"reply file {name} ended early")
                offset += len(piece)
                await send(
                    {"type": "http.response.body", "body": piece, "more_body": offset < size}
                )
        finally:
            try:
                os.unlink(name)
            except OSError:  # pragma: no cover - removed by someone else
                pass
        if self.background is not None:
            await self.background()


def spooled(resp: Response) -> Response:
    """``resp`` itself when its body is at most :data:`SPOOL_OVER` bytes, else the same
    reply sent from a temporary file a piece at a time."""
    if len(resp.body) <= SPOOL_OVER:
        return resp
    return _Spooled(resp)
