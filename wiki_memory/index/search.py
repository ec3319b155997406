"""Full-text search over the index: sections of pages, and the spool of uncompiled observations.

Owns :class:`SectionHit`, :class:`SpoolHit` and :class:`SearchError`, the ranked
queries behind :class:`~wiki_memory.index.store.Index`'s ``search``/``query`` and
``search_spool``/``query_spool``, and the ``spool``/``spool_fts`` rows (added,
replaced, removed per session, copied into a rebuilt index).

Ranking: ``bm25`` with column weights title 10, aliases 8, tags 4, heading 3,
body 1 (:data:`~wiki_memory.index.schema.BM25_WEIGHTS`); scores are returned negated
so that higher is better; ties are broken by path and section order, so results do not
depend on insertion order. Project and kind filters are part of the ``WHERE`` clause,
so rows outside them never take a place in the ranked, limited result (invariant 9).
(FTS5's bm25 statistics — document count, average lengths, term frequencies — still
cover the whole table.) User text reaches ``MATCH`` only through
:func:`~wiki_memory.index.query.build_match`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, Unpack

import apsw

from wiki_memory.errors import Unavailable
from wiki_memory.index.db import note_failure
from wiki_memory.index.pages import as_text
from wiki_memory.index.query import build_match
from wiki_memory.index.schema import BM25_WEIGHTS, UPDATED, given_sql
from wiki_memory.index.text import index_text

_BM25 = "bm25(fts, {})".format(", ".join(str(w) for w in BM25_WEIGHTS.values()))


class SearchError(Unavailable):
    """503 ``unavailable``: the search engine failed. Never reported as "no results"."""


def search_failed(
    conn: apsw.Connection, exc: apsw.Error, what: str = "search failed"
) -> SearchError:
    """The SearchError for ``exc``, raised by a query on ``conn``; damage in the file (a
    CorruptError) is reported to its database first (it is then rebuilt)."""
    note_failure(conn, exc)
    return SearchError(f"{what}: {type(exc).__name__}: {exc}")


@dataclass(frozen=True)
class SectionHit:
    """One matching section. ``score`` is the negated weighted bm25: higher is better.

    ``updated`` is the page's frontmatter ``updated``, else ``created``, else the
    file's mtime (ISO-8601 UTC). ``text`` is the section's original text, ``line``
    its 1-based line in the file.
    """

    path: str
    anchor: str
    heading: str
    title: str
    kind: str
    project: str | None
    updated: str | None
    score: float
    text: str
    line: int


def section_fields(row: Sequence[Any], score: float) -> dict[str, Any]:
    """The :class:`SectionHit` fields of a row read as ``path, anchor, heading, title,
    kind, project, updated, text, line`` (its first nine columns; NULLs as the empty
    text, ``page`` and 0), with ``score``."""
    return {
        "path": row[0],
        "anchor": row[1] or "",
        "heading": row[2] or "",
        "title": row[3] or "",
        "kind": row[4] or "page",
        "project": row[5],
        "updated": row[6],
        "score": score,
        "text": row[7] or "",
        "line": int(row[8] or 0),
    }


@dataclass(frozen=True)
class SpoolHit:
    """One matching uncompiled observation. ``score`` is the negated bm25: higher is better."""

    session_key: str
    obs_id: str
    project: str | None
    session_id: str | None
    ts: str | None
    text: str
    score: float
    user: str | None = None
    harness: str | None = None


# --- pages ---------------------------------------------------------------------------------


SEARCH_LIMIT = 50
"""How many sections a search returns when its caller names no ``limit``."""


class SectionFilters(TypedDict, total=False):
    """The filters of a section search, as keyword arguments (each optional; applied in
    the SQL, before ranking and the limit): ``project`` (the section's page is in it;
    None: any), ``kinds`` (page kinds such as ``["note", "session"]``; None: any; an empty
    list allows none), ``exclude_dirs`` (wiki-relative folders whose pages are left out;
    default none) and ``limit`` (at most this many sections; default
    :data:`SEARCH_LIMIT`). :func:`search` holds the defaults; the layers above pass these
    on unchanged."""

    project: str | None
    kinds: Sequence[str] | None
    exclude_dirs: Sequence[str]
    limit: int


def search(
    conn: apsw.Connection,
    match: str,
    *,
    project: str | None = None,
    kinds: Sequence[str] | None = None,
    exclude_dirs: Sequence[str] = (),
    limit: int = SEARCH_LIMIT,
) -> list[SectionHit]:
    """The work of :meth:`wiki_memory.index.store.Index.search` (documented there)."""
    if not match or not match.strip() or limit <= 0:
        return []
    if kinds is not None and not kinds:
        return []
    where, args = given_sql(("fts MATCH ?", match), ("s.project = ?", project))
    if kinds is not None:
        where.append("s.kind IN ({})".format(", ".join("?" * len(kinds))))
        args.extend(kinds)
    for d in exclude_dirs:
        d = d.strip("/")
        if d:
            where.append("NOT (s.path >= ? AND s.path < ?)")
            args.extend([d + "/", d + "0"])  # '0' sorts right after '/'
    args.append(int(limit))
    # Rank and limit on narrow rows first (filters included), then fetch the text.
    sql = f"""
        WITH ranked AS (
            SELECT fts.rowid AS rid, {_BM25} AS r, s.path AS path, s.ord AS ord
            FROM fts JOIN sections AS s ON s.rowid = fts.rowid
            WHERE {" AND ".join(where)}
            ORDER BY r, path, ord
            LIMIT ?
        )
        SELECT s.path, s.anchor, s.heading, p.title, p.kind, p.project, {UPDATED},
               s.text, s.line, -ranked.r
        FROM ranked
        JOIN sections AS s ON s.rowid = ranked.rid
        JOIN pages AS p ON p.path = s.path
        ORDER BY ranked.r, ranked.path, ranked.ord
    """
    try:
        rows: list[Any] = conn.execute(sql, args).fetchall()
    except apsw.Error as exc:
        raise search_failed(conn, exc) from exc
    return [SectionHit(**section_fields(r, float(r[9]))) for r in rows]


def query(
    conn: apsw.Connection,
    text: str,
    *,
    mode: Literal["auto", "and", "or"] = "auto",
    **filters: Unpack[SectionFilters],
) -> list[SectionHit]:
    """The work of :meth:`wiki_memory.index.store.Index.query` (documented there)."""
    if mode not in ("auto", "and", "or"):
        raise ValueError(f"mode must be 'auto', 'and' or 'or', not {mode!r}")
    first = build_match(text, "or" if mode == "or" else "and")
    if first is None:
        return []
    limit = filters.get("limit", SEARCH_LIMIT)
    hits = search(conn, first, **filters)
    if mode != "auto" or len(hits) >= max(1, limit // 5):
        return hits
    second = build_match(text, "or")
    if second is None or second == first:
        return hits
    seen = {(h.path, h.anchor, h.line) for h in hits}
    for h in search(conn, second, **filters):
        if len(hits) >= limit:
            break
        if (h.path, h.anchor, h.line) not in seen:
            hits.append(h)
    return hits


# --- the spool -----------------------------------------------------------------------------


class SpoolFilters(TypedDict, total=False):
    """The filters of a spool search, as keyword arguments (each optional; applied in the
    SQL, before ranking and the limit): ``project`` and ``user`` (the observation's equals
    it; None: any) and ``limit`` (at most this many observations; default
    :data:`SEARCH_LIMIT`). :func:`search_spool` holds the defaults; the layers above pass
    these on unchanged."""

    project: str | None
    user: str | None
    limit: int


def search_spool(
    conn: apsw.Connection,
    match: str,
    *,
    project: str | None = None,
    user: str | None = None,
    limit: int = SEARCH_LIMIT,
) -> list[SpoolHit]:
    """The work of :meth:`wiki_memory.index.store.Index.search_spool` (documented there)."""
    if not match or not match.strip() or limit <= 0:
        return []
    where, args = given_sql(
        ("spool_fts MATCH ?", match), ("s.project = ?", project), ("s.user = ?", user)
    )
    args.append(int(limit))
    sql = f"""
        SELECT s.session_key, s.obs_id, s.project, s.session_id, s.ts, s.text,
               -bm25(spool_fts), s.user, s.harness
        FROM spool_fts JOIN spool AS s ON s.rowid = spool_fts.rowid
        WHERE {" AND ".join(where)}
        ORDER BY bm25(spool_fts), s.ts, s.session_key, s.obs_id
        LIMIT ?
    """
    try:
        rows: list[Any] = conn.execute(sql, args).fetchall()
    except apsw.Error as exc:
        raise search_failed(conn, exc, "spool search failed") from exc
    return [
        SpoolHit(
            session_key=r[0],
            obs_id=r[1],
            project=r[2],
            session_id=r[3],
            ts=r[4],
            text=r[5] or "",
            score=float(r[6]),
            user=r[7],
            harness=r[8],
        )
        for r in rows
    ]


def query_spool(
    conn: apsw.Connection,
    text: str,
    *,
    mode: Literal["and", "or"] = "and",
    **filters: Unpack[SpoolFilters],
) -> list[SpoolHit]:
    """:func:`search_spool` for free text (built safely with ``build_match``)."""
    match = build_match(text, mode)
    if match is None:
        return []
    return search_spool(conn, match, **filters)


def add_spool_row(conn: apsw.Connection, row: Mapping[str, Any]) -> None:
    """Add (or replace, by ``(session_key, obs_id)``) one observation; KeyError for a
    missing ``session_key``, ``obs_id`` or ``text``."""
    key, obs = str(row["session_key"]), str(row["obs_id"])
    text = str(row["text"] or "")
    old = conn.execute(
        "SELECT rowid FROM spool WHERE session_key = ? AND obs_id = ?", (key, obs)
    ).fetchone()
    if old is not None:
        conn.execute("DELETE FROM spool_fts WHERE rowid = ?", (old[0],))
        conn.execute("DELETE FROM spool WHERE rowid = ?", (old[0],))
    conn.execute(
        "INSERT INTO spool(session_key, obs_id, project, harness, session_id, user, ts, text) "
        "VALUES (?,?,?,?,?,?,?,?)",
        (
            key,
            obs,
            as_text(row.get("project")),
            as_text(row.get("harness")),
            as_text(row.get("session_id")),
            as_text(row.get("user")),
            as_text(row.get("ts")),
            text,
        ),
    )
    conn.execute(
        "INSERT INTO spool_fts(rowid, body) VALUES (?, ?)",
        (conn.last_insert_rowid(), index_text(text)),
    )


def copy_spool(src: apsw.Connection, dst: apsw.Connection) -> None:
    """Add every spool row of ``src`` to ``dst``, in their order."""
    cols = ("session_key", "obs_id", "project", "harness", "session_id", "user", "ts", "text")
    for values in src.execute(f"SELECT {', '.join(cols)} FROM spool ORDER BY rowid").fetchall():
        add_spool_row(dst, dict(zip(cols, values, strict=True)))


def add_spool(conn: apsw.Connection, rows: Iterable[Mapping[str, Any]]) -> int:
    """:func:`add_spool_row` for each of ``rows``; returns how many were written."""
    n = 0
    for row in rows:
        add_spool_row(conn, row)
        n += 1
    return n


def delete_spool_session(conn: apsw.Connection, session_key: str) -> int:
    """Remove every spooled observation of ``session_key``; returns how many."""
    conn.execute(
        "DELETE FROM spool_fts WHERE rowid IN (SELECT rowid FROM spool WHERE session_key = ?)",
        (session_key,),
    )
    conn.execute("DELETE FROM spool WHERE session_key = ?", (session_key,))
    return int(conn.changes())


def replace_spool(conn: apsw.Connection, rows: Iterable[Mapping[str, Any]]) -> int:
    """Empty the spool tables, then :func:`add_spool` ``rows``; returns how many were written."""
    conn.execute("DELETE FROM spool_fts")
    conn.execute("DELETE FROM spool")
    return add_spool(conn, rows)
