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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import apsw

from wiki_memory.identity import Identity, sees_every_shared_page, visible_sql
from wiki_memory.index.everymatch import every_match
from wiki_memory.index.hits import HIT_COLUMNS, SCORE, UPDATED, Hit, hit_from_row, with_score
from wiki_memory.index.pageends import kept_ends
from wiki_memory.index.schema import BM25_WEIGHTS
from wiki_memory.index.search import SearchError
from wiki_memory.index.store import Index
from wiki_memory.index.vocab import run_read as _run
from wiki_memory.states import shown_sql

__all__ = [
    "HIT_COLUMNS",
    "SCORE",
    "Hit",
    "hit_from_row",
    "with_score",
    "Scope",
    "search_sections",
    "search_sections_both",
    "neighbours",
    "pages_named",
    "linked_pages",
    "page_ends",
    "page_rows",
    "page_decay",
    "first_sections",
    "PAGE_START",
    "PAGE_END",
]

SECTION_COLUMNS = ("heading", "body", "stems", "dates")


def bm25_sql(weights: Mapping[str, float] | None, only: Sequence[str] = ()) -> str:
    """The bm25() call with column ``weights`` (missing columns: :data:`BM25_WEIGHTS`);
    with ``only``, every other column weighs 0."""
    w = {**BM25_WEIGHTS, **(weights or {})}
    vals = [float(w[c]) if (not only or c in only) else 0.0 for c in BM25_WEIGHTS]
    return "bm25(fts, {})".format(", ".join(repr(v) for v in vals))


PAGE_END = f"COALESCE(json_extract(p.meta, '$.ended'), {UPDATED})"
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

    @property
    def wide(self) -> bool:
        """True when only the caller and the pages' states narrow the scope (no project,
        kind, tag, time or folder filter): most matches are in scope, so the best ones
        are best found by FTS5 alone first (:func:`_top_first`)."""
        return (
            self.project is None
            and self.kinds is None
            and not self.tags
            and self.since is None
            and self.until is None
            and not self.exclude_dirs
        )

    @property
    def every_shared(self) -> bool:
        """True when every shared page that names no ``state`` is in scope (a wide scope
        whose caller sees every shared page, :func:`wiki_memory.identity.
        sees_every_shared_page`): the sections outside ``sections_apart`` are then
        counted without reading their rows (:func:`wiki_memory.index.tail.count_own`)."""
        return self.wide and sees_every_shared_page(self.who)

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
        conds.append(shown_in_recall(a))  # a forgotten page is not recalled
        args.extend(vargs)
        return conds, args


def shown_in_recall(alias: str) -> str:
    """The SQL condition keeping the ``pages`` rows ``alias`` whose state recall shows
    (:func:`wiki_memory.states.shown_sql`), with its JSON read only for the rows whose
    frontmatter can name a state: one holding neither ``state`` nor a backslash (so no
    escaped key either) has no ``state`` key, which that condition keeps. The same rows
    as the condition alone, without parsing most pages' frontmatter (every match of a
    query is tested)."""
    shown = shown_sql(alias, "recall")
    if shown == "1":
        return shown
    meta = f"{alias}.meta"
    return f"((instr({meta}, 'state') = 0 AND instr({meta}, '\\') = 0) OR {shown})"


