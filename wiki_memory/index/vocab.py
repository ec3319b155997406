"""Statistics of the index that recall's plan reads before it searches: how many
sections there are, how many hold each term (FTS5's own vocabulary), and which tags
every page of a kind carries. Read-only, through the index's connection for this
thread; a database error is a :class:`~wiki_memory.index.search.SearchError`."""

from __future__ import annotations

import time
import weakref
from collections.abc import Sequence
from typing import Any

import apsw

from wiki_memory.index.search import search_failed
from wiki_memory.index.store import Index

__all__ = [
    "UNIVERSAL_CACHE_SECONDS",
    "UNIVERSAL_MIN_PAGES",
    "doc_counts",
    "row_estimate",
    "run_read",
    "universal_tags",
]


def run_read(index: Index, sql: str, args: Sequence[Any]) -> list[Any]:
    """Every row of the read-only ``sql`` with ``args`` on this thread's connection.
    Raises SearchError (:func:`~wiki_memory.index.search.search_failed`) on a database
    error."""
    conn = index._conn()
    try:
        return list(conn.execute(sql, args).fetchall())
    except apsw.Error as exc:
        raise search_failed(conn, exc) from exc


def universal_tags(index: Index) -> set[str]:
    """Tags (lowercased, without ``#``) that every page of some kind carries, for kinds
    with at least :data:`UNIVERSAL_MIN_PAGES` pages (``session`` on every session page):
    a query word matching one says nothing about which page is meant. Read at most every
    :data:`UNIVERSAL_CACHE_SECONDS` per index."""
    now = time.monotonic()
    cached = _UNIVERSAL.get(index)
    if cached is not None and now - cached[0] < UNIVERSAL_CACHE_SECONDS:
        return cached[1]
    rows = run_read(
        index,
        """WITH k AS (SELECT kind, count(*) AS n FROM pages GROUP BY kind HAVING n >= ?)
           SELECT lower(ltrim(jt.value, '#')) AS tag, p.kind, count(DISTINCT p.path), k.n
           FROM pages AS p JOIN k ON k.kind = p.kind, json_each(p.tags) AS jt
           GROUP BY tag, p.kind""",
        [UNIVERSAL_MIN_PAGES],
    )
    found = {str(tag) for tag, _kind, n, total in rows if tag and n == total}
    _UNIVERSAL[index] = (now, found)
    return found


UNIVERSAL_CACHE_SECONDS = 30.0
"""How long :func:`universal_tags` reuses what it read."""
_UNIVERSAL: weakref.WeakKeyDictionary[Index, tuple[float, set[str]]] = weakref.WeakKeyDictionary()


UNIVERSAL_MIN_PAGES = 5
"""A tag on every page of a kind counts as universal only when the kind has this many."""


def row_estimate(index: Index) -> int:
    """About how many sections are indexed (the largest rowid: never fewer)."""
    rows = run_read(index, "SELECT max(rowid) FROM sections", [])
    return int(rows[0][0] or 0) if rows else 0


def doc_counts(index: Index, probes: Sequence[Sequence[tuple[str, bool]]]) -> list[int | None]:
    """For each term's ``(token, is_prefix)`` alternatives, an upper bound of how many
    sections contain it (FTS5's own vocabulary, read through a connection-local
    ``fts5vocab`` table); None for a term without alternatives."""
    conn = index._conn()
    try:
        conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.wm_vocab USING fts5vocab(main, 'fts', 'row')"
        )
    except apsw.Error as exc:
        raise search_failed(conn, exc) from exc
    out: list[int | None] = []
    for alts in probes:
        if not alts:
            out.append(None)
            continue
        total = 0
        for token, prefix in alts:
            if prefix:
                rows = run_read(
                    index,
                    "SELECT total(doc) FROM temp.wm_vocab WHERE term >= ? AND term < ?",
                    [token, token + "\U0010ffff"],
                )
            else:
                rows = run_read(
                    index, "SELECT total(doc) FROM temp.wm_vocab WHERE term = ?", [token]
                )
            total += int(rows[0][0] or 0)
        out.append(total)
    return out
