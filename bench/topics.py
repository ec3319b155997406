"""Topic pages, measured: what compiling them costs at a session's end, and what they
add to a reindex.

1. **compile**: for each project of ``--wiki`` (a wiki holding session pages, e.g. the
   data directory ``bench/locomo.py --data-dir DIR`` kept: ``DIR/wiki``), the topic
   compile (``wiki_memory.wiki.topics.compiled_pages``: read the project's pages, find
   the topics, render every page) in ms, with the sessions and topic pages it holds.
2. **reindex**: ``Index.rebuild`` of the two vaults in ../shared/data/vaults copied
   ``--copies`` times (34: 10,098 pages) plus ``--wiki``'s projects, with their topic
   pages and without them, in pages/s. Floor: reading and hashing every file of the
   same tree (sha256), in pages/s.

    python bench/topics.py --wiki /tmp/locomo-data/wiki [--copies 34]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from wiki_memory.index.store import Index  # noqa: E402

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


def rebuild_rate(corpus: Path, db: Path) -> tuple[int, float]:
    idx = Index(db)
    t0 = time.perf_counter()
    n = idx.rebuild(corpus)
    rate = n / (time.perf_counter() - t0)
    idx.close()
    return n, rate


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
        n_on, on = rebuild_rate(corpus, root / "on.db")
        fl_on = floor_rate(corpus)
        for proj in (corpus / "projects").iterdir():
            shutil.rmtree(proj / "topics", ignore_errors=True)
        n_off, off = rebuild_rate(corpus, root / "off.db")
        fl_off = floor_rate(corpus)
        print(f"{'reindex':<26} {'pages':>7} {'floor pages/s':>13} {'pages/s':>8} {'ratio':>6}")
        for label, n, fl, rate in (
            ("with topic pages", n_on, fl_on, on),
            ("without topic pages", n_off, fl_off, off),
        ):
            print(f"{label:<26} {n:>7,} {fl:>13,.0f} {rate:>8,.0f} {fl / rate:>5.1f}x")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"(vaults x{args.copies} + {args.wiki}; {os.cpu_count()} CPUs, load {load:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
