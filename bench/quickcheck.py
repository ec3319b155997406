"""SQLite's quick check of ``index.db``, as the server runs it at every start, measured
on a synthetic wiki of ``--pages`` (default 100,000) note pages (``bench/index.py``'s
pages). Prints the file's size and the check's time (page cache warm, as just after a
stop; a cold cache adds the time to read the file once), beside a floor: reading the
file once with plain reads in 1 MiB blocks. The target: at most 5 s at 100k pages.

    python bench/quickcheck.py [--pages 100000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=100_000)
    ap.add_argument("--keep", type=Path, help="build in (or reuse) this folder")
    a = ap.parse_args()
    root = a.keep or Path(tempfile.mkdtemp(prefix="wm-quickcheck-"))
    wiki, db = root / "wiki", root / "index.db"
    if not db.exists():
        t = time.perf_counter()
        make_wiki(wiki, a.pages)
        ix = Index(db)
        n = ix.rebuild(wiki)
        ix.close()
        print(f"built {n:,} pages in {time.perf_counter() - t:.0f} s")
    size = db.stat().st_size
    floor = min(read_floor(db) for _ in range(3))
    times = []
    for _ in range(3):
        t = time.perf_counter()
        problems = quick_check(db)
        times.append(time.perf_counter() - t)
        assert problems == [], problems
    print("| pages | index.db | read once (floor) | quick check (best / worst of 3) |")
    print("| --- | --- | --- | --- |")
    print(
        f"| {a.pages:,} | {size / 2**20:.0f} MiB | {floor:.2f} s | "
        f"{min(times):.2f} s / {max(times):.2f} s |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
