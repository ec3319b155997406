"""Topic pages, measured: what compiling them costs at a session's end, and what they
add to a reindex.

1. **compile**: for each project of ``--wiki`` (a wiki holding session pages, e.g. the
   data directory ``bench/locomo.py --data-dir DIR`` kept: ``DIR/wiki``), the topic
   compile (``wiki_memory.wiki.topics.compiled_pages``: read the project's pages, find
   the topics, render every page) in ms, with the sessions and topic pages it holds.
2. **reindex**: ``Index.rebuild`` of the two vaults in ../shared/data/vaults copied
   ``--copies`` times (34: 10,098 pages) plus ``--wiki``'s projects, with their topic
   pages and without them, in pages/s (median of ``--rounds`` alternating rebuilds,
   target 1,500 with them) and in CPU ms per page (this process and its parsing
   helpers: what the topic pages add, whatever else loads the machine). Floor: reading
   and hashing every file of the same tree (sha256), in pages/s.

    python bench/topics.py --wiki /tmp/locomo-data/wiki [--copies 34] [--rounds 3]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from wiki_memory.index.store import Index  # noqa: E402

TARGET = 1_500
"""Reindex pages/s the vaults x34 must reach with topic pages on."""
VAULTS = Path(os.environ.get("WIKI_MEMORY_SHARED") or REPO.parent / "shared") / "data" / "vaults"


def compile_projects(wiki: Path, out: Path) -> list[tuple[str, int, int, float]]:
    """Compile every project's topic pages of ``wiki`` into ``out`` (the same relative
    paths); per project: (name, sessions, topic pages, ms)."""
    from wiki_memory.wiki import topics as tp

    rows = []
    for proj in sorted(p for p in (wiki / "projects").iterdir() if p.is_dir()):
        t0 = time.perf_counter()
        sessions, notes = [], []
        for full in sorted(proj.rglob("*.md")):
            rel = full.relative_to(wiki).as_posix()
            if "/topics/" in rel:
                continue
            raw = full.read_bytes()
            s = tp.read_session(rel, raw)
            if s is not None:
                sessions.append(s)
            elif (n := tp.read_note(rel, raw)) is not None:
                notes.append(n)
        pages = tp.compiled_pages(sessions, notes, f"projects/{proj.name}/topics")
        texts = {rel: tp.merge_page(None, head, body) for rel, (head, body) in pages.items()}
        ms = (time.perf_counter() - t0) * 1000
        for rel, data in texts.items():
            dest = out / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data or b"")
        rows.append((proj.name, len(sessions), len(pages), ms))
    return rows


def _cpu() -> float:
    """CPU seconds of this process and its ended children (the rebuild's helpers)."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def rebuild_rate(corpus: Path, db: Path) -> tuple[int, float, float]:
    """One ``Index.rebuild`` of ``corpus`` into a fresh ``db``: (pages, pages per wall
    second, CPU seconds of this process and its helpers)."""
    for old in db.parent.glob(db.name + "*"):
        old.unlink()
    idx = Index(db)
    t0, c0 = time.perf_counter(), _cpu()
    n = idx.rebuild(corpus)
    rate = n / (time.perf_counter() - t0)
    cpu = _cpu() - c0
    idx.close()
    return n, rate, cpu


def floor_rate(corpus: Path) -> float:
    files = sorted(corpus.rglob("*.md"))
    t0 = time.perf_counter()
    for f in files:
        hashlib.sha256(f.read_bytes()).hexdigest()
    return len(files) / (time.perf_counter() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wiki", type=Path, required=True)
    ap.add_argument("--copies", type=int, default=34)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="wm-bench-topics-") as tmp:
        root = Path(tmp)
        corpus = root / "corpus"
        for i in range(args.copies):
            for v in ("obsidian-tasks-docs", "obsidian-tasks-demo"):
                shutil.copytree(VAULTS / v / "vault", corpus / f"copy-{i:02d}" / v)
        src = args.wiki / "projects"
        shutil.copytree(
            src,
            corpus / "projects",
            ignore=lambda d, names: ["topics"] if "topics" in names else [],
        )
        rows = compile_projects(corpus, corpus)
        print(f"{'project':<12} {'sessions':>8} {'topic pages':>11} {'compile ms':>10}")
        for name, s, t, ms in rows:
            print(f"{name:<12} {s:>8} {t:>11} {ms:>10.0f}")
        print(
            f"{'mean':<12} {statistics.mean(r[1] for r in rows):>8.0f} "
            f"{statistics.mean(r[2] for r in rows):>11.0f} "
            f"{statistics.mean(r[3] for r in rows):>10.0f}"
        )
        print()
        off_tree = root / "off"
        shutil.copytree(corpus, off_tree)
        for proj in (off_tree / "projects").iterdir():
            shutil.rmtree(proj / "topics", ignore_errors=True)
        on_runs, off_runs = [], []
        for _ in range(args.rounds):  # alternating, so a load change hits both alike
            on_runs.append(rebuild_rate(corpus, root / "on.db"))
            off_runs.append(rebuild_rate(off_tree, root / "off.db"))
        n_on, n_off = on_runs[0][0], off_runs[0][0]
        on, off = (statistics.median(r[1] for r in rs) for rs in (on_runs, off_runs))
        cpu_on, cpu_off = (statistics.median(r[2] for r in rs) for rs in (on_runs, off_runs))
        fl_on, fl_off = floor_rate(corpus), floor_rate(off_tree)
        print(
            f"{'reindex (median of ' + str(args.rounds) + ')':<26} {'pages':>7} "
            f"{'floor pages/s':>13} {'pages/s':>8} {'ratio':>6} {'target':>7} "
            f"{'CPU ms/page':>11}"
        )
        for label, n, fl, rate, cpu in (
            ("with topic pages", n_on, fl_on, on, cpu_on),
            ("without topic pages", n_off, fl_off, off, cpu_off),
        ):
            print(
                f"{label:<26} {n:>7,} {fl:>13,.0f} {rate:>8,.0f} {fl / rate:>5.1f}x "
                f"{TARGET:>7,} {cpu / n * 1000:>11.3f}"
            )
        extra = n_on - n_off
        if extra:
            print(
                f"CPU ms per topic page (the difference / {extra} pages): "
                f"{(cpu_on - cpu_off) / extra * 1000:.3f}; per other page: "
                f"{cpu_off / n_off * 1000:.3f}"
            )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"(vaults x{args.copies} + {args.wiki}; {os.cpu_count()} CPUs, load {load:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
