"""The derived search index: an apsw SQLite database with FTS5 beside the wiki.

Everything here can be deleted and rebuilt from ``wiki/`` (and the spool) with
:meth:`Index.rebuild`. The markdown files are the truth; this module only mirrors
them (invariant 1).

Concurrency
    One apsw connection per thread (``threading.local``); WAL journal,
    ``busy_timeout`` 5000 ms, ``synchronous=NORMAL``. Writers in this process are
    serialised by a lock and open their transactions with ``BEGIN IMMEDIATE`` so
    that a busy database waits on the timeout instead of failing on a lock
    upgrade. Readers never block (WAL) and never see a half-written page: every
    page change is one transaction. A connection notices when ``index.db`` was
    deleted or replaced on disk (inode check on each use) and reopens.

Rebuild
    :meth:`Index.rebuild` builds a complete index into ``index.db.new`` beside the
    live file, then copies it into the live database with SQLite's online backup
    API in a single write transaction: readers (other threads, other processes)
    see the old index until the commit and the new one after, never an empty or
    partial one. (Renaming a file over a live WAL database is unsafe: the old
    ``-wal``/``-shm`` files keep the same name and another process's open
    connection would mix them with the new file, so ``os.replace`` is not used.)
    Page writes made through this object while the rebuild runs are replayed onto
    the new index before the copy, and the spool rows are carried over.

Schema (``PRAGMA user_version`` = :data:`SCHEMA_VERSION`; on any other version
the tables are dropped, recreated empty and :attr:`Index.needs_rebuild` is set)
    ``pages``     one row per page; ``kind`` from frontmatter ``type`` else
                  ``"page"``, ``project`` from frontmatter ``project`` else the
                  path ``projects/<project>/...``, ``id`` from frontmatter ``id``
                  else the path; ``tags``/``aliases``/``meta``/``diagnostics`` JSON;
                  ``owner`` the folded user a personal page belongs to alone
                  (:func:`wiki_memory.identity.personal_owner`), NULL when shared.
    ``sections``  one row per section (heading or block id) with the original text.
    ``fts``       FTS5 (contentless, ``contentless_delete=1``) with rowid =
                  ``sections.rowid``, columns title, aliases, tags, heading, body
                  holding :func:`wiki_memory.index.text.index_text` of each value.
    ``links``     outgoing wikilinks as written (``target_key`` = casefolded target)
                  with their status and resolved path; an ambiguous link's
                  candidates are worked out from ``names`` when read, not stored.
    ``names``     casefolded title, file stem, aliases and path (no ``.md``) of each
                  page, for backlinks.
    ``meta``      ``wiki_root``: the wiki folder the index was built from.
    ``spool``/``spool_fts``  uncompiled observations, so a running session is
                  searchable before its page is written.

Ranking: ``bm25`` with column weights title 10, aliases 8, tags 4, heading 3,
body 1; scores are returned negated so that higher is better; ties are broken by
path and section order, so results do not depend on insertion order. Project and kind
filters are part of the ``WHERE`` clause, so rows outside them never take a
place in the ranked, limited result (invariant 9). (FTS5's bm25 statistics —
document count, average lengths, term frequencies — still cover the whole table.)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import stat
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import apsw
from filelock import FileLock

from wiki_memory.errors import Unavailable
from wiki_memory.identity import Identity, is_pinned, may_read, personal_owner, visible_sql
from wiki_memory.index.parallel import map_unordered
from wiki_memory.index.query import build_match
from wiki_memory.index.text import index_text
from wiki_memory.wiki import links as wl
from wiki_memory.wiki.page import Diagnostic, ParsedPage, Section, parse_page
from wiki_memory.wiki.paths import odd_name, report_odd_name

log = logging.getLogger("wiki_memory.index")

__all__ = [
    "Index",
    "SectionHit",
    "SpoolHit",
    "SearchError",
    "is_indexable",
    "read_wiki_root",
    "SCHEMA_VERSION",
    "BM25_WEIGHTS",
]

SCHEMA_VERSION = 5
"""Bump when the schema or what is stored in it changes: old indexes are then rebuilt."""

BM25_WEIGHTS = {"title": 10.0, "aliases": 8.0, "tags": 4.0, "heading": 3.0, "body": 1.0}
"""bm25 column weights, in FTS column order."""

BUSY_TIMEOUT_MS = 5000
_BM25 = "bm25(fts, {})".format(", ".join(str(w) for w in BM25_WEIGHTS.values()))
_UPDATED = "COALESCE(p.updated, p.created, strftime('%Y-%m-%dT%H:%M:%SZ', p.mtime, 'unixepoch'))"
_WRITE_BATCH = 256

_SCHEMA = """
CREATE TABLE pages(
    path TEXT PRIMARY KEY,
    id TEXT,
    title TEXT,
    kind TEXT,
    project TEXT,
    tags TEXT,          -- JSON list
    aliases TEXT,       -- JSON list
    updated TEXT,       -- frontmatter 'updated' (ISO-8601) or NULL
    created TEXT,       -- frontmatter 'created' or NULL
    hash TEXT,          -- sha256 hex of the file's bytes
    size INTEGER,       -- bytes
    mtime REAL,         -- seconds since the epoch, as stat() gave it (NULL if unknown)
    meta TEXT,          -- JSON object: the frontmatter
    diagnostics TEXT,   -- JSON list of {kind, line, message}
    owner TEXT          -- folded user the page belongs to alone, NULL when shared
                        -- (wiki_memory.identity.personal_owner)
);
CREATE INDEX pages_project_kind ON pages(project, kind);
CREATE INDEX pages_kind ON pages(kind);
CREATE INDEX pages_owner ON pages(owner);
CREATE TABLE sections(
    rowid INTEGER PRIMARY KEY,
    path TEXT NOT NULL,
    anchor TEXT,
    heading TEXT,
    ord INTEGER,        -- 0-based position in the page
    line INTEGER,       -- 1-based line in the file
    hash TEXT,          -- sha256 hex of the section text (UTF-8)
    text TEXT,          -- original text, for snippets
    project TEXT,       -- copy of pages.project (filter without a join)
    kind TEXT           -- copy of pages.kind
);
CREATE INDEX sections_path ON sections(path);
CREATE VIRTUAL TABLE fts USING fts5(
    title, aliases, tags, heading, body,
    tokenize = "unicode61 remove_diacritics 2",
    content = '', contentless_delete = 1
);
CREATE TABLE links(
    src_path TEXT NOT NULL,
    target TEXT,        -- as written (page part; '' for a same-page reference)
    fragment TEXT,
    alias TEXT,
    embed INTEGER,
    line INTEGER,
    target_key TEXT,    -- links.target_key(target): NFC, case-folded, no .md, ./ ../ applied
    in_frontmatter INTEGER,
    status TEXT,        -- 'resolved' | 'unresolved' | 'ambiguous' | 'attachment'
    resolved_path TEXT  -- the page (or attachment file) it leads to, else NULL
);
CREATE INDEX links_src ON links(src_path);
CREATE INDEX links_target ON links(target_key);
CREATE INDEX links_resolved ON links(resolved_path);
CREATE TABLE names(
    key TEXT NOT NULL,  -- links.name_key of the path, a path suffix, stem, title or alias
    path TEXT NOT NULL,
    source TEXT         -- 'path' | 'suffix' | 'stem' | 'title' | 'alias'
);
CREATE INDEX names_key ON names(key);
CREATE INDEX names_path ON names(path);
CREATE TABLE meta(
    key TEXT PRIMARY KEY,   -- 'wiki_root': the wiki folder the index was built from
    value TEXT
);
CREATE TABLE files(
    path TEXT PRIMARY KEY,  -- a file that is not a page (an attachment: image, pdf, ...)
    size INTEGER,
    mtime REAL
);
CREATE TABLE file_keys(
    key TEXT NOT NULL,      -- links.name_key of the path and of each trailing part of it
    path TEXT NOT NULL
);
CREATE INDEX file_keys_key ON file_keys(key);
CREATE INDEX file_keys_path ON file_keys(path);
CREATE TABLE spool(
    rowid INTEGER PRIMARY KEY,
    session_key TEXT NOT NULL,
    obs_id TEXT NOT NULL,
    project TEXT,
    harness TEXT,
    session_id TEXT,
    user TEXT,
    ts TEXT,
    text TEXT,
    UNIQUE(session_key, obs_id)
);
CREATE INDEX spool_project ON spool(project);
CREATE VIRTUAL TABLE spool_fts USING fts5(
    body,
    tokenize = "unicode61 remove_diacritics 2",
    content = '', contentless_delete = 1
);
"""


def _statements(sql: str) -> list[str]:
    """``sql`` split into whole statements (SQLite's own ``sqlite3_complete`` decides)."""
    out: list[str] = []
    acc = ""
    for line in sql.splitlines(keepends=True):
        acc += line
        if apsw.complete(acc):
            out.append(acc.strip())
            acc = ""
    return out


# A rebuild creates the secondary indexes after the bulk insert (one sort each instead of
# a B-tree update per row).
_STATEMENTS = _statements(_SCHEMA)
_SCHEMA_TABLES = "\n".join(st for st in _STATEMENTS if not st.startswith("CREATE INDEX"))
_SCHEMA_INDEXES = "\n".join(st for st in _STATEMENTS if st.startswith("CREATE INDEX"))


class SearchError(Unavailable):
    """503 ``unavailable``: the search engine failed. Never reported as "no results"."""


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


# --- which files are pages -----------------------------------------------------------

_TEMP_NAME = re.compile(
    r"""^(?:
        4913                     # vim's write test
      | .*~                      # backups
      | .*\.sw[a-p]              # vim swap
      | .*___jb_(?:tmp|old)___   # JetBrains safe write
      | \#.*\#                   # emacs auto-save
      | .*\.wm-tmp.*             # our own atomic-write temp files
    )$""",
    re.X,
)


def _ignored_part(name: str) -> bool:
    if not name or name in (".", "..") or name.startswith(".") or bool(_TEMP_NAME.match(name)):
        return True
    return odd_name(name) is not None  # not valid UTF-8: never a page or an index row


def is_indexable(rel_path: str) -> bool:
    """True when ``rel_path`` (relative to ``wiki/``, ``/``-separated) names a page to index.

    Pages are ``*.md`` files. Excluded: anything under a dot directory (``.git/``,
    ``.obsidian/``, ``.trash/``), dotfiles (``.#x``, ``.x.swp``, our ``.x.wm-tmp*``
    files), editor temp files (``4913``, ``*~``, ``*.swp``, ``*___jb_tmp___``,
    ``*___jb_old___``, ``#x#``), absolute paths, ``..`` and names that are not valid
    UTF-8 (:func:`~wiki_memory.wiki.paths.odd_name`; logged once). Symlinks are checked
    by :meth:`Index.sync_paths`, which needs the file system.
    """
    rel = rel_path.replace("\\", "/")
    if not rel or rel.startswith("/") or not rel.endswith(".md"):
        return False
    if odd_name(rel):
        report_odd_name(rel)
        return False
    return not any(_ignored_part(part) for part in rel.split("/"))


def _ignored_dir(rel_dir: str) -> bool:
    return any(_ignored_part(part) for part in rel_dir.split("/") if rel_dir)


# --- page rows -----------------------------------------------------------------------


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _text(value: Any) -> str | None:
    if value is None or value == "":
        return None
    iso = getattr(value, "isoformat", None)
    return str(iso()) if callable(iso) else str(value)


def _str_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Iterable):
        return [str(v) for v in value if v is not None and str(v) != ""]
    return [str(value)]


