"""The spool's group fsync awaited from asyncio (no thread per waiting request).

A request handler writes its observations with :meth:`wiki_memory.capture.spool.Spool.write`
and awaits :meth:`SpoolSyncer.wait` with the sync target it got; one thread runs
:meth:`~wiki_memory.capture.spool.Spool.sync_to` for every target waiting at once (one
fsync per dirty session file covers them all) and wakes the waiting requests with one
callback per event loop. The reply is sent only after that fsync (invariant 3); when it
fails, every request it covered gets the OSError (a 500: nothing acknowledged).
"""

from __future__ import annotations

import asyncio
import threading

from wiki_memory.capture.spool import Spool

__all__ = ["SpoolSyncer"]


def _settle(futures: list[asyncio.Future[None]], error: OSError | None) -> None:
    for fut in futures:
        if fut.done():  # the request went away (cancelled)
            continue
        if error is None:
            fut.set_result(None)
        else:
            fut.set_exception(error)


class SpoolSyncer:
    """Awaitable fsyncs of ``spool``; its daemon thread starts on the first wait."""

    def __init__(self, spool: Spool) -> None:
        self.spool = spool
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._waiters: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._thread: threading.Thread | None = None
        self._closed = False

    async def wait(self, target: int) -> None:
        """Return once the spool's writes up to sync target ``target`` are fsynced;
        raises the OSError of a failed fsync. Never blocks the event loop."""
        if self.spool.synced(target):
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the spool is closed")
            self._waiters.append((target, loop, fut))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="wiki-spool-fsync", daemon=True
                )
                self._thread.start()
        self._wake.set()
        await fut

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            with self._lock:
                waiters, self._waiters = self._waiters, []
                closed = self._closed
            if waiters:
                error: OSError | None = None
                try:
                    self.spool.sync_to(max(t for t, _, _ in waiters))
                except OSError as exc:
                    error = exc
                by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
                for _, loop, fut in waiters:
                    by_loop.setdefault(loop, []).append(fut)
                for loop, futures in by_loop.items():
                    try:
                        loop.call_soon_threadsafe(_settle, futures, error)
                    except RuntimeError:  # that loop is closed: nobody waits there
                        pass
            if closed:
                return

    def close(self) -> None:
        """Stop the thread once the waits queued now are settled."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)
