"""The file watcher: keeps the index current and commits hand edits once they settle.

Built on ``watchfiles``. Every change under ``wiki/`` (ignoring ``.git/``,
``.obsidian/``, ``.trash/``, the server's temp files and editors' temp files, see
``store.is_indexable``) is checked with ``stat``, because event kinds are unreliable
(an atomic save looks like "added", a directory rename reports only the directory):
a file that exists is (re)indexed, a missing one is dropped, a directory is reconciled
by scanning it. A page whose bytes differ from what the server last wrote is a hand
edit: it is committed as the local owner after ``hand_edit_settle_seconds`` without
further change. Re-indexing an unchanged file is a no-op (hash check), so the
server's own writes and ``git status`` runs cause no loop.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import watchfiles

from wiki_memory.index.store import is_indexable

if TYPE_CHECKING:
    from wiki_memory.core import Memory

log = logging.getLogger("wiki_memory.watcher")

_IGNORED_DIRS = {".git", ".obsidian", ".trash"}


def _watch_filter(change: watchfiles.Change, path: str) -> bool:
    parts = Path(path).parts
    return not any(p in _IGNORED_DIRS for p in parts)


class Watcher:
    """Watches ``memory.wiki_dir`` on a thread until :meth:`stop`."""

    def __init__(self, memory: Memory, step_ms: int = 20, debounce_ms: int = 50) -> None:
        self.memory = memory
        self.root = memory.wiki_dir.resolve()
        self.step_ms = step_ms
        self.debounce_ms = debounce_ms
        self._stop = threading.Event()
        self._pending: dict[str, float] = {}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="wiki-watcher", daemon=True)
        self._settle = threading.Thread(target=self._settle_loop, name="wiki-settle", daemon=True)
        self.ready = threading.Event()
        self.batches = 0

    def start(self) -> None:
        self._thread.start()
        self._settle.start()
        self.ready.wait(5)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._settle.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for changes in watchfiles.watch(
                    self.root,
                    watch_filter=_watch_filter,
                    stop_event=self._stop,
                    step=self.step_ms,
                    debounce=self.debounce_ms,
                    yield_on_timeout=True,
                    rust_timeout=200,
                    raise_interrupt=False,
                ):
                    self.ready.set()
                    if changes:
                        self.handle({p for _, p in changes})
            except Exception:
                log.exception("watcher failed; restarting in 1 s")
                self.ready.set()
                self._stop.wait(1.0)

    def handle(self, abs_paths: set[str]) -> None:
        """Process one batch of changed absolute paths (never raises)."""
        self.batches += 1
        rels: list[str] = []
        for ap in abs_paths:
            try:
                rel = Path(ap).resolve(strict=False).relative_to(self.root).as_posix()
            except ValueError:
                try:
                    rel = Path(ap).relative_to(self.root).as_posix()
                except ValueError:
                    continue
            rels.append(rel)
        try:
            self.memory.index.sync_paths(self.memory.wiki_dir, rels)
        except Exception:
            log.exception("indexing a change failed")
        now = time.monotonic()
        with self._lock:
            for rel in rels:
                full = self.memory.wiki_dir / rel
                if full.is_dir() or not rel.endswith(".md") or not is_indexable(rel):
                    if full.is_dir():
                        for p in full.rglob("*.md"):
                            r = p.relative_to(self.memory.wiki_dir).as_posix()
                            if is_indexable(r):
                                self._pending[r] = now
                    elif not full.exists() and not rel.endswith(".md"):
                        # a directory removed or renamed away: commit its subtree's removal
                        self._pending[rel] = now
                    continue
                self._pending[rel] = now

    def _settle_loop(self) -> None:
        settle = self.memory.settings.hand_edit_settle_seconds
        while not self._stop.wait(0.1):
            now = time.monotonic()
            with self._lock:
                due = [p for p, t in self._pending.items() if now - t >= settle]
                for p in due:
                    del self._pending[p]
            if due:
                try:
                    self.memory.commit_hand_edits(sorted(due))
                except Exception:
                    log.exception("committing hand edits failed")
