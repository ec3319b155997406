"""Ingest benchmark: the product's observations/s beside the stack's floor, same client,
same run; and compiled pages/s.

    python bench/ingest.py [--events 4000] [--list-events 20000] [--clients 8]
                           [--rounds 3] [--sessions 200] [--profile FILE]

Three servers take the same events from the same client (``--clients`` threads, one
``httpx.Client`` each, keep-alive), in interleaved rounds:

- **product**: ``wiki-memory serve`` on a temporary data directory (127.0.0.1, a free
  port); every 2xx means the observation was fsynced (invariant 3);
- **floor, fsync per request**: ``bench/_floor.py``, a minimal Starlette endpoint that
  parses the JSON and fsyncs one append per request;
- **floor, grouped fsyncs**: the same endpoint with fsyncs shared across concurrent
  requests as the product's spool shares them.

Two workloads: one observation per request, and lists of 50 per request. Each row is
the median of ``--rounds`` rounds; the ratio columns are the product's rate over each
floor's. ``server CPU µs/obs`` is the product process's user+system CPU time
(``/proc/<pid>/stat``) over the observations of the row; ``sanitizer µs/obs`` is the
redaction the request path runs on one bench observation (its payload and its string
fields, as ``wiki_memory/core/capture.py`` calls it), in CPU time of this process, and
its share is of the server's CPU per observation.

``--profile FILE``: also samples the product server with ``py-spy`` (when installed; a
developer tool, not a dependency) during one extra single-observation run and writes the
collapsed stacks to FILE, then prints the share of samples per part of the request path.
``--sessions 0`` skips the compile row. Prints tables; compare rows of one run (the
machine is shared). Not a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from _server import ServerProcess, free_port
from dulwich.repo import Repo

HERE = Path(__file__).resolve().parent
LIST_SIZE = 50


def event(tag: str, c: int, i: int) -> dict[str, Any]:
    """One bench observation (a PostToolUse of a shell command, ~0.6 KB of JSON)."""
    return {
        "harness": "claude-code",
        "event": "PostToolUse",
        "session_id": f"{tag}-{c}",
        "cwd": "/home/u/bench",
        "event_id": f"{tag}-{c}-{i}",
        "payload": {
            "tool_name": "Bash",
            "tool_use_id": f"t{i}",
            "tool_input": {"command": f"echo {i}"},
            "tool_response": {"stdout": "x" * 400},
        },
    }


def post_events(
    url: str, headers: dict[str, str], clients: int, total: int, tag: str, batch: int = 1
) -> tuple[float, list[float]]:
    """Send ``total`` observations from ``clients`` threads, ``batch`` per request (1: a
    bare object). Returns (observations/s, per-request latencies in s)."""
    per = total // clients // batch
    lat: list[float] = []
    lock = threading.Lock()
    failures: list[str] = []

    def worker(c: int) -> None:
        mine = []
        with httpx.Client(base_url=url, headers=headers, timeout=120) as cl:
            for r_ in range(per):
                if batch == 1:
                    body: Any = event(tag, c, r_)
                else:
                    body = [event(tag, c, r_ * batch + j) for j in range(batch)]
                t0 = time.perf_counter()
                r = cl.post("/v1/observations", json=body)
                mine.append(time.perf_counter() - t0)
                if r.status_code != 202:
                    failures.append(r.text)
                    return
        with lock:
            lat.extend(mine)

    threads = [threading.Thread(target=worker, args=(c,)) for c in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    if failures:
        raise SystemExit(f"a request failed: {failures[0][:300]}")
    return per * clients * batch / elapsed, lat


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of process ``pid`` and its threads (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


class Floor:
    """``bench/_floor.py`` as a subprocess on a free port."""

    def __init__(self, tmp: Path, mode: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.file = tmp / f"floor-{mode}.jsonl"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(HERE / "_floor.py"),
                "--port",
                str(self.port),
                "--file",
                str(self.file),
                "--mode",
                mode,
            ]
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/v1/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise SystemExit("the floor server did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def sanitizer_us(n: int = 2000) -> float:
    """CPU µs of redaction per bench observation, as the capture path runs it
    (``wiki_memory/core/capture.py``): the look for a private tag in the request body
    (``may_hold_private``; a bench body holds none, so ``strip_private_obj`` is skipped
    as capture skips it), then one ``redact_obj`` over the payload and the string
    fields. CPU time, so that a busy machine does not inflate it beside the server's
    CPU time."""
    import json

    from wiki_memory.capture.private import may_hold_private, strip_private, strip_private_obj
    from wiki_memory.capture.sanitize import redact_obj

    evs = [event("s", 0, i) for i in range(n)]
    raws = [json.dumps(ev).encode() for ev in evs]
    fields = ("harness", "event", "cwd", "session_id", "event_id")
    t0 = time.process_time()
    for ev, raw in zip(evs, raws, strict=True):
        payload, values = ev["payload"], [ev[k] for k in fields]
        if may_hold_private(raw):
            payload = strip_private_obj(payload)[0]
            values = [strip_private(v) for v in values]
        redact_obj([payload, values])
    return (time.process_time() - t0) / n * 1e6


def compile_rate(srv: ServerProcess, sessions: int) -> float:
    wiki = srv.data_dir / "wiki"
    before = sum(1 for _ in Repo(str(wiki)).get_walker())
    t0 = time.perf_counter()
    with httpx.Client(base_url=srv.url, headers=srv.headers, timeout=60) as cl:
        for s in range(sessions):
            for ev in (
                {"event": "UserPromptSubmit", "payload": {"prompt": f"task number {s}"}},
                {"event": "SessionEnd", "payload": {"reason": "other"}},
            ):
                r = cl.post(
                    "/v1/observations",
                    json={
                        "harness": "codex",
                        "session_id": f"c{s}",
                        "cwd": "/home/u/compile",
                        **ev,
                    },
                )
                assert r.status_code == 202
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        pages = list((wiki / "projects" / "compile" / "sessions").glob("*.md"))
        repo = Repo(str(wiki))
        head = repo[repo.head()]
        tree = {e.path for e in repo.object_store.iter_tree_contents(head.tree)}
        committed = sum(1 for p in tree if p.startswith(b"projects/compile/sessions/"))
        if len(pages) >= sessions and committed >= sessions:
            break
        time.sleep(0.05)
    elapsed = time.perf_counter() - t0
    commits = sum(1 for _ in Repo(str(wiki)).get_walker()) - before
    print(f"  ({sessions} pages in {commits} commits)")
    return sessions / elapsed


#: parts of the request path: a sample counts for the part of its innermost frame that
#: matches one (in this order within a frame)
PARTS: list[tuple[str, Callable[[str], bool]]] = [
    ("fsync (spool)", lambda f: f.startswith("_sync ") or "fsync" in f),
    ("sanitizer", lambda f: "capture/sanitize.py" in f or "capture/private.py" in f),
    ("index: spool rows (SQLite)", lambda f: "index/" in f and "spool" in f),
    ("spool append (JSON, write)", lambda f: "capture/spool.py" in f),
    ("capture: parse, project, gate", lambda f: "capture/" in f or "core/capture.py" in f),
    ("access log", lambda f: "logging/" in f or "audit.py" in f),
    ("auth, host check", lambda f: "auth.py" in f or "hosts.py" in f),
    ("our middleware (own lines)", lambda f: "server/app.py" in f),
    ("JSON (request, reply)", lambda f: "json/" in f or "orjson" in f),
    ("HTTP parsing (h11/httptools)", lambda f: "h11" in f or "httptools" in f),
    ("starlette, anyio, threads", lambda f: "starlette/" in f or "anyio/" in f),
    ("asyncio / uvloop", lambda f: "asyncio/" in f or "uvloop" in f or "selectors" in f),
    ("uvicorn", lambda f: "uvicorn/" in f),
]


def profile_shares(raw: Path) -> list[tuple[str, float]]:
    """Shares of py-spy samples (collapsed stacks, ``--format raw``) per part of
    :data:`PARTS`; idle threads (waiting on a lock, a queue or the selector with nothing
    to do) are left out of the total."""
    counts: dict[str, int] = {}
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        leaf = frames[-1]
        if any(w in leaf for w in ("wait (threading.py", "_worker (concurrent", "select (")):
            if "fsync" not in stack:
                continue
        total += int(n)
        part = next((name for f in reversed(frames) for name, match in PARTS if match(f)), "other")
        counts[part] = counts.get(part, 0) + int(n)
    return sorted(((k, v / max(1, total)) for k, v in counts.items()), key=lambda kv: -kv[1])


def run_profile(srv: ServerProcess, clients: int, events: int, out: Path) -> None:
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        print("(py-spy is not installed: no profile)")
        return
    prof = subprocess.Popen(
        [spy, "record", "--pid", str(srv.proc.pid), "--format", "raw", "--output", str(out)]
        + ["--rate", "250", "--nonblocking", "--gil"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)
    post_events(srv.url, srv.headers, clients, events, f"prof{time.time_ns()}")
    prof.send_signal(2)
    prof.wait(60)
    print(
        "\nwhere the product server's Python time goes (samples of the thread holding the "
        f"GIL), 1 observation per request ({out}):"
    )
    for name, share in profile_shares(out):
        print(f"  {name:<32} {share * 100:5.1f} %")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=4000, help="single observations per round")
    ap.add_argument("--list-events", type=int, default=20000, help="observations in lists")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--profile", type=Path, default=None)
    args = ap.parse_args()
    us_sanitize = sanitizer_us()
    with tempfile.TemporaryDirectory() as tmp_:
        tmp = Path(tmp_)
        srv = ServerProcess(tmp / "data").start()
        floors = {m: Floor(tmp, m) for m in ("per-request", "grouped")}
        rates: dict[tuple[str, str], list[float]] = {}
        lats: dict[str, list[float]] = {}
        cpu: dict[tuple[str, str], list[tuple[float, float]]] = {}
        servers = {"product": (srv.url, srv.headers, srv.proc.pid)} | {
            name: (f.url, {}, f.proc.pid) for name, f in floors.items()
        }
        try:
            # warm each server up (imports, first session files, first index writes)
            for url, headers, _ in servers.values():
                post_events(url, headers, args.clients, 400, "warm")
            for rnd in range(args.rounds):
                for work, total, batch in (
                    ("single", args.events, 1),
                    ("list", args.list_events, LIST_SIZE),
                ):
                    for name, (url, headers, pid) in servers.items():
                        u0, s0 = cpu_seconds(pid)
                        r, lat = post_events(
                            url, headers, args.clients, total, f"{work}{rnd}", batch
                        )
                        u1, s1 = cpu_seconds(pid)
                        rates.setdefault((work, name), []).append(r)
                        cpu.setdefault((work, name), []).append(
                            ((u1 - u0) / total * 1e6, (s1 - s0) / total * 1e6)
                        )
                        if name == "product":
                            lats.setdefault(work, []).extend(lat)
            if args.profile is not None:
                run_profile(srv, args.clients, args.events, args.profile)
            compiled = compile_rate(srv, args.sessions) if args.sessions else None
        finally:
            for f in floors.values():
                f.stop()
            srv.stop()

    def med(work: str, name: str) -> float:
        return statistics.median(rates[(work, name)])

    def cpu_of(work: str, name: str) -> tuple[float, float]:
        rows = cpu[(work, name)]
        return statistics.median(u for u, _ in rows), statistics.median(s for _, s in rows)

    print(
        f"\nobservations/s, {args.clients} clients, median of {args.rounds} rounds "
        "(each 2xx fsynced)"
    )
    head = (
        f"{'workload':<26} {'product':>9} {'floor/req':>10} {'ratio':>6} "
        f"{'floor grp':>10} {'ratio':>6}  product latency"
    )
    print(head)
    print("-" * len(head))
    works = (("single", "1 observation/request"), ("list", f"lists of {LIST_SIZE}"))
    for work, label in works:
        p, fr, fg = med(work, "product"), med(work, "per-request"), med(work, "grouped")
        q = statistics.quantiles(lats[work], n=100)
        print(
            f"{label:<26} {p:>9,.0f} {fr:>10,.0f} {p / fr:>6.2f} {fg:>10,.0f} {p / fg:>6.2f}  "
            f"p50 {q[49] * 1000:.1f} ms, p95 {q[94] * 1000:.1f} ms"
        )
    print("\nrounds:", {f"{w} {n}": [f"{r:,.0f}" for r in v] for (w, n), v in rates.items()})
    print("\nserver CPU per observation, µs (user + system)")
    print(f"{'workload':<26} {'product':>15} {'floor/req':>15} {'floor grp':>15}")
    for work, label in works:
        cells = []
        for name in ("product", "per-request", "grouped"):
            u, s_ = cpu_of(work, name)
            cells.append(f"{u:,.0f} + {s_:,.0f}")
        print(f"{label:<26} {cells[0]:>15} {cells[1]:>15} {cells[2]:>15}")
    single = sum(cpu_of("single", "product"))
    listed = sum(cpu_of("list", "product"))
    print(
        f"\nsanitizer per observation: {us_sanitize:.0f} µs "
        f"({us_sanitize / single * 100:.1f} % of the server's CPU per single observation, "
        f"{us_sanitize / listed * 100:.1f} % in lists)"
    )
    if compiled is not None:
        print(f"session pages compiled+committed/s: {compiled:,.1f} ({args.sessions} sessions)")


if __name__ == "__main__":
    main()
