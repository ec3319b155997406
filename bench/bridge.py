"""Start-up of the MCP stdio bridge (``wiki-memory mcp``), measured as a client pays it.

Runs the bridge the way ``install-mcp`` writes it (``python -S <bridge script> --data-dir
D mcp``) against a live ``wiki-memory serve`` on a temporary data directory, sends one
``initialize`` on stdin, closes stdin and waits for the process to end: ``--runs`` times
(default 50). Beside it, the floor: ``python -S -c pass`` on the same interpreter in the
same run. Prints p50/p95 in ms and the p95 ratio to the floor.

Moved here from the 5 s bound of ``tests/mcp/test_mcp_server.py::test_bridge_starts_fast``;
the test (``test_bridge_starts_light``) now bounds what the bridge imports. docs/mcp.md:
"about 0.3 s to the first answer".

    python bench/bridge.py [--runs 50]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _server import ServerProcess

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from wiki_memory.harness.mcp_install import BRIDGE_SCRIPT  # noqa: E402

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}


def timed(argv: list[str], data: bytes, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(argv, input=data, capture_output=True, env=env, timeout=120)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{argv} exited {p.returncode}: {p.stderr[-500:]!r}")
    return dt


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=50)
    args = ap.parse_args()
    py = sys.executable
    env = {k: v for k, v in os.environ.items() if not k.startswith("WIKI_MEMORY_")}
    rows: list[tuple[str, list[float]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        srv = ServerProcess(data).start()
        try:
            bridge = [py, "-S", str(BRIDGE_SCRIPT), "--data-dir", str(data), "mcp"]
            msg = (json.dumps(INIT) + "\n").encode()
            timed(bridge, msg, env)  # warm the bytecode caches
            rows.append(("floor: python -S -c pass", [timed([py, "-S", "-c", "pass"], b"", env) for _ in range(args.runs)]))  # fmt: skip
            rows.append(("bridge: start, initialize, exit", [timed(bridge, msg, env) for _ in range(args.runs)]))  # fmt: skip
        finally:
            srv.stop()
    floor = pct(rows[0][1], 0.95)
    print(f"interpreter: {py} (Python {sys.version.split()[0]}), {os.cpu_count()} CPUs")
    print(f"{'case':<34} {'runs':>5} {'p50 ms':>8} {'p95 ms':>8} {'p95/floor':>10}")
    for name, xs in rows:
        p50, p95 = pct(xs, 0.5) * 1000, pct(xs, 0.95) * 1000
        print(f"{name:<34} {len(xs):>5} {p50:>8.1f} {p95:>8.1f} {p95 / (floor * 1000):>9.2f}x")
    print("floor = p95 of `python -S -c pass`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
