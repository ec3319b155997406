"""A page indexed again by what changed in it: the sections whose rows still hold their
text keep them (their full-text rows are not written again), the sections gone lose
theirs, the new ones are added; the page's own row, links and names are written again.

A session page grows by a few entries a turn while it holds thousands: writing every
section's full-text row again made each turn cost as much as the page is long.

:func:`update_changed` applies only where the result is the rows a delete and insert of
the whole page would give, the order of rowids aside (no reader depends on a page's
sections being contiguous; they are read by ``ord``). It declines (returns False, having
written nothing) when a value every section row carries changed (title, aliases, tags,
project, kind: in each full-text row or section row), when what decides a section's
place in ``sections_apart`` for the page as a whole changed (its owner, its state), or
when the old or the new page repeats an anchor (``sections_apart`` counts repeats over
the rows written together).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import chain
from typing import Any

import apsw

from wiki_memory.index import sectionrows
from wiki_memory.index import vectors as vec
from wiki_memory.index.graph import Dirty
from wiki_memory.index.schema import (
    APART_SQL,
    INSERT_FTS,
    INSERT_LINK,
    INSERT_PAGE,
    INSERT_SECTION,
)

#: a section row's identity: anchor, heading, hash of its text, day, t0, t1
Key = tuple[Any, ...]


def _page_wide(meta_json: str) -> tuple[Any, Any]:
    """What in a page's frontmatter concerns every section row: its state and ``lang``."""
    try:
        meta = json.loads(meta_json)
    except (TypeError, ValueError):
        return (None, None)
    if not isinstance(meta, dict):
        return (None, None)
    return (meta.get("state"), meta.get("lang"))


def update_changed(
    conn: apsw.Connection,
    prep: tuple[Any, ...],
    dirty: Dirty,
    vectors: bool = False,
    unchanged: tuple[int, int] | None = None,
) -> bool:
    """Replace the indexed rows of an indexed page by those of ``prep`` (a
    :func:`wiki_memory.index.pages.prepare` result), writing only the sections that
    changed. Returns False, having written nothing, where that does not apply (see the
    module's text): the caller then deletes and inserts the page as a whole. ``dirty``
    gains the page's old and new name keys and the page itself (its links were written
    again), as a delete and insert would give; ``vectors``: embed the new sections.
    ``unchanged``: ``(first, end)``, the new sections ``first`` to ``end - 1`` are known
    to be the rows indexed now at those ``ord`` values (:func:`wiki_memory.index.pagetail.
    unchanged`); only the others are read and compared."""
    path, page_row, project, kind, (tf, af, gf), sections, plinks, pnames = prep
    old = conn.execute(
        "SELECT title, tags, aliases, project, kind, owner, meta FROM pages WHERE path = ?",
        (path,),
    ).fetchone()
    if old is None:
        return False
    new_wide = (page_row[2], page_row[5], page_row[6], project, kind, page_row[14])
    if tuple(old[:6]) != new_wide or _page_wide(old[6]) != _page_wide(page_row[12]):
        return False
    anchors = [s[0] for s in sections]
    if len(set(anchors)) != len(anchors):
        return False
    k0, k1 = unchanged or (0, 0)
    rows = conn.execute(
        "SELECT rowid, anchor, heading, ord, line, hash, day, t0, t1 FROM sections "
        "WHERE path = ? AND (ord < ? OR ord >= ?)",
        (path, k0, k1),
    ).fetchall()
    old_anchors = {r[1] for r in rows}
    if len(old_anchors) != len(rows) or (k1 > k0 and not old_anchors.isdisjoint(anchors[k0:k1])):
        return False
    have: dict[Key, tuple[Any, Any, Any]] = {
        (r[1], r[2], r[5], r[6], r[7], r[8]): (r[0], r[3], r[4]) for r in rows
    }
    moved: list[tuple[Any, ...]] = []
    added: list[tuple[int, tuple[Any, ...]]] = []
    for ordinal in chain(range(min(k0, k1)), range(max(k0, k1), len(sections))):
        sec = sections[ordinal]
        anchor, heading, line, h, _text, _hf, _bf, _sf, _df, day, t0, t1, _dw, _dn = sec
        hit = have.pop((anchor, heading, h, day, t0, t1), None)
        if hit is None:
            added.append((ordinal, sec))
        elif (hit[1], hit[2]) != (ordinal, line):
            moved.append((ordinal, line, hit[0]))
    gone = [(rowid,) for rowid, _, _ in have.values()]
    for table in ("fts", "sections_apart", "vectors", "sections"):
        conn.executemany(f"DELETE FROM {table} WHERE rowid = ?", gone)
    if moved:
        conn.executemany("UPDATE sections SET ord = ?, line = ? WHERE rowid = ?", moved)
    keys = [r[0] for r in conn.execute("SELECT key FROM names WHERE path = ?", (path,))]
    conn.execute("DELETE FROM links WHERE src_path = ?", (path,))
    conn.execute("DELETE FROM names WHERE path = ?", (path,))
    conn.execute("DELETE FROM pages WHERE path = ?", (path,))
    conn.execute(INSERT_PAGE, page_row)
    _insert_sections(conn, path, project, kind, (tf, af, gf), added, vectors)
    if plinks:
        conn.executemany(INSERT_LINK, plinks)
    conn.executemany(
        "INSERT INTO names(key, path, source) VALUES (?,?,?)", [(k, path, src) for k, src in pnames]
    )
    dirty.keys.update(keys)
    dirty.keys.update(k for k, _ in pnames)
    dirty.srcs.add(path)
    return True


def _insert_sections(
    conn: apsw.Connection,
    path: str,
    project: Any,
    kind: Any,
    page_fts: tuple[str, str, str],
    added: Sequence[tuple[int, tuple[Any, ...]]],
    vectors: bool,
) -> None:
    if not added:
        return
    row: Any = conn.execute("SELECT coalesce(max(rowid), 0) FROM sections").fetchone()
    first = rowid = int(row[0]) + 1
    secs: list[tuple[Any, ...]] = []
    fts: list[tuple[Any, ...]] = []
    for ordinal, sec in added:
        srow, frow = sectionrows.table_rows(rowid, path, ordinal, project, kind, page_fts, sec)
        secs.append(srow)
        fts.append(frow)
        rowid += 1
    conn.executemany(INSERT_SECTION, secs)
    conn.executemany(INSERT_FTS, fts)
    conn.execute(APART_SQL, (first, rowid - 1))
    if vectors:
        vec.write(conn, [(r[0], r[3], r[2], r[7]) for r in secs])
