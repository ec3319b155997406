"""The ``entity`` signal (page level): a page title, alias or file name found whole in
the query (across scripts and diacritics, through the index's folding). Longer names
rank first. ``why``: ``entity`` and how it was named (``title`` or ``alias``)."""

from __future__ import annotations

from wiki_memory.index import signals
from wiki_memory.recall.pool import Pool
from wiki_memory.recall.terms import words

NAME = "entity"
WEIGHT = 1.0
"""Its weight in the fusion (docs/ranking.md)."""
FIELD_PAGES = 20
"""The best ``fields`` pages whose titles and aliases are compared after folding."""


def collect(pool: Pool) -> None:
    """Pages named in the query: exact names (title, alias, file name) through the
    ``names`` table, and titles/aliases of the best ``fields`` pages compared after
    folding (``lodz`` finds ``Łódź``)."""
    field_pages = list(pool.best_field)[:FIELD_PAGES]
    found: dict[str, tuple[int, str]] = {}
    for key, path, source in signals.pages_named(pool.index, pool.q.name_keys(), pool.scope):
        n = len(words(key))
        how = "alias" if source == "alias" else "title"
        if n and (path not in found or n > found[path][0]):
            found[path] = (n, how)
    pool.rows.update(signals.page_rows(pool.index, [*field_pages, *found]))
    for path in field_pages:
        row = pool.rows.get(path)
        if row is None:
            continue
        for name, how in [(row["title"], "title")] + [(a, "alias") for a in row["aliases"]]:
            if name and pool.q.contains(name):
                n = len(words(name))
                if path not in found or n > found[path][0]:
                    found[path] = (n, how)
    order = sorted(found, key=lambda p: (-found[p][0], p))
    pool.entity_how = {p: found[p][1] for p in order}
    pool.page_ranks[NAME] = {p: i for i, p in enumerate(order)}
