"""Spool rows written into the index after the reply (work that can follow the
fsync leaves the request path).

An accepted observation is durable in the spool's file before its 2xx; its row in the
index (``spool``/``spool_fts``, what recall searches before the session page exists) is
queued here and written by one background thread, many rows per transaction, on one
connection whose page cache stays warm. Every read or change of the spool rows through
:class:`~wiki_memory.index.store.Index` calls :meth:`SpoolQueue.flush` first, so a search
made after a 2xx still finds that observation, and a session's rows deleted after its
compile are never written back by a late queued write. Rows lost with a crash are not
lost observations: the start re-indexes the spool's files
(:meth:`wiki_memory.core.capture.Capture.reindex_spool`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["SpoolQueue"]

log = logging.getLogger("wiki_memory.index")

Row = Mapping[str, Any]


class SpoolQueue:
    """Rows queued for ``write(rows)`` (one transaction per call), written by a daemon
    thread started on the first :meth:`put`, ``delay_seconds`` (seconds) after the first
    row of a batch arrives; thread-safe.

    A failing write leaves its rows queued, first in line; the thread logs it and tries
    again after ``retry_seconds`` (seconds), and :meth:`flush` raises it to its caller."""

    def __init__(
        self,
        write: Callable[[list[Row]], Any],
        delay_seconds: float = 0.1,
        retry_seconds: float = 1.0,
    ) -> None:
        self._write = write
        #: how long the thread lets rows gather after the first one before it writes
        #: (fewer, larger transactions; fewer wake-ups of the thread). 0.1 s: a spool
        #: row costs 68 us alone, 21-22 in batches of 16-64 and 15-18 in batches of 256
        #: (in process); single observations at 800/s made batches of 16 with 0.02 s
        self.delay_seconds = delay_seconds
        self.retry_seconds = retry_seconds
        self._lock = threading.Lock()
        self._turn = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._pending: list[Row] = []
        self._thread: threading.Thread | None = None
        self._closed = False

    def put(self, rows: Sequence[Row]) -> None:
        """Queue ``rows`` to be written soon; returns at once (no I/O)."""
        if not rows:
            return
        with self._lock:
            if self._closed:
                raise RuntimeError("index is closed")
            self._pending.extend(rows)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="wiki-spool-rows", daemon=True
                )
                self._thread.start()
        if not self._wake.is_set():
            self._wake.set()

    def pending(self) -> int:
        """How many rows are queued and not written yet."""
        with self._lock:
            return len(self._pending)

    def flush(self) -> None:
        """Write every row queued before this call, in the caller's thread if the
        background thread has not (waits for a write in progress). Raises what the write
        raises (the rows stay queued)."""
        with self._turn:
            self._drain()

    def _drain(self) -> None:
        """Write what is queued now (the caller holds ``_turn``)."""
        with self._lock:
            batch, self._pending = self._pending, []
        if not batch:
            return
        try:
            self._write(batch)
        except BaseException:
            with self._lock:
                self._pending[:0] = batch
            raise

    def _run(self) -> None:
        while True:
            self._wake.wait()
            if self._closed or self._stop.wait(self.delay_seconds):
                return
            self._wake.clear()
            try:
                with self._turn:
                    self._drain()
            except Exception as exc:  # noqa: BLE001 - the rows stay queued; logged, retried
                log.warning("spool rows not indexed yet (%s); retrying", exc)
                self._wake.set()
                if self._stop.wait(self.retry_seconds):
                    return

    def close(self) -> None:
        """Write what is queued (best effort: a failure is logged) and stop the thread."""
        try:
            self.flush()
        except Exception as exc:  # noqa: BLE001 - the spool's files hold the rows
            log.warning("spool rows left unindexed at close (%s); the next start adds them", exc)
        with self._lock:
            self._closed = True
            thread = self._thread
        self._stop.set()
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)
