"""LoCoMo in process on a data directory ``bench/locomo.py --data-dir DIR`` built: the
default weights' per-category table (topic items counted and taken out), then each
setting of a grid with leave-one-conversation-out, without a server.

Run: ``python bench/locomo_grid.py DIR [--rebuild] [--grid JSON]``. ``--rebuild``
re-indexes the wiki first (to measure a change to indexing on the same pages); ``--grid``
is ``{"name": {tuning}, ...}`` tried besides the default weights (names of
``recall.weights.TUNABLE``). The anchors are read from the session pages' files
(``locomo.anchor_map``), not over HTTP. Left out: per conversation, the setting best on
the other six (S@5 + T@10), scored on it; the mean over the seven. Topic pages are
scored as ``bench/locomo.py`` scores them (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import locomo as L  # noqa: E402

_SID = re.compile(r'^session_id: *"?([^"\n]+)', re.M)


def maps(
    data_dir: Path, convs: list[L.Conversation]
) -> tuple[dict[str, str], dict[str, tuple[str, int]]]:
    """(anchor → dia_id, session page → (sample_id, session number)) from the files."""
    anchors: dict[str, str] = {}
    pages: dict[str, tuple[str, int]] = {}
    wiki = data_dir / "wiki"
    for conv in convs:
        for p in sorted((wiki / "projects" / conv.sample_id / "sessions").glob("*.md")):
            text = p.read_text(encoding="utf-8")
            m = _SID.search(text)
            if not m:
                continue
            rel = p.relative_to(wiki).as_posix()
            anchors.update(L.anchor_map(text, rel))
            pages[rel] = (conv.sample_id, int(m.group(1).strip().rsplit("-s", 1)[1]))
    return anchors, pages


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data_dir", type=Path)
    ap.add_argument("--data", type=Path, default=L.DEFAULT_DATA)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--grid", type=json.loads, default={})
    args = ap.parse_args(argv)
    os.environ.setdefault("WIKI_MEMORY_TOPIC_PAGES", "true")
    from wiki_memory.config import load_settings
    from wiki_memory.core.memory import Memory

    convs = L.load(args.data, None)
    anchors, pages = maps(args.data_dir, convs)
    mem = Memory(load_settings(args.data_dir, watch=False), owner_user="owner")
    mem.start()
    grid: dict[str, dict[str, float]] = {"default": {}, **args.grid}
    runs: dict[str, L.Hits] = {}
    try:
        if args.rebuild:
            t0 = time.perf_counter()
            n = mem.index.rebuild(args.data_dir / "wiki")
            print(f"rebuilt {n} pages in {time.perf_counter() - t0:.0f} s", flush=True)
        for name, tuning in grid.items():
            runs[name] = L.evaluate(mem, convs, anchors, pages, 4000, tuning)
            (s, t), (so, to) = runs[name].rate(), runs[name].rate(off=True)
            print(f"{name:<14} S@5 {s:.3f} T@10 {t:.3f}; items out {so:.3f} {to:.3f}", flush=True)
    finally:
        mem.stop()
    print("\n".join(L.topic_table(runs["default"])))
    every = set(range(len(convs)))
    for off in (False, True):
        folds = []
        for ci in range(len(convs)):
            best = max(
                grid, key=lambda n: (sum(runs[n].rate(every - {ci}, off=off)), n == "default")
            )
            folds.append((runs[best].rate({ci}, off=off), best))
        s5 = statistics.mean(f[0][0] for f in folds)
        t10 = statistics.mean(f[0][1] for f in folds)
        label = "topic items out" if off else "items counted"
        print(f"left out ({label}): S@5 {s5:.3f} T@10 {t10:.3f}; chosen {[f[1] for f in folds]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
