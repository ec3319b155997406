"""The ``fields`` signal (page level): weighted bm25 over all columns, title and aliases
above tags above body; each page ranks by its best section. ``why``: ``title``,
``alias``, ``tags`` for the fields the query's words are in (when the page ranks within
``WHY_TOP`` there)."""

from __future__ import annotations

from wiki_memory.index.signals import Hit
from wiki_memory.recall.pool import Pool
from wiki_memory.recall.terms import words

NAME = "fields"
WEIGHT = 1.0
"""Its weight in the fusion (docs/ranking.md)."""


def collect(pool: Pool, hits: list[Hit]) -> None:
    """Rank the pages of ``hits`` (the fields list of
    :func:`wiki_memory.index.signals.search_sections_both`) by their best hit."""
    best_field = pool.best_field
    for h in hits:
        best_field.setdefault(h.path, h)
    pool.page_ranks[NAME] = {p: i for i, p in enumerate(best_field)}


def matches(pool: Pool, path: str) -> list[str]:
    """Which of ``title``, ``alias``, ``tags`` of page ``path`` hold a query word."""
    row = pool.rows.get(path)
    if row is None:
        return []
    qt = pool.q.content_tokens
    out = []
    if qt & set(words(row["title"])):
        out.append("title")
    if any(qt & set(words(a)) for a in row["aliases"]):
        out.append("alias")
    if any(qt & set(words(t)) for t in row["tags"]):
        out.append("tags")
    return out
