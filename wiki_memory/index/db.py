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

Damage
    A file that is not a database, or whose header is garbled, is replaced by an empty
    one at open (logged). :meth:`Database.quick_check` runs SQLite's ``quick_check``
    (at start and by ``doctor``). A ``CorruptError`` met at run time (a search or a
    write) marks the database :attr:`~Database.damaged` (logged once) and calls
    :attr:`~Database.on_damage`, which the server uses to rebuild from the files;
    until then the index's reads answer "unavailable" instead of a short answer.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Literal

import apsw

from wiki_memory.index.schema import (
    SCHEMA,
    SCHEMA_VERSION,
    drop_all,
    remove_db,
    run_step,
    upgrade_path,
)
from wiki_memory.index.stem import DEFAULT_LANGUAGES

log = logging.getLogger("wiki_memory.index")

#: apsw errors that mean the file is damaged (not a busy or a full disk)
DAMAGE = (apsw.CorruptError, apsw.NotADBError)

#: connection -> the Database that opened it (to report damage a query met)
_OWNERS: weakref.WeakKeyDictionary[apsw.Connection, Database] = weakref.WeakKeyDictionary()

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
        self.damaged: str | None = None
        """Why the file is taken to be damaged (a CorruptError met at run time), or None.
        Cleared by whoever rebuilt it (the server, once the rebuild is done)."""
        self.on_damage: Callable[[str], None] | None = None
        """Called once (from the thread that met it) when damage is first noticed."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.conn()
        except DAMAGE as exc:
            # Derived data: a damaged file is replaced by an empty one.
            log.warning("index.db cannot be opened (%s): replaced by an empty one", exc)
            self.reset()
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
        _OWNERS[conn] = self
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
            version = conn.pragma("user_version")
            if version == SCHEMA_VERSION:
                return
            steps = upgrade_path(version) if version else None
            if steps is not None:  # an index or a derived column added: no rebuild
                for step in steps:
                    run_step(conn, step)
                conn.pragma("user_version", SCHEMA_VERSION)
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
        """A write transaction on the live database (BEGIN IMMEDIATE), serialised in-process.
        A CorruptError in it is reported (:meth:`corrupted`) and raised."""
        with self.write_lock:
            conn = self.conn()
            try:
                with conn:
                    yield conn
            except DAMAGE as exc:
                self.corrupted(exc)
                raise

    def corrupted(self, exc: BaseException) -> None:
        """A query or write met ``exc``, damage in the file: mark it :attr:`damaged` and,
        the first time, log it and call :attr:`on_damage`."""
        with self._conns_lock:
            if self.damaged is not None:
                return
            self.damaged = f"{type(exc).__name__}: {exc}"
        log.error("index.db is damaged (%s): rebuilding it from the files", self.damaged)
        if self.on_damage is not None:
            self.on_damage(self.damaged)

    def quick_check(self, limit: int = 5) -> list[str]:
        """:func:`quick_check` of this database's file."""
        return quick_check(self.path, limit)

    def reset(self) -> None:
        """Replace the file by an empty database of this schema (the caller rebuilds it):
        this process's connections reopen on the new file at their next use. Sets
        :attr:`needs_rebuild`; :attr:`damaged` stays until the rebuild is done (reads of
        the empty file would be short answers)."""
        with self.write_lock:
            self.close()
            remove_db(self.path)
            self._closed = False
            self._local = threading.local()
            self.conn()
            self.needs_rebuild = True

    def record(self, op: Op) -> None:
        """Note a write for the running rebuild to replay (nothing when none runs).
        Call it inside :meth:`writing`, so the rebuild's switch sees it or its effect."""
        if self.ops is not None:
            self.ops.append(op)


def quick_check(path: Path | str, limit: int = 5) -> list[str]:
    """SQLite's ``PRAGMA quick_check`` of the file at ``path``, opened read-only: ``[]``
    when it is sound, else up to ``limit`` problems it names (or the error it raised).
    Reads every page of the file once (no cross-check of indexes against tables)."""
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error as exc:
        return [f"{type(exc).__name__}: {exc}"]
    try:
        rows = [str(r[0]) for r in conn.execute(f"PRAGMA quick_check({int(limit)})")]
    except apsw.Error as exc:
        return [f"{type(exc).__name__}: {exc}"]
    finally:
        with suppress(apsw.Error):
            conn.close()
    return [] if rows == ["ok"] else rows


def note_failure(conn: apsw.Connection, exc: BaseException) -> None:
    """Report ``exc``, raised by a query on ``conn``, to the Database that opened the
    connection when it means the file is damaged (a CorruptError)."""
    if isinstance(exc, DAMAGE):
        db = _OWNERS.get(conn)
        if db is not None:
            db.corrupted(exc)
