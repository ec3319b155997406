"""Ingest benchmark: observations/s through POST /v1/observations and compiled pages/s.

Run: ``python bench/ingest.py [--events 2000] [--sessions 200]``. Starts a real server on
a temp data directory (127.0.0.1, a free port). Every 2xx means the observation was
fsynced. Prints one table; compare rows of the same run (the machine is shared).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx
from _server import ServerProcess
from dulwich.repo import Repo


def post_events(
    srv: ServerProcess, clients: int, total: int, tag: str
) -> tuple[float, list[float]]:
    per = total // clients
    lat: list[float] = []
    lock = threading.Lock()

    def worker(c: int) -> None:
        mine = []
        with httpx.Client(base_url=srv.url, headers=srv.headers, timeout=60) as cl:
            for i in range(per):
                ev = {
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
                t0 = time.perf_counter()
                r = cl.post("/v1/observations", json=ev)
                mine.append(time.perf_counter() - t0)
                assert r.status_code == 202, r.text
        with lock:
            lat.extend(mine)

    threads = [threading.Thread(target=worker, args=(c,)) for c in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return per * clients / (time.perf_counter() - t0), lat


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--sessions", type=int, default=200)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        srv = ServerProcess(Path(tmp) / "data").start()
        try:
            rows = []
            for clients in (1, 8):
                rate, lat = post_events(srv, clients, args.events, f"b{clients}")
                q = statistics.quantiles(lat, n=100)
                rows.append(
                    (
                        f"observations/s, {clients} client(s)",
                        f"{rate:,.0f}",
                        f"p50 {q[49] * 1000:.1f} ms, p95 {q[94] * 1000:.1f} ms",
                    )
                )
            rate = compile_rate(srv, args.sessions)
            rows.append(
                (
                    "session pages compiled+committed/s",
                    f"{rate:,.1f}",
                    f"{args.sessions} sessions, each prompt + SessionEnd",
                )
            )
        finally:
            srv.stop()
    print(f"{'measure':<40} {'value':>10}  notes")
    for name, val, note in rows:
        print(f"{name:<40} {val:>10}  {note}")


if __name__ == "__main__":
    main()
