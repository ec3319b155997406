"""A team's mixed load on one server: captures and recalls sent open loop at fixed rates
from this process to a real ``wiki-memory serve`` over a generated 20,000-page wiki, then
the rates doubled until a p95 passes 1 s. Prints one table per level and a summary.

The wiki is ``bench/recall.py``'s corpus (same generator, seed and query mix), reindexed
by the CLI before the server starts. The server runs with ``WIKI_MEMORY_LOOP_LAG_FILE``
(``wiki_memory/server/looplag.py``, off by default): it writes its event loop's longest
stall when it stops, so each level runs on a freshly started server over the same data
directory (captures of earlier levels stay in it).

- **Solo floors** first, one request at a time on an idle server: a capture, a recall
  over ``POST /v1/recall`` and a recall over MCP (``memory_recall``, streamable HTTP at
  ``/mcp``, the real ``mcp`` client); p50 / p95 ms each.
- **Open loop**: each kind has its own schedule (request ``i`` at ``start + i / rate``)
  and every request is sent at its time whether or not the earlier ones have answered
  (asyncio, ``httpx.AsyncClient`` for HTTP; recalls alternate between HTTP and MCP, the
  MCP ones over :data:`MCP_SESSIONS` client sessions; captures over ``bench/_rawhttp.py``'s
  keep-alive connections, whose client CPU per request is a small fraction of httpx's). A
  latency is counted from the request's scheduled time, so a client that falls behind
  shows in the figures rather than hiding them; ``send lag`` is how late the client itself
  sent its worst request, ``client`` the cores this process used meanwhile.
  Captures are one observation each (``bench/ingest.py``'s, ~0.6 KB) in
  :data:`SESSIONS` sessions; recalls use ``budget_tokens`` 1000.
- Per level: sent and answered rates per kind, p50 / p95 / p99 ms, errors (non-2xx, MCP
  errors, time-outs), the solo p95 beside and the ratio; the server's resident memory
  (``VmRSS`` sampled each second: the largest) and peak (``VmHWM``); the event loop's
  longest stall (from the server).
- **Durable**: after the last level the server stops and the spool is read: every
  observation a 202 accepted (not a duplicate) must be there, once.

Run:

    python bench/mixed.py [--pages 20000] [--seconds 60] [--captures 200] [--recalls 20]
                          [--levels 6] [--data-dir DIR]

``--seconds`` shortens each level (the machine here is shared), ``--levels`` caps the
doublings, ``--data-dir DIR`` keeps the generated wiki and reuses it next time (its spool
then holds earlier runs' captures too; the check counts this run's only). Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import json
import os
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
print = functools.partial(print, flush=True)  # noqa: A001  (progress shows when piped)
sys.path.insert(0, str(HERE))

import recall as base  # noqa: E402  (bench/recall.py: corpus, queries, pct)
from _rawhttp import RawPool  # noqa: E402
from _server import ServerProcess  # noqa: E402
from recall_stages import build  # noqa: E402

SESSIONS = 40
"""Agent sessions the captures are spread over."""
MCP_SESSIONS = 4
"""MCP client sessions the MCP recalls are spread over."""
SATURATED_MS = 1000.0
"""A level whose p95 of any kind passes this is the saturation point."""
DRAIN_SECONDS = 30.0
"""After the schedule ends, answers are awaited this long; the rest count as time-outs."""
KINDS = ("capture", "recall http", "recall mcp")
HTTP_CONNECTIONS = 64
"""HTTP connections: 48 for captures (:class:`RawPool`) and 16 for recalls (httpx; agents
that capture and agents that recall do not queue behind each other); a request beyond its
kind's share waits, on its clock, for one."""
RECALL_SLOTS = 16
MCP_CONNECTIONS = 8
"""Each MCP session's connections, likewise (all below the server's 128 per address)."""


def observation(tag: str, i: int) -> dict[str, Any]:
    """Capture ``i`` of run ``tag``: ``bench/ingest.py``'s observation."""
    return {
        "harness": "claude-code",
        "event": "PostToolUse",
        "session_id": f"{tag}-s{i % SESSIONS}",
        "cwd": "/home/u/bench",
        "event_id": f"{tag}-{i}",
        "payload": {
            "tool_name": "Bash",
            "tool_use_id": f"t{i}",
            "tool_input": {"command": f"echo {i}"},
            "tool_response": {"stdout": "x" * 400},
        },
    }