def _parse(raw: bytes, path: str) -> ParsedPage:
    """parse_page, but a parser bug never stops indexing: the page becomes plain text."""
    try:
        return parse_page(raw, path)
    except Exception as exc:  # noqa: BLE001 - indexing must go on; the problem is recorded
        text = raw.decode("utf-8", errors="replace")
        return ParsedPage(
            metadata={},
            body=text,
            body_line=1,
            title=_stem(path),
            sections=[Section("", "", 0, text, 1)],
            diagnostics=[Diagnostic("parse-error", None, f"{type(exc).__name__}: {exc}")],
        )


def _stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].removesuffix(".md")


def _project_from_path(path: str) -> str | None:
    parts = path.split("/")
    if len(parts) >= 3 and parts[0] == "projects" and parts[1]:
        return parts[1]
    return None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _check_rel(path: str) -> str:
    if not path or path.startswith("/") or "\\" in path or ".." in path.split("/"):
        raise ValueError(f"not a wiki-relative path: {path!r}")
    return path


# --- the index -----------------------------------------------------------------------

_Op = (
    tuple[Literal["upsert"], str, bytes, float | None]
    | tuple[Literal["delete", "under", "file_delete"], str]
    | tuple[Literal["file_add"], str, int, float | None]
)


class Index:
    """The search index of one wiki, stored at ``db_path`` (usually ``<data_dir>/index.db``).

    Thread-safe: each thread gets its own connection. Opening creates the file and
    schema when missing; a file with another schema version is emptied and
    :attr:`needs_rebuild` is set (the caller then runs :meth:`rebuild`).
    """

    def __init__(self, db_path: Path | str) -> None:
        self.db_path = Path(db_path)
        self.needs_rebuild = False
        self._local = threading.local()
        self._conns: weakref.WeakSet[apsw.Connection] = weakref.WeakSet()
        self._conns_lock = threading.Lock()
        self._write_lock = threading.RLock()
        self._rebuild_lock = threading.Lock()
        self._ops: list[_Op] | None = None  # page writes made during a rebuild
        self._closed = False
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn()
        except (apsw.NotADBError, apsw.CorruptError):
            # Derived data: a damaged file is replaced by an empty one.
            self.close()
            self._closed = False
            for suffix in ("", "-wal", "-shm", "-journal"):
                with suppress(FileNotFoundError):
                    os.remove(f"{self.db_path}{suffix}")
            self._conn()
            self.needs_rebuild = True

    # -- connections --

    def _file_id(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.db_path)
        except FileNotFoundError:
            return None
        return (st.st_dev, st.st_ino)

    def _conn(self) -> apsw.Connection:
        """This thread's connection, (re)opened when missing or when the file changed."""
        if self._closed:
            raise RuntimeError("index is closed")
        local = self._local
        conn: apsw.Connection | None = getattr(local, "conn", None)
        file_id = self._file_id()
        if conn is not None:
            if file_id is not None and file_id == local.file_id:
                return conn
            self._forget(conn)
        conn = apsw.Connection(str(self.db_path))
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
        with self._write_lock, conn:
            if conn.pragma("user_version") == SCHEMA_VERSION:
                return
            _drop_all(conn)
            conn.execute(_SCHEMA)
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

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _writing(self) -> Iterator[apsw.Connection]:
        """A write transaction on the live database (BEGIN IMMEDIATE), serialised in-process."""
        with self._write_lock:
            conn = self._conn()
            with conn:
                yield conn

    def _record(self, op: _Op) -> None:
        if self._ops is not None:
            self._ops.append(op)

    # -- pages --

    def upsert_page(self, path: str, raw: bytes, mtime: float | None = None) -> bool:
        """Index the page at wiki-relative ``path`` with file bytes ``raw``.

        ``mtime`` is the file's modification time in seconds (``stat().st_mtime``),
        or None. Returns False, without re-indexing, when the stored sha256 of the
        bytes is the same (watcher echoes of the server's own writes are cheap);
        True when the page was (re)indexed. Raises ValueError for a path that is
        absolute or contains ``..``. The page's rows change in one transaction.
        """
        _check_rel(path)
        with self._writing() as conn:
            self._record(("upsert", path, raw, mtime))
            return _upsert(conn, path, raw, mtime)

    def delete_page(self, path: str) -> bool:
        """Remove the page at ``path`` from the index. True if it was there."""
        with self._writing() as conn:
            self._record(("delete", path))
            return _delete(conn, path)

    def delete_under(self, prefix_dir: str) -> int:
        """Remove every page below the directory ``prefix_dir`` (``""`` = all). Returns the count."""
        with self._writing() as conn:
            self._record(("under", prefix_dir))
            return _delete_under(conn, prefix_dir)

    def page_hash(self, path: str) -> str | None:
        """The stored sha256 hex of the page's bytes, or None when not indexed."""
        row = self._conn().execute("SELECT hash FROM pages WHERE path = ?", (path,)).fetchone()
        return None if row is None else str(row[0])

    def set_wiki_root(self, wiki_dir: Path | str) -> None:
        """Record the wiki folder the index holds (so a tool run without ``--wiki`` can
        tell that the index belongs to another folder, e.g. a ``serve --wiki`` vault)."""
        with self._write_lock, self._conn() as conn:
            _set_meta(conn, "wiki_root", os.path.abspath(wiki_dir))

    def paths(self) -> dict[str, str]:
        """Every indexed page: path → sha256 hex of its bytes."""
        return {p: h for p, h in self._conn().execute("SELECT path, hash FROM pages")}

    def count_pages(self) -> int:
        """How many pages are indexed."""
        return _scalar(self._conn(), "SELECT count(*) FROM pages")

    def rows(self) -> set[tuple[str, str, str]]:
        """Every section as ``(path, anchor, sha256 of its text)``: equal sets mean equal indexes."""
        return {
            (p, a, h) for p, a, h in self._conn().execute("SELECT path, anchor, hash FROM sections")
        }

    # -- files --

    def sync_paths(self, wiki_dir: Path | str, rel_paths: Iterable[str]) -> int:
        """Bring the index in line with the files at ``rel_paths`` under ``wiki_dir``.

        Each path (wiki-relative, or absolute inside ``wiki_dir``) is checked with
        ``lstat``: an indexable ``.md`` file is upserted (hash-compared, so unchanged
        files cost a read); another regular file is recorded as an attachment (for link
        resolution); a missing path is removed, as a page, a file and as a directory (a
        renamed directory reports only itself); a directory is reconciled: every page
        below it is upserted (skipped when size and mtime match the index) and index
        rows below it whose file is gone are removed. Symlinks are never followed and
        count as missing, as do paths resolving outside ``wiki_dir`` and files with more
        than one hard link (their other name may be outside the wiki). Ignored names
        (see :func:`is_indexable`) are skipped. Links that name a page or file that
        appeared or went away are resolved again in the same transaction. Returns how
        many pages were added, changed or removed.
        """
        root = Path(wiki_dir)
        root_real = os.path.realpath(root)
        changed = 0
        missing: list[str] = []
        dirs: list[str] = []
        pages: list[tuple[str, os.stat_result]] = []
        others: list[tuple[str, os.stat_result]] = []
        for given in rel_paths:
            rel = _relative(root, given)
            if rel is None:
                continue
            if rel == "":
                dirs.append("")
                continue
            if _ignored_dir(rel):
                continue
            full = root / rel
            try:
                st = os.lstat(full)
                gone = not _acceptable(st) or not _inside(os.path.realpath(full), root_real)
            except (FileNotFoundError, NotADirectoryError):
                gone = True
            if gone:
                missing.append(rel)
            elif stat.S_ISDIR(st.st_mode):
                dirs.append(rel)
            elif stat.S_ISREG(st.st_mode) and is_indexable(rel):
                pages.append((rel, st))
            elif stat.S_ISREG(st.st_mode) and not rel.endswith(".md"):
                others.append((rel, st))
        for i in range(0, len(missing), _WRITE_BATCH):
            with self._writing() as conn:
                dirty = _Dirty()
                for rel in missing[i : i + _WRITE_BATCH]:
                    if rel.endswith(".md"):
                        self._record(("delete", rel))
                        changed += int(_delete(conn, rel, dirty))
                    self._record(("file_delete", rel))
                    _file_delete(conn, rel, dirty)
                    self._record(("under", rel))
                    changed += _delete_under(conn, rel, dirty)
                _resolve_dirty(conn, dirty)
        for i in range(0, len(pages), _WRITE_BATCH):
            batch = [(rel, st, _read(root / rel)) for rel, st in pages[i : i + _WRITE_BATCH]]
            with self._writing() as conn:
                dirty = _Dirty()
                for rel, st, raw in batch:
                    if raw is None:
                        self._record(("delete", rel))
                        changed += int(_delete(conn, rel, dirty))
                    else:
                        self._record(("upsert", rel, raw, st.st_mtime))
                        changed += int(_upsert(conn, rel, raw, st.st_mtime, dirty))
                _resolve_dirty(conn, dirty)
        if others:
            with self._writing() as conn:
                dirty = _Dirty()
                for rel, st in others:
                    self._record(("file_add", rel, st.st_size, st.st_mtime))
                    _file_add(conn, rel, st.st_size, st.st_mtime, dirty)
                _resolve_dirty(conn, dirty)
        for rel in dirs:
            changed += self._reconcile(root, root_real, rel)
        return changed

    def add_file(self, path: str, size: int, mtime: float | None) -> bool:
        """Record a file that is not a page (an attachment) so links to it resolve."""
        _check_rel(path)
        with self._writing() as conn:
            self._record(("file_add", path, size, mtime))
            dirty = _Dirty()
            added = _file_add(conn, path, size, mtime, dirty)
            _resolve_dirty(conn, dirty)
            return added

    def _reconcile(self, root: Path, root_real: str, rel_dir: str) -> int:
        found: dict[str, os.stat_result] = {}
        found_files: dict[str, os.stat_result] = {}
        for rel, st, is_page in _walk(root, root_real, rel_dir, files=True):
            (found if is_page else found_files)[rel] = st
        conn = self._conn()
        if rel_dir:
            lo, hi = rel_dir + "/", rel_dir + "0"  # '0' sorts right after '/'
            where, args = "WHERE path >= ? AND path < ?", (lo, hi)
        else:
            where, args = "", ()  # type: ignore[assignment]
        known = {
            p: (s, m)
            for p, s, m in conn.execute(f"SELECT path, size, mtime FROM pages {where}", args)
        }
        known_files = {
            p: (s, m)
            for p, s, m in conn.execute(f"SELECT path, size, mtime FROM files {where}", args)
        }
        changed = 0
        gone = [p for p in known if p not in found]
        gone_files = [p for p in known_files if p not in found_files]
        new_files = [
            (rel, st)
            for rel, st in found_files.items()
            if known_files.get(rel) != (st.st_size, st.st_mtime)
        ]
        todo = [
            (rel, st) for rel, st in found.items() if known.get(rel) != (st.st_size, st.st_mtime)
        ]
        if gone or gone_files or new_files:
            with self._writing() as conn:
                dirty = _Dirty()
                for p in gone:
                    self._record(("delete", p))
                    changed += int(_delete(conn, p, dirty))
                for p in gone_files:
                    self._record(("file_delete", p))
                    _file_delete(conn, p, dirty)
                for p, st in new_files:
                    self._record(("file_add", p, st.st_size, st.st_mtime))
                    _file_add(conn, p, st.st_size, st.st_mtime, dirty)
                _resolve_dirty(conn, dirty)
        for i in range(0, len(todo), _WRITE_BATCH):
            batch = []
            for rel, st in todo[i : i + _WRITE_BATCH]:
                raw = _read(root / rel)
                if raw is not None:
                    batch.append((rel, raw, st.st_mtime))
            with self._writing() as conn:
                dirty = _Dirty()
                for rel, raw, mtime in batch:
                    self._record(("upsert", rel, raw, mtime))
                    changed += int(_upsert(conn, rel, raw, mtime, dirty))
                _resolve_dirty(conn, dirty)
        return changed

    def rebuild(self, wiki_dir: Path | str, progress: bool = False) -> int:
        """Re-index every page under ``wiki_dir`` from the files; returns the page count.

        Builds ``<db>.new`` from scratch, then copies it over the live database in one
        transaction with SQLite's backup API, so concurrent readers (threads and
        other processes) see the complete old index until the switch and the
        complete new one after. Page writes made through this object during the
        rebuild are replayed onto the new index first; the spool rows are kept.
        ``progress=True`` shows a tqdm bar on stderr. Only one rebuild runs at a
        time (a file lock beside the database). Clears :attr:`needs_rebuild`.
        """
        root = Path(wiki_dir)
        root_real = os.path.realpath(root)
        new_path = Path(f"{self.db_path}.new")
        with self._rebuild_lock, FileLock(f"{new_path}.lock"):
            _remove_db(new_path)
            with self._write_lock:
                self._ops = []
            new = apsw.Connection(str(new_path))
            try:
                live = self._conn()
                new.pragma("page_size", live.pragma("page_size"))
                new.pragma("journal_mode", "MEMORY")
                new.pragma("synchronous", "OFF")
                new.pragma("cache_size", -65536)
                with new:
                    new.execute(_SCHEMA_TABLES)
                    new.pragma("user_version", SCHEMA_VERSION)
                    _set_meta(new, "wiki_root", os.path.abspath(root))
                pages: list[tuple[str, os.stat_result]] = []
                other: list[tuple[str, os.stat_result]] = []
                for rel, st, is_page in _walk(root, root_real, "", files=True):
                    (pages if is_page else other).append((rel, st))
                self._fill(new, root, pages, progress)
                with new:
                    new.execute(_SCHEMA_INDEXES)
                    scratch = _Dirty()
                    for rel, st in other:
                        _file_add(new, rel, st.st_size, st.st_mtime, scratch)
                    _resolve_all(new)
                new.execute("INSERT INTO fts(fts) VALUES('optimize')")
                # Switch: no other write of this process may run from here to the copy.
                with self._write_lock:
                    ops, self._ops = self._ops or [], None
                    with new:
                        dirty = _Dirty()
                        for op in ops:
                            if op[0] == "upsert":
                                _upsert(new, op[1], op[2], op[3], dirty)
                            elif op[0] == "delete":
                                _delete(new, op[1], dirty)
                            elif op[0] == "under":
                                _delete_under(new, op[1], dirty)
                            elif op[0] == "file_add":
                                _file_add(new, op[1], op[2], op[3], dirty)
                            else:
                                _file_delete(new, op[1], dirty)
                        _resolve_dirty(new, dirty)
                        _copy_spool(self._conn(), new)
                    count = _scalar(new, "SELECT count(*) FROM pages")
                    _copy_database(new, self._conn())
                    self.needs_rebuild = False
            finally:
                with self._write_lock:
                    self._ops = None
                new.close()
                _remove_db(new_path)
        return count

    def _fill(
        self,
        conn: apsw.Connection,
        root: Path,
        files: list[tuple[str, os.stat_result]],
        progress: bool,
    ) -> int:
        """Insert every page of ``files`` into the fresh database ``conn`` (links left
        unresolved). Pages are parsed by helper processes for large wikis (see
        :func:`_rebuild_workers` and :func:`~wiki_memory.index.parallel.map_unordered`)
        and by this thread, which also does the inserts, 512 pages per transaction."""
        from tqdm import tqdm

        jobs = [(str(root), rel, st.st_mtime) for rel, st in files]
        helpers = _rebuild_workers(len(jobs)) - 1
        count = 0
        batch: list[tuple] = []
        with tqdm(
            total=len(jobs), unit="page", desc="reindex", disable=not progress, leave=False
        ) as bar:
            for prep in map_unordered(_prepare_file, jobs, helpers):
                bar.update(1)
                if prep is not None:
                    batch.append(prep)
                if len(batch) >= 512:
                    with conn:
                        _insert_prepared(conn, batch)
                    count += len(batch)
                    batch = []
            if batch:
                with conn:
                    _insert_prepared(conn, batch)
                count += len(batch)
        return count

    # -- search --

    def search(
        self,
        match: str,
        *,
        project: str | None = None,
        kinds: Sequence[str] | None = None,
        exclude_dirs: Sequence[str] = (),
        limit: int = 50,
    ) -> list[SectionHit]:
        """Run an FTS5 ``MATCH`` expression (from :func:`~wiki_memory.index.query.build_match`).

        Returns at most ``limit`` sections, best first, ranked by weighted bm25
        (:data:`BM25_WEIGHTS`). ``project`` and ``kinds`` (page kinds, e.g.
        ``["note", "session"]``; an empty list allows none) and ``exclude_dirs``
        (wiki-relative directories whose pages are left out, e.g. other people's
        ``people/<user>``) filter inside the SQL, before ranking and the limit. An empty ``match`` gives ``[]``. Raises
        :class:`SearchError` when SQLite fails (bad expression, I/O): an error is
        never reported as zero hits.
        """
        if not match or not match.strip() or limit <= 0:
            return []
        if kinds is not None and not kinds:
            return []
        where = ["fts MATCH ?"]
        args: list[Any] = [match]
        if project is not None:
            where.append("s.project = ?")
            args.append(project)
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
            SELECT s.path, s.anchor, s.heading, p.title, p.kind, p.project, {_UPDATED},
                   -ranked.r, s.text, s.line
            FROM ranked
            JOIN sections AS s ON s.rowid = ranked.rid
            JOIN pages AS p ON p.path = s.path
            ORDER BY ranked.r, ranked.path, ranked.ord
        """
        try:
            rows: list[Any] = self._conn().execute(sql, args).fetchall()
        except apsw.Error as exc:
            raise SearchError(f"search failed: {type(exc).__name__}: {exc}") from exc
        return [
            SectionHit(
                path=r[0],
                anchor=r[1] or "",
                heading=r[2] or "",
                title=r[3] or "",
                kind=r[4] or "page",
                project=r[5],
                updated=r[6],
                score=float(r[7]),
                text=r[8] or "",
                line=int(r[9] or 0),
            )
            for r in rows
        ]

    def query(
        self,
        text: str,
        *,
        project: str | None = None,
        kinds: Sequence[str] | None = None,
        exclude_dirs: Sequence[str] = (),
        limit: int = 50,
        mode: Literal["auto", "and", "or"] = "auto",
    ) -> list[SectionHit]:
        """Search free text safely (see :mod:`wiki_memory.index.query`).

        ``mode="and"``: every word must match; ``"or"``: any word; ``"auto"``
        (default): AND first, and when that finds fewer than ``max(1, limit // 5)``
        sections, the OR results are appended (AND hits stay first, no duplicates).
        Text with nothing searchable (``""``, ``*``, punctuation) gives ``[]``.
        Filters as in :meth:`search`. Raises :class:`SearchError` when the engine fails.
        """
        if mode not in ("auto", "and", "or"):
            raise ValueError(f"mode must be 'auto', 'and' or 'or', not {mode!r}")
        first = build_match(text, "or" if mode == "or" else "and")
        if first is None:
            return []
        scope: dict[str, Any] = {"project": project, "kinds": kinds, "exclude_dirs": exclude_dirs}
        hits = self.search(first, limit=limit, **scope)
        if mode != "auto" or len(hits) >= max(1, limit // 5):
            return hits
        second = build_match(text, "or")
        if second is None or second == first:
            return hits
        seen = {(h.path, h.anchor, h.line) for h in hits}
        for h in self.search(second, limit=limit, **scope):
            if len(hits) >= limit:
                break
            if (h.path, h.anchor, h.line) not in seen:
                hits.append(h)
        return hits

    # -- spool --

    def add_spool(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Add (or replace, by ``(session_key, obs_id)``) uncompiled observations.

        Each row needs ``session_key``, ``obs_id`` and ``text``; ``project``,
        ``harness``, ``session_id``, ``user`` and ``ts`` (ISO-8601) are optional.
        Returns how many rows were written. Raises KeyError for a missing key.
        """
        n = 0
        with self._writing() as conn:
            for row in rows:
                _add_spool_row(conn, row)
                n += 1
        return n

    def delete_spool_session(self, session_key: str) -> int:
        """Remove every spooled observation of ``session_key`` (after it was compiled)."""
        with self._writing() as conn:
            conn.execute(
                "DELETE FROM spool_fts WHERE rowid IN "
                "(SELECT rowid FROM spool WHERE session_key = ?)",
                (session_key,),
            )
            conn.execute("DELETE FROM spool WHERE session_key = ?", (session_key,))
            return int(conn.changes())

    def replace_spool(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Replace the whole spool table with ``rows`` (same keys as :meth:`add_spool`)."""
        n = 0
        with self._writing() as conn:
            conn.execute("DELETE FROM spool_fts")
            conn.execute("DELETE FROM spool")
            for row in rows:
                _add_spool_row(conn, row)
                n += 1
        return n

    def search_spool(
        self,
        match: str,
        *,
        project: str | None = None,
        user: str | None = None,
        limit: int = 50,
    ) -> list[SpoolHit]:
        """Run an FTS5 ``MATCH`` expression over the spool; filters apply before ranking.

        Returns at most ``limit`` observations, best first. Raises
        :class:`SearchError` when SQLite fails.
        """
        if not match or not match.strip() or limit <= 0:
            return []
        where = ["spool_fts MATCH ?"]
        args: list[Any] = [match]
        if project is not None:
            where.append("s.project = ?")
            args.append(project)
        if user is not None:
            where.append("s.user = ?")
            args.append(user)
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
            rows: list[Any] = self._conn().execute(sql, args).fetchall()
        except apsw.Error as exc:
            raise SearchError(f"spool search failed: {type(exc).__name__}: {exc}") from exc
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
        self,
        text: str,
        *,
        project: str | None = None,
        user: str | None = None,
        limit: int = 50,
        mode: Literal["and", "or"] = "and",
    ) -> list[SpoolHit]:
        """:meth:`search_spool` for free text (built safely with ``build_match``)."""
        match = build_match(text, mode)
        if match is None:
            return []
        return self.search_spool(match, project=project, user=user, limit=limit)

    # -- reading pages --

    def page_meta(self, path: str, who: Identity | None = None) -> dict[str, Any] | None:
        """The ``pages`` row of ``path`` as a dict (JSON columns decoded), or None (also
        when ``who`` may not see it; None is the server itself).

        Keys: path, id, title, kind, project, tags, aliases, updated, created, hash,
        size, mtime, meta, diagnostics, owner.
        """
        cond, args = visible_sql("p", who)
        row = (
            self._conn()
            .execute(
                f"SELECT {', '.join('p.' + c for c in _PAGE_COLUMNS)} FROM pages AS p "
                f"WHERE p.path = ? AND {cond}",
                (path, *args),
            )
            .fetchone()
        )
        return None if row is None else _page_dict(row)

    def list_pages(
        self,
        project: str | None = None,
        kind: str | None = None,
        since: str | None = None,
        limit: int = 100,
        offset: int = 0,
        who: Identity | None = None,
    ) -> list[dict[str, Any]]:
        """Pages, most recently updated first (then by path), as :meth:`page_meta` dicts.

        ``since`` is an ISO-8601 string compared with the page's ``updated`` (else
        ``created``, else mtime), which is returned under ``updated``. Pages ``who`` may
        not see are left out in the SQL, so they take no place in ``limit``/``offset``.
        """
        cond, args = visible_sql("p", who)
        where: list[str] = [cond]
        if project is not None:
            where.append("p.project = ?")
            args.append(project)
        if kind is not None:
            where.append("p.kind = ?")
            args.append(kind)
        if since is not None:
            where.append(f"{_UPDATED} >= ?")
            args.append(since)
        args.extend([int(limit), int(offset)])
        sql = f"""
            SELECT p.path, p.id, p.title, p.kind, p.project, p.tags, p.aliases,
                   {_UPDATED} AS updated, p.created, p.hash, p.size, p.mtime, p.meta,
                   p.diagnostics, p.owner
            FROM pages AS p {"WHERE " + " AND ".join(where) if where else ""}
            ORDER BY updated DESC, p.path LIMIT ? OFFSET ?
        """
        return [_page_dict(row) for row in self._conn().execute(sql, args)]

    def sections_of(self, path: str) -> list[dict[str, Any]]:
        """The sections of ``path`` in page order: dicts with anchor, heading, ord, line, hash, text."""
        cur = self._conn().execute(
            "SELECT anchor, heading, ord, line, hash, text FROM sections WHERE path = ? ORDER BY ord",
            (path,),
        )
        keys = ("anchor", "heading", "ord", "line", "hash", "text")
        return [dict(zip(keys, row, strict=True)) for row in cur]

    def links_from(self, path: str) -> list[dict[str, Any]]:
        """Outgoing links of ``path`` as written: dicts with target, fragment, alias, embed, line."""
        cur = self._conn().execute(
            "SELECT target, fragment, alias, embed, line FROM links WHERE src_path = ? "
            "ORDER BY line, rowid",
            (path,),
        )
        return [
            {"target": t, "fragment": f, "alias": a, "embed": bool(e), "line": ln}
            for t, f, a, e, ln in cur
        ]

    def outlinks(self, path: str, who: Identity | None = None) -> list[dict[str, Any]]:
        """Every link of ``path`` with where it leads, in file order, as ``who`` sees it.

        Dicts: ``target`` (as written, ``""`` for a same-page reference), ``fragment``,
        ``alias``, ``embed``, ``line``, ``in_frontmatter``, ``status`` (``resolved``,
        ``unresolved``, ``ambiguous``, ``attachment``), ``path`` (the page or file it
        leads to; None when unresolved, ambiguous or a missing attachment) and
        ``candidates`` (paths, for an ambiguous link; else ``[]``). For a caller ``who``
        every link is resolved again among the pages and files ``who`` may see
        (:meth:`resolver_for`), so a hidden page is never named and never changes where a
        link leads (a link to it alone reads as unresolved).
        """
        conn = self._conn()
        rows: list[Any] = conn.execute(
            "SELECT target, fragment, alias, embed, line, in_frontmatter, status, "
            "resolved_path, target_key FROM links WHERE src_path = ? ORDER BY line, rowid",
            (path,),
        ).fetchall()
        cands = _candidates(conn, {r[8] for r in rows if r[6] == wl.AMBIGUOUS})
        resolver = None
        if who is not None:
            resolver = _resolver_for(conn, {r[8] for r in rows if r[0]}, who)
        out = []
        for t, f, a, e, ln, fm, st, rp, k in rows:
            cand = list(cands.get(k, ())) if st == wl.AMBIGUOUS else []
            if resolver is not None and t:
                res = resolver.resolve_key(k, path)
                st, rp, cand = res.status, res.path, list(res.candidates)
            out.append(
                {
                    "target": t,
                    "fragment": f,
                    "alias": a,
                    "embed": bool(e),
                    "line": ln,
                    "in_frontmatter": bool(fm),
                    "status": st,
                    "path": rp,
                    "candidates": cand,
                }
            )
        return out

    def backlinks(self, path: str, who: Identity | None = None) -> list[dict[str, Any]]:
        """Links from other pages that resolve to the page ``path`` (same-page references
        left out), ordered by source path and line; only from pages ``who`` may see.
        Dicts: ``src_path``, ``title`` (of the linking page), ``target``, ``fragment``,
        ``alias``, ``embed``, ``line``."""
        conn = self._conn()
        cond, args = visible_sql("p", who)
        cols = "l.src_path, p.title, l.target, l.fragment, l.alias, l.embed, l.line, l.target_key"
        if who is None:
            rows: list[Any] = conn.execute(
                f"SELECT {cols} FROM links AS l JOIN pages AS p ON p.path = l.src_path "
                "WHERE l.resolved_path = ? AND l.target != '' AND l.status = 'resolved' "
                "ORDER BY l.src_path, l.line, l.rowid",
                (path,),
            ).fetchall()
        else:
            # every link that names this page, resolved again among what ``who`` sees
            keys = [r[0] for r in conn.execute("SELECT key FROM names WHERE path = ?", (path,))]
            marks = ", ".join("?" * len(keys)) or "NULL"
            found: list[Any] = conn.execute(
                f"SELECT {cols} FROM links AS l JOIN pages AS p ON p.path = l.src_path "
                f"WHERE l.target != '' AND (l.resolved_path = ? OR l.target_key IN ({marks})) "
                f"AND {cond} ORDER BY l.src_path, l.line, l.rowid",
                (path, *keys, *args),
            ).fetchall()
            resolver = _resolver_for(conn, {r[7] for r in found}, who)
            rows = []
            for r in found:
                res = resolver.resolve_key(str(r[7]), str(r[0]))
                if res.status == wl.RESOLVED and res.path == path:
                    rows.append(r)
        return [
            {
                "src_path": s,
                "title": ti,
                "target": t,
                "fragment": f,
                "alias": a,
                "embed": bool(e),
                "line": ln,
            }
            for s, ti, t, f, a, e, ln, _k in rows
        ]

    def link_stats(self) -> dict[str, int]:
        """Counts over the whole index: ``pages``, ``links`` (links and embeds with a
        target, same-page references left out), ``embeds``, ``resolved`` (to a page),
        ``unresolved``, ``ambiguous``, ``attachments`` (links to files that are not
        pages), ``missing_attachments``, ``same_page`` references, ``aliases`` and
        ``tags`` (per page, summed) and ``files`` (attachment files found)."""
        conn = self._conn()
        out: dict[str, int] = {
            "pages": _scalar(conn, "SELECT count(*) FROM pages"),
            "files": _scalar(conn, "SELECT count(*) FROM files"),
            "same_page": _scalar(conn, "SELECT count(*) FROM links WHERE target = ''"),
            "links": _scalar(conn, "SELECT count(*) FROM links WHERE target != ''"),
            "embeds": _scalar(conn, "SELECT count(*) FROM links WHERE target != '' AND embed"),
            "aliases": _scalar(
                conn, "SELECT coalesce(sum(json_array_length(aliases)), 0) FROM pages"
            ),
            "tags": _scalar(conn, "SELECT coalesce(sum(json_array_length(tags)), 0) FROM pages"),
        }
        for status in (wl.RESOLVED, wl.UNRESOLVED, wl.AMBIGUOUS):
            out[status] = _scalar(
                conn, f"SELECT count(*) FROM links WHERE target != '' AND status = '{status}'"
            )
        out["attachments"] = _scalar(
            conn, "SELECT count(*) FROM links WHERE target != '' AND status = 'attachment'"
        )
        out["missing_attachments"] = _scalar(
            conn,
            "SELECT count(*) FROM links WHERE status = 'attachment' AND resolved_path IS NULL",
        )
        return out

    def problem_links(self) -> list[dict[str, Any]]:
        """Links that lead nowhere: unresolved, ambiguous, and attachments whose file is
        missing. Dicts: ``src_path``, ``line``, ``target``, ``fragment``, ``embed``,
        ``status`` (``unresolved``, ``ambiguous``, ``missing_attachment``), ``candidates``."""
        conn = self._conn()
        rows: list[Any] = conn.execute(
            "SELECT src_path, line, target, fragment, embed, status, target_key FROM links "
            "WHERE target != '' AND (status IN ('unresolved', 'ambiguous') "
            "OR (status = 'attachment' AND resolved_path IS NULL)) ORDER BY src_path, line, rowid"
        ).fetchall()
        cands = _candidates(conn, {r[6] for r in rows if r[5] == wl.AMBIGUOUS})
        return [
            {
                "src_path": sp,
                "line": ln,
                "target": t,
                "fragment": f,
                "embed": bool(e),
                "status": "missing_attachment" if st == wl.ATTACHMENT else st,
                "candidates": list(cands.get(k, ())) if st == wl.AMBIGUOUS else [],
            }
            for sp, ln, t, f, e, st, k in rows
        ]

    def resolve_name(self, name: str, src_path: str = "") -> wl.Resolution:
        """Resolve a link target as if written in ``src_path`` (see :mod:`wiki_memory.wiki.links`)."""
        key = wl.target_key(name, src_path)
        conn = self._conn()
        names: dict[str, list[tuple[str, str]]] = {}
        for p, src in conn.execute("SELECT path, source FROM names WHERE key = ?", (key,)):
            names.setdefault(key, []).append((p, src))
        files = {
            key: [r[0] for r in conn.execute("SELECT path FROM file_keys WHERE key = ?", (key,))]
        }
        return wl.resolve(name, src_path, names, files)

    def has_file(self, path: str) -> bool:
        """True when ``path`` is an attachment file the index knows."""
        row = self._conn().execute("SELECT 1 FROM files WHERE path = ?", (path,)).fetchone()
        return row is not None

    def links_to(self, title_or_stem: str, who: Identity | None = None) -> list[dict[str, Any]]:
        """Backlinks: links that lead to the page named ``title_or_stem``.

        ``title_or_stem`` may be a page path (with or without ``.md``), title, file stem or
        alias, resolved like a link target (exact names only, never a fuzzy match); links
        to any page it names count. When it names no page, the links written with that
        target (unresolved) are returned. Pages ``who`` may not see neither count as
        named nor lend their links. Dicts with src_path, target, fragment, alias, embed,
        line.
        """
        key = wl.target_key(title_or_stem)
        conn = self._conn()
        paths = sorted({r[0] for r in conn.execute("SELECT path FROM names WHERE key = ?", (key,))})
        if who is not None:
            shown = _visible_paths(conn, paths, who)
            paths = [p for p in paths if p in shown]
        cond, args = visible_sql("p", who)
        if paths:
            marks = ", ".join("?" * len(paths))
            cur = conn.execute(
                "SELECT l.src_path, l.target, l.fragment, l.alias, l.embed, l.line "
                "FROM links AS l JOIN pages AS p ON p.path = l.src_path "
                f"WHERE l.resolved_path IN ({marks}) AND l.target != '' "
                f"AND l.status = 'resolved' AND {cond} ORDER BY l.src_path, l.line",
                [*paths, *args],
            )
        else:
            cur = conn.execute(
                "SELECT l.src_path, l.target, l.fragment, l.alias, l.embed, l.line "
                "FROM links AS l JOIN pages AS p ON p.path = l.src_path "
                f"WHERE l.target_key = ? AND {cond} ORDER BY l.src_path, l.line",
                (key, *args),
            )
        return [
            {"src_path": s, "target": t, "fragment": f, "alias": a, "embed": bool(e), "line": ln}
            for s, t, f, a, e, ln in cur
        ]

    def pinned_pages(self, project: str, who: Identity | None = None) -> list[dict[str, Any]]:
        """Pages that frontmatter ``pinned`` pins (:func:`wiki_memory.identity.is_pinned`)
        whose project is ``project`` or none, that ``who`` may see; by path. Dicts with
        ``path``, ``title`` (the path when untitled) and ``meta`` (the frontmatter)."""
        cond, args = visible_sql("p", who)
        pin = "json_extract(p.meta, '$.pinned')"
        kind = "json_type(p.meta, '$.pinned')"
        rows = (
            self._conn()
            .execute(
                "SELECT p.path, p.title, p.meta FROM pages AS p "
                "WHERE (p.project = ? OR p.project IS NULL) "
                f"AND ({kind} = 'true' OR ({kind} = 'integer' AND {pin} = 1) "
                f"OR ({kind} = 'text' AND lower(trim({pin})) IN ('true', 'yes'))) "
                f"AND {cond} ORDER BY p.path",
                (project, *args),
            )
            .fetchall()
        )
        out = []
        for path, title, meta in rows:
            m = json.loads(str(meta)) if meta else {}
            if is_pinned(m):  # the SQL narrows; the rule decides
                out.append({"path": path, "title": title or path, "meta": m})
        return out

    def names_for(
        self, keys: Iterable[str], who: Identity | None = None
    ) -> list[tuple[str, str, str]]:
        """``(key, path, source)`` rows of the ``names`` table for ``keys`` (casefolded
        link targets), pages ``who`` may not see left out; ``source`` is ``title``,
        ``stem``, ``alias`` or ``path``."""
        cond, args = visible_sql("p", who)
        uniq = sorted(set(keys))
        out: list[tuple[str, str, str]] = []
        conn = self._conn()
        for chunk in _chunks(uniq):
            marks = ", ".join("?" * len(chunk))
            out.extend(
                (str(k), str(p), str(s or ""))
                for k, p, s in conn.execute(
                    "SELECT n.key, n.path, n.source FROM names AS n JOIN pages AS p "
                    f"ON p.path = n.path WHERE n.key IN ({marks}) AND {cond}",
                    [*chunk, *args],
                )
            )
        return out

    def visible_paths(self, paths: Iterable[str], who: Identity | None) -> set[str]:
        """The indexed pages among ``paths`` that ``who`` may see (None: all indexed)."""
        return _visible_paths(self._conn(), paths, who)


# --- helpers working on a given connection (live or the one being rebuilt) -----------


def _resolver_for(conn: apsw.Connection, keys: Iterable[str], who: Identity) -> wl.Resolver:
    """A link resolver over the names and attachment files of ``keys`` that ``who``
    may see (the scope rule), so hidden pages take no part in any resolution."""
    names, files = _lookup_names(conn, keys)
    shown = _visible_paths(conn, {p for rows in names.values() for p, _s in rows}, who)
    names = {k: [(p, s) for p, s in v if p in shown] for k, v in names.items()}
    files = {k: [p for p in v if may_read(who, p, None)] for k, v in files.items()}
    return wl.Resolver(names, files)


def _visible_paths(conn: apsw.Connection, paths: Iterable[str], who: Identity | None) -> set[str]:
    cond, args = visible_sql("p", who)
    out: set[str] = set()
    for chunk in _chunks(sorted(set(paths))):
        marks = ", ".join("?" * len(chunk))
        sql = f"SELECT p.path FROM pages AS p WHERE p.path IN ({marks}) AND {cond}"
        out.update(r[0] for r in conn.execute(sql, [*chunk, *args]))
    return out


def _scalar(conn: apsw.Connection, sql: str) -> int:
    row: Any = conn.execute(sql).fetchone()
    return int(row[0])


def _copy_database(src: apsw.Connection, dst: apsw.Connection) -> None:
    """Replace ``dst``'s content with ``src``'s in one write transaction (backup API).

    Readers of ``dst`` (WAL) keep their snapshot until the copy commits. A busy
    destination (another process writing) is retried for up to a minute.
    """
    deadline = time.monotonic() + 60
    while True:
        try:
            with dst.backup("main", src, "main") as backup:
                while not backup.done:
                    backup.step(-1)
            break
        except (apsw.BusyError, apsw.LockedError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    with suppress(apsw.Error):
        dst.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)


def _drop_all(conn: apsw.Connection) -> None:
    objects: list[Any] = conn.execute(
        "SELECT name, sql FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    ).fetchall()
    virtual = [n for n, sql in objects if (sql or "").upper().startswith("CREATE VIRTUAL")]
    for name in virtual:
        conn.execute(f'DROP TABLE IF EXISTS "{name}"')
    for name, _ in objects:
        if name not in virtual:
            conn.execute(f'DROP TABLE IF EXISTS "{name}"')


class _Dirty:
    """Names whose links must be resolved again before the transaction ends.

    ``keys``: name keys that gained or lost a page or file; ``srcs``: pages whose own
    outgoing links were (re)inserted.
    """

    __slots__ = ("keys", "srcs")

    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.srcs: set[str] = set()

    def __bool__(self) -> bool:
        return bool(self.keys or self.srcs)


def _upsert(
    conn: apsw.Connection,
    path: str,
    raw: bytes,
    mtime: float | None,
    dirty: _Dirty | None = None,
) -> bool:
    """Index one page's bytes (skipped when the hash is unchanged). Links touched by the
    change are resolved again before returning, or added to ``dirty`` for the caller."""
    digest = _sha256(raw)
    row = conn.execute("SELECT hash, mtime FROM pages WHERE path = ?", (path,)).fetchone()
    if row is not None and row[0] == digest:
        if mtime is not None and row[1] != mtime:
            conn.execute("UPDATE pages SET mtime = ? WHERE path = ?", (mtime, path))
        return False
    local = dirty if dirty is not None else _Dirty()
    if row is not None:
        _delete(conn, path, local)
    _insert(conn, path, raw, mtime, digest, local)
    if dirty is None:
        _resolve_dirty(conn, local)
    return True


def _prepare(path: str, raw: bytes, mtime: float | None, digest: str | None = None) -> tuple:
    """Parse and normalise one page (pure CPU work: runs in worker processes on rebuild)."""
    parsed = _parse(raw, path)
    meta = parsed.metadata if isinstance(parsed.metadata, dict) else {}
    stem = _stem(path)
    title = parsed.title or _text(meta.get("title")) or stem
    tags = _str_list(parsed.tags)
    aliases = _str_list(parsed.aliases)
    project = _text(meta.get("project")) or _project_from_path(path)
    kind = _text(meta.get("type")) or "page"
    diagnostics = [_diagnostic(d) for d in parsed.diagnostics]
    page_row = (
        path,
        _text(meta.get("id")) or path,
        title,
        kind,
        project,
        _json(tags),
        _json(aliases),
        _text(meta.get("updated")),
        _text(meta.get("created")),
        digest or _sha256(raw),
        len(raw),
        mtime,
        _json(meta),
        _json(diagnostics),
        personal_owner(path, meta),
    )
    fts_page = (index_text(title), index_text("\n".join(aliases)), index_text(" ".join(tags)))
    sections = []
    for sec in parsed.sections or [Section("", "", 0, parsed.body, parsed.body_line)]:
        text = sec.text or ""
        sections.append(
            (
                sec.anchor or "",
                sec.heading or "",
                sec.line,
                _sha256(text.encode("utf-8", "surrogatepass")),
                text,
                index_text(sec.heading or ""),
                index_text(text),
            )
        )
    links = [
        (
            path,
            link.target,
            link.fragment,
            link.alias,
            int(bool(link.embed)),
            link.line,
            wl.target_key(link.target, path) if link.target else "",
            int(bool(link.in_frontmatter)),
            wl.UNRESOLVED if link.target else wl.RESOLVED,
            None if link.target else path,
        )
        for link in parsed.links
    ]
    names = wl.page_name_keys(path, title, aliases)
    return (path, page_row, project, kind, fts_page, sections, links, names)


def _prepare_file(job: tuple[str, str, float | None]) -> tuple | None:
    """:func:`_prepare` for ``(root, rel, mtime)``; None when the file cannot be read
    (gone, or no longer a regular file)."""
    root, rel, mtime = job
    raw = _read(Path(root) / rel)
    if raw is None:
        return None
    return _prepare(rel, raw, mtime)


_SQL_PAGE = (
    "INSERT INTO pages(path, id, title, kind, project, tags, aliases, updated, created, "
    "hash, size, mtime, meta, diagnostics, owner) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)
_SQL_SECTION = (
    "INSERT INTO sections(rowid, path, anchor, heading, ord, line, hash, text, project, kind) "
    "VALUES (?,?,?,?,?,?,?,?,?,?)"
)
_SQL_FTS = "INSERT INTO fts(rowid, title, aliases, tags, heading, body) VALUES (?,?,?,?,?,?)"
_SQL_LINK = (
    "INSERT INTO links(src_path, target, fragment, alias, embed, line, target_key, "
    "in_frontmatter, status, resolved_path) VALUES (?,?,?,?,?,?,?,?,?,?)"
)
_SQL_NAME = "INSERT INTO names(key, path, source) VALUES (?,?,?)"


def _next_rowid(conn: apsw.Connection) -> int:
    row: Any = conn.execute("SELECT coalesce(max(rowid), 0) FROM sections").fetchone()
    return int(row[0]) + 1


def _insert_prepared(
    conn: apsw.Connection, preps: Sequence[tuple], dirty: _Dirty | None = None
) -> None:
    """Insert prepared pages (none of them indexed yet) with a few ``executemany`` calls."""
    if not preps:
        return
    rowid = _next_rowid(conn)
    pages: list[tuple] = []
    secs: list[tuple] = []
    fts: list[tuple] = []
    links: list[tuple] = []
    names: list[tuple] = []
    for path, page_row, project, kind, (tf, af, gf), sections, plinks, pnames in preps:
        pages.append(page_row)
        for ordinal, (anchor, heading, line, h, text, hf, bf) in enumerate(sections):
            secs.append((rowid, path, anchor, heading, ordinal, line, h, text, project, kind))
            fts.append((rowid, tf, af, gf, hf, bf))
            rowid += 1
        links.extend(plinks)
        names.extend((k, path, src) for k, src in pnames)
        if dirty is not None:
            dirty.srcs.add(path)
            dirty.keys.update(k for k, _ in pnames)
    conn.executemany(_SQL_PAGE, pages)
    conn.executemany(_SQL_SECTION, secs)
    conn.executemany(_SQL_FTS, fts)
    if links:
        conn.executemany(_SQL_LINK, links)
    conn.executemany(_SQL_NAME, names)


def _insert(
    conn: apsw.Connection,
    path: str,
    raw: bytes,
    mtime: float | None,
    digest: str | None = None,
    dirty: _Dirty | None = None,
) -> None:
    """Insert a page that is not indexed yet. With ``dirty`` None, links are left
    unresolved (a rebuild resolves them all at the end)."""
    _insert_prepared(conn, [_prepare(path, raw, mtime, digest)], dirty)


def _diagnostic(d: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(d) and not isinstance(d, type):
        return dataclasses.asdict(d)
    return {"kind": str(d), "line": None, "message": str(d)}


def _delete(conn: apsw.Connection, path: str, dirty: _Dirty | None = None) -> bool:
    """Remove a page's rows. Links elsewhere that named it are resolved again."""
    keys = [r[0] for r in conn.execute("SELECT key FROM names WHERE path = ?", (path,))]
    conn.execute(
        "DELETE FROM fts WHERE rowid IN (SELECT rowid FROM sections WHERE path = ?)", (path,)
    )
    conn.execute("DELETE FROM sections WHERE path = ?", (path,))
    conn.execute("DELETE FROM links WHERE src_path = ?", (path,))
    conn.execute("DELETE FROM names WHERE path = ?", (path,))
    conn.execute("DELETE FROM pages WHERE path = ?", (path,))
    gone = bool(conn.changes())
    if keys:
        local = dirty if dirty is not None else _Dirty()
        local.keys.update(keys)
        local.srcs.discard(path)
        if dirty is None:
            _resolve_dirty(conn, local)
    return gone


def _under(conn: apsw.Connection, table: str, prefix_dir: str) -> list[str]:
    prefix = prefix_dir.strip("/")
    if prefix in ("", "."):
        return [r[0] for r in conn.execute(f"SELECT path FROM {table}")]
    return [
        r[0]
        for r in conn.execute(
            f"SELECT path FROM {table} WHERE path >= ? AND path < ?", (prefix + "/", prefix + "0")
        )
    ]


def _delete_under(conn: apsw.Connection, prefix_dir: str, dirty: _Dirty | None = None) -> int:
    """Remove every page and attachment file below ``prefix_dir``; returns the page count."""
    local = dirty if dirty is not None else _Dirty()
    paths = _under(conn, "pages", prefix_dir)
    for p in paths:
        _delete(conn, p, local)
    for f in _under(conn, "files", prefix_dir):
        _file_delete(conn, f, local)
    if dirty is None:
        _resolve_dirty(conn, local)
    return len(paths)


# --- attachments (files that are not pages) ----------------------------------------


def _file_add(
    conn: apsw.Connection, path: str, size: int, mtime: float | None, dirty: _Dirty
) -> bool:
    row = conn.execute("SELECT size, mtime FROM files WHERE path = ?", (path,)).fetchone()
    if row is not None:
        if (row[0], row[1]) != (size, mtime):
            conn.execute("UPDATE files SET size = ?, mtime = ? WHERE path = ?", (size, mtime, path))
        return False
    conn.execute("INSERT INTO files(path, size, mtime) VALUES (?,?,?)", (path, size, mtime))
    keys = wl.file_name_keys(path)
    conn.executemany("INSERT INTO file_keys(key, path) VALUES (?,?)", [(k, path) for k in keys])
    dirty.keys.update(keys)
    return True


def _file_delete(conn: apsw.Connection, path: str, dirty: _Dirty) -> bool:
    keys = [r[0] for r in conn.execute("SELECT key FROM file_keys WHERE path = ?", (path,))]
    conn.execute("DELETE FROM file_keys WHERE path = ?", (path,))
    conn.execute("DELETE FROM files WHERE path = ?", (path,))
    gone = bool(conn.changes())
    dirty.keys.update(keys)
    return gone


# --- link resolution -------------------------------------------------------------------


def read_wiki_root(db_path: Path | str) -> Path | None:
    """The wiki folder the index at ``db_path`` was built or last reconciled from (its
    ``meta`` table, see :meth:`Index.set_wiki_root`); None when unknown, absent or
    unreadable. Opens the file read-only and never creates or migrates it."""
    if not os.path.exists(db_path):
        return None
    try:
        conn = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'wiki_root'").fetchone()
        finally:
            conn.close()
    except apsw.Error:
        return None
    return Path(str(row[0])) if row else None


def _set_meta(conn: apsw.Connection, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def _chunks(items: Sequence[Any], n: int = 500) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


def _resolve_rows(
    conn: apsw.Connection,
    rows: Sequence[tuple[int, str, str, str]],
    names: Mapping[str, Sequence[tuple[str, str]]],
    files: Mapping[str, Sequence[str]],
) -> None:
    """Set status and resolved_path of link rows ``(rowid, src, target, key)``."""
    resolver = wl.Resolver(names, files)
    updates = []
    for rowid, src, _target, key in rows:
        res = resolver.resolve_key(key, src)
        updates.append((res.status, res.path, rowid))
    conn.executemany("UPDATE links SET status = ?, resolved_path = ? WHERE rowid = ?", updates)


def _lookup_names(
    conn: apsw.Connection, keys: Iterable[str]
) -> tuple[dict[str, list[tuple[str, str]]], dict[str, list[str]]]:
    """The ``names`` and ``file_keys`` rows of ``keys``, grouped by key (for a Resolver)."""
    names: dict[str, list[tuple[str, str]]] = {}
    files: dict[str, list[str]] = {}
    for chunk in _chunks(sorted(set(keys))):
        marks = ",".join("?" * len(chunk))
        for k, p, src in conn.execute(
            f"SELECT key, path, source FROM names WHERE key IN ({marks})", list(chunk)
        ):
            names.setdefault(k, []).append((p, src))
        for k, p in conn.execute(
            f"SELECT key, path FROM file_keys WHERE key IN ({marks})", list(chunk)
        ):
            files.setdefault(k, []).append(p)
    return names, files


def _candidates(conn: apsw.Connection, keys: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Every page (or attachment) each target key names, sorted: the candidates of an
    ambiguous link with that key. One set per key, so they are not stored per link."""
    wanted = set(keys)
    if not wanted:
        return {}
    names, files = _lookup_names(conn, wanted)
    resolver = wl.Resolver(names, files)
    return {k: resolver.paths(k) for k in wanted}


def _resolve_dirty(conn: apsw.Connection, dirty: _Dirty) -> None:
    """Resolve again every link whose target key is in ``dirty.keys`` or whose page is in
    ``dirty.srcs``. Called inside the write transaction that made the change."""
    if not dirty:
        return
    rows: dict[int, tuple[int, str, str, str]] = {}
    keys = sorted(dirty.keys)
    for chunk in _chunks(keys):
        marks = ",".join("?" * len(chunk))
        for r in conn.execute(
            f"SELECT rowid, src_path, target, target_key FROM links "
            f"WHERE target_key IN ({marks}) AND target != ''",
            list(chunk),
        ):
            rows[r[0]] = r
    for src in sorted(dirty.srcs):
        for r in conn.execute(
            "SELECT rowid, src_path, target, target_key FROM links "
            "WHERE src_path = ? AND target != ''",
            (src,),
        ):
            rows[r[0]] = r
    dirty.keys.clear()
    dirty.srcs.clear()
    if not rows:
        return
    names, files = _lookup_names(conn, (r[3] for r in rows.values()))
    _resolve_rows(conn, list(rows.values()), names, files)


def _resolve_all(conn: apsw.Connection) -> None:
    """Resolve every link (after a rebuild filled the tables)."""
    names: dict[str, list[tuple[str, str]]] = {}
    for k, p, src in conn.execute("SELECT key, path, source FROM names"):
        names.setdefault(k, []).append((p, src))
    files: dict[str, list[str]] = {}
    for k, p in conn.execute("SELECT key, path FROM file_keys"):
        files.setdefault(k, []).append(p)
    rows: list[Any] = conn.execute(
        "SELECT rowid, src_path, target, target_key FROM links WHERE target != ''"
    ).fetchall()
    _resolve_rows(conn, rows, names, files)


def _add_spool_row(conn: apsw.Connection, row: Mapping[str, Any]) -> None:
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
            _text(row.get("project")),
            _text(row.get("harness")),
            _text(row.get("session_id")),
            _text(row.get("user")),
            _text(row.get("ts")),
            text,
        ),
    )
    conn.execute(
        "INSERT INTO spool_fts(rowid, body) VALUES (?, ?)",
        (conn.last_insert_rowid(), index_text(text)),
    )


def _copy_spool(src: apsw.Connection, dst: apsw.Connection) -> None:
    cols = ("session_key", "obs_id", "project", "harness", "session_id", "user", "ts", "text")
    for values in src.execute(f"SELECT {', '.join(cols)} FROM spool ORDER BY rowid").fetchall():
        _add_spool_row(dst, dict(zip(cols, values, strict=True)))


_PAGE_COLUMNS = (
    "path",
    "id",
    "title",
    "kind",
    "project",
    "tags",
    "aliases",
    "updated",
    "created",
    "hash",
    "size",
    "mtime",
    "meta",
    "diagnostics",
    "owner",
)


def _page_dict(row: Sequence[Any]) -> dict[str, Any]:
    out = dict(zip(_PAGE_COLUMNS, row, strict=True))
    for key, empty in (("tags", []), ("aliases", []), ("meta", {}), ("diagnostics", [])):
        value = out.get(key)
        out[key] = json.loads(value) if value else empty
    return out


# --- file system helpers -------------------------------------------------------------


def _inside(real: str, root_real: str) -> bool:
    return real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)


def _relative(root: Path, given: str | os.PathLike[str]) -> str | None:
    """``given`` as a clean wiki-relative ``/`` path, ``""`` for the root, None if outside."""
    raw = os.fspath(given)
    if os.path.isabs(raw):
        rel = os.path.relpath(raw, root)
    else:
        rel = raw
    rel = rel.replace(os.sep, "/").strip("/")
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        return None
    return "/".join(parts)


# O_NONBLOCK: opening a FIFO named like a page must not wait for a writer.
_O_READ = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_BINARY", 0)
)


def _read(path: Path) -> bytes | None:
    """The file's bytes, or None when it vanished or is not a regular file (no symlinks,
    FIFOs, sockets or devices: those are never opened for a blocking read)."""
    try:
        fd = os.open(path, _O_READ)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        with os.fdopen(fd, "rb", closefd=True) as f:
            return f.read()
    except OSError:
        return None


def _rebuild_workers(n_pages: int) -> int:
    """Processes that parse pages in a rebuild of ``n_pages``, the calling one included:
    1 (no helpers) below 1,000 pages, else the CPU count up to 4.
    ``WIKI_MEMORY_REINDEX_WORKERS`` overrides (0 or 1: this process alone; at most twice
    the CPU count)."""
    env = os.environ.get("WIKI_MEMORY_REINDEX_WORKERS")
    if env is not None:
        try:
            return max(1, min(int(env), 2 * (os.cpu_count() or 1)))
        except ValueError:
            return 1
    if n_pages < 1000:
        return 1
    return max(1, min(os.cpu_count() or 1, 4))


def _acceptable(st: os.stat_result) -> bool:
    """A directory, or a regular file with one link: no symlink, no hard-linked file."""
    if stat.S_ISDIR(st.st_mode):
        return True
    return stat.S_ISREG(st.st_mode) and st.st_nlink <= 1


def _walk(
    root: Path, root_real: str, rel_dir: str, files: bool = False
) -> Iterator[tuple[str, os.stat_result, bool]]:
    """Pages (and with ``files``, other files) under ``rel_dir`` as (rel path, lstat,
    is_page), never following symlinks and skipping hard-linked files."""
    if _ignored_dir(rel_dir):
        return
    start = root / rel_dir if rel_dir else root
    try:
        if not _inside(os.path.realpath(start), root_real):
            return
    except OSError:
        return
    stack = [(str(start), rel_dir)]
    while stack:
        dir_path, dir_rel = stack.pop()
        try:
            entries = list(os.scandir(dir_path))
        except OSError:
            continue
        for entry in entries:
            name = entry.name
            if _ignored_part(name):
                if odd_name(name):
                    report_odd_name(f"{dir_rel}/{name}" if dir_rel else name)
                continue
            rel = f"{dir_rel}/{name}" if dir_rel else name
            try:
                if entry.is_symlink():
                    continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append((entry.path, rel))
                    continue
                is_page = name.endswith(".md")
                if not (is_page or files) or not entry.is_file(follow_symlinks=False):
                    continue
                st = entry.stat(follow_symlinks=False)
                if st.st_nlink > 1:
                    continue
                yield rel, st, is_page
            except OSError:
                continue


def _remove_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with suppress(FileNotFoundError):
            os.remove(f"{path}{suffix}")
