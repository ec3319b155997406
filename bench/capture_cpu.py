"""The server's CPU per capture and per recall under ``bench/mixed.py``'s load, this tree
against another checkout, in alternating rounds.

Each round starts a real ``wiki-memory serve`` of each tree in turn on its own copy of
one prepared data directory (``bench/mixed.py``'s 20,000-page wiki, copied afresh so no
round inherits another's spool), waits until the idle server has settled, then sends an
open-loop load with ``bench/mixed.py``'s clients: ``--captures`` per second, ``--recalls``
per second (every other one over MCP), for ``--seconds``. The server's CPU time (user +
system, ``/proc/<pid>/stat``) over the load, from its first request until every answer
came and the spool rows' thread has had its 0.1 s, is divided by the requests answered:

- with ``--recalls 0``: CPU ms per capture;
- with ``--captures 0``: CPU ms per recall;
- both: CPU ms per capture with the recalls' share taken out at the per-recall cost of
  the same round's recall-only run when ``--split`` is given (three runs per tree then).

Each run also prints the capture and recall p95 (ms, from the scheduled time, as in
``bench/mixed.py``) and the event loop's longest stall (``WIKI_MEMORY_LOOP_LAG_FILE``).
``--in-place`` serves ``--data-dir`` itself instead of a copy (a copy's files have new
inodes, so each start re-hashes every page for ``git status``; in place, each run's
captures stay in the spool for the next). ``--this-only`` runs this tree alone.

The other tree is run with ``PYTHONPATH`` set to it (``--against DIR``: a checkout, or
``git archive REV wiki_memory hooks | tar -x -C DIR``), the server started from a neutral
working directory so that neither tree shadows the other. Prints one line per run and the
median ratio this/other per figure; ``uptime`` before and after.

Run:

    python bench/capture_cpu.py --against DIR [--data-dir DIR] [--rounds 3]
        [--seconds 20] [--captures 100] [--recalls 10] [--split] [--in-place] [--this-only]

Not a test; timings on a shared machine are noisy, the ratios are the figure.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
print = functools.partial(print, flush=True)  # noqa: A001  (progress shows when piped)
sys.path.insert(0, str(HERE))

import mixed as mx  # noqa: E402  (bench/mixed.py: the clients and the open loop)
import recall as base  # noqa: E402
from _server import ServerProcess  # noqa: E402
from recall_stages import build  # noqa: E402


async def run_load(
    srv: ServerProcess, qs: list[str], tag: str, captures: float, recalls: float, seconds: float
) -> tuple[float, int, int, float, float]:
    """(server CPU s, captures answered, recalls answered, capture p95 ms, recall p95 ms)."""
    assert srv.proc is not None
    load = mx.Load(srv, tag, qs)
    try:
        await load.open()
        # warm: a few of each kind, outside the measure
        for i in range(5):
            if captures:
                await load.capture()
            if recalls:
                await load.recall_http(qs[i])
                await load.recall_mcp(qs[i], i)
        await asyncio.sleep(0.5)
        c0 = mx.cpu_seconds(srv.proc.pid)
        got = await mx.open_loop(load, captures, recalls, seconds)
        await asyncio.sleep(0.3)  # the spool rows' thread writes 0.1 s after a batch
        c1 = mx.cpu_seconds(srv.proc.pid)
    finally:
        await load.close()
    cap = got["capture"].latencies
    rec = got["recall http"].latencies + got["recall mcp"].latencies
    return (
        c1 - c0,
        len(cap),
        len(rec),
        base.pct(cap, 95) if cap else float("nan"),
        base.pct(rec, 95) if rec else float("nan"),
    )


def one(
    tree: Path | None,
    pristine: Path,
    work: Path,
    qs: list[str],
    captures: float,
    recalls: float,
    seconds: float,
    in_place: bool = False,
) -> tuple[float, int, int, float, float, float]:
    """One server of ``tree`` (None: this checkout) on a fresh copy of ``pristine``:
    :func:`run_load`'s figures and the event loop's longest stall (ms)."""
    data = work / "data"
    if in_place:
        data = pristine
    else:
        if data.exists():
            shutil.rmtree(data)
        subprocess.run(["cp", "-a", "--reflink=auto", str(pristine), str(data)], check=True)
    for stale in ("server.json", "server.lock"):
        (data / stale).unlink(missing_ok=True)
    lag_file = work / "lag.json"
    env = {"WIKI_MEMORY_VECTORS": "false", "WIKI_MEMORY_LOOP_LAG_FILE": str(lag_file)}
    extra = os.environ.get("PYTHONPATH")
    env["PYTHONPATH"] = str(tree if tree is not None else ROOT) + (f":{extra}" if extra else "")
    srv = ServerProcess(data, env=env).start(timeout=900)
    assert srv.proc is not None
    try:
        mx.settle(srv.proc.pid)
        tag = "cpu-" + uuid.uuid4().hex[:8]
        got = asyncio.run(run_load(srv, qs, tag, captures, recalls, seconds))
    finally:
        srv.stop(timeout=300)
    return (*got, json.loads(lag_file.read_text())["max_lag_ms"])


def uptime() -> str:
    """The load averages (1, 5, 15 minutes), as ``uptime`` prints them."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--against", type=Path, required=True, help="the other tree's root")
    ap.add_argument("--data-dir", type=Path, help="the prepared 20,000-page data directory")
    ap.add_argument("--pages", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--captures", type=float, default=100.0)
    ap.add_argument("--recalls", type=float, default=10.0)
    ap.add_argument("--this-only", action="store_true", help="run this tree alone (no ratio)")
    ap.add_argument(
        "--in-place", action="store_true", help="serve --data-dir itself, not a fresh copy"
    )
    ap.add_argument("--split", action="store_true", help="also captures alone and recalls alone")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="capcpu-") as tmp_s:
        tmp = Path(tmp_s)
        pristine = args.data_dir or tmp / "pristine"
        pristine.mkdir(parents=True, exist_ok=True)
        vocab, titles = build(pristine, args.pages)
        qs = base.queries(vocab, titles, 200)
        os.chdir(tmp)  # neither tree on sys.path through the working directory
        plans = [(args.captures, args.recalls)]
        if args.split:
            plans += [(args.captures, 0.0), (0.0, args.recalls)]
        trees: list[tuple[str, Path | None]] = [("this", None), ("other", args.against)]
        if args.this_only:
            trees = trees[:1]
        print(f"load average at start: {uptime()}")
        per: dict[tuple[str, float, float], list[tuple[float, float]]] = {}
        for r in range(args.rounds):
            order = trees if r % 2 == 0 else trees[::-1]
            for c, rc in plans:
                for name, tree in order:
                    cpu, nc, nr, p95c, p95r, lag = one(
                        tree, pristine, tmp, qs, c, rc, args.seconds, args.in_place
                    )
                    n = nc + nr
                    print(
                        f"round {r} {name:<5} {c:g}+{rc:g}/s: CPU {cpu:6.2f} s, "
                        f"{nc} captures, {nr} recalls, {cpu / max(n, 1) * 1000:6.2f} ms per request, "
                        f"p95 capture {p95c:.1f} ms, recall {p95r:.1f} ms, stall {lag:.0f} ms; "
                        f"load {uptime()}"
                    )
                    per.setdefault((name, c, rc), []).append((cpu, n))
        print(f"load average at end: {uptime()}")
        for c, rc in plans if not args.this_only else []:
            ratios = [
                (a[0] / a[1]) / (b[0] / b[1])
                for a, b in zip(per[("this", c, rc)], per[("other", c, rc)], strict=True)
            ]
            print(
                f"{c:g}+{rc:g}/s: CPU per request this/other, median of {len(ratios)}: "
                f"{statistics.median(ratios):.2f}x ({', '.join(f'{x:.2f}' for x in ratios)})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
