"""The three file rules every room shares, each written once here.

- **Reading a plain file** (:func:`read_plain`, :func:`read_regular`): opened with
  ``O_NOFOLLOW | O_NONBLOCK`` (never through a symbolic link at the last component, and
  a FIFO named like the file opens at once instead of waiting for a writer), then
  ``fstat``: only a regular file is read; a link, FIFO, socket, device or folder reads
  as absent.
- **The page hash** (:func:`page_hash`): sha256 of a page's bytes, lower-case hex (64
  characters): what the index stores, the API shows and compare-and-set writes compare.
  The hashes of the last few large pages are remembered by their bytes (a session page
  of megabytes is hashed about eight times in one turn); :func:`forget_hashes` empties
  that memory (a purge).
- **The atomic write** (:func:`atomic_write`): a temporary file in the same folder
  (named ``.<name>.*.wm-tmp``, which the watcher and git ignore), fsynced, renamed over
  the target, then the folder fsynced; no temporary file is left behind on an error.

Standard library only (the lowest floor: every room may call it).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "READ_FLAGS",
    "atomic_write",
    "forget_hashes",
    "fsync_dir",
    "page_hash",
    "read_plain",
    "read_regular",
    "scrub_files",
    "temp_beside",
]

#: how a plain file is opened for reading: never through a link, never blocking on a FIFO
READ_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


#: bytes at least this long have their hash remembered, at most :data:`_HASHES_KEPT` of them
_HASH_MEMO_BYTES = 1 << 18
_HASHES_KEPT = 4
#: ``(bytes, digest)``, newest last: a list, so keeping a page never hashes its bytes for a dict
_hashes: list[tuple[bytes, str]] = []
_hash_lock = threading.Lock()


def page_hash(data: bytes) -> str:
    """The page hash of ``data``: sha256, lower-case hex, 64 characters."""
    if len(data) < _HASH_MEMO_BYTES:
        return hashlib.sha256(data).hexdigest()
    key = bytes(data)  # a bytearray or memoryview is not a key; bytes is itself
    with _hash_lock:
        # a scan of the few kept, not a dict lookup: the same object asked again (a
        # compile hashes the page it wrote several times) is found without reading its
        # bytes, equal bytes read again from disk by one comparison (a pass over the bytes
        # for the dict's own hash cost as much as the sha256), another page's bytes of the
        # same length at their first difference (a session page's differ near the top)
        hit = next((h for k, h in _hashes if k is key), None)
        if hit is None:
            n = len(key)
            hit = next((h for k, h in _hashes if len(k) == n and k == key), None)
    if hit is not None:
        return hit
    digest = hashlib.sha256(key).hexdigest()
    with _hash_lock:
        _hashes.append((key, digest))
        del _hashes[:-_HASHES_KEPT]
    return digest


def forget_hashes() -> None:
    """Forget the remembered hashes and the bytes they were remembered by (a purge: no
    copy of purged text stays in memory)."""
    with _hash_lock:
        _hashes.clear()


def read_regular(fd: int) -> bytes | None:
    """The bytes behind the descriptor ``fd`` (opened with :data:`READ_FLAGS`) when it
    is a regular file, else None. Always closes ``fd``. Raises OSError when reading
    fails."""
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    if not regular:
        os.close(fd)
        return None
    with os.fdopen(fd, "rb") as f:
        return f.read()


def read_plain(path: str | os.PathLike[str]) -> bytes | None:
    """The bytes of the regular file at ``path``; None when it is missing (or a folder
    on the way is), is a symbolic link, or is not a regular file (a FIFO, socket,
    device or folder: none of them is waited on). Raises OSError for other failures
    (permission denied, an I/O error)."""
    try:
        fd = os.open(path, READ_FLAGS)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link at the last component
            return None
        raise
    return read_regular(fd)


def fsync_dir(folder: str | os.PathLike[str]) -> None:
    """fsync the folder ``folder`` (a rename or new name in it reaches the disk)."""
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_beside(path: Path, data: bytes, mode: int | None = None) -> str:
    """A new temporary file in ``path``'s folder holding ``data``, flushed and fsynced,
    named ``.<name>.*.wm-tmp``; returns its path. Its permission bits: ``mode`` when
    given, else those of the file at ``path`` when it exists (a vault's own files are
    never narrowed), else owner-only (0600). Removed again when writing fails (the
    OSError is raised)."""
    if mode is None:
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except OSError:
            mode = None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".wm-tmp", dir=path.parent)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        _unlink(tmp)
        raise
    return tmp


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` atomically: :func:`temp_beside` (its ``mode`` rule),
    renamed over ``path``, then the folder fsynced. A missing folder is made first.
    Readers see the old bytes or the new, never a part; on an error (raised) no
    temporary file is left behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_beside(path, data, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise
    fsync_dir(path.parent)


def scrub_files(
    folder: Path, needles: Sequence[bytes], mark: bytes, *, skip: str = "", fsync: bool = True
) -> dict[str, int]:
    """Replace each of ``needles`` (empty ones ignored) by ``mark`` in every regular file
    of ``folder`` (not below it; links and FIFOs passed over as :func:`read_plain` does)
    whose name does not start with ``skip``, in place: the same inode, written over then
    cut to its new length, so a descriptor a writer holds open stays valid; with
    ``fsync`` each changed file is fsynced. Returns file name -> occurrences replaced,
    changed files only; ``{}`` for a missing folder. Raises OSError when a changed file
    cannot be written."""
    try:
        names = sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return {}
    changed: dict[str, int] = {}
    for name in names:
        if skip and name.startswith(skip):
            continue
        data = read_plain(folder / name)
        if data is None:
            continue
        new, count = data, 0
        for needle in needles:
            if needle:
                count += new.count(needle)
                new = new.replace(needle, mark)
        if new == data:
            continue
        fd = os.open(folder / name, os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0))
        try:
            view = memoryview(new)
            while view:
                view = view[os.write(fd, view) :]
            os.ftruncate(fd, len(new))
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        changed[name] = count
    return changed


def _unlink(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except OSError:
        pass
