"""The watcher and the index, measured. Prints one table:

1. **write -> searchable**: 500 single-file edits (a new word written into one of 50 pages,
   as an editor saves: temp file + rename), one at a time; the time from the rename to the
   first ``Index.query`` that returns the page (polled every 2 ms). p50 / p95 / max in ms.
   Runs on a live in-process ``Memory`` with its watcher, the server's own code path.
2. **git checkout of 1,000 files**: a branch that changes 1,000 pages is checked out with
   stock git in the watched wiki; the time until the index equals the files (every path
   and content hash), in seconds. Needs the git binary.
3. **reindex**: ``Index.rebuild`` of the two vaults in ../shared/data/vaults copied side by
   side until there are 10,000+ pages (34 copies, 10,098 pages); pages/s, with the default
   worker processes and with none (``WIKI_MEMORY_REINDEX_WORKERS=1``).

Targets: write -> searchable p95 <= 300 ms; reindex >= 2,000 pages/s.

    python bench/watcher.py [--edits 500] [--copies 34] [--skip-checkout]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from wiki_memory.index.store import Index  # noqa: E402

if TYPE_CHECKING:
    from wiki_memory.core.memory import Memory

# The core is imported where it is used, not here: a rebuild's helper processes start by
# importing this script (multiprocessing's spawn), and the server's core would add about
# 0.5 s of CPU to each that `wiki-memory reindex` (whose module imports little) never pays.

VAULTS = REPO.parent / "shared" / "data" / "vaults"


def start_memory(data: Path, files: dict[str, str]) -> Memory:
    from wiki_memory.config import load_settings
    from wiki_memory.core.memory import Memory
    from wiki_memory.datadir import ensure_layout

    settings = load_settings(data, commit_delay_seconds=0.25, hand_edit_settle_seconds=1.0)
    ensure_layout(settings)
    for rel, text in files.items():
        p = settings.wiki_dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    m = Memory(settings, owner_user="bench")
    m.start()
    return m


def save(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.swp")  # an editor's temp name (ignored)
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def bench_latency(root: Path, edits: int) -> list[float]:
    files = {f"notes/page-{i:02d}.md": f"# Page {i}\n\nfirst text\n" for i in range(50)}
    m = start_memory(root / "lat", files)
    try:
        time.sleep(1.0)
        out: list[float] = []
        for n in range(edits):
            rel = f"notes/page-{n % 50:02d}.md"
            word = f"zqx{n:05d}marker"
            save(m.wiki_dir / rel, f"# Page {n % 50}\n\nedit {n}: {word}\n")
            t0 = time.perf_counter()
            deadline = t0 + 10
            while not m.index.query(word, mode="and", limit=1):
                if time.perf_counter() > deadline:
                    raise RuntimeError(f"edit {n} never became searchable")
                time.sleep(0.002)
            out.append((time.perf_counter() - t0) * 1000)
        return out
    finally:
        m.stop()


def digest_of(wiki: Path) -> dict[str, str]:
    out = {}
    for p in wiki.rglob("*.md"):
        if ".git" not in p.parts:
            out[p.relative_to(wiki).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def bench_checkout(root: Path, n_files: int = 1000) -> float:
    files = {
        f"bulk/{i // 100:02d}/page-{i:04d}.md": f"# Page {i}\n\nfirst {i}\n" for i in range(n_files)
    }
    m = start_memory(root / "co", files)
    w = m.wiki_dir

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=w, check=True, capture_output=True)

    try:
        git("config", "user.email", "bench@x")
        git("config", "user.name", "Bench")
        git("checkout", "-q", "-b", "second")
        for rel in files:
            (w / rel).write_text(files[rel].replace("first", "second"), encoding="utf-8")
        git("commit", "-q", "-am", "second")
        git("checkout", "-q", "main")
        want = digest_of(w)
        deadline = time.monotonic() + 60
        while m.index.paths() != want:  # settled on main first
            if time.monotonic() > deadline:
                raise RuntimeError("did not settle before the checkout")
            time.sleep(0.05)
        time.sleep(2.0)
        t0 = time.perf_counter()
        git("checkout", "-q", "second")
        want = digest_of(w)
        while m.index.paths() != want:
            if time.perf_counter() - t0 > 120:
                raise RuntimeError("the checkout did not settle in 120 s")
            time.sleep(0.01)
        return time.perf_counter() - t0
    finally:
        m.stop()


def bench_reindex(root: Path, copies: int) -> tuple[int, float, float]:
    corpus = root / "corpus"
    for i in range(copies):
        for v in ("obsidian-tasks-docs", "obsidian-tasks-demo"):
            shutil.copytree(VAULTS / v / "vault", corpus / f"copy-{i:02d}" / v)
    rates = []
    n = 0
    for workers in (None, "1"):
        if workers is None:
            os.environ.pop("WIKI_MEMORY_REINDEX_WORKERS", None)
        else:
            os.environ["WIKI_MEMORY_REINDEX_WORKERS"] = workers
        db = root / f"index-{workers or 'default'}.db"
        idx = Index(db)
        t0 = time.perf_counter()
        n = idx.rebuild(corpus)
        rates.append(n / (time.perf_counter() - t0))
        idx.close()
    os.environ.pop("WIKI_MEMORY_REINDEX_WORKERS", None)
    return n, rates[0], rates[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edits", type=int, default=500)
    ap.add_argument("--copies", type=int, default=34)
    ap.add_argument("--skip-checkout", action="store_true")
    args = ap.parse_args()
    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="wm-bench-watcher-") as tmp:
        root = Path(tmp)
        lat = bench_latency(root, args.edits)
        q = statistics.quantiles(lat, n=100)
        p50, p95 = statistics.median(lat), q[94]
        rows.append(
            (
                f"write -> searchable, {len(lat)} edits",
                f"p50 {p50:.0f} ms, p95 {p95:.0f} ms, max {max(lat):.0f} ms",
                "PASS" if p95 <= 300 else "MISS (target p95 <= 300 ms)",
            )
        )
        if not args.skip_checkout and shutil.which("git"):
            settle = bench_checkout(root)
            rows.append(("git checkout of 1,000 files, settled", f"{settle:.2f} s", "consistent"))
        n, rate, serial = bench_reindex(root, args.copies)
        rows.append(
            (
                f"reindex {n:,} pages (vaults x{args.copies})",
                f"{rate:,.0f} pages/s ({serial:,.0f} pages/s in one process)",
                "PASS" if rate >= 2000 else "MISS (target >= 2,000 pages/s)",
            )
        )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    w1 = max(len(r[0]) for r in rows)
    w2 = max(len(r[1]) for r in rows)
    print(f"{'measure':<{w1}}  {'result':<{w2}}  target")
    print(f"{'-' * w1}  {'-' * w2}  ------")
    for a, b, c in rows:
        print(f"{a:<{w1}}  {b:<{w2}}  {c}")
    print(f"({os.cpu_count()} CPUs, load average {load:.1f} at the end)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
