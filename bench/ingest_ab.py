"""The product server's CPU per single observation, several trees side by side in one
run: ``bench/ingest.py``'s single-observation workload without the floors.

    python bench/ingest_ab.py [--rounds 12] [--events 800] [--clients 8] TREE [TREE ...]

One ``wiki-memory serve`` per tree (each on a temporary data directory, started with its
tree as the working directory, so ``python -m`` imports that tree's code), all running at
once. Each round sends ``--events`` single observations (one per request, ``--clients``
keep-alive threads, new sessions each round) to every server in turn, the order rotated
from round to round, and reads each server's CPU time (user + system, ``/proc/<pid>/stat``)
around its share. Prints, per tree, the median CPU µs per observation over the rounds,
its interquartile range, its ratio to the first tree's, and the median rate.

On a shared machine the load changes from one minute to the next: servers measured in
turn within each round see the same load, so their ratio holds where runs made one after
the other differ by ±15 %. Not a test; ``uptime`` before and after.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from _server import free_port
from ingest import cpu_seconds, post_events


def start(tree: Path) -> tuple[subprocess.Popen[bytes], str, dict[str, str]]:
    """A server of ``tree`` on a fresh data directory: (process, base URL, auth headers)."""
    data = Path(tempfile.mkdtemp(prefix="ingest-ab-")) / "data"
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "wiki_memory.cli.main", "--data-dir", str(data), "serve"]
        + ["--port", str(port)],
        cwd=tree,
        env=dict(os.environ, WIKI_MEMORY_HOME=str(data)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/v1/health", timeout=2).status_code == 200:
                token = (data / "auth" / "owner.token").read_text().strip()
                return proc, url, {"Authorization": f"Bearer {token}"}
        except (httpx.HTTPError, OSError):
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"the server of {tree} did not start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("trees", nargs="+", type=Path)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--events", type=int, default=800, help="single observations per round")
    ap.add_argument("--clients", type=int, default=8)
    args = ap.parse_args()
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    servers = [(str(t), *start(t.resolve())) for t in args.trees]
    cpu: dict[str, list[float]] = {name: [] for name, *_ in servers}
    rates: dict[str, list[float]] = {name: [] for name, *_ in servers}
    try:
        for _name, _proc, url, headers in servers:
            post_events(url, headers, args.clients, 400, "warm")
        for r in range(args.rounds):
            k = r % len(servers)
            for name, proc, url, headers in servers[k:] + servers[:k]:
                u0, s0 = cpu_seconds(proc.pid)
                rate, _ = post_events(url, headers, args.clients, args.events, f"r{r}")
                u1, s1 = cpu_seconds(proc.pid)
                cpu[name].append((u1 - u0 + s1 - s0) / args.events * 1e6)
                rates[name].append(rate)
    finally:
        for _name, proc, _url, _headers in servers:
            proc.send_signal(signal.SIGINT)
        for _name, proc, _url, _headers in servers:
            proc.wait(60)
    first = statistics.median(cpu[servers[0][0]])
    print(f"\nserver CPU per single observation, {args.rounds} rounds of {args.events}")
    for name, *_ in servers:
        med = statistics.median(cpu[name])
        q1, _q2, q3 = statistics.quantiles(cpu[name], n=4)
        print(
            f"  {name:<28} {med:6.0f} µs (IQR {q1:.0f}-{q3:.0f})  x{med / first:5.3f}"
            f"  {statistics.median(rates[name]):7,.0f} obs/s"
        )
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
