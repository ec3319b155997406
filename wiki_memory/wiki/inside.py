"""Writes that stay inside a folder, whatever is on disk (docs/team-server.md, "Threat
model").

Bytes from others (a hub's merge, a restored archive, an import) are written here rather
than by joining strings into a path: every parent folder is opened one component at a
time from the root's own descriptor with ``O_DIRECTORY | O_NOFOLLOW`` (``dir_fd=``), so a
symbolic link anywhere on the way, a ``..`` or an absolute component ends the write with
:class:`Outside` instead of following it. The file itself is written to a temporary name
in its folder and renamed over the target with both descriptors (a link at the target's
name is replaced, never followed). The border (:mod:`wiki_memory.wiki.border`) decides
what may come in; this module only makes sure that whatever is written lands inside,
so a bug elsewhere cannot write outside either.

POSIX only (``dir_fd`` and ``O_NOFOLLOW``), like the server.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from wiki_memory.wiki.border import is_git_name

__all__ = [
    "Outside",
    "open_inside",
    "read_inside",
    "remove_inside",
    "stream_inside",
    "write_inside",
]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class Outside(OSError):
    """A path that would leave the root or pass through a link: the message names the
    component (escaped with ``repr``), never the server's folders."""


def _parts(rel: str, git_ok: bool) -> list[str]:
    if not rel or rel.startswith("/"):
        raise Outside(f"not a relative path: {rel!r}")
    parts = rel.split("/")
    for part in parts:
        if part in ("", ".", "..") or "\0" in part:
            raise Outside(f"bad path component {part!r}")
        if not git_ok and is_git_name(part):
            raise Outside(f"path component {part!r} is git's own folder")
    return parts


@contextlib.contextmanager
def _folders(root: Path, parts: list[str], create: bool) -> Iterator[list[int]]:
    """Descriptors of the root and each parent folder of ``parts`` (the last is the
    target's folder), opened without following links; closed on exit. Raises Outside for
    a link or a file on the way, FileNotFoundError for a missing folder when not
    ``create``."""
    fds = [os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))]
    try:
        for part in parts[:-1]:
            try:
                fd = os.open(part, _DIR_FLAGS, dir_fd=fds[-1])
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(part, 0o755, dir_fd=fds[-1])
                except FileExistsError:
                    pass
                fd = os.open(part, _DIR_FLAGS, dir_fd=fds[-1])
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                    raise Outside(f"{part!r} is a link or not a folder") from None
                raise
            fds.append(fd)
        yield fds
    finally:
        for fd in fds:
            os.close(fd)


def write_inside(
    root: Path | str,
    rel: str,
    data: bytes,
    *,
    executable: bool = False,
    fsync: bool = False,
    git_ok: bool = False,
) -> None:
    """Write ``data`` to ``rel`` (``/``-separated, relative) under the folder ``root``,
    creating missing folders (0755 before the umask), through a temporary file
    (``.<random>.wm-tmp``, which the watcher ignores) renamed over the target: a reader
    sees the old bytes or the new. A new file gets 0666 (0777 when ``executable``) before
    the umask; an existing one is replaced by a new inode. ``fsync``: flush the file and
    its folder before returning (else the caller syncs once for a batch).

    Raises Outside for an empty, absolute, ``.``/``..`` or NUL component, a ``.git``
    component (folded as the border folds it; ``git_ok`` allows it, for restoring a
    repository's own files), or a link or file where a folder should be; IsADirectoryError
    when ``rel`` names a folder; other OSErrors as the system gives them."""
    parts = _parts(rel, git_ok)
    name = parts[-1]
    with _folders(Path(root), parts, create=True) as fds:
        folder = fds[-1]
        tmp = f".{secrets.token_hex(6)}.wm-tmp"
        perm = 0o777 if executable else 0o666
        fd = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
            perm,
            dir_fd=folder,
        )
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                if fsync:
                    fh.flush()
                    os.fsync(fh.fileno())
            os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=folder)
            raise
        if fsync:
            os.fsync(folder)


#: how a file inside is opened for reading: never through a link, never blocking (a FIFO)
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def open_inside(root: Path | str, rel: str, *, git_ok: bool = False) -> int:
    """A descriptor of ``rel`` under ``root`` opened for reading, every folder on the way
    and the file itself without following a link, and without blocking (a FIFO opens at
    once: ``fstat`` it). Raises Outside for a bad path or a link or file on the way,
    OSError when it cannot be opened (a link at the target: ``ELOOP``)."""
    parts = _parts(rel, git_ok)
    with _folders(Path(root), parts, create=False) as fds:
        return os.open(parts[-1], _READ_FLAGS, dir_fd=fds[-1])


def read_inside(root: Path | str, rel: str, *, git_ok: bool = False) -> bytes | None:
    """The bytes of the regular file ``rel`` under ``root``, or None when it is missing,
    is not a regular file (a link, a folder, a FIFO) or a folder on the way is missing.
    Raises Outside as :func:`write_inside` does for a bad path or a link on the way."""
    try:
        fd = open_inside(root, rel, git_ok=git_ok)
    except Outside:
        raise
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None
        return fh.read()


def remove_inside(root: Path | str, rel: str, *, prune: bool = True, git_ok: bool = False) -> bool:
    """Remove the file (or link: never what it points at) ``rel`` under ``root``; with
    ``prune``, then remove the folders it leaves empty, up to (not including) ``root``.
    Returns False when there was nothing to remove. Raises Outside as
    :func:`write_inside` does; IsADirectoryError when ``rel`` is a folder."""
    parts = _parts(rel, git_ok)
    try:
        with _folders(Path(root), parts, create=False) as fds:
            try:
                os.unlink(parts[-1], dir_fd=fds[-1])
            except FileNotFoundError:
                return False
            if prune:
                for i in range(len(parts) - 2, -1, -1):
                    try:
                        os.rmdir(parts[i], dir_fd=fds[i])
                    except OSError:
                        break
            return True
    except FileNotFoundError:
        return False


def stream_inside(
    root: Path | str,
    rel: str,
    chunks: Iterable[bytes],
    *,
    perm: int = 0o600,
    fsync: bool = False,
) -> int:
    """Write the bytes of ``chunks`` (read one at a time, never joined) to ``rel`` under
    ``root`` as :func:`write_inside` does (folders opened without following links, a
    temporary file renamed over the target), the new file with mode ``perm`` (0600: a
    restored token or spool file is the owner's alone; set with ``fchmod``, so the umask
    does not change it). Returns the number of bytes written. If ``chunks`` raises, the
    temporary file is removed and the target is left as it was. Raises as
    :func:`write_inside` does (never for a ``.git`` component: no caller may write one)."""
    parts = _parts(rel, False)
    written = 0
    with _folders(Path(root), parts, create=True) as fds:
        folder = fds[-1]
        tmp = f".{secrets.token_hex(6)}.wm-tmp"
        fd = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
            0o600,
            dir_fd=folder,
        )
        try:
            with os.fdopen(fd, "wb") as fh:
                os.fchmod(fh.fileno(), perm)
                for chunk in chunks:
                    fh.write(chunk)
                    written += len(chunk)
                if fsync:
                    fh.flush()
                    os.fsync(fh.fileno())
            os.replace(tmp, parts[-1], src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=folder)
            raise
        if fsync:
            os.fsync(folder)
    return written