@dataclass
class Kind:
    """What one kind of request saw in a level."""

    latencies: list[float] = field(default_factory=list)  # ms, from the scheduled time
    sent: int = 0
    errors: int = 0
    last_done: float = 0.0
    send_lag: float = 0.0  # s, the worst
    why: dict[str, int] = field(default_factory=dict)  # error -> count

    def summary(self, seconds: float) -> dict[str, float]:
        lat = self.latencies or [float("nan")]
        return {
            "sent_per_s": self.sent / seconds,
            "done_per_s": len(self.latencies) / max(self.last_done, seconds),
            "p50": base.pct(lat, 50),
            "p95": base.pct(lat, 95),
            "p99": base.pct(lat, 99),
            "errors": self.errors,
            "send_lag_ms": self.send_lag * 1000,
        }


class Load:
    """One server's clients: HTTP (captures, recalls) and :data:`MCP_SESSIONS` MCP
    sessions; :meth:`open` / :meth:`close` around their use."""

    def __init__(self, srv: ServerProcess, tag: str, queries: list[str]) -> None:
        self.srv = srv
        self.tag = tag
        self.queries = queries
        self.accepted: set[str] = set()
        self._n = itertools.count()
        self._stack: Any = None
        self.http: httpx.AsyncClient | None = None
        self.raw: RawPool | None = None
        self.mcp: list[Any] = []
        self.recall_slots = asyncio.Semaphore(RECALL_SLOTS)
        self.mcp_slots = [asyncio.Semaphore(MCP_CONNECTIONS) for _ in range(MCP_SESSIONS)]

    async def open(self) -> None:
        import contextlib

        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.types import Implementation

        self._stack = contextlib.AsyncExitStack()
        # every request comes from 127.0.0.1: the server keeps at most
        # max_connections_per_address (128) idle ones per address and evicts the oldest,
        # so the pools stay below it. A request over them waits on a semaphore (on its
        # clock), not in httpx's pool, whose assignment of queued requests takes time
        # quadratic in their number and became the bottleneck under overload.
        self.raw = RawPool(self.srv.url, self.srv.headers, HTTP_CONNECTIONS - RECALL_SLOTS)
        self._stack.push_async_callback(self.raw.close)
        limits = httpx.Limits(max_connections=RECALL_SLOTS, max_keepalive_connections=RECALL_SLOTS)
        self.http = await self._stack.enter_async_context(
            httpx.AsyncClient(
                base_url=self.srv.url, headers=self.srv.headers, timeout=60, limits=limits
            )
        )
        for i in range(MCP_SESSIONS):
            lim = httpx2.Limits(max_connections=MCP_CONNECTIONS + 2)  # + its GET stream
            hc = await self._stack.enter_async_context(
                httpx2.AsyncClient(headers=self.srv.headers, timeout=60, limits=lim)
            )
            t = streamable_http_client(self.srv.url + "/mcp", http_client=hc)
            info = Implementation(name=f"bench-mixed-{i}", version="1.0")
            self.mcp.append(await self._stack.enter_async_context(Client(t, client_info=info)))

    async def close(self) -> None:
        """Closes the clients; an MCP session whose transport failed during the load
        (its failed calls are counted as errors already) is noted, not raised."""
        if self._stack is not None:
            try:
                await self._stack.aclose()
            except Exception as e:  # an ExceptionGroup of the MCP transport's tasks
                print(f"  (an MCP client session ended with {type(e).__name__}: {e})")

    async def capture(self) -> bool:
        assert self.raw is not None
        obs = observation(self.tag, next(self._n))
        status, reply = await self.raw.post_json("/v1/observations", obs)
        if status != 202:
            raise RuntimeError(f"HTTP {status} {str(reply)[:80]}")
        if not (isinstance(reply, dict) and reply.get("duplicate")):
            self.accepted.add(obs["event_id"])
        return True

    async def recall_http(self, q: str) -> bool:
        assert self.http is not None
        async with self.recall_slots:
            r = await self.http.post("/v1/recall", json={"query": q, "budget_tokens": 1000})
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code} {r.text[:80]}")
        return True

    async def recall_mcp(self, q: str, i: int) -> bool:
        c = self.mcp[i % len(self.mcp)]
        async with self.mcp_slots[i % len(self.mcp)]:
            res = await c.call_tool("memory_recall", {"query": q, "budget_tokens": 1000})
        return not getattr(res, "is_error", getattr(res, "isError", False))


