"""The ``link`` signal (page level): pages linked to or from the strongest pages (the
wikilink graph) that share the query's words or are named by it. ``why``: ``link``.
Topic pages (``projects/<p>/topics/``) are neither followed nor reached: their links are
compiled from the sessions they link, so they would only echo the text's ranking."""

from __future__ import annotations

from collections.abc import Callable

from wiki_memory.index import signals
from wiki_memory.recall.pool import Pool
from wiki_memory.wiki.topics import is_topic_path

NAME = "link"
WEIGHT = 0.5
"""Its weight in the fusion (docs/ranking.md)."""
LINK_SOURCES = 3
"""How many of the strongest pages have their links followed."""


def collect(pool: Pool, strongest: Callable[[int], list[str]]) -> None:
    """Rank the pages linked with the first :data:`LINK_SOURCES` of ``strongest(n)``
    (the strongest pages so far, best first), in the order found."""
    sources = strongest(LINK_SOURCES)
    # a neighbour joins only when it shares query words (found by the text, all-words
    # or fields lists) or the query names it: links alone bring no unrelated page
    related = {c.path for c in pool.cands.values()} | set(pool.best_field)
    related |= set(pool.page_ranks.get("entity", {}))
    order: list[str] = []
    for src in sources:
        if is_topic_path(src):
            continue  # a topic page's links are compiled from the sessions, not a person's
        for other, _direction in signals.linked_pages(pool.index, src, pool.scope):
            if other not in order and other in related and not is_topic_path(other):
                order.append(other)
    pool.page_ranks[NAME] = {p: i for i, p in enumerate(order)}
