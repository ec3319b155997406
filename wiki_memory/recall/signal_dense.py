"""The ``dense`` signal (section level, with the ``vectors`` extra and setting): the
sections of the strongest pages whose dense vector is nearest the query's, and of any
page a near paraphrase (cosine ≥ :data:`DENSE_ALONE`) with no shared word
(:mod:`wiki_memory.index.vectors`). ``why``: ``dense``."""

from __future__ import annotations

from collections.abc import Callable

from wiki_memory.index import nearest
from wiki_memory.recall.pool import Pool

NAME = "dense"
WEIGHT = 0.1
"""Its weight in the fusion (docs/ranking.md)."""
DENSE_LIMIT = 30
"""Sections in the ``dense`` list (whatever the limit: a dense neighbour is no match of
the query's words, so asking for every match does not ask for every neighbour)."""
DENSE_PAGES = 10
"""The ``dense`` list ranks the sections of this many of the strongest pages ..."""
DENSE_MIN = 0.0
"""... those at least this similar (cosine) to the query ..."""
DENSE_ALONE = 0.4
"""... and, from every page, sections at least this similar (a paraphrase that shares
no word with its section has no strong page to come from; above 1: none)."""


def collect(pool: Pool, strongest: Callable[[int], list[str]]) -> None:
    """Rank the sections of the first :data:`DENSE_PAGES` of ``strongest(n)`` by the
    similarity of their vectors with the query's, then sections of any page at least
    :data:`DENSE_ALONE` similar. Nothing when the index has no vectors for the query."""
    pages = strongest(DENSE_PAGES)
    scored = pool.index.dense(pool.q.text)
    if scored is None:
        return
    found = nearest.dense_sections(
        pool.index, scored, pool.scope, DENSE_LIMIT, DENSE_MIN, paths=pages
    )
    if DENSE_ALONE <= 1:
        seen = {(h.path, h.anchor) for h in found}
        alone = nearest.dense_sections(pool.index, scored, pool.scope, DENSE_LIMIT, DENSE_ALONE)
        found += [h for h in alone if (h.path, h.anchor) not in seen]
    pool.section_list(NAME, found)
