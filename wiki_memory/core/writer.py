"""The one writer (invariant 2): every server change to ``wiki/`` runs on one thread.

Jobs are callables run in order on the writer thread; each returns the repo-relative
paths it wrote and the author to attribute them to. Written paths wait in a pending
group per author and personal owner (``classify``: a personal page's change never shares
a commit with a shared one, nor with another user's personal one); the group is
committed when the queue has been quiet for ``commit_delay`` seconds or has waited
``max_delay`` seconds, so a burst of writes costs one commit per author and kind.
:meth:`Writer.flush` commits everything pending now.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

log = logging.getLogger("wiki_memory.core.writer")


@dataclass
class Author:
    """A commit author: the user a change is attributed to."""

    name: str
    email: str


class Change(Protocol):
    """A change whose commit message line sums up with a later change of the same
    ``key`` when both land in one commit (two compiles of one session page: "+1 turn"
    and "+1 turn" commit as "+2 turns")."""

    @property
    def key(self) -> str: ...

    def plus(self, later: Any) -> Any: ...

    def message(self) -> str: ...


@dataclass
class WriteResult:
    """What a job wrote: repo-relative paths, the author, and a commit message line
    (``message``, or the line of ``change``, which merges with a later change of the
    same key in the same commit)."""

    paths: list[str] = field(default_factory=list)
    author: Author | None = None
    message: str = ""
    value: Any = None
    commit_now: bool = False
    change: Change | None = None
    #: False when the file was written but its index update failed (queued again)
    indexed: bool = True


@dataclass
class _Group:
    author: Author
    paths: set[str] = field(default_factory=set)
    messages: list[str] = field(default_factory=list)
    #: change key -> (its place in ``messages``, the change summed so far)
    changes: dict[str, tuple[int, Any]] = field(default_factory=dict)
    since: float = field(default_factory=time.monotonic)
    last: float = field(default_factory=time.monotonic)
    waiters: list[Future[WriteResult]] = field(default_factory=list)


class Writer:
    """Serializes jobs and groups their commits per author.

    ``commit_fn(paths, author, message) -> sha | None`` does the git commit;
    ``classify(path)`` names the user a written path belongs to alone (None: shared;
    :func:`wiki_memory.wiki.personal.page_owner`), and paths of different owners go to
    different groups. A job whose paths fall into several groups gives each group a
    line naming only that group's paths, never the job's own message. A group whose
    commit failed is tried again ``retry_seconds`` later.
    """

    def __init__(
        self,
        commit_fn: Callable[[list[str], Author, str], str | None],
        commit_delay: float = 0.25,
        max_delay: float = 2.0,
        classify: Callable[[str], str | None] | None = None,
        retry_seconds: float = 5.0,
    ) -> None:
        self._commit_fn = commit_fn
        self.classify = classify
        self.commit_delay = commit_delay
        self.max_delay = max_delay
        self._q: queue.Queue[tuple[Callable[[], WriteResult], Future[WriteResult]] | None] = (
            queue.Queue()
        )
        self._groups: dict[tuple[str, str, str | None], _Group] = {}
        self._thread = threading.Thread(target=self._run, name="wiki-writer", daemon=True)
        self._stopped = threading.Event()
        self.commits = 0
        self.errors = 0
        self._give_up = False
        #: consecutive failed commits, and the pause before a failed group is tried again
        self.failing = 0
        self.retry_seconds = retry_seconds

    def start(self) -> None:
        self._thread.start()

    def submit(self, job: Callable[[], WriteResult]) -> Future[WriteResult]:
        """Queue a job; the future resolves to its :class:`WriteResult` once it has run
        (and, when the result asks ``commit_now``, once its commit is made)."""
        fut: Future[WriteResult] = Future()
        if self._stopped.is_set():
            fut.set_exception(RuntimeError("the writer has stopped"))
            return fut
        self._q.put((job, fut))
        return fut

    def call(self, job: Callable[[], WriteResult], timeout: float | None = 60) -> WriteResult:
        """Run a job on the writer thread and wait for it. Called from the writer thread
        itself (a job that writes another page), the job runs inline."""
        if self.on_thread:
            res = job()
            self._add(res)
            return res
        done: WriteResult = self.submit(job).result(timeout=timeout)
        return done

    def flush(self, timeout: float = 60) -> None:
        """Commit everything pending now and wait for it."""

        def job() -> WriteResult:
            return WriteResult(commit_now=True)

        self.call(job, timeout=timeout)

    def stop(self, timeout: float = 60) -> None:
        """Run what is queued, commit every pending group, and stop the thread."""
        if not self._thread.is_alive():
            return
        try:
            self.flush(timeout=timeout)
        except Exception:
            # one failed try is enough (a commit already waited for the git lock): the
            # files are on disk and the next start commits them; don't try every group
            # again on the way out
            self._give_up = True
            raise
        finally:
            self._stopped.set()
            self._q.put(None)
            self._thread.join(timeout=timeout)

    @property
    def on_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def _run(self) -> None:
        while True:
            wait = self._next_wait()
            try:
                item = self._q.get(timeout=wait)
            except queue.Empty:
                self._commit_due(force=False)
                continue
            if item is None:
                if self._groups and not self._give_up:
                    try:
                        self._commit_due(force=True)
                    except Exception:  # noqa: BLE001 - logged by _commit_due
                        pass
                if self._groups:
                    log.warning(
                        "writer stopped with %d uncommitted group(s); the next start commits them",
                        len(self._groups),
                    )
                return
            job, fut = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                res = job()
            except BaseException as exc:  # noqa: BLE001 - reported to the caller
                self.errors += 1
                fut.set_exception(exc)
                continue
            self._add(res)
            if res.commit_now:
                try:
                    self._commit_due(force=True)
                except BaseException as exc:  # noqa: BLE001
                    fut.set_exception(exc)
                    continue
            fut.set_result(res)
            self._commit_due(force=False)

    def owner(self, path: str) -> str | None:
        """The group a written ``path`` goes to: ``classify`` (None: shared)."""
        if self.classify is None:
            return None
        try:
            return self.classify(path)
        except Exception:  # noqa: BLE001 - unreadable: treat as its own, personal kind
            log.debug("could not classify %s", path, exc_info=True)
            return "\x00unknown"

    def _add(self, res: WriteResult) -> None:
        if not res.paths or res.author is None:
            return
        parts: dict[str | None, list[str]] = {}
        for p in res.paths:
            parts.setdefault(self.owner(p), []).append(p)
        for owner, paths in parts.items():
            key = (res.author.name, res.author.email, owner)
            g = self._groups.get(key)
            if g is None:
                g = self._groups[key] = _Group(res.author)
            g.paths.update(paths)
            g.last = time.monotonic()
            if len(parts) > 1:
                line = f"Update {paths[0]}" + (f" (+{len(paths) - 1})" if len(paths) > 1 else "")
                if line not in g.messages:
                    g.messages.append(line)
            elif res.change is not None:
                c = res.change
                if c.key in g.changes:
                    i, before = g.changes[c.key]
                    c = before.plus(c)
                    g.messages[i] = c.message()
                else:
                    i = len(g.messages)
                    g.messages.append(c.message())
                g.changes[c.key] = (i, c)
            elif res.message and res.message not in g.messages:
                g.messages.append(res.message)

    def _next_wait(self) -> float | None:
        if not self._groups:
            return None
        due = min(
            min(g.last + self.commit_delay, g.since + self.max_delay) for g in self._groups.values()
        )
        return max(0.0, due - time.monotonic())

    def _commit_due(self, force: bool) -> None:
        now = time.monotonic()
        for key, g in list(self._groups.items()):
            if not force and now < min(g.last + self.commit_delay, g.since + self.max_delay):
                continue
            del self._groups[key]
            msg = _message(g.messages, len(g.paths))
            try:
                if self._commit_fn(sorted(g.paths), g.author, msg):
                    self.commits += 1
                self.failing = 0
            except Exception as exc:
                # keep the group: the files are on disk; retried after a pause, and said
                # once (the commit function reports the cause)
                later = time.monotonic() + self.retry_seconds
                g.since = g.last = later
                self._groups[key] = g
                self.failing += 1
                if self.failing == 1:
                    log.info("commit failed (%s); will retry every %.0f s", exc, self.retry_seconds)
                else:
                    log.debug("commit failed again", exc_info=True)
                if force:
                    raise


def _message(messages: list[str], n_paths: int) -> str:
    if not messages:
        return f"Update {n_paths} page(s)"
    if len(messages) == 1:
        return messages[0]
    head = f"{messages[0]} (+{len(messages) - 1} more)"
    return head + "\n\n" + "\n".join(f"- {m}" for m in messages[:50])
