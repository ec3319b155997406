"""An unordered parallel map in which the calling process does its share.

A rebuild parses thousands of pages (pure Python, so threads do not help) and inserts
them into SQLite on the calling thread. :func:`map_unordered` spreads the parsing over
``helpers`` extra processes (``multiprocessing``, started with ``spawn``) and has
the caller parse too, one item at a time, whenever no helper result is waiting. On
``n`` cores, ``n - 1`` helpers keep every core busy without a third process competing
with the inserts.

The caller reads the helpers' pipes itself, between its own items: a result-reading
thread in the caller would wait up to the interpreter's switch interval (5 ms) for
the GIL after every pipe read while the caller parses, and large results take many
reads. A helper writes a large result to a file in a private temporary directory
and sends only its name, so it never waits for a caller busy with its own work
(a pipe holds 64 KiB); the caller reads the file in one call and deletes it.

It never hangs on its helpers: when the caller has nothing left to do and no helper
result arrives for ``stall_seconds`` (a helper stuck, or blocked importing a
``__main__`` without a ``__main__`` guard), the caller computes the outstanding items
itself and stops the helpers; a helper that dies has its items computed by the caller.
An item whose helper raised is computed again by the caller, so a real error is raised
where the caller can see it.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import tempfile
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any, TypeVar

__all__ = ["map_unordered"]

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


def _context() -> Any:
    """Helpers are started with ``spawn``: a fresh interpreter, safe in a process that
    runs threads (``fork`` is not), and ``Process.start`` returns at once (the helper
    imports what it needs while the caller already works)."""
    return multiprocessing.get_context("spawn")


#: results larger than this (pickled bytes) travel through a file, not the pipe
_INLINE_MAX = 32 * 1024


def _serve(conn: Connection, fn: Callable[[Any], Any], spill: str) -> None:
    """A helper's loop: receive a list of items; send back ``("data", pickled results)``,
    ``("file", path)`` when the pickled results are large (written under ``spill``;
    through the pipe when ``spill`` is empty or the file cannot be written), or
    ``("error", text)``. ``None`` or a closed pipe ends it."""
    seq = 0
    while True:
        try:
            batch = conn.recv()
        except (EOFError, OSError):
            return
        if batch is None:
            return
        try:
            data = pickle.dumps([fn(item) for item in batch], pickle.HIGHEST_PROTOCOL)
            reply: tuple[str, Any] = ("data", data)
            if spill and len(data) > _INLINE_MAX:
                seq += 1
                path = os.path.join(spill, f"{os.getpid()}-{seq}.pickle")
                try:
                    with open(path, "wb") as f:
                        f.write(data)
                    reply = ("file", path)
                except OSError:  # a full or read-only disk: the pipe still works
                    spill = ""
        except Exception as exc:  # noqa: BLE001 - reported; the caller recomputes
            reply = ("error", f"{type(exc).__name__}: {exc}")
        try:
            conn.send(reply)
        except (OSError, ValueError):
            return


def _load(kind: str, payload: Any) -> list[Any]:
    """The results of a ``("data" | "file", ...)`` reply (a file is deleted once read)."""
    if kind == "data":
        return pickle.loads(payload)  # noqa: S301 - our own helper process wrote it
    with open(payload, "rb") as f:
        data = f.read()
    os.remove(payload)
    return pickle.loads(data)  # noqa: S301 - our own helper process wrote it


#: batches queued per helper, so it keeps working while the caller is busy elsewhere
_QUEUED = 8


class _Helper:
    __slots__ = ("proc", "conn", "out")

    def __init__(self, proc: Any, conn: Connection) -> None:
        self.proc = proc
        self.conn = conn
        self.out: deque[list[int]] = deque()  # item indices sent, oldest first

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass
        self.conn.close()
        self.proc.join(1.0)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(1.0)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(1.0)


def map_unordered(
    fn: Callable[[T], R],
    items: Sequence[T],
    helpers: int,
    *,
    batch: int = 32,
    stall_seconds: float = 20.0,
) -> Iterator[R]:
    """Yield ``fn(item)`` once for every item of ``items``, in no particular order.

    ``fn`` must be a module-level function; items and results must pickle. Helpers get
    ``batch`` items at a time (eight batches queued each); the caller takes single items
    from the other end. With ``helpers`` < 1, fewer than ``2 * batch`` items, or when
    no helper process can be started, everything runs in the calling process, in
    order. ``stall_seconds``: how long the caller, with nothing left to compute,
    waits for a helper before taking its items back. Exceptions
    from ``fn`` propagate from the caller's own calls only. Closing the generator
    early stops the helpers.
    """
    if helpers < 1 or len(items) < 2 * batch:
        for item in items:
            yield fn(item)
        return
    team: list[_Helper] = []
    try:
        spill: tempfile.TemporaryDirectory[str] | None = tempfile.TemporaryDirectory(
            prefix="wiki-memory-map-"
        )
    except OSError:  # no writable temporary directory: results come through the pipes
        spill = None
    try:
        ctx = _context()
        for _ in range(helpers):
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(
                target=_serve, args=(theirs, fn, spill.name if spill else ""), daemon=True
            )
            proc.start()
            theirs.close()
            team.append(_Helper(proc, mine))
    except (OSError, RuntimeError, ValueError, AssertionError) as exc:
        log.warning("could not start %d helper processes (%s); working alone", helpers, exc)
    pending = deque(range(len(items)))  # not handed out yet; helpers take from the left

    def send(h: _Helper) -> bool:
        idxs = [pending.popleft() for _ in range(min(batch, len(pending)))]
        if not idxs:
            return False
        try:
            h.conn.send([items[i] for i in idxs])
        except (OSError, ValueError):
            pending.extendleft(reversed(idxs))
            return False
        h.out.append(idxs)
        return True

    def drop(h: _Helper) -> None:
        """Take back every item sent to ``h`` and let it go."""
        for idxs in reversed(h.out):
            pending.extendleft(reversed(idxs))
        h.out.clear()
        team.remove(h)
        h.stop()

    try:
        for h in list(team):
            for _ in range(_QUEUED):
                if not send(h):
                    break
        while pending or any(h.out for h in team):
            busy = [h for h in team if h.out]
            ready = wait([h.conn for h in busy], timeout=0 if pending else stall_seconds)
            if not ready:
                if pending:
                    yield fn(items[pending.pop()])
                    continue
                log.warning(
                    "helpers gave no result in %.0f s; finishing their items here", stall_seconds
                )
                for h in busy:
                    drop(h)
                continue
            for h in busy:
                if h.conn not in ready:
                    continue
                try:
                    kind, payload = h.conn.recv()
                    results = None if kind == "error" else _load(kind, payload)
                except (EOFError, OSError, pickle.UnpicklingError) as exc:
                    log.warning("a helper process ended (%s); finishing its items here", exc)
                    drop(h)
                    continue
                idxs = h.out.popleft()
                if results is not None:
                    yield from results
                else:
                    log.warning("a helper failed (%s); redoing its items here", payload)
                    for i in idxs:
                        yield fn(items[i])
                send(h)
    finally:
        for h in team:
            h.stop()
        if spill is not None:
            spill.cleanup()
