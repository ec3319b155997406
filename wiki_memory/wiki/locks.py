"""Git lock files in a wiki's ``.git``: which exist, and whether any process holds them.

A lock another program left (``index.lock``, ``HEAD.lock``, a branch's
``refs/heads/<name>.lock``, ``packed-refs.lock``) stalls every commit. The server never
removes one it did not create (docs/git.md); ``wiki-memory doctor --fix`` removes one
only after proving that no process holds it: no process has the file open (found by
reading ``/proc/<pid>/fd`` links, Linux only: on other systems nothing is proven and
nothing is removed) and it is older than :data:`STALE_AFTER_SECONDS` (a git that closed
the file while it waits, e.g. for a commit message, is given that long). Processes
whose descriptors cannot be read (another user's) cannot be checked; that is a
documented limit of the proof.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

#: a lock file no process has open is stale only once it is at least this old (seconds)
STALE_AFTER_SECONDS = 600.0


@dataclass
class LockFile:
    """One lock file: ``name`` relative to ``.git`` (``index.lock``), ``age`` in seconds,
    ``holders``: pids with the file open (None when that cannot be found out here)."""

    name: str
    path: Path
    age: float
    holders: list[int] | None

    @property
    def stale(self) -> bool:
        """True when no process holds it (proven) and it is old enough to remove."""
        return self.holders == [] and self.age >= STALE_AFTER_SECONDS

    def describe(self) -> str:
        """``.git/index.lock (for 12 s, held by no process)`` and the like."""
        if self.holders is None:
            who = "whether a process holds it cannot be checked on this system"
        elif self.holders:
            who = "held by pid " + ", ".join(str(p) for p in self.holders[:3])
        else:
            who = "held by no process"
        return f".git/{self.name} (for {self.age:.0f} s, {who})"


def lock_files(git_dir: Path | str) -> list[LockFile]:
    """The lock files that stall a commit in ``git_dir`` (the ``.git`` folder): the
    index's, HEAD's, ``packed-refs``' and every branch's under ``refs/``. Sorted by name."""
    root = Path(git_dir)
    names: list[str] = []
    for n in ("index.lock", "HEAD.lock", "packed-refs.lock"):
        if (root / n).exists():
            names.append(n)
    refs = root / "refs"
    for dirpath, _dirs, files in os.walk(refs):
        for f in files:
            if f.endswith(".lock"):
                names.append(os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/"))
    if not names:
        return []
    open_files = _open_files()
    now = time.time()
    out = []
    for n in sorted(names):
        p = root / n
        try:
            st = p.stat()
        except OSError:
            continue
        holders = None
        if open_files is not None:
            key = (st.st_dev, st.st_ino)
            holders = sorted(pid for pid, k in open_files if k == key)
        out.append(LockFile(n, p, max(0.0, now - st.st_mtime), holders))
    return out


def _open_files() -> list[tuple[int, tuple[int, int]]] | None:
    """``(pid, (dev, inode))`` of every open file this process can see, from
    ``/proc/*/fd``; None where there is no ``/proc`` (nothing can be proven then)."""
    proc = Path("/proc")
    if not (proc / "self" / "fd").is_dir():
        return None
    out: list[tuple[int, tuple[int, int]]] = []
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        fd_dir = proc / entry / "fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue  # gone, or another user's: cannot be read
        for fd in fds:
            try:
                st = os.stat(fd_dir / fd)
            except OSError:
                continue
            out.append((int(entry), (st.st_dev, st.st_ino)))
    return out


def remove_stale(git_dir: Path | str) -> tuple[list[str], list[str]]:
    """Remove the lock files in ``git_dir`` that are proven stale (:attr:`LockFile.stale`).
    Returns ``(removed, kept)``: descriptions of each. Each lock is checked again
    just before it is removed."""
    removed: list[str] = []
    kept: list[str] = []
    for lk in lock_files(git_dir):
        if not lk.stale:
            kept.append(lk.describe())
            continue
        again = {x.name: x for x in lock_files(git_dir)}.get(lk.name)
        if again is None or not again.stale:
            kept.append(lk.describe())
            continue
        try:
            os.unlink(lk.path)
        except OSError as exc:
            kept.append(f"{lk.describe()}: cannot remove ({exc.strerror})")
            continue
        removed.append(lk.describe())
    return removed, kept
