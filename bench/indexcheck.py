"""The server's whole start-up check of ``index.db``, measured on a synthetic wiki of
``--pages`` (default 100,000) note pages (``bench/index.py``'s pages). The check is what
:func:`wiki_memory.core.indexcheck.prepare_index` runs before the server answers on an
index that needs no rebuild: SQLite's quick check of the file, opening it (schema and
settings), the page count, then each file's size and mtime against the index (a walk of
the wiki, on a thread beside the quick check: what changed while no server ran). Timed three times each, page cache warm (as
just after a stop), with nothing changed and with ``--edits`` (default 100) pages edited
while stopped (the catch-up re-indexes them). Printed beside two floors: reading the
index file once in 1 MiB blocks, and ``os.walk`` + ``lstat`` of the wiki (what any stamp
check must do). The target: the check itself at most 5 s at 100k pages.

    python bench/indexcheck.py [--pages 100000] [--edits 100] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from index import make_wiki  # noqa: E402

from wiki_memory.index.db import quick_check  # noqa: E402
from wiki_memory.index.store import Index  # noqa: E402


def read_floor(path: Path) -> float:
    t = time.perf_counter()
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass
    return time.perf_counter() - t


def walk_floor(wiki: Path) -> float:
    t = time.perf_counter()
    for root, dirs, files in os.walk(wiki):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for f in files:
            os.lstat(os.path.join(root, f))
    return time.perf_counter() - t


cpu: list[float] = []
"""CPU seconds of each quick check (load-independent, unlike the wall times)."""


def start_check(db: Path, wiki: Path) -> tuple[float, float, float, float, int]:
    """One start-up check as ``prepare_index`` runs it: the walk of the files' stamps on a
    thread beside the quick check, then opening the index and its page count, then the
    catch-up (compare, re-index what differs). Returns ``(quick check s, walk s,
    open + count + catch-up s, total s, pages changed)``."""
    walked: list[Any] = []
    took: list[float] = []
    ix = Index(db)

    def walk() -> None:
        t = time.perf_counter()
        walked.append(ix.stamps(wiki))
        took.append(time.perf_counter() - t)

    t0 = time.perf_counter()
    c0 = time.thread_time()
    walker = threading.Thread(target=walk)
    walker.start()
    assert quick_check(db) == []
    t1 = time.perf_counter()
    cpu.append(time.thread_time() - c0)  # SQLite runs on this thread: its CPU seconds
    walker.join()
    t2 = time.perf_counter()
    assert not ix.needs_rebuild and ix.count_pages() > 0
    changed = ix.catch_up(wiki, walked[0])
    t3 = time.perf_counter()
    ix.close()
    return t1 - t0, took[0], t3 - t2, t3 - t0, changed


def edit(wiki: Path, n: int, round_no: int) -> None:
    for i in range(n):
        p = wiki / f"projects/p{i % 4}/notes/n{i}.md"
        with open(p, "a", encoding="utf-8") as f:
            f.write(f"\nedited offline, round {round_no}\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=100_000)
    ap.add_argument("--edits", type=int, default=100)
    ap.add_argument("--keep", type=Path, help="build in (or reuse) this folder")
    a = ap.parse_args()
    root = a.keep or Path(tempfile.mkdtemp(prefix="wm-indexcheck-"))
    wiki, db = root / "wiki", root / "index.db"
    if not db.exists():
        t = time.perf_counter()
        make_wiki(wiki, a.pages)
        ix = Index(db)
        n = ix.rebuild(wiki)
        ix.close()
        print(f"built {n:,} pages in {time.perf_counter() - t:.0f} s", flush=True)
    start_check(db, wiki)  # warms the page cache and catches up anything left over
    size = db.stat().st_size
    floor_read = min(read_floor(db) for _ in range(3))
    floor_walk = min(walk_floor(wiki) for _ in range(3))
    cpu.clear()
    rows: list[tuple[str, list[tuple[float, float, float, float, int]]]] = []
    rows.append(("nothing changed", [start_check(db, wiki) for _ in range(3)]))
    runs = []
    for k in range(3):
        edit(wiki, a.edits, k)
        runs.append(start_check(db, wiki))
    rows.append((f"{a.edits} pages edited while stopped", runs))
    print(f"index.db {size / 2**20:.0f} MiB; floors: read the file once {floor_read:.2f} s, ")
    print(f"walk + lstat the wiki {floor_walk:.2f} s (sum {floor_read + floor_walk:.2f} s)")
    print()
    print(
        "| pages | case | quick check | stamps walk (beside it) | count + catch-up | "
        "whole check (best / worst of 3) | floor | × floor | pages re-indexed |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    floor = floor_read + floor_walk
    for case, rs in rows:
        best = min(rs, key=lambda r: r[3])
        worst = max(r[3] for r in rs)
        print(
            f"| {a.pages:,} | {case} | {best[0]:.2f} s | {best[1]:.2f} s | {best[2]:.2f} s | "
            f"{best[3]:.2f} s / {worst:.2f} s | {floor:.2f} s | {best[3] / floor:.1f}x | "
            f"{best[4]} |"
        )
    print()
    print(f"quick check CPU time: {min(cpu):.2f} s best, {max(cpu):.2f} s worst of {len(cpu)}")
    print(f"load average: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
