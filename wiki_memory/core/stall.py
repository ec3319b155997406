"""Commit health: whether the server's commits reach git, and when they stall (a lock
held or left by another program, a full disk, a broken repository) what the cause and
the remedy are. Said once in the log, shown by ``GET /v1/health``, ``doctor`` and the
brief (docs/git.md)."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from wiki_memory.capture.observation import iso
from wiki_memory.diskfull import CAUSE as DISK_FULL
from wiki_memory.diskfull import REMEDY as DISK_REMEDY
from wiki_memory.diskfull import DiskState, is_disk_full
from wiki_memory.wiki.git import GitBusy
from wiki_memory.wiki.locks import lock_files

log = logging.getLogger("wiki_memory.core")

__all__ = ["CommitHealth", "DiskState"]


class CommitHealth:
    """The state of commits for one repository (``controldir``: its ``.git``), and of
    the disk it is on (``disk``: every write refused for want of space, commits and
    the spool's alike; while it is full, :meth:`status` says "disk full")."""

    def __init__(self, controldir: Path | str, disk: DiskState | None = None) -> None:
        self.controldir = controldir
        self.disk = disk or DiskState(Path(controldir).parent)
        self._stall: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        """True while no commit has failed since the last one that worked."""
        return self._stall is None

    def succeeded(self) -> bool:
        """A commit worked; True when it ends a stall (the caller retries what failed)."""
        self.disk.succeeded()
        if self._stall is None:
            return False
        if self._stall.get("declared"):
            log.warning("commits resumed after %.0f s", time.time() - self._stall["since"])
        self._stall = None
        return True

    def failed(self, exc: Exception) -> None:
        """A commit raised ``exc``: start or continue a stall. It is declared (logged once,
        with cause and remedy) from the second failure in a row: a person's git holding a
        lock for a moment is not a stall. A full disk is noted in :attr:`disk` too."""
        if is_disk_full(exc):
            self.disk.failed(exc, "git repository")
        if self._stall is not None:
            self._stall["failures"] += 1
            if self._stall["failures"] == 2:
                self._declare()
            return
        locks = lock_files(self.controldir)
        if isinstance(exc, GitBusy) and locks:
            # no lock file name in the log or a reply (C21): doctor names them
            cause = (
                f"{len(locks)} git lock file(s) held or left by another program "
                "(`wiki-memory doctor` lists them)"
            )
            remedy = (
                "if no git program is running, `wiki-memory doctor --fix` removes locks no "
                "process holds"
            )
        elif isinstance(exc, GitBusy):
            cause = str(exc) or "the git repository is busy"
            remedy = "finish or abort the git operation in the wiki"
        elif is_disk_full(exc):  # ENOSPC, EDQUOT, SQLITE_FULL
            cause = DISK_FULL
            remedy = DISK_REMEDY
        else:
            cause = f"{type(exc).__name__}: {exc}"
            remedy = "run `wiki-memory doctor` to check the repository"
        self._stall = {
            "since": time.time(),
            "cause": cause,
            "remedy": remedy,
            "public_cause": "a git lock held by another program"
            if isinstance(exc, GitBusy) and locks
            else (DISK_FULL if remedy == DISK_REMEDY else type(exc).__name__),
            "failures": 1,
        }

    def _declare(self) -> None:
        st = self._stall
        if st is None:
            return
        st["declared"] = True
        log.warning(
            "memory is not being committed to git: %s. Every accepted change stays on disk "
            "and is committed when this is fixed; remedy: %s",
            st["cause"],
            st["remedy"],
        )

    def status(self, detail: bool = True) -> dict[str, Any]:
        """``{"ok": True}``, or while commits fail ``{"ok": False, "since" (ISO-8601 UTC),
        "cause", "remedy", "failures"}``. ``detail`` False leaves out what names files
        (for the unauthenticated health route). While the disk is full, the disk's
        status (``cause`` "disk full"), whatever the commits say."""
        if self.disk.full:
            return self.disk.status()
        st = self._stall
        if st is None or not st.get("declared"):
            return {"ok": True}
        return {
            "ok": False,
            "since": iso(st["since"]),
            "cause": st["cause"] if detail else st["public_cause"],
            "remedy": st["remedy"],
            "failures": st["failures"],
        }
