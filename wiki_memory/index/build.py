"""Bringing the index in line with the wiki folder: syncing changed paths, reconciling a
directory, and rebuilding the whole index beside the live one.

Owns :func:`sync_paths` (what the watcher reports), :func:`rebuild` and how a rebuild's
parsing is spread over processes (:func:`rebuild_workers`,
:func:`~wiki_memory.index.parallel.map_unordered`). Each works on a
:class:`~wiki_memory.index.db.Database`: writes go through its write lock in transactions
of up to :data:`WRITE_BATCH` paths and are recorded for a running rebuild to replay.

Rebuild
    :func:`rebuild` builds a complete index into ``index.db.new`` beside the live file,
    then copies it into the live database with SQLite's online backup API in a single
    write transaction: readers (other threads, other processes) see the old index until
    the commit and the new one after, never an empty or partial one. (Renaming a file
    over a live WAL database is unsafe: the old ``-wal``/``-shm`` files keep the same
    name and another process's open connection would mix them with the new file, so
    ``os.replace`` is not used.) Page writes made through the same
    :class:`~wiki_memory.index.db.Database` while the rebuild runs are replayed onto the
    new index before the copy, and the spool rows are carried over.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import apsw
from filelock import FileLock

from wiki_memory.index.db import Database
from wiki_memory.index.files import (
    acceptable,
    ignored_dir,
    inside,
    is_indexable,
    read_file,
    relative,
    walk,
)
from wiki_memory.index.graph import Dirty, resolve_all, resolve_dirty
from wiki_memory.index.pages import (
    delete,
    delete_under,
    file_add,
    file_delete,
    insert_prepared,
    prepare_file,
    upsert,
)
from wiki_memory.index.parallel import map_unordered
from wiki_memory.index.schema import (
    SCHEMA_INDEXES,
    SCHEMA_TABLES,
    SCHEMA_VERSION,
    copy_database,
    remove_db,
    scalar,
    set_meta,
)
from wiki_memory.index.search import copy_spool
from wiki_memory.index.vectors import model_id
from wiki_memory.wiki.oddnames import on_disk, page_name
from wiki_memory.wiki.paths import odd_name, report_odd_name

WRITE_BATCH = 256
"""Paths applied per write transaction by :func:`sync_paths` and directory reconciling."""

INSERT_BATCH = 512
"""Pages inserted per transaction while a rebuild fills the new database."""


def sync_paths(db: Database, wiki_dir: Path | str, rel_paths: Iterable[str]) -> int:
    """The work of :meth:`wiki_memory.index.store.Index.sync_paths` (documented there)."""
    root = Path(wiki_dir)
    root_real = os.path.realpath(root)
    changed = 0
    missing: list[str] = []
    dirs: list[str] = []
    pages: list[tuple[str, os.stat_result]] = []
    others: list[tuple[str, os.stat_result]] = []
    for given in rel_paths:
        rel = relative(root, given)
        if rel is None:
            continue
        if rel == "":
            dirs.append("")
            continue
        if odd_name(rel):  # as the watcher spells it: the page's name is the escaped one
            served = page_name(root, rel)
            if served is None:
                report_odd_name(rel)
                continue
            rel = served
        if ignored_dir(rel):
            continue
        full = on_disk(root, rel)
        try:
            st = os.lstat(full)
            gone = not acceptable(st) or not inside(os.path.realpath(full), root_real)
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
    for i in range(0, len(missing), WRITE_BATCH):
        with db.writing() as conn:
            dirty = Dirty()
            for rel in missing[i : i + WRITE_BATCH]:
                if rel.endswith(".md"):
                    db.record(("delete", rel))
                    changed += int(delete(conn, rel, dirty))
                db.record(("file_delete", rel))
                file_delete(conn, rel, dirty)
                db.record(("under", rel))
                changed += delete_under(conn, rel, dirty)
            resolve_dirty(conn, dirty)
    for i in range(0, len(pages), WRITE_BATCH):
        batch = [(rel, st, read_file(on_disk(root, rel))) for rel, st in pages[i : i + WRITE_BATCH]]
        with db.writing() as conn:
            dirty = Dirty()
            for rel, st, raw in batch:
                if raw is None:
                    db.record(("delete", rel))
                    changed += int(delete(conn, rel, dirty))
                else:
                    db.record(("upsert", rel, raw, st.st_mtime))
                    changed += int(upsert(conn, rel, raw, st.st_mtime, dirty, db.langs, db.vectors))
            resolve_dirty(conn, dirty)
    if others:
        with db.writing() as conn:
            dirty = Dirty()
            for rel, st in others:
                db.record(("file_add", rel, st.st_size, st.st_mtime))
                file_add(conn, rel, st.st_size, st.st_mtime, dirty)
            resolve_dirty(conn, dirty)
    for rel in dirs:
        changed += _reconcile(db, root, root_real, rel)
    return changed


Stamps = tuple[dict[str, os.stat_result], dict[str, os.stat_result]]
"""A walk of the wiki: ``(pages, other files)``, each wiki-relative path → its lstat."""


def stamps(wiki_dir: Path | str) -> Stamps:
    """The walk :func:`sync_paths` of ``"."`` makes (no symlink followed, hard-linked and
    ignored files left out), with nothing read from the index."""
    root = Path(wiki_dir)
    return _walked(root, os.path.realpath(root), "")


def catch_up(db: Database, wiki_dir: Path | str, walked: Stamps) -> int:
    """:func:`sync_paths` of ``"."`` with the walk ``walked`` taken beforehand by
    :func:`stamps`; returns pages changed."""
    root = Path(wiki_dir)
    return _reconcile(db, root, os.path.realpath(root), "", walked)


def _walked(root: Path, root_real: str, rel_dir: str) -> Stamps:
    found: dict[str, os.stat_result] = {}
    found_files: dict[str, os.stat_result] = {}
    for rel, st, is_page in walk(root, root_real, rel_dir, files=True):
        (found if is_page else found_files)[rel] = st
    return found, found_files


def _reconcile(
    db: Database, root: Path, root_real: str, rel_dir: str, walked: Stamps | None = None
) -> int:
    """Bring the index in line with the directory ``rel_dir`` (``""``: the whole wiki),
    walked now or given as ``walked``; pages whose size and mtime match the index are
    skipped. Returns pages changed."""
    found, found_files = walked if walked is not None else _walked(root, root_real, rel_dir)
    conn = db.conn()
    if rel_dir:
        lo, hi = rel_dir + "/", rel_dir + "0"  # '0' sorts right after '/'
        where, args = "WHERE path >= ? AND path < ?", (lo, hi)
    else:
        where, args = "", ()  # type: ignore[assignment]
    known = {
        p: (s, m) for p, s, m in conn.execute(f"SELECT path, size, mtime FROM pages {where}", args)
    }
    known_files = {
        p: (s, m) for p, s, m in conn.execute(f"SELECT path, size, mtime FROM files {where}", args)
    }
    changed = 0
    gone = [p for p in known if p not in found]
    gone_files = [p for p in known_files if p not in found_files]
    new_files = [
        (rel, st)
        for rel, st in found_files.items()
        if known_files.get(rel) != (st.st_size, st.st_mtime)
    ]
    todo = [(rel, st) for rel, st in found.items() if known.get(rel) != (st.st_size, st.st_mtime)]
    if gone or gone_files or new_files:
        with db.writing() as conn:
            dirty = Dirty()
            for p in gone:
                db.record(("delete", p))
                changed += int(delete(conn, p, dirty))
            for p in gone_files:
                db.record(("file_delete", p))
                file_delete(conn, p, dirty)
            for p, st in new_files:
                db.record(("file_add", p, st.st_size, st.st_mtime))
                file_add(conn, p, st.st_size, st.st_mtime, dirty)
            resolve_dirty(conn, dirty)
    for i in range(0, len(todo), WRITE_BATCH):
        batch = []
        for rel, st in todo[i : i + WRITE_BATCH]:
            raw = read_file(on_disk(root, rel))
            if raw is not None:
                batch.append((rel, raw, st.st_mtime))
        with db.writing() as conn:
            dirty = Dirty()
            for rel, raw, mtime in batch:
                db.record(("upsert", rel, raw, mtime))
                changed += int(upsert(conn, rel, raw, mtime, dirty, db.langs, db.vectors))
            resolve_dirty(conn, dirty)
    return changed


def rebuild(db: Database, wiki_dir: Path | str, progress: bool = False) -> int:
    """The work of :meth:`wiki_memory.index.store.Index.rebuild` (documented there)."""
    root = Path(wiki_dir)
    root_real = os.path.realpath(root)
    new_path = Path(f"{db.path}.new")
    with db.rebuild_lock, FileLock(f"{new_path}.lock"):
        remove_db(new_path)
        with db.write_lock:
            db.ops = []
        new = apsw.Connection(str(new_path))
        try:
            live = db.conn()
            new.pragma("page_size", live.pragma("page_size"))
            new.pragma("journal_mode", "MEMORY")
            new.pragma("synchronous", "OFF")
            new.pragma("cache_size", -65536)
            with new:
                new.execute(SCHEMA_TABLES)
                new.pragma("user_version", SCHEMA_VERSION)
                set_meta(new, "wiki_root", os.path.abspath(root))
                set_meta(new, "stem_languages", ",".join(db.langs))
                set_meta(new, "vectors", model_id() if db.vectors else "")
            pages: list[tuple[str, os.stat_result]] = []
            other: list[tuple[str, os.stat_result]] = []
            for rel, st, is_page in walk(root, root_real, "", files=True):
                (pages if is_page else other).append((rel, st))
            _fill(new, root, pages, progress, db.langs, db.vectors)
            with new:
                scratch = Dirty()
                for rel, st in other:
                    file_add(new, rel, st.st_size, st.st_mtime, scratch)
                resolve_all(new)
                # after the links' status is set: an index is then sorted once, not
                # updated row by row
                new.execute(SCHEMA_INDEXES)
            new.execute("INSERT INTO fts(fts) VALUES('optimize')")
            # Switch: no other write of this process may run from here to the copy.
            with db.write_lock:
                ops, db.ops = db.ops or [], None
                with new:
                    dirty = Dirty()
                    for op in ops:
                        if op[0] == "upsert":
                            upsert(new, op[1], op[2], op[3], dirty, db.langs, db.vectors)
                        elif op[0] == "delete":
                            delete(new, op[1], dirty)
                        elif op[0] == "under":
                            delete_under(new, op[1], dirty)
                        elif op[0] == "file_add":
                            file_add(new, op[1], op[2], op[3], dirty)
                        else:
                            file_delete(new, op[1], dirty)
                    resolve_dirty(new, dirty)
                    copy_spool(db.conn(), new)
                count = scalar(new, "SELECT count(*) FROM pages")
                copy_database(new, db.conn())
                db.needs_rebuild = False
        finally:
            with db.write_lock:
                db.ops = None
            new.close()
            remove_db(new_path)
    return count


def _fill(
    conn: apsw.Connection,
    root: Path,
    files: list[tuple[str, os.stat_result]],
    progress: bool,
    langs: tuple[str, ...],
    vectors: bool = False,
) -> int:
    """Insert every page of ``files`` into the fresh database ``conn`` (links left
    unresolved). Pages are parsed by helper processes for large wikis (see
    :func:`rebuild_workers` and :func:`~wiki_memory.index.parallel.map_unordered`)
    and by this thread, which also does the inserts, 512 pages per transaction (and,
    with ``vectors``, embeds their sections)."""
    from tqdm import tqdm

    jobs = [(str(root), rel, st.st_mtime, langs) for rel, st in files]
    helpers = rebuild_workers(len(jobs)) - 1
    count = 0
    batch: list[tuple[Any, ...]] = []
    with tqdm(
        total=len(jobs), unit="page", desc="reindex", disable=not progress, leave=False
    ) as bar:
        for prep in map_unordered(prepare_file, jobs, helpers):
            bar.update(1)
            if prep is not None:
                batch.append(prep)
            if len(batch) >= INSERT_BATCH:
                with conn:
                    insert_prepared(conn, batch, vectors=vectors)
                count += len(batch)
                batch = []
        if batch:
            with conn:
                insert_prepared(conn, batch, vectors=vectors)
            count += len(batch)
    return count


def rebuild_workers(n_pages: int) -> int:
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
