"""Read-only queries behind recall's ranking signals (see ``wiki_memory.recall.rank``).

These run on an :class:`~wiki_memory.index.store.Index` (this thread's connection) and
only read: sections matching an FTS5 expression with the scope and user filters applied
in SQL before ranking and the limit (invariant 9), neighbouring sections, pages named in
a query, pages linked to or from a page, and page rows. They live beside ``store.py``
because they know its schema; ``store.py`` stays the only writer.

Every function raises :class:`~wiki_memory.index.store.SearchError` when SQLite fails,
never returns "no results" for an error.
"""

from __future__ import annotations

import json
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import apsw

from wiki_memory.identity import Identity, visible_sql
from wiki_memory.index.schema import BM25_WEIGHTS
from wiki_memory.index.search import SearchError, SectionHit
from wiki_memory.index.store import Index
from wiki_memory.states import shown_sql

__all__ = [
    "Hit",
    "Scope",
    "search_sections",
    "search_sections_both",
    "dense_sections",
    "doc_counts",
    "row_estimate",
    "universal_tags",
    "neighbours",
    "pages_named",
    "linked_pages",
    "page_rows",
    "first_sections",
    "PAGE_START",
    "PAGE_END",
]

_SECTION_COLUMNS = ("heading", "body", "stems", "dates")


def _bm25(weights: Mapping[str, float] | None, only: Sequence[str] = ()) -> str:
    """The bm25() call with column ``weights`` (missing columns: :data:`BM25_WEIGHTS`);
    with ``only``, every other column weighs 0."""
    w = {**BM25_WEIGHTS, **(weights or {})}
    vals = [float(w[c]) if (not only or c in only) else 0.0 for c in BM25_WEIGHTS]
    return "bm25(fts, {})".format(", ".join(repr(v) for v in vals))


_UPDATED = "COALESCE(p.updated, p.created, strftime('%Y-%m-%dT%H:%M:%SZ', p.mtime, 'unixepoch'))"

PAGE_END = f"COALESCE(json_extract(p.meta, '$.ended'), {_UPDATED})"
"""SQL for the end of the time a page covers: frontmatter ``ended`` (sessions), else
``updated``, else ``created``, else the file's mtime."""

PAGE_START = (
    "COALESCE(json_extract(p.meta, '$.started'), p.created, p.updated, "
    "strftime('%Y-%m-%dT%H:%M:%SZ', p.mtime, 'unixepoch'))"
)
"""SQL for the start of the time a page covers: frontmatter ``started`` (sessions), else
``created``, else ``updated``, else the file's mtime."""


@dataclass(frozen=True)
class Scope:
    """Which pages a query may see. Every condition is part of the SQL ``WHERE``.

    ``project``: exact project; ``kinds``: page kinds (an empty list allows none);
    ``tags``: the page must carry every one (case-insensitive; ``a`` also matches the
    nested ``a/b``); ``since``/``until``: UTC epoch seconds, the time the page covers
    (:data:`PAGE_START` .. :data:`PAGE_END`) must overlap ``[since, until]``;
    ``exclude_dirs``: wiki-relative folders whose pages are left out; ``who``: the
    caller, whose pages are those :func:`wiki_memory.identity.visible_sql` keeps (None:
    the server itself, every page).
    """

    project: str | None = None
    kinds: tuple[str, ...] | None = None
    tags: tuple[str, ...] = ()
    since: float | None = None
    until: float | None = None
    exclude_dirs: tuple[str, ...] = field(default=())
    who: Identity | None = None

    @property
    def empty(self) -> bool:
        """True when nothing can match (an empty ``kinds`` list)."""
        return self.kinds is not None and not self.kinds

    def where(self, alias: str = "p") -> tuple[list[str], list[Any]]:
        """SQL conditions on the ``pages`` row ``alias`` and their arguments."""
        conds: list[str] = []
        args: list[Any] = []
        a = alias
        if self.project is not None:
            conds.append(f"{a}.project = ?")
            args.append(self.project)
        if self.kinds is not None:
            conds.append(f"{a}.kind IN ({', '.join('?' * len(self.kinds))})")
            args.extend(self.kinds)
        for tag in self.tags:
            t = tag.lstrip("#").casefold()
            conds.append(
                f"EXISTS (SELECT 1 FROM json_each({a}.tags) AS jt "
                "WHERE lower(ltrim(jt.value, '#')) = ? OR lower(ltrim(jt.value, '#')) LIKE ? "
                "ESCAPE '\\')"
            )
            args.extend([t, _like_prefix(t) + "/%"])
        if self.since is not None:
            conds.append(f"unixepoch({PAGE_END.replace('p.', a + '.')}) >= ?")
            args.append(float(self.since))
        if self.until is not None:
            conds.append(f"unixepoch({PAGE_START.replace('p.', a + '.')}) <= ?")
            args.append(float(self.until))
        for d in self.exclude_dirs:
            d = d.strip("/")
            if d:
                conds.append(f"NOT ({a}.path >= ? AND {a}.path < ?)")
                args.extend([d + "/", d + "0"])  # '0' sorts right after '/'
        cond, vargs = visible_sql(a, self.who)
        conds.append(cond)
        conds.append(shown_sql(a, "recall"))  # a forgotten or superseded page is not recalled
        args.extend(vargs)
        return conds, args


