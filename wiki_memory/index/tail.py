"""The matches after recall's ranked pool: sections holding the query's words in their
own text, counted and read a page at a time in SQL (see ``wiki_memory.recall.rank.POOL``).

Read-only, like :mod:`wiki_memory.index.signals`, whose helpers and :class:`Scope` it
uses; raises :class:`~wiki_memory.index.store.SearchError` when SQLite fails.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from wiki_memory.index.schema import BM25_WEIGHTS, HEAD_ONLY_SQL
from wiki_memory.index.signals import (
    HIT_COLUMNS,
    SCORE,
    SECTION_COLUMNS,
    Hit,
    Scope,
    bm25_sql,
    hit_from_row,
)
from wiki_memory.index.store import Index
from wiki_memory.index.vocab import run_read as _run

__all__ = ["HEAD_ONLY_SQL", "own_sections", "count_own"]


def _rowids_of(index: Index, keys: Iterable[tuple[str, str]]) -> list[int]:
    """The rowids of every section whose ``(path, anchor)`` is one of ``keys`` (a page
    that repeats a heading has several), read by path 400 paths at a time."""
    want = set(keys)
    paths = sorted({p for p, _ in want})
    out: list[int] = []
    for i in range(0, len(paths), 400):
        chunk = paths[i : i + 400]
        sql = (
            "SELECT rowid, path, anchor FROM sections "
            f"WHERE path IN ({', '.join('?' * len(chunk))})"
        )
        out += [int(r[0]) for r in _run(index, sql, chunk) if (r[1], r[2]) in want]
    return sorted(out)


def _own_matches(
    index: Index,
    match: str,
    scope: Scope,
    weights: Mapping[str, float] | None,
    rids: list[int],
    *,
    apart: bool = False,
) -> tuple[str, list[Any]]:
    """The subquery of :func:`own_sections`: ``(rid, r, path, anchor, ord)`` of every
    match whose rowid is not in ``rids`` (the sections of the keys left out, from
    :func:`_rowids_of`: a row-value ``NOT IN`` over the keys took SQLite 6 times longer at
    100,000 pages). ``apart``: only the matches in ``sections_apart``."""
    conds, args = scope.where("p")
    skip = ["s.rowid NOT IN (SELECT value FROM json_each(?))"] if rids else []
    where = " AND ".join(["fts MATCH ?", *conds, f"NOT {HEAD_ONLY_SQL}", *skip])
    only = "JOIN sections_apart AS a ON a.rowid = fts.rowid" if apart else ""
    sql = f"""
        SELECT fts.rowid AS rid, {bm25_sql(weights, SECTION_COLUMNS)} AS r, s.path AS path,
               s.anchor AS anchor, s.ord AS ord
        FROM fts {only} JOIN sections AS s ON s.rowid = fts.rowid
        JOIN pages AS p ON p.path = s.path
        WHERE {where}
    """
    return sql, [match, *args, *([json.dumps(rids)] if rids else [])]


def own_sections(
    index: Index,
    match: str,
    scope: Scope,
    limit: int,
    weights: Mapping[str, float] | None = None,
    *,
    offset: int = 0,
    exclude: Iterable[tuple[str, str]] = (),
    last: Iterable[str] = (),
) -> list[Hit]:
    """Sections holding ``match`` in their own text (heading, body, its other word forms,
    its day: the first list of :func:`search_sections_both`), timeline entries that are
    only their head line (:data:`HEAD_ONLY_SQL`) and the ``(path, anchor)`` keys in
    ``exclude`` left out, one section per key (a page may repeat a heading: its best
    section, as recall's items are one per key); best first by the bm25 of that text, ties
    by path and page order; ``limit`` of them from the ``offset``-th on. Scope and
    ``weights`` as in :func:`search_sections`. The pages in ``last`` (superseded ones)
    come after every other match, so no page they were replaced by follows them
    (invariant 14)."""
    if not match or limit <= 0 or scope.empty:
        return []
    inner, args = _own_matches(index, match, scope, weights, _rowids_of(index, exclude))
    late = sorted(set(last))
    first = "(path IN (SELECT value FROM json_each(?))), " if late else ""
    final = "(ranked.path IN (SELECT value FROM json_each(?))), " if late else ""
    late_args = [json.dumps(late)] if late else []
    sql = f"""
        WITH m AS ({inner}),
        firsts AS (
            SELECT * FROM (
                SELECT *, row_number() OVER (PARTITION BY path, anchor ORDER BY r, ord) AS k
                FROM m WHERE r < 0
            ) WHERE k = 1
        ),
        ranked AS (SELECT * FROM firsts ORDER BY {first}r, path, ord LIMIT ? OFFSET ?)
        SELECT {HIT_COLUMNS}, -ranked.r
        FROM ranked
        JOIN sections AS s ON s.rowid = ranked.rid
        JOIN pages AS p ON p.path = s.path
        ORDER BY {final}ranked.r, ranked.path, ranked.ord
    """
    rows = _run(index, sql, [*args, *late_args, int(limit), max(0, int(offset)), *late_args])
    return [hit_from_row(r, float(r[SCORE])) for r in rows]


def count_own(
    index: Index,
    match: str,
    scope: Scope,
    weights: Mapping[str, float] | None = None,
    exclude: Iterable[tuple[str, str]] = (),
    *,
    upto: int | None = None,
    plain: bool = False,
) -> int:
    """How many sections :func:`own_sections` would list with no limit (one per key),
    counted in SQL, in one statement (one snapshot of the index): no row leaves SQLite.
    With ``upto``, the sections are counted (not their keys) and the answer is at most
    ``upto`` (enough to tell whether there are more than ``upto - 1``).

    Unless ``plain``, when the scope holds every shared page (:attr:`Scope.every_shared`),
    the matches outside ``sections_apart`` are counted by FTS5 alone (each is one key of a
    shared page that names no state, in scope:
    :data:`~wiki_memory.index.schema.APART_SQL`) and only the matches in it are joined
    with their rows for the scope, the head-line test and their keys; the same number as
    joining every match, which ``plain`` does (checked by
    ``tests/recall/test_recall_count.py``; 3.3 against 31.7 ms a count at 100,000 pages,
    bench/RESULTS.md)."""
    if not match or scope.empty:
        return 0
    # bm25 of the own columns is below 0 exactly when a term occurs in one of them with a
    # weight above 0 (FTS5 keeps every idf above 0): a column filter says the same, and
    # FTS5 counts it without computing bm25 for each match
    w = {**BM25_WEIGHTS, **(weights or {})}
    own = [c for c in SECTION_COLUMNS if float(w[c]) > 0]
    if not own:
        return 0
    own_match = "{" + " ".join(own) + "} : (" + match + ")"
    rids = _rowids_of(index, exclude)
    fast = not plain and scope.every_shared
    sql, args = _joined_count(index, own_match, scope, weights, rids, upto, apart=fast)
    if fast:
        skip = " AND fts.rowid NOT IN (SELECT value FROM json_each(?))" if rids else ""
        sql = (
            f"SELECT ({sql}) + (SELECT count(*) FROM fts WHERE fts MATCH ? "
            f"AND fts.rowid NOT IN (SELECT rowid FROM sections_apart){skip})"
        )
        args += [own_match, *([json.dumps(rids)] if rids else [])]
    rows = _run(index, sql, args)
    n = int(rows[0][0]) if rows else 0
    return n if upto is None else min(n, max(0, int(upto)))


def _joined_count(
    index: Index,
    own_match: str,
    scope: Scope,
    weights: Mapping[str, float] | None,
    rids: list[int],
    upto: int | None,
    *,
    apart: bool = False,
) -> tuple[str, list[Any]]:
    """The SQL (and its arguments) of :func:`count_own` by joining each match with its
    section and page (``apart``: only the matches in ``sections_apart``); ``rids``: the
    rowids left out."""
    inner, args = _own_matches(index, own_match, scope, weights, rids, apart=apart)
    inner = inner.replace(f"{bm25_sql(weights, SECTION_COLUMNS)} AS r", "0 AS r", 1)
    if upto is not None:
        inner += " LIMIT ?"
        args.append(max(0, int(upto)))
        return f"SELECT count(*) FROM ({inner})", args
    return f"SELECT count(*) FROM (SELECT DISTINCT path, anchor FROM ({inner}))", args
