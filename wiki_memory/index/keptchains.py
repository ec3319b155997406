"""The supersession chains a caller may see (:func:`wiki_memory.index.supersede.chains`)
kept in memory between recalls: every recall reads them, and they change only when the
index does (finding the conflict copies alone scans every page's path: about 1 ms a
recall at 10,000 pages).

Each connection (one per thread) keeps the chains of the last caller it read them for,
with the database's state they were read at (:func:`wiki_memory.index.pageends.db_state`:
another connection's commit or this one's own write moves it); when the state or the
caller differs, they are read again. A rebuilt file is a new connection, which starts
empty. The chains returned are shared between the recalls of one state: callers read
them and never change them. Errors: :class:`~wiki_memory.index.search.SearchError` when
SQLite fails reading the state, else those of :meth:`Index.chains
<wiki_memory.index.store.Index.chains>`, which reads them."""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections.abc import Mapping
from typing import Any

import apsw

from wiki_memory.identity import Identity
from wiki_memory.index import supersede
from wiki_memory.index.pageends import db_state
from wiki_memory.index.store import Index

__all__ = ["kept_chains"]

_KEPT: weakref.WeakKeyDictionary[apsw.Connection, tuple[Any, supersede.Chains]] = (
    weakref.WeakKeyDictionary()
)
_LOCK = threading.Lock()


def _caller(who: Identity | None) -> Any:
    """Every field of ``who`` as one value (its grants as sorted pairs)."""
    if who is None:
        return None
    out = []
    for f in dataclasses.fields(who):
        v = getattr(who, f.name)
        out.append(tuple(sorted(v.items())) if isinstance(v, Mapping) else v)
    return (type(who).__name__, tuple(out))


def kept_chains(index: Index, who: Identity | None = None) -> supersede.Chains:
    """What :meth:`Index.chains(who) <wiki_memory.index.store.Index.chains>` gives, read
    again only when the database or the caller changed since this connection last read
    it. The caller must not change the chains returned (they are shared)."""
    conn = index._conn()
    key = (db_state(conn), _caller(who))
    try:
        hash(key)
    except TypeError:  # a caller with a value that cannot be a key: read every time
        return index.chains(who)
    with _LOCK:
        got = _KEPT.get(conn)
    if got is not None and got[0] == key:
        return got[1]
    # read after the state: a commit in between moves the state, so it is read again
    found = index.chains(who)
    with _LOCK:
        _KEPT[conn] = (key, found)
    return found
