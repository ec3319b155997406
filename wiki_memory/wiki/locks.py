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

Our own locks are told apart by a sidecar: while a commit holds ``index.lock``,
:func:`record_owner` names it (its inode, the branch's ref lock it may take, the
process's pid and a per-process token) in ``.git/wiki-memory-lock-owner.<pid>``; after
a ``kill -9`` the next server's :func:`clear_recorded_locks` removes the locks a dead
wiki-memory process recorded (and dulwich's loose-object locks, which only wiki-memory
writes), never one nobody recorded (docs/git.md).
"""

from __future__ import annotations

import glob
import json
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# the store's logger: these lines are about its commits
log = logging.getLogger("wiki_memory.wiki.git")

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


# --------------------------------------------------------------------------- our own locks

# While a commit holds index.lock, this sidecar in .git names the lock (inode) and the
# branch whose ref lock it may take, with the owner's pid and a per-process token.
OWNER_PREFIX = "wiki-memory-lock-owner."
_PROCESS_TOKEN = os.urandom(8).hex()
# dulwich writes a loose object through "objects/xx/<rest>.lock" (git itself never does)
_LOOSE_LOCK = re.compile(r"^[0-9a-f]{2}$")
_HEADREF = b"HEAD"


def record_owner(owner_path: str, lockfile: Any, refs: Any) -> None:
    """Name the index.lock we hold (``lockfile``, open) and the ref lock we may take
    (HEAD's branch in ``refs``, dulwich's refs container) in the sidecar ``owner_path``.
    Not fsynced: a killed process loses no page-cache writes, and after a power loss
    a lock without its sidecar is only waited on (as any foreign lock)."""
    try:
        st = os.fstat(lockfile.fileno())
        names = refs.follow(_HEADREF)[0]
        last = names[-1] if names else _HEADREF
        rec = {
            "pid": os.getpid(),
            "token": _PROCESS_TOKEN,
            "ino": st.st_ino,
            "since_ns": st.st_mtime_ns,
            "ref_lock": last.decode("utf-8", "surrogateescape") + ".lock",
        }
        with open(owner_path, "w", encoding="utf-8") as fh:
            json.dump(rec, fh)
    except Exception:  # noqa: BLE001 - only the clean-up after a crash depends on it
        log.debug("cannot record the git lock owner", exc_info=True)


def clear_recorded_locks(controldir: str, index_path: str) -> list[str]:
    """Remove the locks a killed wiki-memory process left in ``controldir`` (``.git``);
    returns their paths (relative to ``.git``). The caller makes sure no other
    wiki-memory process writes this repository.

    * ``index.lock`` and the branch's ref lock are removed only when a sidecar
      ``wiki-memory-lock-owner.<pid>`` names them (the same inode for index.lock)
      and that process is gone. A lock nobody recorded may belong to a live git
      (C21): it is left alone.
    * dulwich's loose-object locks (``objects/xx/<sha>.lock``; stock git never
      writes these) are removed: only a wiki-memory process writes through them.
    """
    removed: list[str] = []
    for side in glob.glob(os.path.join(glob.escape(controldir), OWNER_PREFIX + "*")):
        try:
            with open(side, encoding="utf-8") as fh:
                rec = json.load(fh)
            pid = int(rec["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            rec, pid = {}, -1
        if pid > 0 and _owner_alive(pid, str(rec.get("token", ""))):
            continue
        removed += _remove_recorded_locks(controldir, index_path, rec)
        unlink(side)
    objects = os.path.join(controldir, "objects")
    for sub in os.listdir(objects) if os.path.isdir(objects) else []:
        if not _LOOSE_LOCK.match(sub):
            continue
        for name in os.listdir(os.path.join(objects, sub)):
            if name.endswith(".lock") and unlink(os.path.join(objects, sub, name)):
                removed.append(f"objects/{sub}/{name}")
    return removed


def _remove_recorded_locks(controldir: str, index_path: str, rec: dict[str, Any]) -> list[str]:
    out: list[str] = []
    index_lock = index_path + ".lock"
    try:
        st = os.stat(index_lock)
    except OSError:
        return out  # released before the kill: any ref lock now is somebody else's
    if rec.get("ino") != st.st_ino or st.st_mtime_ns < int(rec.get("since_ns", 0)):
        return out  # not the file we created
    ref = rec.get("ref_lock")
    if isinstance(ref, str) and (ref == "HEAD.lock" or ref.startswith("refs/")) and ".." not in ref:
        full = os.path.join(controldir, *ref.split("/"))
        try:
            if os.stat(full).st_mtime_ns >= int(rec.get("since_ns", 0)) and unlink(full):
                out.append(ref)
        except OSError:
            pass
    if unlink(index_lock):
        out.append("index.lock")
    return out


def unlink(path: str) -> bool:
    """Remove a file; False when it could not be (gone already, or refused)."""
    try:
        os.unlink(path)
        return True
    except OSError:
        return False


def _owner_alive(pid: int, token: str) -> bool:
    """True when the process that wrote a lock-owner sidecar may still run."""
    if pid == os.getpid():
        return token == _PROCESS_TOKEN  # else: an earlier process that had our pid
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by another user
    return True


# -- a failed write leaves no lock ------------------------------------------------------
# dulwich writes refs, the git index and loose objects through ``_GitFile``: a ``.lock``
# beside the target, renamed over it by ``close``. When the flush or fsync in ``close``
# fails (a full disk), or ``abort`` cannot flush the buffered bytes while closing, the
# lock file stays: every later commit then meets a lock nobody holds and stalls after
# space has returned. Both are wrapped once here, so that a failed write always removes
# its lock file (the target is untouched: it either was renamed over in full or not).


def _discard(gitfile: Any) -> None:
    """Close ``gitfile``'s lock file (ignoring a failed flush) and remove it."""
    if getattr(gitfile, "_closed", True):
        return
    try:
        gitfile._file.close()
    except OSError:
        pass
    try:
        os.remove(gitfile._lockfilename)
    except FileNotFoundError:
        pass
    gitfile._closed = True


