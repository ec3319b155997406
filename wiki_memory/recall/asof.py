"""``as_of`` recall: search the wiki as it was committed at a past time.

The commit is the newest on HEAD's history made at or before the time (``GitStore.log``).
Its pages (``changed_paths(None, sha)`` lists the tree, ``read_at`` reads each file) are
indexed into a separate derived index, ``<data_dir>/as-of/<sha>.db``, built once per
commit and reused; the newest :data:`KEEP` are kept. The live index and the spool are not
involved (uncompiled observations were not in the wiki then).

Cost: the first query at a commit indexes every page of that tree (about 1-2k pages/s);
later queries at the same commit cost what a live query costs. Builds are serialised.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from wiki_memory.index.store import Index, is_indexable
from wiki_memory.wiki.git import GitStore

__all__ = ["commit_at", "index_at", "KEEP"]

KEEP = 4
"""How many as-of indexes are kept on disk (least recently used are deleted)."""

_lock = threading.Lock()
_open: dict[str, Index] = {}
_LOG_LIMIT = 1_000_000


def commit_at(git: GitStore, when: float) -> str | None:
    """The sha of the newest commit on HEAD's history at or before ``when`` (UTC epoch
    seconds), or None when the history starts later."""
    for info in git.log(limit=_LOG_LIMIT):
        if info.time <= when:
            return info.sha
    return None


@contextmanager
def index_at(git: GitStore, folder: Path, when: float) -> Iterator[tuple[Index | None, str | None]]:
    """Context manager: the index of the wiki as committed at ``when`` (UTC epoch
    seconds) in ``git``, kept in ``folder`` (``<data_dir>/as-of``), as ``(index, sha)``,
    or ``(None, None)`` when nothing was committed yet then. As-of queries are
    serialised (an index is never evicted while one is read)."""
    with _lock:
        sha = commit_at(git, when)
        if sha is None:
            yield None, None
            return
        db = folder / f"{sha}.db"
        idx = _open.get(str(db))
        if idx is None or not db.exists():
            folder.mkdir(parents=True, exist_ok=True)
            done = folder / f"{sha}.done"
            if not (db.exists() and done.exists()):
                _build(git, sha, db)
                done.write_text(sha)
            idx = Index(db)
            if idx.needs_rebuild:  # built under an older schema: its tables were emptied
                idx.close()
                _build(git, sha, db)
                idx = Index(db)
            _open[str(db)] = idx
        os.utime(db)
        _evict(folder, keep=str(db))
        yield idx, sha


def _build(git: GitStore, sha: str, db: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.remove(f"{db}{suffix}")
        except FileNotFoundError:
            pass
    idx = Index(db)
    try:
        for path in git.changed_paths(None, sha):
            if not is_indexable(path):
                continue
            raw = git.read_at(path, sha)
            if raw is not None:
                idx.upsert_page(path, raw)
    finally:
        idx.close()


def _evict(folder: Path, keep: str) -> None:
    dbs = sorted(folder.glob("*.db"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in dbs[KEEP:]:
        if str(old) == keep:
            continue
        idx = _open.pop(str(old), None)
        if idx is not None:
            idx.close()
        for suffix in ("", "-wal", "-shm", "-journal"):
            try:
                os.remove(f"{old}{suffix}")
            except FileNotFoundError:
                pass
        try:
            os.remove(old.with_suffix(".done"))
        except FileNotFoundError:
            pass