def _like_prefix(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def search_sections(
    index: Index,
    match: str,
    scope: Scope,
    limit: int,
    *,
    weights: Mapping[str, float] | None = None,
    plain: bool = False,
) -> list[Hit]:
    """Sections matching the FTS5 expression ``match``, best first by weighted bm25
    (title 10, aliases 8, tags 4, heading 3, body 1), ties by path and page order.

    ``match`` must be built from quoted strings (``wiki_memory.recall.terms``); a column
    filter (``{heading body} : (...)``) limits which columns may match. The ``scope``
    conditions are applied in SQL before ``ORDER BY ... LIMIT``. ``weights`` overrides
    column weights (:data:`~wiki_memory.index.schema.BM25_WEIGHTS`). Unless ``plain``,
    the rows of a :attr:`Scope.wide` scope are ranked by FTS5 alone first
    (:func:`_top_first`; from :data:`FIRST_MAX` on, every match:
    :mod:`~wiki_memory.index.everymatch`; the same list).
    """
    if not match or limit <= 0 or scope.empty:
        return []
    got = None if plain else _wide(index, match, scope, limit, [(weights, ())])
    if got is not None:
        return got[0]
    conds, args = scope.where("p")
    where = " AND ".join(["fts MATCH ?", *conds])
    sql = f"""
        WITH ranked AS (
            SELECT fts.rowid AS rid, {bm25_sql(weights)} AS r, s.path AS path, s.ord AS ord
            FROM fts JOIN sections AS s ON s.rowid = fts.rowid
            JOIN pages AS p ON p.path = s.path
            WHERE {where}
            ORDER BY r, path, ord
            LIMIT ?
        )
        SELECT {HIT_COLUMNS}, -ranked.r
        FROM ranked
        JOIN sections AS s ON s.rowid = ranked.rid
        JOIN pages AS p ON p.path = s.path
        ORDER BY ranked.r, ranked.path, ranked.ord
    """
    rows = _run(index, sql, [match, *args, int(limit)])
    return [hit_from_row(r, float(r[SCORE])) for r in rows]


Lists = Sequence[tuple[Mapping[str, float] | None, Sequence[str]]]
"""Rankings of one match: ``(weights, only)`` (``only``: the columns that count, the
others weigh 0 and rows scoring 0 are left out; empty: every column)."""


def _wide(
    index: Index, match: str, scope: Scope, limit: int, lists: Lists
) -> list[list[Hit]] | None:
    """The best ``limit`` sections of each of ``lists`` ranked by FTS5 alone first, when
    ``scope`` is :attr:`Scope.wide` (:func:`_top_first`; from :data:`FIRST_MAX` on, every
    match: :mod:`~wiki_memory.index.everymatch`); None when the full query must run."""
    if not scope.wide:
        return None
    if limit >= FIRST_MAX:
        return _every(index, match, scope, limit, lists)
    return _top_first(index, match, scope, limit, lists)


def _every(index: Index, match: str, scope: Scope, limit: int, lists: Lists) -> list[list[Hit]]:
    rankings = [(bm25_sql(w, only), bool(only)) for w, only in lists]
    got = every_match(index, match, rankings, HIT_COLUMNS, scope.where("p"), limit)
    # a section in both lists is read once: its second hit is the first's with its score
    built: dict[int, Hit] = {}
    out: list[list[Hit]] = []
    for one in got:
        hits: list[Hit] = []
        for row, score in one:
            h = built.get(row[11])
            if h is None:
                h = built[row[11]] = hit_from_row(row, score)
            elif h.score != score:
                h = with_score(h, score)
            hits.append(h)
        out.append(hits)
    return out


FIRST_K = 2
""":func:`_top_first` reads this many times ``limit`` rows (plus one) at first, and this
many times more on each retry, up to :data:`FIRST_MAX` rows."""
FIRST_MAX = 3_200


def _top_first(
    index: Index, match: str, scope: Scope, limit: int, lists: Lists
) -> list[list[Hit]] | None:
    """The best ``limit`` sections in scope for each ``(weights, only)`` ranking of
    ``match`` (``only``: the columns that count, the others weigh 0 and rows scoring 0
    are left out), as the full queries give them, or None when this way does not get
    there (then the caller runs the full query).

    FTS5 alone (no join, no scope) ranks every match and hands over the best ``k + 1``
    rowids of each ranking. Every match scoring below the last of those is among them;
    only they are joined with their pages and filtered by ``scope``. When at least
    ``limit`` of them are in scope (or the ranking has no more rows) their first
    ``limit`` by (score, path, position) are the full query's. Otherwise ``k`` grows
    :data:`FIRST_K`-fold, up to :data:`FIRST_MAX`."""
    k = FIRST_K * limit
    conds, args = scope.where("p")
    while k <= FIRST_MAX:
        cols = ", ".join(f"{bm25_sql(w, only)} AS r{i}" for i, (w, only) in enumerate(lists))
        parts = [
            f"SELECT * FROM (SELECT rid, r{i} AS r, {i} AS which FROM m"
            + (f" WHERE r{i} < 0" if only else "")
            + f" ORDER BY r{i} LIMIT {k + 1})"
            for i, (_w, only) in enumerate(lists)
        ]
        sql = (
            f"WITH m AS MATERIALIZED (SELECT rowid AS rid, {cols} FROM fts WHERE fts MATCH ?) "
            + " UNION ALL ".join(parts)
        )
        ranked: list[list[tuple[int, float]]] = [[] for _ in lists]
        for rid, r, which in _run(index, sql, [match]):
            ranked[which].append((int(rid), float(r)))
        # the rows sure to be all the matches scoring that well: below the (k+1)-th
        sure = [got if len(got) <= k else [t for t in got if t[1] < got[-1][1]] for got in ranked]
        rids = sorted({rid for got in sure for rid, _ in got})
        where = " AND ".join(["s.rowid IN (SELECT value FROM json_each(?))", *conds])
        # CROSS JOIN: the few sections first, then their pages (not every page the
        # scope lets through)
        seen = {
            int(row[0]): (str(row[1]), int(row[2] or 0))
            for row in _run(
                index,
                f"SELECT s.rowid, s.path, s.ord FROM sections AS s CROSS JOIN pages AS p "
                f"ON p.path = s.path WHERE {where}",
                [json.dumps(rids), *args],
            )
        }
        best: list[list[tuple[float, str, int, int]]] = []
        for got, full in zip(sure, ranked, strict=True):
            kept = sorted((r, *seen[rid], rid) for rid, r in got if rid in seen)
            if len(kept) < limit and len(full) > k:
                break  # too few in scope among the rows read: read more
            best.append(kept[:limit])
        else:
            want = sorted({t[3] for b in best for t in b})
            rows = {
                int(row[11]): row
                for row in _run(
                    index,
                    f"SELECT {HIT_COLUMNS} FROM sections AS s CROSS JOIN pages AS p "
                    "ON p.path = s.path WHERE s.rowid IN (SELECT value FROM json_each(?))",
                    [json.dumps(want)],
                )
            }
            return [[hit_from_row(rows[t[3]], -t[0]) for t in b] for b in best]
        k *= FIRST_K
    return None


def search_sections_both(
    index: Index,
    match: str,
    scope: Scope,
    limit: int,
    weights: Mapping[str, float] | None = None,
    plain: bool = False,
) -> tuple[list[Hit], list[Hit]]:
    """One FTS5 scan, two rankings of the sections matching ``match``: by bm25 of the
    section's own text only (heading, body, its other word forms and its day as words;
    title, aliases and tags weighted 0; sections that match only there are left out), and
    by the weighted bm25 of all columns. At most ``limit`` of each, best first; scope as
    in :func:`search_sections`; ``weights`` overrides column weights. Unless ``plain``,
    the rows of a :attr:`Scope.wide` scope are ranked by FTS5 alone first
    (:func:`_top_first`; from :data:`FIRST_MAX` on, every match:
    :mod:`~wiki_memory.index.everymatch`; the same lists)."""
    if not match or limit <= 0 or scope.empty:
        return [], []
    lists = [(weights, SECTION_COLUMNS), (weights, ())]
    got = None if plain else _wide(index, match, scope, limit, lists)
    if got is not None:
        return got[0], got[1]
    conds, args = scope.where("p")
    where = " AND ".join(["fts MATCH ?", *conds])
    sql = f"""
        WITH m AS MATERIALIZED (
            SELECT fts.rowid AS rid, {bm25_sql(weights)} AS r,
                   {bm25_sql(weights, SECTION_COLUMNS)} AS rb,
                   s.path AS path, s.ord AS ord
            FROM fts JOIN sections AS s ON s.rowid = fts.rowid
            JOIN pages AS p ON p.path = s.path
            WHERE {where}
        ),
        body AS (SELECT rid, rb AS r, path, ord, 0 AS which FROM m WHERE rb < 0
                 ORDER BY rb, path, ord LIMIT ?),
        alls AS (SELECT rid, r, path, ord, 1 AS which FROM m ORDER BY r, path, ord LIMIT ?),
        both AS (SELECT * FROM body UNION ALL SELECT * FROM alls)
        SELECT {HIT_COLUMNS}, -both.r, both.which
        FROM both
        JOIN sections AS s ON s.rowid = both.rid
        JOIN pages AS p ON p.path = s.path
        ORDER BY both.which, both.r, both.path, both.ord
    """
    rows = _run(index, sql, [match, *args, int(limit), int(limit)])
    body = [hit_from_row(r, float(r[SCORE])) for r in rows if r[SCORE + 1] == 0]
    alls = [hit_from_row(r, float(r[SCORE])) for r in rows if r[SCORE + 1] == 1]
    return body, alls


def neighbours(index: Index, keys: Iterable[tuple[str, int]]) -> list[Hit]:
    """The sections at ``(path, ord)`` positions (score 0), for timeline context."""
    wanted = sorted(set(keys))
    out: list[Hit] = []
    for i in range(0, len(wanted), 400):
        chunk = wanted[i : i + 400]
        values = ", ".join("(?, ?)" for _ in chunk)
        sql = f"""
            WITH want(path, ord) AS (VALUES {values})
            SELECT {HIT_COLUMNS}
            FROM want JOIN sections AS s ON s.path = want.path AND s.ord = want.ord
            JOIN pages AS p ON p.path = s.path
        """
        args = [v for pair in chunk for v in pair]
        out.extend(hit_from_row(r, 0.0) for r in _run(index, sql, args))
    return out


def first_sections(index: Index, paths: Iterable[str]) -> dict[str, Hit]:
    """For each page, its first section with any text (else its first section), score 0:
    the anchor for a page found by a page-level signal only (a name, a link)."""
    out: dict[str, Hit] = {}
    for path in dict.fromkeys(paths):
        rows = _run(
            index,
            f"SELECT {HIT_COLUMNS} FROM sections AS s JOIN pages AS p ON p.path = s.path "
            "WHERE s.path = ? ORDER BY (trim(s.text) = ''), s.ord LIMIT 1",
            [path],
        )
        if rows:
            out[path] = hit_from_row(rows[0], 0.0)
    return out


def in_scope(index: Index, paths: Iterable[str], scope: Scope) -> set[str]:
    """The pages among ``paths`` that ``scope`` lets a query see (recall's successor of a
    superseded page joins only when the same filters keep it)."""
    conds, args = scope.where("p")
    out: set[str] = set()
    for path in dict.fromkeys(paths):
        sql = f"SELECT p.path FROM pages AS p WHERE p.path = ? AND {' AND '.join(conds)}"
        out.update(r[0] for r in _run(index, sql, [path, *args]))
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
        # CROSS JOIN keeps names (by key) the outer loop: with a caller's scope the
        # planner otherwise walks every shared page by owner (90 ms at 20k pages)
        sql = f"""
            SELECT n.key, n.path, n.source FROM names AS n CROSS JOIN pages AS p
            ON p.path = n.path
            WHERE n.key IN ({", ".join("?" * len(chunk))})
              AND n.source IN ({", ".join("?" * len(ENTITY_SOURCES))})
              {"AND " + " AND ".join(conds) if conds else ""}
            ORDER BY n.path, n.key
        """
        out.extend(tuple(r) for r in _run(index, sql, [*chunk, *ENTITY_SOURCES, *args]))
    return out


def _link_ends(
    run: Callable[[str], Iterable[Any]], target: str, join: str, extra: str
) -> tuple[list[str], list[str]]:
    """The pages a page links to and the pages linking to it (each sorted), with the
    link's target page read as ``target`` after joining ``join``, filtered by ``extra``;
    ``run`` runs a query on the page's path twice and the scope's arguments."""
    out = (
        f"SELECT DISTINCT {target} FROM links AS l {join} JOIN pages AS p ON p.path = {target}"
        f" WHERE l.src_path = ? AND {target} != ? {extra} ORDER BY 1"
    )
    back = (
        f"SELECT DISTINCT l.src_path FROM links AS l {join} JOIN pages AS p"
        f" ON p.path = l.src_path WHERE {target} = ? AND l.src_path != ? {extra} ORDER BY 1"
    )
    return [r[0] for r in run(out)], [r[0] for r in run(back)]


def linked_pages(index: Index, path: str, scope: Scope) -> list[tuple[str, str]]:
    """Pages linked from ``path`` (``"out"``) and pages linking to it (``"in"``), scope
    applied, each once: ``[(other_path, direction)]``, outgoing first, by path.

    Uses the links' resolved targets when the index has them (``links.resolved_path``),
    else exact names (``names.key`` = the link's ``target_key``)."""
    conds, args = scope.where("p")
    extra = ("AND " + " AND ".join(conds)) if conds else ""
    ends = [path, path, *args]
    try:
        outs, ins = _link_ends(
            lambda sql: index._conn().execute(sql, ends), "l.resolved_path", "", extra
        )
    except apsw.SQLError:
        # an index without resolved links: match the link text against page names
        by_name = "JOIN names AS n ON n.key = l.target_key"
        outs, ins = _link_ends(lambda sql: _run(index, sql, ends), "n.path", by_name, extra)
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


def page_ends(index: Index, paths: Iterable[str]) -> dict[str, Any]:
    """``path → end`` (:data:`PAGE_END` as stored: an ISO-8601 string or None) for indexed
    pages: what the ``recent`` signal reads of every candidate page, without the JSON
    columns :func:`page_rows` decodes. Kept in memory while the database does not change
    (:mod:`~wiki_memory.index.pageends`)."""
    return kept_ends(index, paths, lambda need: _read_ends(index, need))


def _read_ends(index: Index, paths: Iterable[str]) -> dict[str, Any]:
    uniq = sorted(set(paths))
    out: dict[str, Any] = {}
    for i in range(0, len(uniq), 400):
        chunk = uniq[i : i + 400]
        marks = ", ".join("?" * len(chunk))
        sql = f"SELECT p.path, {PAGE_END} FROM pages AS p WHERE p.path IN ({marks})"
        out.update((r[0], r[1]) for r in _run(index, sql, chunk))
    return out


def page_decay(index: Index, paths: Iterable[str]) -> dict[str, tuple[str, bool]]:
    """``path -> (kind, pinned)`` of indexed pages: how their strength decays
    (:mod:`wiki_memory.core.strength`; ``pinned`` by :func:`wiki_memory.identity.is_pinned`)."""
    from wiki_memory.identity import is_pinned

    uniq = sorted(set(paths))
    out: dict[str, tuple[str, bool]] = {}
    for i in range(0, len(uniq), 400):
        chunk = uniq[i : i + 400]
        sql = f"""
            SELECT p.path, p.kind, json_extract(p.meta, '$.pinned')
            FROM pages AS p WHERE p.path IN ({", ".join("?" * len(chunk))})
        """
        for r in _run(index, sql, chunk):
            # json_extract reads a JSON true as 1, which is_pinned also takes
            out[r[0]] = (r[1] or "page", is_pinned({"pinned": r[2]}))
    return out


def _json_list(value: Any) -> list[str]:
    if not value:
        return []
    try:
        data = json.loads(value)
    except ValueError:
        return []
    return [str(v) for v in data] if isinstance(data, list) else []
