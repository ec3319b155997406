"""A damaged index, at start and at run time (docs/operations.md, "Storage at the edges").

At start SQLite's quick check of ``index.db`` (every page read once) decides whether the
file is rebuilt from the files before the server answers; the page count and each
file's stamp against the index then catch what changed while no server ran
(:meth:`wiki_memory.core.memory.Memory.start`). A CorruptError met at run time is
logged once and rebuilds the index from the files and the spool on a thread of its own;
meanwhile recall answers from a scan of the page files with ``complete: false``
(:mod:`wiki_memory.core.scanrecall`) and the index's other reads answer 503 with
``Retry-After``, never a short 200."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from wiki_memory.diskfull import is_disk_full

log = logging.getLogger("wiki_memory.core.memory")

__all__ = [
    "CHECK_EVERY_SECONDS",
    "PAUSE_ENV",
    "RETRY_SECONDS",
    "check_index",
    "prepare_index",
    "rebuild_damaged",
]

#: a rebuild after damage that failed (a full disk) is tried again this often
RETRY_SECONDS = 30.0
#: names a step at which a background rebuild waits (:mod:`wiki_memory.core.pausepoint`;
#: the one step is ``started``), so a test holds it instead of racing its speed
PAUSE_ENV = "WIKI_MEMORY_REBUILD_PAUSE_AT"
#: while running, the index file is quick-checked this often: damage that makes a query
#: miss rows without an error (a short 200) is found within this time
CHECK_EVERY_SECONDS = 900.0


def prepare_index(memory: Any) -> None:
    """The index at start: quick-checked (:func:`check_index`), then rebuilt from the files
    when damaged, missing, empty or of another schema, else caught up with what changed
    while no server ran (each file's size and mtime against the index, walked on a
    thread beside the quick check), and the spool's
    rows written again; all before the server answers, except the rebuild of a wiki of
    ``settings.rebuild_background_pages`` pages or more (5,000), which runs on a thread
    while recall answers from a scan of the files with ``complete: false`` and the
    index's other reads answer 503 (never a short 200). When the disk is too full for
    that, the server starts anyway (no crash loop): recall scans the files as above, the
    index's other reads answer 503, and :func:`rebuild_damaged` tries again until there
    is room."""
    index, wiki = memory.index, memory.wiki_dir
    # the walk of the files' stamps runs beside the quick check (SQLite reads the index
    # file without the GIL): the whole check takes about the longer of the two
    walked: list[Any] = []
    walker = threading.Thread(
        target=lambda: walked.append(index.stamps(wiki)), name="wiki-index-stamps", daemon=True
    )
    walker.start()
    try:
        try:
            damaged = check_index(memory)
        finally:
            walker.join()
        if damaged or index.needs_rebuild or not index.count_pages():
            many = memory.settings.rebuild_background_pages
            large = len(walked[0][0]) >= many if walked else None
            if large if large is not None else _at_least(wiki, many):
                # a large wiki: the server answers meanwhile (capture works; recall
                # scans the files, complete: false; the index's other reads answer 503
                # with Retry-After until the rebuild is done)
                index.damaged = "being rebuilt at start"
                log.warning("index.db is rebuilt from the files in the background")
                rebuild_damaged(memory, index.damaged)
                return
            index.rebuild(wiki)
        else:
            if walked:
                index.catch_up(wiki, walked[0])
            else:  # the walk failed on its thread: walked again, here
                index.sync_paths(wiki, ["."])
            index.set_wiki_root(wiki)
        memory.capturer.reindex_spool()
    except Exception as exc:
        if not is_disk_full(exc):
            raise
        memory.health.disk.failed(exc, "index")
        index.damaged = "disk full at start"
        log.error("the index cannot be brought up to date at start (disk full): %s", exc)
        rebuild_damaged(memory, index.damaged)


def _at_least(wiki: Path, n: int) -> bool:
    """Whether the wiki holds at least ``n`` ``.md`` files (dot folders left out); stops
    counting at ``n``."""
    found = 0
    for _root, dirs, files in os.walk(wiki):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found += sum(1 for f in files if f.endswith(".md"))
        if found >= n:
            return True
    return False


def check_index(memory: Any) -> bool:
    """Quick-check the index of ``memory`` (the Memory, which imports this) at start; a damaged file is logged and replaced by
    an empty one (True: the caller rebuilds it before answering). Damage met later calls
    :func:`rebuild_damaged`."""
    t = time.monotonic()
    problems = memory.index.quick_check()
    took = time.monotonic() - t
    if problems:
        log.warning(
            "index.db is damaged (%s; quick check %.1f s): rebuilding it from the files",
            "; ".join(problems)[:500],
            took,
        )
        memory.index.reset()
    else:
        log.info("index.db quick check: ok in %.2f s", took)
    memory.index.on_damage(lambda why: rebuild_damaged(memory, why))
    checker = threading.Thread(
        target=_check_loop, args=(memory,), name="wiki-index-check", daemon=True
    )
    checker.start()
    memory._threads.append(checker)
    return bool(problems)


def _check_loop(memory: Any) -> None:
    """Quick-check the index every :data:`CHECK_EVERY_SECONDS` while the server runs
    (not while a rebuild after damage runs); damage found is reported as a CorruptError
    met at run time would be (logged once, rebuilt on a thread)."""
    while not memory._stop.wait(CHECK_EVERY_SECONDS):
        if memory.index.damaged is not None:
            continue
        problems = memory.index.quick_check()
        if problems and memory.index.damaged is None:
            memory.index.note_damage("; ".join(problems)[:500])


def rebuild_damaged(memory: Any, why: str) -> None:
    """A query or write met damage in the index (``why``, logged by the index): rebuild
    it from the files and the spool on a thread of its own, then let reads through
    again. A rebuild that fails is tried again every :data:`RETRY_SECONDS`, one log line
    each time; the server keeps running."""

    def run() -> None:
        from wiki_memory.core.pausepoint import pause

        pause(PAUSE_ENV, "index rebuild", "started")
        while not memory._stop.is_set():
            try:
                memory.index.reset()
                n = memory.index.rebuild(memory.wiki_dir)
                memory.capturer.reindex_spool()
            except Exception as exc:  # noqa: BLE001 - logged, tried again
                log.error(
                    "rebuilding the damaged index failed (%s); retrying in %.0f s",
                    exc,
                    RETRY_SECONDS,
                )
                if memory._stop.wait(RETRY_SECONDS):
                    return
                continue
            memory.index.damaged = None
            log.warning("index.db rebuilt from the files (%s): %d pages", why, n)
            return

    t = threading.Thread(target=run, name="wiki-index-rebuild", daemon=True)
    t.start()
    memory._threads.append(t)
