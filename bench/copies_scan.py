"""What finding conflict copies adds to each recall (docs/git.md, "Conflict copies").

Every recall reads the supersession chains of the index (``wiki_memory.index.supersede.
chains``), which now also finds the conflict copies, by name, from the primary key's
index. This builds an index of N synthetic pages (sessions and notes, a few superseded,
a few copies), then times, over R rounds each:

- the floor: the supersession scan the chains did before copies existed (every row's
  frontmatter searched for ``supersede``);
- the copies part alone (``supersede._copies``);
- the whole ``chains()`` call.

    python bench/copies_scan.py [--pages 20000] [--rounds 30]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from wiki_memory.index import supersede
from wiki_memory.index.store import Index


def build(root: Path, n: int) -> Index:
    wiki = root / "wiki"
    for i in range(n):
        folder = wiki / "projects" / f"p{i % 20}" / ("sessions" if i % 3 else "notes")
        folder.mkdir(parents=True, exist_ok=True)
        meta = f"---\nid: n{i}\ntitle: Page {i}\ntags: [a, b]\nupdated: 2026-01-01T00:00:00Z\n"
        if i % 500 == 1:
            meta += f"state: superseded\nsuperseded_by: Page {i + 1}\n"
        (folder / f"page-{i}.md").write_text(meta + f"---\n# Page {i}\n\nbody {i} words\n")
        if i % 1000 == 2:
            (folder / f"page-{i}.sync-conflict-20260102-030405-ABCDEF1.md").write_text(
                meta + f"---\n# Page {i}\n\nother body {i}\n"
            )
    idx = Index(root / "index.db")
    idx.rebuild(wiki)
    return idx


def timed(fn, rounds: int) -> float:
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=30)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        idx = build(Path(tmp), a.pages)
        conn = idx._conn()
        floor = timed(lambda: list(conn.execute(supersede._ROWS)), a.rounds)
        part = timed(lambda: supersede._copies(conn, None, supersede.Chains()), a.rounds)
        whole = timed(lambda: supersede.chains(conn), a.rounds)
        found = len(supersede.chains(conn).copies)
        idx.close()
    print(f"{a.pages} pages, {found} conflict copies found, median of {a.rounds} rounds")
    print(f"{'what':<44}{'ms':>8}{'x floor':>9}")
    print(f"{'floor: the supersession scan alone':<44}{floor:>8.2f}{1:>9.2f}")
    print(f"{'conflict copies (supersede._copies)':<44}{part:>8.2f}{part / floor:>9.2f}")
    print(f"{'chains(), both':<44}{whole:>8.2f}{whole / floor:>9.2f}")


if __name__ == "__main__":
    main()
