"""An unordered parallel map in which the calling process does its share.

A rebuild parses thousands of pages (pure Python, so threads do not help) and inserts
them into SQLite on the calling thread. :func:`map_unordered` spreads the parsing over
``helpers`` extra processes (``multiprocessing``, started with ``spawn``) and has the
caller parse too, one item at a time. On ``n`` cores, ``n - 1`` helpers keep every core
busy without a third process competing with the inserts.

How work moves:

- The items are written once to a file in a private temporary directory that every
  helper loads; a task is then a short list of item numbers, so the caller never
  blocks sending one (the socket's buffer holds hundreds of them).
- A helper answers a task with its pickled results, or, when they are larger than
  32 KiB, with the name of a file holding them (in the same directory), so it never
  waits for a caller busy inside an insert; the caller reads such a file in one call
  and deletes it.
- The caller reads the helpers' sockets itself, between its own items: a
  result-reading thread in the caller would wait up to the interpreter's switch
  interval (5 ms) for the GIL after every read while the caller parses.
- The caller takes single items from the far end of the queue. When the queue is
  empty it takes back the helpers' newest tasks, item by item, skipping items already
  done. A result that arrives for items the caller did meanwhile is dropped. So the
  caller never waits for a helper: a slow, stuck or dead helper (or one blocked
  importing a script without a ``__main__`` guard) costs nothing but its own core.
- An item whose helper raised is computed again by the caller, so a real error is
  raised where the caller can see it.

Without a usable temporary directory everything runs in the caller.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import pickle
import re
import shutil
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["map_unordered"]

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

#: answers larger than this (pickled bytes) travel through a file. Small enough that a
#: message is one write (``Connection`` writes up to 16 KiB in one call), so the caller
#: never finds half a message waiting and blocks reading the rest.
_INLINE_MAX = 8 * 1024

#: tasks queued per helper, so it keeps working while the caller is busy elsewhere
_QUEUED = 8

_SPILL_PREFIX = "wiki-memory-map-"
_SPILL_RE = re.compile(rf"{_SPILL_PREFIX}(\d+)-")


def _serve(conn: Connection, fn: Callable[[Any], Any], spill: str) -> None:
    """A helper's loop. Loads the items from ``spill``/items.pickle, then answers each
    task (a list of item numbers) with ``("data", pickled results)``, ``("file",
    path)`` for results over :data:`_INLINE_MAX` bytes, or ``("error", text)`` (also
    when the file cannot be written). ``None``, a closed socket or Ctrl-C ends it."""
    try:
        with open(os.path.join(spill, "items.pickle"), "rb") as f:
            items = pickle.load(f)  # noqa: S301 - written by the caller that started us
        seq = 0
        while True:
            try:
                task = conn.recv()
            except (EOFError, OSError):
                return
            if task is None:
                return
            path = ""
            try:
                data = pickle.dumps([fn(items[i]) for i in task], pickle.HIGHEST_PROTOCOL)
                reply: tuple[str, Any] = ("data", data)
                if len(data) > _INLINE_MAX:
                    seq += 1
                    path = os.path.join(spill, f"{os.getpid()}-{seq}.pickle")
                    with open(path, "wb") as f:
                        f.write(data)
                    reply = ("file", path)
            except Exception as exc:  # noqa: BLE001 - reported; the caller recomputes
                if path:  # a full disk: drop the partial file
                    with contextlib.suppress(OSError):
                        os.remove(path)
                reply = ("error", f"{type(exc).__name__}: {exc}")
            try:
                conn.send(reply)
            except (OSError, ValueError):
                return
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the caller decides
        return


def _load(kind: str, payload: Any) -> list[Any]:
    """The results of a ``("data" | "file", ...)`` reply (a file is deleted once read)."""
    if kind == "data":
        out: list[Any] = pickle.loads(payload)  # noqa: S301 - our own helper process wrote it
        return out
    with open(payload, "rb") as f:
        data = f.read()
    os.remove(payload)
    result: list[Any] = pickle.loads(data)  # noqa: S301 - our own helper process wrote it
    return result


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError, ValueError):  # someone else's, or not a pid at all
        return True
    return True


#: a directory untouched this long whose process is gone is left over (a run in another
#: pid namespace sharing the temporary directory looks gone, but keeps touching its own)
_STALE_SECONDS = 3600.0


def _clear_stale_spills() -> None:
    """Remove the temporary directories of earlier runs killed before they could clean
    up: their process is gone and nothing was written there for an hour."""
    try:
        entries = list(Path(tempfile.gettempdir()).glob(f"{_SPILL_PREFIX}*"))
    except OSError:
        return
    now = time.time()
    for entry in entries:
        m = _SPILL_RE.match(entry.name)
        if not m or int(m.group(1)) == os.getpid() or _pid_alive(int(m.group(1))):
            continue
        try:
            if now - entry.lstat().st_mtime < _STALE_SECONDS or not entry.is_dir():
                continue
        except OSError:
            continue
        shutil.rmtree(entry, ignore_errors=True)


class _Helper:
    __slots__ = ("proc", "conn", "out")

    def __init__(self, proc: Any, conn: Connection) -> None:
        self.proc = proc
        self.conn = conn
        self.out: deque[list[int]] = deque()  # tasks sent and not answered, oldest first

    def begin_stop(self) -> None:
        """Ask an idle helper to end; kill at once one still working on tasks whose
        items the caller has done (SIGKILL also ends a stopped process)."""
        if self.out:
            with contextlib.suppress(OSError):
                self.proc.kill()
        else:
            with contextlib.suppress(OSError, ValueError):
                self.conn.send(None)

    def finish_stop(self, deadline: float) -> None:
        """Wait for it until ``deadline`` (monotonic), then kill it."""
        self.proc.join(max(0.0, deadline - time.monotonic()))
        if self.proc.is_alive():
            with contextlib.suppress(OSError):
                self.proc.kill()
            self.proc.join(1.0)
        self.conn.close()


def _stop_all(team: list[_Helper]) -> None:
    for h in team:
        h.begin_stop()
    deadline = time.monotonic() + 0.5
    for h in team:
        h.finish_stop(deadline)


def map_unordered(
    fn: Callable[[T], R],
    items: Sequence[T],
    helpers: int,
    *,
    batch: int = 32,
) -> Iterator[R]:
    """Yield ``fn(item)`` once for every item of ``items``, in no particular order.

    ``fn`` must be a module-level function; items and results must pickle. Helpers get
    tasks of ``batch`` items (eight queued each); the caller takes single items from
    the other end and, once none are left, takes back the helpers' queued items. With
    ``helpers`` < 1, fewer than ``2 * batch`` items, no usable temporary directory, or
    when no helper process can be started, everything runs in the calling process, in
    order. Exceptions from ``fn`` propagate from the caller's own calls only.
    Closing the generator early stops the helpers and removes the temporary files.
    """
    if helpers < 1 or len(items) < 2 * batch:
        yield from (fn(item) for item in items)
        return
    _clear_stale_spills()
    try:
        spill = tempfile.mkdtemp(prefix=f"{_SPILL_PREFIX}{os.getpid()}-")
    except OSError as exc:
        log.warning("no usable temporary directory (%s); parsing in this process alone", exc)
        yield from (fn(item) for item in items)
        return
    team: list[_Helper] = []
    try:
        try:
            with open(os.path.join(spill, "items.pickle"), "wb") as f:
                pickle.dump(list(items), f, pickle.HIGHEST_PROTOCOL)
        except OSError as exc:
            log.warning("temporary directory not writable (%s); parsing alone", exc)
            yield from (fn(item) for item in items)
            return
        try:
            ctx = multiprocessing.get_context("spawn")  # safe with threads; fork is not
            for _ in range(helpers):
                mine, theirs = ctx.Pipe()
                proc = ctx.Process(target=_serve, args=(theirs, fn, spill), daemon=True)
                proc.start()
                theirs.close()
                team.append(_Helper(proc, mine))
        except (OSError, RuntimeError, ValueError, AssertionError) as exc:
            log.warning("could not start %d helper processes (%s); working alone", helpers, exc)
        yield from _run(fn, items, team, batch)
    finally:
        _stop_all(team)
        shutil.rmtree(spill, ignore_errors=True)


def _run(fn: Callable[[T], R], items: Sequence[T], team: list[_Helper], batch: int) -> Iterator[R]:
    """The caller's loop of :func:`map_unordered` (helpers started; the caller stops
    them)."""
    pending = deque(range(len(items)))  # not handed out yet; helpers take from the left
    done = bytearray(len(items))  # 1 once the item's result was yielded
    left = len(items)

    def send(h: _Helper) -> None:
        task = [pending.popleft() for _ in range(min(batch, len(pending)))]
        if not task:
            return
        try:
            h.conn.send(task)
        except (OSError, ValueError):  # the helper is gone: the caller does these
            pending.extendleft(reversed(task))
            return
        h.out.append(task)

    def steal() -> int | None:
        """An item not done yet from the newest task of the busiest helper. Items are
        taken from the end of a task, so an answer still pairs with what is left of it
        (a helper answers for its whole task, in order)."""
        for h in sorted(team, key=lambda x: -sum(len(t) for t in x.out)):
            for task in reversed(h.out):
                while task and done[task[-1]]:
                    task.pop()
                if task:
                    return task.pop()
        return None

    for h in team:
        for _ in range(_QUEUED):
            send(h)
    while left:
        ready = wait([h.conn for h in team if h.out], timeout=0) if team else []
        for h in [x for x in team if x.conn in ready]:
            try:
                kind, payload = h.conn.recv()
            except (EOFError, OSError) as exc:
                log.warning("a helper process ended (%s); its items are done here", exc)
                for task in h.out:
                    pending.extendleft(reversed([i for i in task if not done[i]]))
                h.out.clear()
                team.remove(h)
                _stop_all([h])
                continue
            task = h.out.popleft()
            try:
                results = None if kind == "error" else _load(kind, payload)
            except Exception as exc:  # noqa: BLE001 - unreadable answer: redo it here
                results, payload = None, f"{type(exc).__name__}: {exc}"
            if results is None:
                log.warning("a helper failed (%s); redoing its items here", payload)
                pending.extend(i for i in task if not done[i])
            else:
                for i, r in zip(task, results, strict=False):
                    if not done[i]:
                        done[i] = 1
                        left -= 1
                        yield r
            send(h)
        if not left:
            break
        j: int | None = pending.pop() if pending else steal()
        if j is None:  # cannot happen while items are left; never spin on it
            wait([h.conn for h in team if h.out], timeout=1.0)
            continue
        if not done[j]:
            done[j] = 1
            left -= 1
            yield fn(items[j])
