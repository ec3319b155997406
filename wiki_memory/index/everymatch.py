"""Every section matching an FTS5 expression, ranked in Python: the no-limit case of
:func:`wiki_memory.index.signals.search_sections` and
:func:`~wiki_memory.index.signals.search_sections_both` for a :attr:`~wiki_memory.index.
signals.Scope.wide` scope (recall ranking every match, ``rank.FULL_RANK``).

The SQL those run otherwise joins every match with its section and page to rank it, then
joins each ranked row again for its columns (twice for a row in both lists). Here FTS5
alone scores every match (each ranking one ``bm25`` column), the sections in scope are
read once with their columns, and Python sorts them by (score, path, position): the order
of the SQL's ``ORDER BY r, path, ord`` (paths compare as SQLite's ``BINARY`` does, code
point by code point; a NULL position first), so the lists are the same. Raises
:class:`~wiki_memory.index.search.SearchError` when SQLite fails. It knows no hit:
``signals`` gives it the SQL and builds the hits.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from wiki_memory.index.store import Index
from wiki_memory.index.vocab import run_read


def every_match(
    index: Index,
    match: str,
    rankings: Sequence[tuple[str, bool]],
    columns: str,
    scope: tuple[list[str], list[Any]],
    limit: int,
) -> list[list[tuple[Sequence[Any], float]]]:
    """For each ``(bm25 call, only)`` ranking of ``match`` (``only``: rows scoring 0 are
    left out), the sections whose page (``p``) meets the ``scope`` conditions and
    arguments, best first by that bm25, ties by path and page order, at most ``limit``:
    ``(row, score)`` with ``row`` the section's ``columns`` (SQL over ``s`` and ``p``)
    and ``score`` the negated bm25 (a section in several rankings: the same ``row``)."""
    cols = ", ".join(sql for sql, _only in rankings)
    found = run_read(index, f"SELECT rowid, {cols} FROM fts WHERE fts MATCH ?", [match])
    conds, args = scope
    where = " AND ".join(["s.rowid IN (SELECT value FROM json_each(?))", *conds])
    rows: dict[int, Sequence[Any]] = {
        int(r[0]): r
        for r in run_read(
            index,
            f"SELECT s.rowid, s.path, s.ord, {columns} FROM sections AS s CROSS JOIN pages AS p "
            f"ON p.path = s.path WHERE {where}",
            [json.dumps([f[0] for f in found]), *args],
        )
    }
    # each section's place and columns worked out once, for every ranking
    place = {rid: _place(r) for rid, r in rows.items()}
    values = {rid: r[3:] for rid, r in rows.items()}
    found = [f for f in found if f[0] in rows]
    out: list[list[tuple[Sequence[Any], float]]] = []
    for i, (_sql, only) in enumerate(rankings, 1):
        kept = sorted((float(f[i]), place[f[0]], f[0]) for f in found if not only or f[i] < 0)
        out.append([(values[rid], -r) for r, _p, rid in kept[:limit]])
    return out


def _place(row: Sequence[Any]) -> tuple[str, bool, int]:
    """A section's path and position as SQLite orders them (a NULL ``ord`` first)."""
    return (row[1], row[2] is not None, row[2] or 0)
