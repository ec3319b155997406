"""An attacker for tests/server/test_slow_clients.py, run as its own process: holds ``n``
connections from ``source`` to ``host:port`` that never finish their request head (each
sends the start of one and then nothing), and reopens every one the server closes, every
1 s, until SIGTERM. Raises its own soft file limit to ``n + 256``. Prints ``ready``
once all ``n`` were opened once, and on SIGTERM one JSON line: ``opened`` (connections
made), ``closed`` (closes seen) and ``open`` (held at the end).

Usage: python slowclients.py HOST PORT N SOURCE_ADDRESS
"""

from __future__ import annotations

import json
import resource
import signal
import socket
import sys
import time

HEAD = b"POST /v1/recall HTTP/1.1\r\nHost: attacker\r\nContent-Type: application/json\r\n"


def main() -> None:
    host, port, n, source = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 256), hard))
    socks: list[socket.socket | None] = [None] * n
    stats = {"opened": 0, "closed": 0}
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))

    def open_one(i: int) -> None:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((source, 0))
        s.setblocking(False)
        s.connect_ex((host, port))
        socks[i] = s
        stats["opened"] += 1

    for i in range(n):
        open_one(i)
    sent = [False] * n
    print("ready", flush=True)
    while not stop:
        for i, s in enumerate(socks):
            if s is None:
                continue
            try:
                if not sent[i]:
                    s.send(HEAD)
                    sent[i] = True
                elif s.recv(1, socket.MSG_PEEK) == b"":
                    raise ConnectionResetError
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                s.close()
                stats["closed"] += 1
                sent[i] = False
                open_one(i)
        time.sleep(1.0)
    held = sum(1 for s in socks if s is not None)
    print(json.dumps({**stats, "open": held}), flush=True)


if __name__ == "__main__":
    main()
