"""Browsing the index: folders, tags and the most-linked pages (the web view's listings).

:func:`folder_listing` (a folder's subfolders and its own pages, a page at a time),
:func:`subfolders`, :func:`tagged_pages` (a tag and the tags nested under it) and
:func:`most_linked` back :class:`~wiki_memory.index.store.Index`'s ``folder``,
``tagged`` and ``most_linked``. Every listing applies the scope rule in its SQL
(:func:`wiki_memory.identity.visible_sql`) and reads rows by primary-key ranges of the
path, so a folder page costs what the folder holds, not what the wiki holds. Every
function works on the connection it is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

from wiki_memory.identity import Identity, visible_sql
from wiki_memory.index.schema import UPDATED
from wiki_memory.states import shown_sql
from wiki_memory.wiki.sessionparts import not_part_sql


def _prefix_range(prefix: str) -> tuple[str, str]:
    """``(low, high)`` bounds of the paths that start with ``prefix`` (a primary-key range
    scan; ``prefix`` ends with ``/`` or is empty)."""
    return prefix, prefix + "\U0010ffff"


def _count(conn: apsw.Connection, sql: str, args: Sequence[Any]) -> int:
    row: Any = conn.execute(sql, args).fetchone()
    return int(row[0])


#: the ``pages`` rows under a path prefix, in path order, as a subquery the planner
#: keeps (its ``LIMIT -1`` stops SQLite from flattening it): it walks the primary key's
#: range, where the scope condition's ``owner IN (...)`` would otherwise make it read the
#: ``pages_owner`` index for every row and sort them all
_UNDER = """(SELECT path, title, kind, owner, meta, updated, created, mtime FROM pages
    WHERE path >= ? AND path < ? ORDER BY path LIMIT -1) AS p"""


def _shown_in_lists() -> str:
    """:func:`~wiki_memory.states.shown_sql` for listings, reading the stored frontmatter
    as JSON only when it names a ``state`` at all (most pages do not)."""
    return f"(instr(p.meta, '\"state\"') = 0 OR {shown_sql('p', 'list')})"


def subfolders(conn: apsw.Connection, folder: str, who: Identity | None = None) -> list[str]:
    """The names of the folders directly in ``folder`` (``""``: the top) that hold a page
    ``who`` may see and a listing shows, sorted by path. A loose scan of the ``pages``
    primary key (one short query per subfolder, each jumping past the subfolder it
    found), so its cost grows with the number of subfolders, not of pages below."""
    prefix = folder + "/" if folder else ""
    cond, args = visible_sql("p", who)
    return _subfolder_names(conn, prefix, f"{cond} AND {_shown_in_lists()}", args)


def _subfolder_names(conn: apsw.Connection, prefix: str, cond: str, args: list[Any]) -> list[str]:
    _, high = _prefix_range(prefix)
    n = len(prefix) + 1
    sql = f"""SELECT p.path FROM {_UNDER}
        WHERE instr(substr(p.path, {n}), '/') > 0 AND {cond} LIMIT 1"""
    names: list[str] = []
    low = prefix
    while True:
        row: Any = conn.execute(sql, (low, high, *args)).fetchone()
        if row is None:
            return names
        name = str(row[0])[len(prefix) :].split("/", 1)[0]
        names.append(name)
        low = prefix + name + "0"  # "0" sorts right after "/": past everything in name/


def folder_listing(
    conn: apsw.Connection, folder: str, limit: int, offset: int, who: Identity | None = None
) -> dict[str, Any]:
    """What the folder ``folder`` (``""`` for the wiki's top, else ``a/b`` without a
    trailing ``/``) holds that ``who`` may see: ``{"folders": [name], "pages": [{path,
    title, kind, updated}], "pages_total": n}``. Subfolders are those holding a visible
    page (:func:`subfolders`: a folder of hidden pages only is not named); pages are the
    folder's own, by title (case-folded), ``limit`` from ``offset`` on (no page query
    when ``limit`` is 0). Pages a listing hides (a forgotten page, :func:`wiki_memory.states.shown_sql`)
    are left out too."""
    prefix = folder + "/" if folder else ""
    low, high = _prefix_range(prefix)
    cond, args = visible_sql("p", who)
    n = len(prefix) + 1
    own = f"instr(substr(p.path, {n}), '/') = 0 AND {cond} AND {_shown_in_lists()}"
    folders = subfolders(conn, folder, who)
    if limit <= 0:
        return {"folders": folders, "pages": [], "pages_total": None}
    # the folder's own pages lie in the gaps between its subfolders' ranges: reading only
    # the gaps keeps the cost with the folder's own pages, not with everything below it
    gaps: list[tuple[str, str]] = []
    start = low
    for name in _subfolder_names(conn, prefix, "1", []):  # hidden ones too: skip them all
        gaps.append((start, prefix + name + "/"))
        start = prefix + name + "0"
    gaps.append((start, high))
    sql = f"SELECT p.path, p.title, p.kind, {UPDATED} AS updated FROM {_UNDER} WHERE {own}"
    keys = ("path", "title", "kind", "updated")
    found = [
        dict(zip(keys, r, strict=True)) for a, b in gaps for r in conn.execute(sql, (a, b, *args))
    ]
    found.sort(key=lambda r: (str(r["title"] or r["path"]).casefold(), r["path"]))
    total = len(found)
    pages = found[int(offset) : int(offset) + int(limit)]
    return {"folders": folders, "pages": pages, "pages_total": total}


def tagged_pages(
    conn: apsw.Connection, tag: str, limit: int, offset: int, who: Identity | None = None
) -> tuple[list[dict[str, Any]], int]:
    """Pages ``who`` may see whose tags (frontmatter ``tags`` and ``#tags``) include
    ``tag`` or a nested tag below it (``ops`` also finds ``ops/deploy``), compared
    case-insensitively, newest first: ``([{path, title, kind, project, updated}], total)``."""
    cond, args = visible_sql("p", who)
    t = tag.strip().lstrip("#").lower()
    where = (
        f"{cond} AND {shown_sql('p', 'list')} AND EXISTS (SELECT 1 FROM json_each(p.tags) AS j "
        "WHERE lower(ltrim(j.value, '#')) = ? OR substr(lower(ltrim(j.value, '#')), 1, ?) = ?)"
    )
    wargs = [*args, t, len(t) + 1, t + "/"]
    total = _count(conn, f"SELECT count(*) FROM pages AS p WHERE {where}", wargs)
    rows = conn.execute(
        f"""SELECT p.path, p.title, p.kind, p.project, {UPDATED} AS updated FROM pages AS p
            WHERE {where} ORDER BY updated DESC, p.path LIMIT ? OFFSET ?""",
        (*wargs, int(limit), int(offset)),
    )
    keys = ("path", "title", "kind", "project", "updated")
    return [dict(zip(keys, r, strict=True)) for r in rows], total


def most_linked(
    conn: apsw.Connection, project: str, limit: int, who: Identity | None = None
) -> list[dict[str, Any]]:
    """The pages of ``project`` that most visible pages link to (links from pages ``who``
    may not see are not counted, and only pages ``who`` may see are named):
    ``[{path, title, kind, links}]``, most links first, then by path. A long session's
    parts are not named (each is linked from its session page, which is)."""
    cond, args = visible_sql("p", who)
    scond, sargs = visible_sql("s", who)
    rows = conn.execute(
        f"""SELECT p.path, p.title, p.kind, count(DISTINCT l.src_path) AS n
            FROM links AS l JOIN pages AS p ON p.path = l.resolved_path
            JOIN pages AS s ON s.path = l.src_path
            WHERE p.project = ? AND l.src_path != p.path AND {cond} AND {scond}
              AND {shown_sql("p", "list")} AND {not_part_sql("p")}
            GROUP BY p.path ORDER BY n DESC, p.path LIMIT ?""",
        (project, *args, *sargs, int(limit)),
    )
    return [dict(zip(("path", "title", "kind", "links"), r, strict=True)) for r in rows]
