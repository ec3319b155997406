"""The temporary files of a backup being written, and the removal of those a stopped
backup left (docs/operations.md, "Backup and restore").

A backup writes ``.wiki-memory-backup-<random>.partial`` (the archive) and
``<that>.bundle`` (the wiki's git bundle) beside its target, and holds an ``flock`` on
the archive while it runs. Every backup first removes, in the folder it writes to, the
partial files no running backup holds: those of a backup killed (``kill -9``, a power
cut) before it could remove them. A partial file is never renamed to the target unless
it was read back whole and checked, so none is ever taken for a backup.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path

__all__ = ["BACKUP_PAUSE_ENV", "PREFIX", "SUFFIX", "Partial", "clear_stale"]

PREFIX = ".wiki-memory-backup-"
SUFFIX = ".partial"
#: a test's kill point: backup stops (sleeps) at the step this names
BACKUP_PAUSE_ENV = "WIKI_MEMORY_BACKUP_PAUSE_AT"


def _held(fd: int) -> bool:
    """True when another open file holds the lock of the file behind ``fd``."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    return False


class Partial:
    """The temporary files of one backup in ``folder``: ``path`` (the archive, created
    0600 and open for writing as ``fd``; the caller closes ``fd``) and ``bundle`` (not
    created here). The lock on ``path`` is held until :meth:`close`, which removes both
    files when they are still there. Raises OSError when the folder cannot be written."""

    def __init__(self, folder: Path) -> None:
        for _ in range(10):
            fd, name = tempfile.mkstemp(prefix=PREFIX, suffix=SUFFIX, dir=folder)
            lock = os.open(name, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                same = os.stat(name).st_ino == os.fstat(lock).st_ino
            except FileNotFoundError:
                same = False  # another backup's clearing took it before the lock
            if same:
                self.fd, self.path, self._lock = fd, Path(name), lock
                self.bundle = Path(name + ".bundle")
                return
            os.close(fd)
            os.close(lock)
        raise OSError(f"cannot make a temporary file in {folder} that stays")

    def close(self) -> None:
        """Remove what is left of the two files and release the lock."""
        for p in (self.bundle, self.path):
            try:
                p.unlink()
            except FileNotFoundError:
                pass
        os.close(self._lock)


def clear_stale(folder: Path) -> list[Path]:
    """Remove from ``folder`` the partial files of backups that no longer run (no lock
    held on the archive; a bundle whose archive is gone). Returns what was removed.
    Files it cannot open or remove are left (a folder of someone else's)."""
    removed: list[Path] = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return removed
    for name in names:
        if not (name.startswith(PREFIX) and name.endswith(SUFFIX)):
            continue
        path = folder / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            if _held(fd):
                continue
            path.unlink()
            removed.append(path)
        except OSError:
            continue
        finally:
            os.close(fd)
    for name in names:
        if not (name.startswith(PREFIX) and name.endswith(SUFFIX + ".bundle")):
            continue
        path = folder / name
        if os.path.lexists(path.with_name(name[: -len(".bundle")])):
            continue  # its backup is running
        try:
            path.unlink()
            removed.append(path)
        except OSError:
            continue
    return removed