async def solo(load: Load, n: int) -> dict[str, list[float]]:
    """Each kind ``n`` times, one request at a time: latencies in ms."""
    out: dict[str, list[float]] = {k: [] for k in KINDS}
    for i in range(n):
        q = load.queries[i % len(load.queries)]
        calls: list[tuple[str, Callable[[], Awaitable[bool]]]] = [
            ("capture", load.capture),
            ("recall http", lambda q=q: load.recall_http(q)),  # type: ignore[misc]
            ("recall mcp", lambda q=q, i=i: load.recall_mcp(q, i)),  # type: ignore[misc]
        ]
        for kind, fn in calls:
            t0 = time.perf_counter()
            ok = await fn()
            if not ok:
                raise RuntimeError(f"solo {kind} failed")
            out[kind].append((time.perf_counter() - t0) * 1000)
    return out


async def open_loop(load: Load, captures: float, recalls: float, seconds: float) -> dict[str, Kind]:
    """Captures at ``captures``/s and recalls at ``recalls``/s (every other one over MCP)
    for ``seconds``, each sent at its scheduled time."""
    loop = asyncio.get_running_loop()
    kinds = {k: Kind() for k in KINDS}
    pending: set[asyncio.Task[None]] = set()
    start = loop.time() + 0.2

    async def one(kind: str, due: float, fn: Callable[[], Awaitable[bool]]) -> None:
        k = kinds[kind]
        try:
            ok = await fn()
        except asyncio.CancelledError:  # unanswered DRAIN_SECONDS after the schedule
            k.errors += 1
            raise
        except Exception as e:  # a refused connection, a time-out, an MCP transport error
            ok = False
            why = f"{type(e).__name__}: {e}"[:120]
            k.why[why] = k.why.get(why, 0) + 1
        now = loop.time()
        if ok:
            k.latencies.append((now - due) * 1000)
            k.last_done = max(k.last_done, now - start)
        else:
            k.errors += 1

    async def schedule(
        rate: float, make: Callable[[int], tuple[str, Callable[[], Awaitable[bool]]]]
    ) -> None:
        n = int(rate * seconds)
        for i in range(n):
            due = start + i / rate
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            kind, fn = make(i)
            kinds[kind].sent += 1
            kinds[kind].send_lag = max(kinds[kind].send_lag, loop.time() - due)
            task = asyncio.create_task(one(kind, due, fn))
            pending.add(task)
            task.add_done_callback(pending.discard)

    def capture(i: int) -> tuple[str, Callable[[], Awaitable[bool]]]:
        return "capture", load.capture

    def recall(i: int) -> tuple[str, Callable[[], Awaitable[bool]]]:
        q = load.queries[i % len(load.queries)]
        if i % 2 == 0:
            return "recall http", lambda: load.recall_http(q)
        return "recall mcp", lambda: load.recall_mcp(q, i // 2)

    await asyncio.gather(schedule(captures, capture), schedule(recalls, recall))
    if pending:
        _done, late = await asyncio.wait(set(pending), timeout=DRAIN_SECONDS)
        for t in late:
            t.cancel()
        for t in late:
            try:
                await t
            except asyncio.CancelledError:
                pass
        if late:
            print(f"  ({len(late)} requests unanswered {DRAIN_SECONDS:.0f} s after the schedule)")
    return kinds


class RssSampler:
    """The largest ``VmRSS`` of a process, sampled every second in a thread."""

    def __init__(self, pid: int) -> None:
        import threading

        self.pid = pid
        self.max_rss = 0.0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                self.max_rss = max(self.max_rss, base.rss_mb(self.pid)[0])
            except (OSError, KeyError):
                return

    def __enter__(self) -> RssSampler:
        self.max_rss = base.rss_mb(self.pid)[0]
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()


TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def settle(pid: int, quiet: float = 0.02, spell: float = 2.0, most: float = 120.0) -> None:
    """Wait until ``pid`` used at most ``quiet`` of a core over ``spell`` seconds (its
    start's own work done), at most ``most`` seconds."""
    end = time.monotonic() + most
    while time.monotonic() < end:
        a = cpu_seconds(pid)
        time.sleep(spell)
        if cpu_seconds(pid) - a <= quiet * spell:
            return


def start_server(data: Path, lag_file: Path) -> ServerProcess:
    """A started server over ``data``, once its start's own work (the git status of
    every page, a first pack, the spool's re-index) is done: a level measures the load,
    not the start."""
    env = {"WIKI_MEMORY_LOOP_LAG_FILE": str(lag_file), "WIKI_MEMORY_VECTORS": "false"}
    srv = ServerProcess(data, env=env).start(timeout=900)
    assert srv.proc is not None
    settle(srv.proc.pid)
    return srv


def durable(data: Path, tag: str, accepted: set[str]) -> tuple[int, int, int]:
    """(accepted, found in the spool once, found more than once) for run ``tag``."""
    from wiki_memory.capture.spool import Spool

    spool = Spool(data / "spool")
    try:
        seen: dict[str, int] = {}
        for _info, obs in spool.iter_all():
            eid = obs.event_id or ""
            if eid.startswith(tag + "-"):
                seen[eid] = seen.get(eid, 0) + 1
    finally:
        spool.close()
    once = sum(1 for e in accepted if seen.get(e) == 1)
    twice = sum(1 for e in accepted if seen.get(e, 0) > 1)
    return len(accepted), once, twice


def print_level(
    title: str,
    got: dict[str, Kind],
    seconds: float,
    floors: dict[str, list[float]],
    server: dict[str, float],
) -> dict[str, dict[str, float]]:
    print(title)
    print(
        f"{'kind':<12} {'sent/s':>8} {'done/s':>8} {'p50':>8} {'p95':>8} {'p99':>8} "
        f"{'errors':>6} {'solo p95':>9} {'p95/solo':>9} {'send lag':>9}"
    )
    out: dict[str, dict[str, float]] = {}
    merged = Kind()
    for name in ("recall http", "recall mcp"):
        k = got[name]
        merged.latencies += k.latencies
        merged.sent += k.sent
        merged.errors += k.errors
        merged.last_done = max(merged.last_done, k.last_done)
        merged.send_lag = max(merged.send_lag, k.send_lag)
    rows = [*((k, got[k]) for k in KINDS), ("recall (all)", merged)]
    for name, k in rows:
        s = k.summary(seconds)
        floor = (
            floors["recall http"] + floors["recall mcp"] if name == "recall (all)" else floors[name]
        )
        f95 = base.pct(floor, 95)
        s["solo_p95"] = f95
        out[name] = s
        print(
            f"{name:<12} {s['sent_per_s']:>8.1f} {s['done_per_s']:>8.1f} {s['p50']:>8.1f} "
            f"{s['p95']:>8.1f} {s['p99']:>8.1f} {s['errors']:>6} {f95:>9.1f} "
            f"{s['p95'] / f95:>8.1f}x {s['send_lag_ms']:>8.1f}"
        )
    for name in KINDS:
        for why, count in sorted(got[name].why.items(), key=lambda x: -x[1])[:3]:
            print(f"  {name} error x{count}: {why}")
    print(
        f"server: RSS idle {server['rss_idle']:.0f} MB, largest {server['rss_max']:.0f} MB, "
        f"peak (VmHWM) {server['hwm']:.0f} MB; event loop's longest stall "
        f"{server['max_lag_ms']:.1f} ms (mean wake-up delay {server['mean_lag_ms']:.2f} ms)"
    )
    print(f"client (this process): {server['client']:.2f} cores while it sent and awaited")
    return out


async def level(
    data: Path,
    tmp: Path,
    tag: str,
    qs: list[str],
    n: int,
    captures: float,
    recalls: float,
    seconds: float,
    floors: dict[str, list[float]] | None,
    solo_n: int,
) -> tuple[dict[str, Kind], dict[str, float], set[str], dict[str, list[float]]]:
    lag_file = tmp / f"lag-{n}.json"
    srv = start_server(data, lag_file)
    assert srv.proc is not None
    load = Load(srv, f"{tag}-l{n}", qs)
    try:
        await load.open()
        idle = base.rss_mb(srv.proc.pid)[0]
        if floors is None:
            floors = await solo(load, solo_n)
        with RssSampler(srv.proc.pid) as rss:
            c0, w0 = time.process_time(), time.perf_counter()
            got = await open_loop(load, captures, recalls, seconds)
            client = (time.process_time() - c0) / (time.perf_counter() - w0)
        hwm = base.rss_mb(srv.proc.pid)[1]
    finally:
        try:
            await load.close()
        finally:
            srv.stop(timeout=300)
    lag = json.loads(lag_file.read_text())
    server = {"rss_idle": idle, "rss_max": rss.max_rss, "hwm": hwm, "client": client, **lag}
    return got, server, load.accepted, floors


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pages", type=int, default=20000)
    ap.add_argument("--seconds", type=float, default=60.0, help="each level's length")
    ap.add_argument("--captures", type=float, default=200.0, help="captures/s of the first level")
    ap.add_argument("--recalls", type=float, default=20.0, help="recalls/s of the first level")
    ap.add_argument(
        "--levels", type=int, default=6, help="at most this many levels (doublings + 1)"
    )
    ap.add_argument("--solo", type=int, default=40, help="solo requests of each kind")
    ap.add_argument("--data-dir", type=Path, help="keep the data directory here and reuse it")
    args = ap.parse_args()
    tag = "mixed-" + uuid.uuid4().hex[:8]
    with tempfile.TemporaryDirectory(prefix="mixed-") as tmp_s:
        tmp = Path(tmp_s)
        data = args.data_dir or tmp / "data"
        data.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        vocab, titles = build(data, args.pages)
        print(f"wiki: {args.pages:,} pages ready in {time.perf_counter() - t0:.0f} s")
        qs = base.queries(vocab, titles, 200)
        random.Random(base.SEED).shuffle(qs)
        floors: dict[str, list[float]] | None = None
        accepted: set[str] = set()
        summary = []
        for n in range(args.levels):
            c, r = args.captures * 2**n, args.recalls * 2**n
            got, server, acc, floors = asyncio.run(
                level(data, tmp, tag, qs, n, c, r, args.seconds, floors, args.solo)
            )
            accepted |= acc
            if n == 0:
                print(
                    "solo (one at a time, idle server), ms p50 / p95: "
                    + "; ".join(
                        f"{k} {base.pct(v, 50):.1f} / {base.pct(v, 95):.1f}"
                        for k, v in floors.items()
                    )
                )
            rows = print_level(
                f"\nlevel {n}: {c:g} captures/s + {r:g} recalls/s (half over MCP), {args.seconds:.0f} s, ms",
                got,
                args.seconds,
                floors,
                server,
            )
            worst = max(rows[k]["p95"] for k in KINDS)
            summary.append((c, r, worst, server["max_lag_ms"]))
            if worst > SATURATED_MS:
                break
        print("\nlevels: captures/s + recalls/s -> worst p95 ms, longest stall ms")
        for c, r, worst, lag in summary:
            mark = "  <- saturated (a p95 over 1 s)" if worst > SATURATED_MS else ""
            print(f"  {c:>6g} + {r:>4g} -> {worst:>8.1f}, {lag:>7.1f}{mark}")
        if summary[-1][2] <= SATURATED_MS:
            print(f"  no level passed {SATURATED_MS:.0f} ms within {args.levels} levels")
        total, once, twice = durable(data, tag, accepted)
        print(
            f"\ndurable: {total} observations accepted, {once} in the spool once, {twice} more than once, "
            f"{total - once - twice} missing"
        )
        return 0 if once == total else 1


if __name__ == "__main__":
    raise SystemExit(main())
