"""Pages written to disk whose index update failed, waiting to be indexed again.

A write lands when its file is written: an index failure after that (a locked or
damaged ``index.db``, a full disk) does not turn the write into an error, since the
file is the truth and the caller would otherwise retry a write that happened. The
writer logs the failure, commits the write with the caller as author as usual and
queues the page here; the Memory's idle loop indexes the queue again from the files
(:meth:`Unindexed.retry`) until it succeeds."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Protocol

log = logging.getLogger("wiki_memory.core.unindexed")


class _Index(Protocol):
    def upsert_page(self, path: str, raw: bytes) -> bool: ...

    def sync_paths(self, wiki_dir: Path, rel_paths: list[str]) -> int: ...


class Unindexed:
    """The queue of page paths whose index update failed after their write."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._paths: set[str] = set()

    def index_written(self, index: _Index, rel: str, data: bytes) -> bool:
        """``index.upsert_page(rel, data)``; on any failure log it, queue ``rel`` and
        return False (the write itself stands)."""
        try:
            index.upsert_page(rel, data)
        except Exception:
            log.exception("indexing %s after its write failed; queued to index again", rel)
            with self._lock:
                self._paths.add(rel)
            return False
        return True

    def pending(self) -> list[str]:
        with self._lock:
            return sorted(self._paths)

    def retry(self, index: _Index, wiki_dir: Path) -> int:
        """Index the queued pages again from their files; those that fail stay queued.
        Returns how many were indexed."""
        rels = self.pending()
        if not rels:
            return 0
        try:
            index.sync_paths(wiki_dir, rels)
        except Exception:
            log.warning("indexing %d written pages again failed; will retry", len(rels))
            return 0
        with self._lock:
            self._paths.difference_update(rels)
        return len(rels)
