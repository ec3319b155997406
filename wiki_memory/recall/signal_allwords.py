"""The ``all-words`` signal (section level): sections matching every query word (AND),
by weighted bm25 over all columns (title 10, aliases 8, tags 4, heading 3, body 1).
``why``: ``all-words``."""

from __future__ import annotations

from wiki_memory.index import signals
from wiki_memory.recall.candidate import Cand
from wiki_memory.recall.pool import Pool

NAME = "all-words"
WEIGHT = 2.0
"""Its weight in the fusion (docs/ranking.md)."""


def collect(pool: Pool, limit: int) -> None:
    """Rank the first ``limit`` sections holding every word of the query (none when the
    query has no AND expression)."""
    if not pool.q.all_match:
        return
    hits = signals.search_sections(
        pool.index, pool.q.all_match, pool.scope, limit, weights=pool.cols, plain=pool.plain
    )
    pool.section_list(NAME, hits)


def why(pool: Pool, c: Cand) -> list[str]:
    """``all-words`` when the candidate is in its list."""
    return [NAME] if NAME in c.signals else []
