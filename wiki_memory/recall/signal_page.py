"""The ``page`` signal (page level): pages whose best sections match best (the sum of
their top section scores, each weighted :data:`PAGE_RATIO` of the one before).
``why``: ``page``."""

from __future__ import annotations

from collections import defaultdict

from wiki_memory.recall.candidate import decayed
from wiki_memory.recall.pool import Pool

NAME = "page"
WEIGHT = 3.0
"""Its weight in the fusion (docs/ranking.md)."""
PAGE_DEPTH = 6
"""The ``page`` signal of a page sums its best this many section scores, ..."""
PAGE_RATIO = 0.7
"""... each weighted this much of the one before (best + 0.7 second + 0.49 third ...):
nearer a whole-page score than best + ½ second + ¼ third (docs/ranking.md)."""


def collect(pool: Pool, depth: int, ratio: float) -> None:
    """Rank the pages of the candidates by their sections' own text bm25 (``text``),
    summed over the best ``depth``, each ``ratio`` of the one before."""
    per: dict[str, list[float]] = defaultdict(list)
    for c in pool.cands.values():
        if c.raw > 0:
            per[c.path].append(c.raw)
    score = {p: decayed(v, depth, ratio) for p, v in per.items()}
    order = sorted(score, key=lambda p: (-score[p], p))
    pool.page_ranks[NAME] = {p: i for i, p in enumerate(order)}
