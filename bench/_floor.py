"""The ingest floor: a minimal Starlette endpoint that parses the JSON body and appends it
durably, run as its own process by ``bench/ingest.py`` beside the product.

    python bench/_floor.py --port 8123 --file /tmp/x.jsonl --mode per-request|grouped

``POST /v1/observations`` takes one JSON object or a list of them, appends one line per
object to ``--file`` (``O_APPEND``) and fsyncs before the reply:

- ``per-request``: each request fsyncs its own append (one ``fsync`` per request);
- ``grouped``: concurrent requests share fsyncs the way the product's spool does
  (``wiki_memory/capture/spool.py``: a request waits for a sync that covers its write, and
  one sync covers every write made before it started).

The reply is ``202 {"id", "duplicate"}`` (a list: ``{"accepted": [...]}``), the same
shape the product sends. uvicorn runs with its defaults (``http`` and ``loop`` "auto":
httptools and uvloop when installed) and no access log: nothing but the floor's work.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


class Appender:
    """Appends lines to one file and fsyncs them, per request or grouped."""

    def __init__(self, path: str, grouped: bool) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self.grouped = grouped
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._written = 0
        self._synced = 0

    def append(self, data: bytes) -> None:
        if not self.grouped:
            os.write(self.fd, data)
            os.fsync(self.fd)
            return
        with self._lock:
            os.write(self.fd, data)
            self._written += 1
            target = self._written
        with self._sync_lock:
            if self._synced >= target:
                return
            with self._lock:
                upto = self._written
            os.fsync(self.fd)
            self._synced = upto


def build(path: str, grouped: bool) -> Starlette:
    app_ = Appender(path, grouped)
    counter = {"n": 0}

    async def observations(request: Request) -> Response:
        body: Any = json.loads(await request.body())
        items = body if isinstance(body, list) else [body]
        data = b"".join(json.dumps(i, ensure_ascii=False).encode() + b"\n" for i in items)
        await run_in_threadpool(app_.append, data)
        out = []
        for _ in items:
            counter["n"] += 1
            out.append({"id": f"floor-{counter['n']}", "duplicate": False})
        if isinstance(body, list):
            return JSONResponse({"accepted": out}, 202)
        return JSONResponse(out[0], 202)

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True})

    return Starlette(
        routes=[
            Route("/v1/observations", observations, methods=["POST"]),
            Route("/v1/health", health, methods=["GET"]),
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--file", required=True)
    ap.add_argument("--mode", choices=("per-request", "grouped"), default="per-request")
    args = ap.parse_args()
    uvicorn.run(
        build(args.file, args.mode == "grouped"),
        host="127.0.0.1",
        port=args.port,
        access_log=False,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
