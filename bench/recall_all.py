"""What ranking every match costs (no 50-item ceiling, so ``total`` and
``omitted`` count every match and a cursor reaches all of them).

A temp data directory gets ``--pages`` generated notes (two sections of random words from a
3,000-word vocabulary); every note also holds the word ``commonword``. Then, in process
(``Memory.recall``, the core every face calls), the median of ``--runs`` calls at
``budget_tokens`` 1000 for a rare two-word query (a few matches) and for ``commonword``
(every note matches). Beside them, the floor: the FTS5 bm25 query alone that fetches every
section matching ``commonword`` (``index.signals.search_sections`` with no limit), the
least any ranking of all matches must do. Prints ms and the ratio to the floor.

Measured on the 2-core shared machine when the ceiling went, 2,000 pages: the common query took
348 ms with every match ranked against 44 ms with the old 50-item ceiling (rare query:
39 ms against 35 ms). Run:

    python bench/recall_all.py [--pages 2000] [--runs 7]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support import make_memory  # noqa: E402

from wiki_memory.index import signals  # noqa: E402
from wiki_memory.recall.filters import Filters  # noqa: E402
from wiki_memory.recall.rank import NO_LIMIT  # noqa: E402
from wiki_memory.recall.terms import analyze  # noqa: E402


def median_ms(fn: object, runs: int) -> float:
    xs = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        xs.append(time.perf_counter() - t0)
    return statistics.median(xs) * 1000


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(3)
    words = [f"w{i}" for i in range(3000)]
    with tempfile.TemporaryDirectory() as tmp:
        m = make_memory(Path(tmp) / "data")
        try:
            notes = m.wiki_dir / "notes"
            notes.mkdir(parents=True)
            for i in range(args.pages):
                a = " ".join(rng.choice(words) for _ in range(60))
                b = " ".join(rng.choice(words) for _ in range(40))
                (notes / f"n{i}.md").write_text(
                    f"---\ntitle: Note {i}\n---\n\n## A\n\ncommonword {a}\n\n## B\n\n{b}\n"
                )
            m.reindex()
            scope = Filters()
            match = analyze("commonword").any_match or ""
            floor = median_ms(
                lambda: signals.search_sections(m.index, match, scope, NO_LIMIT), args.runs
            )
            print(f"{args.pages} pages; median of {args.runs} runs; budget_tokens 1000")
            print(f"{'case':<42} {'matches':>8} {'ms':>8} {'/floor':>8}")
            print(f"{'floor: FTS5 query, every commonword section':<42} {'':>8} {floor:>8.1f}")
            for name, q in (
                ("rare query (w17 w2001)", "w17 w2001"),
                ("every page matches", "commonword"),
            ):
                res = m.recall(q, budget_tokens=1000)
                ms = median_ms(lambda q=q: m.recall(q, budget_tokens=1000), args.runs)
                print(f"{name:<42} {res.total:>8} {ms:>8.1f} {ms / floor:>7.1f}x")
        finally:
            m.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
