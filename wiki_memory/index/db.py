"""Connections to ``index.db``: one per thread, the in-process write lock, and the journal
of page writes a running rebuild replays.

Owns :class:`Database`, which the :class:`~wiki_memory.index.store.Index` facade wraps.

Concurrency
    One apsw connection per thread (``threading.local``); WAL journal,
    ``busy_timeout`` 5000 ms, ``synchronous=NORMAL``. Writers in this process are
    serialised by a lock and open their transactions with ``BEGIN IMMEDIATE`` so
    that a busy database waits on the timeout instead of failing on a lock
    upgrade. Readers never block (WAL) and never see a half-written page: every
    page change is one transaction. A connection notices when ``index.db`` was
    deleted or replaced on disk (inode check on each use) and reopens.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Literal

import apsw

from wiki_memory.index.schema import SCHEMA, SCHEMA_VERSION, drop_all, remove_db
from wiki_memory.index.stem import DEFAULT_LANGUAGES

BUSY_TIMEOUT_MS = 5000
"""How long a connection waits for another writer's lock, in milliseconds."""

Op = (
    tuple[Literal["upsert"], str, bytes, float | None]
    | tuple[Literal["delete", "under", "file_delete"], str]
    | tuple[Literal["file_add"], str, int, float | None]
)
"""A page or file write, as recorded for a rebuild to replay: ``("upsert", path, raw,
mtime)``, ``("delete", path)``, ``("under", dir)``, ``("file_delete", path)``,
``("file_add", path, size, mtime)``."""


class Database:
    """The database file at ``path``: per-thread connections and the write lock.

    Opening creates the file and schema when missing; a file with another schema
    version is emptied and :attr:`needs_rebuild` is set; a file that is not a database
    (or is corrupt) is replaced by an empty one, also setting :attr:`needs_rebuild`.
    """

    def __init__(
        self, path: Path | str, langs: tuple[str, ...] = DEFAULT_LANGUAGES, vectors: bool = False
    ) -> None:
        self.path = Path(path)
        self.langs = langs
        """Snowball stemmers for pages without a frontmatter ``lang`` (``stem_languages``)."""
        self.vectors = vectors
        """Every page write also stores its sections' dense vectors
        (:mod:`wiki_memory.index.vectors`; the ``vectors`` setting with the extra)."""
        self.needs_rebuild = False
        self.write_lock = threading.RLock()
        """Serialises this process's writes; held by :meth:`writing`."""
        self.rebuild_lock = threading.Lock()
        """Held for a whole rebuild (one at a time in this process)."""
        self.ops: list[Op] | None = None
        """Page writes made during a rebuild (None when none runs); see :meth:`record`."""
        self._local = threading.local()
        self._conns: weakref.WeakSet[apsw.Connection] = weakref.WeakSet()
        self._conns_lock = threading.Lock()
        self._closed = False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.conn()
        except (apsw.NotADBError, apsw.CorruptError):
            # Derived data: a damaged file is replaced by an empty one.
            self.close()
            self._closed = False
            remove_db(self.path)
            self.conn()
            self.needs_rebuild = True

    def _file_id(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_dev, st.st_ino)

    def conn(self) -> apsw.Connection:
        """This thread's connection, (re)opened when missing or when the file changed.

        Raises RuntimeError after :meth:`close`."""
        if self._closed:
            raise RuntimeError("index is closed")
        local = self._local
        conn: apsw.Connection | None = getattr(local, "conn", None)
        file_id = self._file_id()
        if conn is not None:
            if file_id is not None and file_id == local.file_id:
                return conn
            self._forget(conn)
        conn = apsw.Connection(str(self.path))
        try:
            conn.set_busy_timeout(BUSY_TIMEOUT_MS)
            conn.pragma("journal_mode", "wal")
            conn.pragma("synchronous", "NORMAL")
            conn.transaction_mode = "IMMEDIATE"
            self._ensure_schema(conn)
        except BaseException:
            conn.close()
            raise
        local.conn = conn
        local.file_id = self._file_id()
        with self._conns_lock:
            self._conns.add(conn)
        return conn

    def _forget(self, conn: apsw.Connection) -> None:
        with self._conns_lock:
            self._conns.discard(conn)
        with suppress(apsw.Error):
            conn.close()
        self._local.conn = None

    def _ensure_schema(self, conn: apsw.Connection) -> None:
        if conn.pragma("user_version") == SCHEMA_VERSION:
            return
        with self.write_lock, conn:
            if conn.pragma("user_version") == SCHEMA_VERSION:
                return
            drop_all(conn)
            conn.execute(SCHEMA)
            conn.pragma("user_version", SCHEMA_VERSION)
        self.needs_rebuild = True

    def close(self) -> None:
        """Close every connection this object opened (in all threads)."""
        self._closed = True
        with self._conns_lock:
            conns = list(self._conns)
            self._conns = weakref.WeakSet()
        for conn in conns:
            with suppress(apsw.Error):
                conn.close()

    @contextmanager
    def writing(self) -> Iterator[apsw.Connection]:
        """A write transaction on the live database (BEGIN IMMEDIATE), serialised in-process."""
        with self.write_lock:
            conn = self.conn()
            with conn:
                yield conn

    def record(self, op: Op) -> None:
        """Note a write for the running rebuild to replay (nothing when none runs).
        Call it inside :meth:`writing`, so the rebuild's switch sees it or its effect."""
        if self.ops is not None:
            self.ops.append(op)