def _lock_safe_gitfile() -> None:
    from dulwich import file as dulwich_file

    cls: Any = getattr(dulwich_file, "_GitFile", None)
    if cls is None or getattr(cls, "_wiki_memory_lock_safe", False):
        return
    close = cls.close

    def close_or_discard(self: Any) -> None:
        try:
            close(self)
        except BaseException:
            _discard(self)
            raise

    def abort(self: Any) -> None:
        _discard(self)

    cls.close = close_or_discard
    cls.abort = abort
    cls._wiki_memory_lock_safe = True


_lock_safe_gitfile()


# -- a failed pack leaves no temporary pack ---------------------------------------------
# Packing (``pack_every_commits``) writes ``objects/pack/tmpXXXX.pack`` through
# ``DiskObjectStore.add_pack``, whose abort closes the file before removing it: on a full
# disk the close fails too and the temporary pack stayed, as large as what was written.
# The abort and commit handed out are wrapped once here so that a failed pack always
# removes its temporary file (the loose objects are untouched until a pack is complete).


def _remove_quietly(f: Any, path: str) -> None:
    try:
        f.close()
    except OSError:
        pass
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def _pack_safe_store() -> None:
    from dulwich.object_store import DiskObjectStore

    cls: Any = DiskObjectStore
    if getattr(cls, "_wiki_memory_pack_safe", False):
        return
    add_pack = cls.add_pack

    def safe_add_pack(self: Any) -> Any:
        f, commit, abort = add_pack(self)
        cells = dict(zip(abort.__code__.co_freevars, abort.__closure__ or (), strict=False))
        if "path" not in cells:  # another dulwich: leave it as it is
            return f, commit, abort
        path = cells["path"].cell_contents

        def safe_commit() -> Any:
            try:
                return commit()
            except BaseException:
                _remove_quietly(f, path)
                raise

        return f, safe_commit, lambda: _remove_quietly(f, path)

    cls.add_pack = safe_add_pack
    cls._wiki_memory_pack_safe = True


_pack_safe_store()


# -- one pack completed at a time per object store --------------------------------------
# Two fetches into one wiki at once (``sync`` runs every remote on a thread of its own,
# each fetch in a child process) can receive packs holding the same objects: dulwich
# names a pack by the SHA-1 of its sorted object ids, so both move in the same
# ``pack-<sha>.pack`` and write the same ``.idx`` through a lock file, and the second
# failed with FileLocked ("cannot fetch from origin"). Completing a pack (a fetch's thin
# pack, the writer's packing of loose objects) now holds an OS file lock beside the
# store, across threads and processes; only the local move-in waits, never the network.

#: the lock file completing a pack holds, in the git folder (``.git`` or a bare repo)
PACK_LOCK = "wiki-memory-pack.flock"


def _pack_serial_store() -> None:
    from dulwich.object_store import DiskObjectStore
    from filelock import FileLock

    cls: Any = DiskObjectStore
    complete = getattr(cls, "_complete_pack", None)
    if complete is None or getattr(cls, "_wiki_memory_pack_serial", False):
        return

    def serial_complete(self: Any, *args: Any, **kwargs: Any) -> Any:
        lock = os.path.join(os.path.dirname(os.path.abspath(self.path)), PACK_LOCK)
        with FileLock(lock):
            return complete(self, *args, **kwargs)

    cls._complete_pack = serial_complete
    cls._wiki_memory_pack_serial = True


_pack_serial_store()
