"""The file watcher: keeps the index current and commits hand edits once they settle.

Built on ``watchfiles`` (Rust ``notify``). What it relies on, and what it does not:

* **Event kinds are not trusted.** An atomic save (write a temp file, rename it over the
  page) looks like "added"; vim's save is "deleted daily.md, added daily.md~, added
  daily.md"; a batch delete has been seen reported as "added". Every reported path is
  checked with ``lstat`` instead (``Index.sync_paths``): a page that exists is
  (re)indexed, one that is gone is dropped, a folder is reconciled by scanning it (a
  folder rename or restore reports only the folder).
* **Ignored:** anything under ``.git/``, ``.obsidian/`` or ``.trash/`` (and any other dot
  folder), the server's own temp files (``.x.wm-tmp*``), editors' temp files (vim's
  ``4913``, ``x~`` and ``.x.swp``; JetBrains' ``x___jb_tmp___``/``x___jb_old___``;
  Emacs' ``.#x`` lock links and ``#x#`` auto-saves). They are dropped before any work, so
  they never become a page, an index row or a commit.
* **No loops.** The server's own writes are already indexed when the watcher sees them
  (the hash check makes the echo a no-op) and are not committed again (the writer knows
  their hash); ``git status`` only touches ``.git/``. With nothing changing, the watcher
  thread blocks in Rust and the settle thread sleeps on a condition: no work at all.
* **Hand edits** (a page whose bytes are not the server's) are committed as the local
  owner once the wiki has been quiet for ``hand_edit_settle_seconds``: one commit per
  save, or per burst (a ``git checkout`` of 1,000 files is one burst, and makes no
  commit when HEAD already holds those files).
* **Links out of the wiki:** symlinks are never followed; a file with more than one hard
  link is neither indexed, served nor committed (its other name may be outside
  ``wiki/``). An editor can leave a second link for a moment while saving, so such a file
  is checked again once things settle.
* **Names that are not UTF-8.** watchfiles fails a whole batch when one path in it is
  not valid UTF-8; the watcher then scans the whole wiki (:meth:`Watcher.rescan`), so
  the other files of that batch are indexed and committed all the same. Such files are
  skipped (one log line each) and left as they are.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import watchfiles

from wiki_memory.index.store import Index, is_indexable
from wiki_memory.wiki.git import GitStore
from wiki_memory.wiki.oddnames import on_disk, page_name
from wiki_memory.wiki.paths import odd_name, report_odd_name

log = logging.getLogger("wiki_memory.watcher")

_IGNORED_DIRS = {".git", ".obsidian", ".trash"}


def ignored_name(name: str) -> bool:
    """Temp and lock files of editors and of the server itself (see the module docstring)."""
    return (
        name.startswith(".")
        or name == "4913"
        or name.endswith("~")
        or name.endswith("___jb_tmp___")
        or name.endswith("___jb_old___")
        or (name.startswith("#") and name.endswith("#"))
        or (len(name) > 4 and name[-4:-1] == ".sw" and "a" <= name[-1] <= "p")
        or ".wm-tmp" in name
    )


def watch_filter(change: watchfiles.Change, path: str) -> bool:
    """True for a path the watcher must look at: nothing under a dot folder
    (``.git/``, ``.obsidian/``, ``.trash/``), no editor or server temp file."""
    parts = path.replace("\\", "/").split("/")
    if any(p in _IGNORED_DIRS for p in parts):
        return False
    return not ignored_name(parts[-1])


#: the longest wait, in seconds, between tries to make watches that could not be made (a
#: whole-wiki scan each: at 2,000 pages, 0.6 s of CPU)
UNMADE_MAX_WAIT = 5.0


class _StopQuestion:
    """The stop event as watchfiles is handed it: watchfiles asks ``is_set()`` every
    ``step`` ms from inside its watch loop, which starts once its watches are in place
    (``RustNotify`` sets them up when it is made, before the loop), so the first question
    sets ``ready``. Before, ``ready`` waited for watchfiles' first idle timeout
    (``rust_timeout``, 1 s), a second added to every start of the server.

    ``watching`` (if given) runs at that first question, before ``ready`` is set: after a
    broken watch, the scan of the whole wiki that catches up with what changed while no
    watch was in place. Events meanwhile wait in the new watches' queue. ``asked`` tells
    whether the watches got that far."""

    def __init__(
        self,
        stop: threading.Event,
        ready: threading.Event,
        watching: Callable[[], object] | None = None,
    ) -> None:
        self.stop = stop
        self.ready = ready
        self.watching = watching
        self.asked = False

    def is_set(self) -> bool:
        if not self.asked:
            self.asked = True
            if self.watching is not None:
                self.watching()
            self.ready.set()
        return self.stop.is_set()


@dataclass(eq=False)
class Watcher:
    """Watches ``wiki_dir`` on a thread until :meth:`stop`, keeping ``index`` in step
    and handing settled hand edits (paths git sees changed) to ``on_hand_edits``.

    ``git`` tells which paths differ from HEAD after a batch it could not read;
    ``settle_seconds`` is how long a changed file must stay unchanged before it counts
    as a hand edit. ``step_ms``/``debounce_ms`` are watchfiles' (a change is reported
    ~``step`` ms after it happens, and a burst is gathered for up to ``debounce`` ms).
    ``batches`` counts the batches handled and ``synced`` the index changes they made
    (for tests and the bench).
    """

    wiki_dir: Path
    index: Index
    git: GitStore
    on_hand_edits: Callable[[list[str]], object]
    settle_seconds: float
    step_ms: int = 20
    debounce_ms: int = 50

    def __post_init__(self) -> None:
        self.root = self.wiki_dir.resolve()
        self._stop = threading.Event()
        self._pending: dict[str, float] = {}  # rel path -> first seen (monotonic)
        self._last_event = 0.0
        self._recheck: set[str] = set()
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="wiki-watcher", daemon=True)
        self._settle = threading.Thread(target=self._settle_loop, name="wiki-settle", daemon=True)
        self.ready = threading.Event()
        self.batches = 0
        self.synced = 0
        self.commits_requested = 0
        #: whole-wiki scans after a lost batch (see :meth:`rescan`)
        self.rescans = 0
        self._failures: set[str] = set()

    def start(self) -> None:
        self._thread.start()
        self._settle.start()
        self.ready.wait(5)

    def alive(self) -> bool:
        """True while the watching thread runs (``wiki-memory status`` shows it)."""
        return self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(timeout=5)
        self._settle.join(timeout=5)

    def _run(self) -> None:
        catch_up = False  # a watch broke: scan once the next one is in place
        unmade = 0  # watches that could not be made, in a row
        while not self._stop.is_set():
            question = _StopQuestion(self._stop, self.ready, self.rescan if catch_up else None)
            try:
                for changes in watchfiles.watch(
                    self.root,
                    watch_filter=watch_filter,
                    stop_event=question,
                    step=self.step_ms,
                    debounce=self.debounce_ms,
                    yield_on_timeout=True,
                    rust_timeout=1000,
                    raise_interrupt=False,
                ):
                    self.ready.set()
                    if changes:
                        self.handle({p for _, p in changes})
            except Exception as exc:
                self.ready.set()
                if "decode path" in str(exc):
                    # watchfiles drops a whole batch when one name in it is not UTF-8:
                    # look at the whole wiki instead, so the rest of the batch is not lost
                    msg = str(exc)
                    if msg not in self._failures:
                        self._failures.add(msg)
                        log.info(
                            "a file name in the wiki is not valid UTF-8 (%s); the wiki is "
                            "scanned again (such a file is a page under its escaped name)",
                            msg,
                        )
                else:
                    log.exception("watcher failed; scanning the wiki again and restarting")
                # what changed from the lost batch until the next watches are in place is
                # seen by a scan made once they are (their first question); a scan made
                # before them would miss what changed in between
                catch_up = True
                if question.asked:
                    unmade = 0
                else:
                    # these watches never came to be (and the next ones may not): scan
                    # now too, so the index does not wait on them
                    self.rescan()
                    unmade += 1
                # while watches cannot be made, each try scans the whole wiki: wait
                # longer each time (0.1, 0.2, ... s, at most UNMADE_MAX_WAIT)
                self._stop.wait(min(UNMADE_MAX_WAIT, 0.05 * 2 ** min(unmade, 8)))

    def _rel(self, ap: str) -> str | None:
        try:
            rel = os.path.relpath(ap, self.root)
        except ValueError:
            return None
        rel = rel.replace(os.sep, "/")
        if rel == "." or rel.startswith("../") or rel == "..":
            return "" if rel == "." else None
        return self._served(rel)

    def _served(self, rel: str) -> str | None:
        """The page name of the file ``rel`` as ``os`` spells it: its escaped name when
        it is not valid UTF-8 (:func:`~wiki_memory.wiki.oddnames.page_name`), None
        (logged once) when it has none."""
        if not odd_name(rel):
            return rel
        served = page_name(self.wiki_dir, rel)
        if served is None:
            report_odd_name(rel)
        return served

    def handle(self, abs_paths: set[str]) -> None:
        """Process one batch of changed absolute paths (never raises)."""
        self.batches += 1
        rels = sorted({r for r in (self._rel(ap) for ap in abs_paths) if r is not None})
        if not rels:
            return
        try:
            self.synced += self.index.sync_paths(self.wiki_dir, rels)
        except Exception:
            log.exception("indexing a change failed")
        now = time.monotonic()
        wiki = self.wiki_dir
        pending: list[str] = []
        recheck: list[str] = []
        for rel in rels:
            full = on_disk(wiki, rel)
            try:
                st = os.lstat(full)
            except (FileNotFoundError, NotADirectoryError):
                # gone: a page, or a folder removed or renamed away (commit its removal)
                if rel.endswith(".md") and is_indexable(rel) or not rel.endswith(".md"):
                    pending.append(rel)
                continue
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                pending.extend(self._pages_below(rel))
            elif rel.endswith(".md") and is_indexable(rel):
                if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                    recheck.append(rel)  # maybe an editor's transient second link
                pending.append(rel)
        with self._cond:
            for rel in pending:
                self._pending.setdefault(rel, now)
            self._recheck.update(recheck)
            self._last_event = now
            self._cond.notify_all()

    def rescan(self) -> None:
        """Catch up after events were lost: reconcile the whole index with the files and
        queue every page git sees as changed for a hand-edit commit (never raises)."""
        self.rescans += 1
        try:
            self.synced += self.index.sync_paths(self.wiki_dir, [""])
            served = (self._served(p) for p in self.git.dirty_paths())
            dirty = [p for p in served if p is not None and is_indexable(p)]
        except Exception:
            log.exception("scanning the wiki again failed")
            return
        now = time.monotonic()
        with self._cond:
            for rel in dirty:
                self._pending.setdefault(rel, now)
            self._last_event = now
            self._cond.notify_all()

    def _pages_below(self, rel_dir: str) -> list[str]:
        out: list[str] = []
        base = on_disk(self.wiki_dir, rel_dir)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                if name.endswith(".md"):
                    r = os.path.relpath(os.path.join(dirpath, name), self.wiki_dir)
                    served = self._served(r.replace(os.sep, "/"))
                    if served is not None and is_indexable(served):
                        out.append(served)
        return out

    def _settle_loop(self) -> None:
        """Commit the pending hand edits once nothing changed for the settle time (or the
        burst has lasted ten times that). Sleeps on a condition when nothing is pending."""
        settle = max(0.05, float(self.settle_seconds))
        while not self._stop.is_set():
            with self._cond:
                while not self._pending and not self._recheck and not self._stop.is_set():
                    self._cond.wait()
                if self._stop.is_set():
                    return
                now = time.monotonic()
                first = min(self._pending.values(), default=now)
                due_at = min(self._last_event + settle, first + 10 * settle)
                if now < due_at:
                    self._cond.wait(due_at - now)
                    continue
                due = sorted(self._pending)
                recheck = sorted(self._recheck)
                self._pending.clear()
                self._recheck.clear()
            if recheck:
                try:
                    self.synced += self.index.sync_paths(self.wiki_dir, recheck)
                except Exception:
                    log.exception("checking hard-linked files again failed")
            if due:
                try:
                    self.commits_requested += 1
                    self.on_hand_edits(due)
                except Exception:
                    log.exception("committing hand edits failed")
