"""An attacker for tests/server/test_slow_clients.py, run as its own process: holds ``n``
connections to ``host:port`` from the given source addresses (comma-separated, used in
turn), and reopens every one the server closes, every 1 s, until SIGTERM. Raises its own
soft file limit to ``n + 256``. Prints ``ready`` once all ``n`` were opened once, and on
SIGTERM one JSON line: ``opened`` (connections made), ``closed`` (closes seen) and
``open`` (held at the end).

Two kinds of connection:

- ``head`` (the default): sends the start of a request head and then nothing.
- ``body``: sends a whole request head and then its body one byte every ``--every``
  seconds: in turn a sign-in form (``POST /login``, no token) and a page
  (``PUT /v1/pages/...`` with ``--token``; without one, the sign-in form only), or
  only one of them (``--kind put`` or ``login``). A
  connection the server answers or closes counts as closed and is opened again.

Usage: python slowclients.py HOST PORT N SOURCES [--body] [--token T] [--every S] [--kind K]
"""

from __future__ import annotations

import argparse
import json
import resource
import signal
import socket
import time

HEAD = b"POST /v1/recall HTTP/1.1\r\nHost: attacker\r\nContent-Type: application/json\r\n"


def body_head(i: int, host: str, port: int, token: str, kind: str) -> bytes:
    """The whole head of slow-body request ``i``: a sign-in form or a page upload."""
    if token and (kind == "put" or (kind == "both" and i % 2)):
        return (
            f"PUT /v1/pages/notes/slow-{i}.md HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: text/markdown\r\n"
            "Content-Length: 100000\r\n\r\n"
        ).encode()
    return (
        f"POST /login HTTP/1.1\r\nHost: {host}:{port}\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 4000\r\n\r\n"
    ).encode()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("n", type=int)
    ap.add_argument("sources")
    ap.add_argument("--body", action="store_true")
    ap.add_argument("--token", default="")
    ap.add_argument("--every", type=float, default=5.0)
    ap.add_argument("--kind", choices=("both", "put", "login"), default="both")
    a = ap.parse_args()
    host, port, n = a.host, a.port, a.n
    sources = a.sources.split(",")
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 256), hard))
    socks: list[socket.socket | None] = [None] * n
    heads = [body_head(i, host, port, a.token, a.kind) if a.body else HEAD for i in range(n)]
    stats = {"opened": 0, "closed": 0}
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    sent = [False] * n
    last = [0.0] * n

    def open_one(i: int) -> None:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((sources[i % len(sources)], 0))
        s.setblocking(False)
        s.connect_ex((host, port))
        socks[i] = s
        sent[i] = False
        stats["opened"] += 1

    for i in range(n):
        open_one(i)
    print("ready", flush=True)
    while not stop:
        now = time.monotonic()
        for i, s in enumerate(socks):
            if s is None:
                continue
            try:
                if not sent[i]:
                    s.send(heads[i])
                    sent[i] = True
                    last[i] = now
                elif a.body and now - last[i] >= a.every:
                    s.send(b"x")
                    last[i] = now
                if s.recv(1, socket.MSG_PEEK) is not None:
                    # answered (or closed: b""): this request is over
                    raise ConnectionResetError
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                s.close()
                stats["closed"] += 1
                open_one(i)
        time.sleep(1.0)
    held = sum(1 for s in socks if s is not None)
    print(json.dumps({**stats, "open": held}), flush=True)


if __name__ == "__main__":
    main()
