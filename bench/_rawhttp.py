"""A small keep-alive HTTP/1.1 client for a benchmark's many small POSTs (``bench/mixed.py``'s
captures): requests written by hand on asyncio streams, so that the client's own CPU per
request stays far below the server's.

``httpx.AsyncClient`` spends about 1.2 ms of client CPU per capture while its pool is
small, and up to about 5 ms once a slower spell has opened all its connections (its pool
checks every connection on each request and each response). At 200 captures/s that is a
whole core: a single-process open-loop client then falls behind the schedule it measures
from, which counts as the server's latency and, since a late client opens still more
connections, does not recover. This client costs a small fraction of that and does not
grow with the connections it holds.

Plain ``http://`` only (the benchmarks' servers listen on 127.0.0.1 without TLS); replies
must carry ``Content-Length`` (Starlette's JSON responses do).
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

import orjson

__all__ = ["RawPool"]


class RawPool:
    """At most ``size`` keep-alive connections to ``url`` (``http://host:port``), each
    request sent with ``headers``; a request beyond ``size`` waits (on the caller's clock)
    for a free connection. :meth:`close` closes them all."""

    def __init__(self, url: str, headers: dict[str, str], size: int, timeout: float = 60) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise ValueError(f"RawPool needs http://host:port, got {url!r}")
        self.host, self.port = parts.hostname, parts.port
        self.timeout = timeout
        self._head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self._slots = asyncio.Semaphore(size)
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self._all: set[asyncio.StreamWriter] = set()

    async def post_json(self, path: str, body: Any) -> tuple[int, Any]:
        """POST ``body`` as JSON to ``path``: (status, the reply's JSON or None when it is
        empty or not JSON). Raises OSError / asyncio.IncompleteReadError when the
        connection fails, TimeoutError after ``timeout`` s."""
        data = orjson.dumps(body)
        req = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n{self._head}"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        ).encode() + data
        async with self._slots:
            reused = bool(self._idle)
            conn = self._idle.pop() if reused else await self._open()
            try:
                async with asyncio.timeout(self.timeout):
                    status, reply, keep = await self._exchange(conn, req)
            except (OSError, asyncio.IncompleteReadError):
                self._drop(conn)
                if not reused:
                    raise
                # a kept connection the server closed while it was idle: once more on a
                # new one (a capture that did arrive answers ``duplicate`` the second time)
                conn = await self._open()
                try:
                    async with asyncio.timeout(self.timeout):
                        status, reply, keep = await self._exchange(conn, req)
                except BaseException:
                    self._drop(conn)
                    raise
            except BaseException:
                self._drop(conn)
                raise
            if keep:
                self._idle.append(conn)
            else:
                self._drop(conn)
        try:
            return status, orjson.loads(reply) if reply else None
        except orjson.JSONDecodeError:
            return status, None

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection(self.host, self.port)
        self._all.add(writer)
        return reader, writer

    def _drop(self, conn: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
        self._all.discard(conn[1])
        conn[1].close()

    @staticmethod
    async def _exchange(
        conn: tuple[asyncio.StreamReader, asyncio.StreamWriter], req: bytes
    ) -> tuple[int, bytes, bool]:
        reader, writer = conn
        writer.write(req)
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length, keep = 0, True
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "connection" and value.strip().lower() == "close":
                keep = False
            elif name == "transfer-encoding":
                raise OSError("RawPool reads Content-Length replies only")
        body = await reader.readexactly(length) if length else b""
        return status, body, keep

    async def close(self) -> None:
        """Close every connection."""
        for w in list(self._all):
            w.close()
        self._all.clear()
        self._idle.clear()
