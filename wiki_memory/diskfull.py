"""A full disk: telling it apart from other write errors, and the one state that says so.

Every write of the server (the spool, pages, git, the index) that fails because the
disk or the user's quota is full ends in :meth:`DiskState.failed`: the request is
refused with :class:`~wiki_memory.errors.DiskFull` (507), nothing of it acknowledged,
and the condition is logged at most once a minute. ``/v1/health``, ``status``,
``doctor`` and the brief read :meth:`DiskState.status` (through the Memory's commit
status). The state ends by itself: at the next write that works, or when the
filesystem has room again (checked when the status is read), so nothing has to be
restarted once space returns (docs/operations.md, "Storage at the edges").
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("wiki_memory.disk")

__all__ = ["DiskState", "is_disk_full", "REMEDY", "CAUSE"]

#: errno values that mean "no room": the disk, or the user's quota
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
CAUSE = "disk full"
REMEDY = (
    "free disk space on the data directory's filesystem; refused writes answer 507 and "
    "hooks keep their events in the outbox until then, and everything resumes by itself"
)
#: at most one log line per this many seconds while the disk stays full
LOG_EVERY = 60.0
#: free bytes that end the state without a write having worked (at least)
MIN_FREE = 1 << 20
#: seconds without a refused write before a write that works ends the state
SETTLE = 2.0


def is_disk_full(exc: BaseException | None) -> bool:
    """True when ``exc`` (or an error it was raised from) says the disk or the quota is
    full: ``OSError`` ENOSPC/EDQUOT, or SQLite's ``FullError`` (apsw)."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, OSError) and exc.errno in FULL_ERRNOS:
            return True
        if type(exc).__name__ == "FullError":  # apsw.FullError: SQLITE_FULL
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


class DiskState:
    """Whether the data directory's disk was found full, since when, and what to do.

    Thread-safe. ``path``: a folder on the filesystem to watch (the data directory)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._since: float | None = None
        self._last_failure = 0.0
        self._need = MIN_FREE
        self._logged = 0.0
        self._refused = 0

    def failed(self, exc: BaseException, where: str, need: int = 0) -> None:
        """A write of ``need`` bytes (0: unknown) to ``where`` failed with ``exc``, a full
        disk. Logs the condition at most once per :data:`LOG_EVERY` seconds."""
        now = time.time()
        with self._lock:
            if self._since is None:
                self._since = now
                self._refused = 0
                self._need = MIN_FREE
            self._last_failure = now
            self._need = max(self._need, 4 * need)
            self._refused += 1
            if now - self._logged < LOG_EVERY:
                return
            self._logged = now
            refused = self._refused
        log.warning(
            "disk full: a write to the %s failed (%s); %d write(s) refused since %s, nothing "
            "refused was acknowledged. Remedy: %s",
            where,
            os.strerror(getattr(exc, "errno", None) or errno.ENOSPC),
            refused,
            time.strftime("%H:%M:%S", time.localtime(self._since or now)),
            REMEDY,
        )

    def succeeded(self) -> None:
        """A write worked: a full disk, if there was one, has room again, unless a write
        failed in the last :data:`SETTLE` seconds (a nearly full disk takes small writes
        between refusals: the state does not flap with them)."""
        if self._since is None or time.time() - self._last_failure < SETTLE:
            return
        self._end()

    def _end(self) -> None:
        with self._lock:
            since, self._since = self._since, None
            refused = self._refused
        if since is not None:
            log.warning(
                "disk space returned after %.0f s; %d write(s) had been refused",
                time.time() - since,
                refused,
            )

    def _room(self) -> bool:
        try:
            st = os.statvfs(self.path)
        except OSError:
            return False
        return st.f_bavail * st.f_frsize >= self._need

    @property
    def full(self) -> bool:
        """True while the disk is taken to be full: a write failed for want of space,
        none has worked since, and the filesystem has not got room again (at least
        1 MiB and four times the refused write, looked at :data:`SETTLE` seconds after
        the last failure)."""
        if self._since is None:
            return False
        if time.time() - self._last_failure > SETTLE and self._room():
            self._end()
            return False
        return True

    def status(self) -> dict[str, Any]:
        """``{"ok": True}``, or while full ``{"ok": False, "since" (ISO-8601 UTC),
        "cause": "disk full", "remedy", "failures"}`` (the shape of the commit status)."""
        if not self.full:
            return {"ok": True}
        since = self._since or time.time()
        return {
            "ok": False,
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(since)),
            "cause": CAUSE,
            "remedy": REMEDY,
            "failures": self._refused,
        }
