"""Pages' end times (:data:`~wiki_memory.index.signals.PAGE_END`) kept in memory between
recalls: every recall's ``recent`` signal reads the end of each candidate page (some 600
at 10,000 bench pages), and a page's end does not depend on the query.

Each connection (one per thread) keeps the ends it read, with the database's state they
were read at: SQLite's ``PRAGMA data_version`` (it changes when another connection, in this
process or another, commits) and the connection's own ``total_changes`` (its own writes).
When either moved since, the kept ends are dropped before the next read, so a read never
gives an end older than the database's; a rebuilt file is a new connection
(:meth:`wiki_memory.index.db.Database.conn`), which starts empty. Raises
:class:`~wiki_memory.index.search.SearchError` when SQLite fails."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import apsw

from wiki_memory.index.search import search_failed
from wiki_memory.index.store import Index

__all__ = ["KEPT_MAX", "db_state", "kept_ends"]

KEPT_MAX = 10_000
"""Past this many pages' ends kept by a connection, they are dropped and the reading
starts again: about 2 MB per connection at most (a path, its end and a dict entry are
some 180 bytes), and a server has one connection per thread that recalls."""

_KEPT: weakref.WeakKeyDictionary[apsw.Connection, tuple[tuple[int, int], dict[str, Any]]] = (
    weakref.WeakKeyDictionary()
)
_LOCK = threading.Lock()


def db_state(conn: apsw.Connection) -> tuple[int, int]:
    """The state of the database as ``conn`` sees it: ``(PRAGMA data_version, the
    connection's total_changes)``; either moves when the database changed since (another
    connection's commit, or this one's own write). What is kept in memory between recalls
    is kept with it and dropped when it moved. Raises
    :class:`~wiki_memory.index.search.SearchError` when SQLite fails."""
    try:
        # the pragma, not ``Connection.data_version()``: that file control reads the
        # counter as of this connection's last read, so it misses others' commits since
        version: Any = conn.execute("PRAGMA data_version").fetchall()[0][0]
        return (int(version), int(conn.total_changes()))
    except apsw.Error as exc:
        raise search_failed(conn, exc) from exc


def kept_ends(
    index: Index, paths: Iterable[str], read: Callable[[list[str]], dict[str, Any]]
) -> dict[str, Any]:
    """``path → end`` for the indexed pages among ``paths``, as ``read(paths)`` gives
    them (the SQL of :func:`~wiki_memory.index.signals.page_ends`), reading only the
    pages whose end is not kept from the database's present state."""
    conn = index._conn()
    state = db_state(conn)
    with _LOCK:
        got = _KEPT.get(conn)
        if got is None or got[0] != state or len(got[1]) > KEPT_MAX:
            got = _KEPT[conn] = (state, {})
    # only this thread uses its connection, so only it changes these ends
    ends = got[1]
    want = list(dict.fromkeys(paths))
    need = [p for p in want if p not in ends]
    if need:
        ends.update(read(need))
    return {p: ends[p] for p in want if p in ends}
