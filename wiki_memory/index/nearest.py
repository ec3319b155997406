"""The dense signal's reads: the sections nearest a query's vector that the caller may
read (see ``wiki_memory.recall.rank``, the ``dense`` list, and
:mod:`wiki_memory.index.vectors`, which owns the vectors and scores them).

Read-only, like :mod:`wiki_memory.index.signals`, whose :class:`Scope` and :class:`Hit`
it uses; raises :class:`~wiki_memory.index.store.SearchError` when SQLite fails.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wiki_memory.index.signals import HIT_COLUMNS, Hit, Scope, hit_from_row
from wiki_memory.index.store import Index
from wiki_memory.index.vocab import run_read as _run

__all__ = ["DENSE_FIRST", "dense_sections"]


DENSE_FIRST = 256
""":func:`dense_sections` checks the scope of at least this many of the most similar
sections first, then eight times more each round, until it has ``limit`` visible ones."""


def dense_sections(
    index: Index,
    query: str | tuple[Any, Any] | None,
    scope: Scope,
    limit: int,
    min_score: float,
    paths: Sequence[str] | None = None,
) -> list[Hit]:
    """Sections ``scope`` lets the caller see, most similar to ``query`` first by the
    cosine similarity of their dense vectors (:meth:`Index.dense`; ties by rowid), those
    of at least ``min_score`` only, at most ``limit``, each with score 0 (not a text
    match). ``query`` is the text, or what :meth:`Index.dense` gave for it (to score the
    rows once for several lists). ``paths``: only the sections of these pages (else of
    every page).

    The scope is applied before the limit (invariant 9): with ``paths``, the SQL that
    reads those pages' sections applies it; without, the rows are visited in similarity
    order and each round keeps those the scope's SQL admits, until ``limit`` are kept or
    every row was visited, so a section the caller may not see neither takes a place
    nor moves one. ``[]`` when vectors are off or the query has no known token.
    """
    if limit <= 0 or scope.empty or (paths is not None and not paths):
        return []
    got = index.dense(query) if isinstance(query, str) else query
    if got is None:
        return []
    import numpy as np

    rowids, scores = got
    if paths is not None:
        hits = _sections_of(index, paths, scope)
        ids = np.fromiter(hits, dtype=np.int64, count=len(hits))
        pos = np.minimum(np.searchsorted(rowids, ids), max(len(rowids) - 1, 0))
        ok = (rowids[pos] == ids) if len(rowids) else np.zeros(len(ids), dtype=bool)
        sims = np.where(ok, scores[pos] if len(rowids) else 0.0, -2.0)
        order = np.lexsort((ids, -sims))
        return [hits[int(ids[i])] for i in order if sims[i] >= min_score][:limit]
    keep = np.flatnonzero(scores >= min_score)
    n = len(keep)
    out: list[Hit] = []
    seen: set[int] = set()
    want = max(4 * limit, DENSE_FIRST)
    while True:
        m = min(n, want)
        top = keep if m >= n else keep[np.argpartition(-scores[keep], m - 1)[:m]]
        top = top[np.lexsort((rowids[top], -scores[top]))]
        batch = [int(rowids[i]) for i in top if int(rowids[i]) not in seen]
        seen.update(batch)
        visible = _visible(index, batch, scope)
        for rid in batch:
            h = visible.get(rid)
            if h is not None:
                out.append(h)
                if len(out) >= limit:
                    return out
        if m >= n:
            return out
        want *= 8


def _sections_of(index: Index, paths: Sequence[str], scope: Scope) -> dict[int, Hit]:
    """Every section of the pages ``paths`` that ``scope`` admits, by rowid (score 0)."""
    return _admitted(index, "s.path", paths, scope)


def _visible(index: Index, rowids: Sequence[int], scope: Scope) -> dict[int, Hit]:
    """The sections among ``rowids`` that ``scope`` admits, by rowid (score 0)."""
    return _admitted(index, "s.rowid", rowids, scope)


def _admitted(
    index: Index, column: str, values: Sequence[str] | Sequence[int], scope: Scope
) -> dict[int, Hit]:
    """The sections whose ``column`` (``s.path`` or ``s.rowid``) is one of ``values`` and
    that ``scope`` admits, by rowid (score 0); read 400 values at a time."""
    conds, args = scope.where("p")
    out: dict[int, Hit] = {}
    for i in range(0, len(values), 400):
        chunk = list(values[i : i + 400])
        sql = f"""
            SELECT {HIT_COLUMNS}, s.rowid FROM sections AS s JOIN pages AS p ON p.path = s.path
            WHERE {column} IN ({", ".join("?" * len(chunk))}) AND {" AND ".join(conds)}
        """
        for r in _run(index, sql, [*chunk, *args]):
            out[int(r[11])] = hit_from_row(r, 0.0)
    return out