def _like_prefix(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


@dataclass(frozen=True)
class Hit(SectionHit):
    """One section: a :class:`SectionHit` (``score`` 0 when the section was not found by
    text) plus ``ord``, its 0-based position in its page."""

    ord: int
    day: str | None = None  # the day the section happened (YYYY-MM-DD) or None


_HIT_COLUMNS = (
    f"s.path, s.anchor, s.heading, p.title, p.kind, p.project, {_UPDATED}, s.text, s.line, "
    "s.ord, s.day"
)


def _hit(row: Sequence[Any], score: float) -> Hit:
    return Hit(
        path=row[0],
        anchor=row[1] or "",
        heading=row[2] or "",
        title=row[3] or "",
        kind=row[4] or "page",
        project=row[5],
        updated=row[6],
        score=score,
        text=row[7] or "",
        line=int(row[8] or 0),
        ord=int(row[9] or 0),
        day=row[10],
    )


def _run(index: Index, sql: str, args: Sequence[Any]) -> list[Any]:
    try:
        return list(index._conn().execute(sql, args).fetchall())
    except apsw.Error as exc:
        raise SearchError(f"search failed: {type(exc).__name__}: {exc}") from exc


def search_sections(
    index: Index,
    match: str,
    scope: Scope,
    limit: int,
    weights: Mapping[str, float] | None = None,
) -> list[Hit]:
    """Sections matching the FTS5 expression ``match``, best first by weighted bm25
    (title 10, aliases 8, tags 4, heading 3, body 1), ties by path and page order.

    ``match`` must be built from quoted strings (``wiki_memory.recall.terms``); a column
    filter (``{heading body} : (...)``) limits which columns may match. The ``scope``
    conditions are applied in SQL before ``ORDER BY ... LIMIT``. ``weights`` overrides
    column weights (:data:`~wiki_memory.index.schema.BM25_WEIGHTS`).
    """
    if not match or limit <= 0 or scope.empty:
        return []
    conds, args = scope.where("p")
    where = " AND ".join(["fts MATCH ?", *conds])
    sql = f"""
        WITH ranked AS (
            SELECT fts.rowid AS rid, {_bm25(weights)} AS r, s.path AS path, s.ord AS ord
            FROM fts JOIN sections AS s ON s.rowid = fts.rowid
            JOIN pages AS p ON p.path = s.path
            WHERE {where}
            ORDER BY r, path, ord
            LIMIT ?
        )
        SELECT {_HIT_COLUMNS}, -ranked.r
        FROM ranked
        JOIN sections AS s ON s.rowid = ranked.rid
        JOIN pages AS p ON p.path = s.path
        ORDER BY ranked.r, ranked.path, ranked.ord
    """
    rows = _run(index, sql, [match, *args, int(limit)])
    return [_hit(r, float(r[11])) for r in rows]


def search_sections_both(
    index: Index,
    match: str,
    scope: Scope,
    limit: int,
    weights: Mapping[str, float] | None = None,
) -> tuple[list[Hit], list[Hit]]:
    """One FTS5 scan, two rankings of the sections matching ``match``: by bm25 of the
    section's own text only (heading, body, its other word forms and its day as words;
    title, aliases and tags weighted 0; sections that match only there are left out), and
    by the weighted bm25 of all columns. At most ``limit`` of each, best first; scope as
    in :func:`search_sections`; ``weights`` overrides column weights."""
    if not match or limit <= 0 or scope.empty:
        return [], []
    conds, args = scope.where("p")
    where = " AND ".join(["fts MATCH ?", *conds])
    sql = f"""
        WITH m AS MATERIALIZED (
            SELECT fts.rowid AS rid, {_bm25(weights)} AS r,
                   {_bm25(weights, _SECTION_COLUMNS)} AS rb,
                   s.path AS path, s.ord AS ord
            FROM fts JOIN sections AS s ON s.rowid = fts.rowid
            JOIN pages AS p ON p.path = s.path
            WHERE {where}
        ),
        body AS (SELECT rid, rb AS r, path, ord, 0 AS which FROM m WHERE rb < 0
                 ORDER BY rb, path, ord LIMIT ?),
        alls AS (SELECT rid, r, path, ord, 1 AS which FROM m ORDER BY r, path, ord LIMIT ?),
        both AS (SELECT * FROM body UNION ALL SELECT * FROM alls)
        SELECT {_HIT_COLUMNS}, -both.r, both.which
        FROM both
        JOIN sections AS s ON s.rowid = both.rid
        JOIN pages AS p ON p.path = s.path
        ORDER BY both.which, both.r, both.path, both.ord
    """
    rows = _run(index, sql, [match, *args, int(limit), int(limit)])
    body = [_hit(r, float(r[11])) for r in rows if r[12] == 0]
    alls = [_hit(r, float(r[11])) for r in rows if r[12] == 1]
    return body, alls


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
            SELECT {_HIT_COLUMNS}, s.rowid FROM sections AS s JOIN pages AS p ON p.path = s.path
            WHERE {column} IN ({", ".join("?" * len(chunk))}) AND {" AND ".join(conds)}
        """
        for r in _run(index, sql, [*chunk, *args]):
            out[int(r[11])] = _hit(r, 0.0)
    return out


def universal_tags(index: Index) -> set[str]:
    """Tags (lowercased, without ``#``) that every page of some kind carries, for kinds
    with at least :data:`UNIVERSAL_MIN_PAGES` pages (``session`` on every session page):
    a query word matching one says nothing about which page is meant. Read at most every
    :data:`UNIVERSAL_CACHE_SECONDS` per index."""
    now = time.monotonic()
    cached = _UNIVERSAL.get(index)
    if cached is not None and now - cached[0] < UNIVERSAL_CACHE_SECONDS:
        return cached[1]
    rows = _run(
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
    rows = _run(index, "SELECT max(rowid) FROM sections", [])
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
        raise SearchError(f"search failed: {type(exc).__name__}: {exc}") from exc
    out: list[int | None] = []
    for alts in probes:
        if not alts:
            out.append(None)
            continue
        total = 0
        for token, prefix in alts:
            if prefix:
                rows = _run(
                    index,
                    "SELECT total(doc) FROM temp.wm_vocab WHERE term >= ? AND term < ?",
                    [token, token + "\U0010ffff"],
                )
            else:
                rows = _run(index, "SELECT total(doc) FROM temp.wm_vocab WHERE term = ?", [token])
            total += int(rows[0][0] or 0)
        out.append(total)
    return out


def neighbours(index: Index, keys: Iterable[tuple[str, int]]) -> list[Hit]:
    """The sections at ``(path, ord)`` positions (score 0), for timeline context."""
    wanted = sorted(set(keys))
    out: list[Hit] = []
    for i in range(0, len(wanted), 400):
        chunk = wanted[i : i + 400]
        values = ", ".join("(?, ?)" for _ in chunk)
        sql = f"""
            WITH want(path, ord) AS (VALUES {values})
            SELECT {_HIT_COLUMNS}
            FROM want JOIN sections AS s ON s.path = want.path AND s.ord = want.ord
            JOIN pages AS p ON p.path = s.path
        """
        args = [v for pair in chunk for v in pair]
        out.extend(_hit(r, 0.0) for r in _run(index, sql, args))
    return out


def first_sections(index: Index, paths: Iterable[str]) -> dict[str, Hit]:
    """For each page, its first section with any text (else its first section), score 0:
    the anchor for a page found by a page-level signal only (a name, a link)."""
    out: dict[str, Hit] = {}
    for path in dict.fromkeys(paths):
        rows = _run(
            index,
            f"SELECT {_HIT_COLUMNS} FROM sections AS s JOIN pages AS p ON p.path = s.path "
            "WHERE s.path = ? ORDER BY (trim(s.text) = ''), s.ord LIMIT 1",
            [path],
        )
        if rows:
            out[path] = _hit(rows[0], 0.0)
    return out


#: ``names.source`` values that name a page the way a person would write it in a query
#: (``path`` too: a page at the wiki's root keeps its file name only as its ``path`` name)
ENTITY_SOURCES = ("path", "title", "title_other", "alias", "stem")


def pages_named(index: Index, keys: Iterable[str], scope: Scope) -> list[tuple[str, str, str]]:
    """Pages one of whose names (title, alias, file stem; ``names.key``, NFC casefolded)
    equals one of ``keys``: ``[(key, path, source)]``, scope applied."""
    uniq = sorted({k for k in keys if k})
    if not uniq or scope.empty:
        return []
    conds, args = scope.where("p")
    out: list[tuple[str, str, str]] = []
    for i in range(0, len(uniq), 400):
        chunk = uniq[i : i + 400]
        sql = f"""
            SELECT n.key, n.path, n.source FROM names AS n JOIN pages AS p ON p.path = n.path
            WHERE n.key IN ({", ".join("?" * len(chunk))})
              AND n.source IN ({", ".join("?" * len(ENTITY_SOURCES))})
              {"AND " + " AND ".join(conds) if conds else ""}
            ORDER BY n.path, n.key
        """
        out.extend(tuple(r) for r in _run(index, sql, [*chunk, *ENTITY_SOURCES, *args]))
    return out


def linked_pages(index: Index, path: str, scope: Scope) -> list[tuple[str, str]]:
    """Pages linked from ``path`` (``"out"``) and pages linking to it (``"in"``), scope
    applied, each once: ``[(other_path, direction)]``, outgoing first, by path.

    Uses the links' resolved targets when the index has them (``links.resolved_path``),
    else exact names (``names.key`` = the link's ``target_key``)."""
    conds, args = scope.where("p")
    extra = ("AND " + " AND ".join(conds)) if conds else ""
    try:
        out_rows = index._conn().execute(
            f"""SELECT DISTINCT l.resolved_path FROM links AS l
                JOIN pages AS p ON p.path = l.resolved_path
                WHERE l.src_path = ? AND l.resolved_path != ? {extra}
                ORDER BY 1""",
            [path, path, *args],
        )
        outs = [r[0] for r in out_rows]
        in_rows = index._conn().execute(
            f"""SELECT DISTINCT l.src_path FROM links AS l
                JOIN pages AS p ON p.path = l.src_path
                WHERE l.resolved_path = ? AND l.src_path != ? {extra}
                ORDER BY 1""",
            [path, path, *args],
        )
        ins = [r[0] for r in in_rows]
    except apsw.SQLError:
        # an index without resolved links: match the link text against page names
        outs = [
            r[0]
            for r in _run(
                index,
                f"""SELECT DISTINCT n.path FROM links AS l
                    JOIN names AS n ON n.key = l.target_key
                    JOIN pages AS p ON p.path = n.path
                    WHERE l.src_path = ? AND n.path != ? {extra} ORDER BY 1""",
                [path, path, *args],
            )
        ]
        ins = [
            r[0]
            for r in _run(
                index,
                f"""SELECT DISTINCT l.src_path FROM links AS l
                    JOIN names AS n ON n.key = l.target_key
                    JOIN pages AS p ON p.path = l.src_path
                    WHERE n.path = ? AND l.src_path != ? {extra} ORDER BY 1""",
                [path, path, *args],
            )
        ]
    except apsw.Error as exc:
        raise SearchError(f"search failed: {type(exc).__name__}: {exc}") from exc
    seen: set[str] = set()
    result: list[tuple[str, str]] = []
    for p, d in [(p, "out") for p in outs] + [(p, "in") for p in ins]:
        if p not in seen:
            seen.add(p)
            result.append((p, d))
    return result


def page_rows(index: Index, paths: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``path → {title, aliases, tags, kind, project, start, end}`` for indexed pages
    (``start``/``end``: :data:`PAGE_START`/:data:`PAGE_END` as stored strings)."""
    uniq = sorted(set(paths))
    out: dict[str, dict[str, Any]] = {}
    for i in range(0, len(uniq), 400):
        chunk = uniq[i : i + 400]
        sql = f"""
            SELECT p.path, p.title, p.aliases, p.tags, p.kind, p.project,
                   {PAGE_START}, {PAGE_END}
            FROM pages AS p WHERE p.path IN ({", ".join("?" * len(chunk))})
        """
        for r in _run(index, sql, chunk):
            out[r[0]] = {
                "title": r[1] or "",
                "aliases": _json_list(r[2]),
                "tags": _json_list(r[3]),
                "kind": r[4] or "page",
                "project": r[5],
                "start": r[6],
                "end": r[7],
            }
    return out


def _json_list(value: Any) -> list[str]:
    if not value:
        return []
    try:
        data = json.loads(value)
    except ValueError:
        return []
    return [str(v) for v in data] if isinstance(data, list) else []
