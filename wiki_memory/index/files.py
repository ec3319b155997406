"""The wiki folder as the index sees it: which files are pages, walking and reading them.

Owns the page-name rule (:func:`is_indexable`, also used by the watcher), and the file
system helpers of syncing and rebuilding: a walk that never follows symlinks and skips
hard-linked files, a read that never blocks on a FIFO or device, and path checks
(inside the wiki, wiki-relative). Nothing here touches the database.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

from wiki_memory.wiki.oddnames import disk_rel, escaped, on_disk, page_name
from wiki_memory.wiki.paths import odd_name, report_escaped_name, report_odd_name

_TEMP_NAME = re.compile(
    r"""^(?:
        4913                     # vim's write test
      | .*~                      # backups
      | .*\.sw[a-p]              # vim swap
      | .*___jb_(?:tmp|old)___   # JetBrains safe write
      | \#.*\#                   # emacs auto-save
      | .*\.wm-tmp.*             # our own atomic-write temp files
    )$""",
    re.X,
)


def ignored_part(name: str) -> bool:
    """True for a path component that is never indexed: empty, ``.``/``..``, a dot name,
    an editor temp name, or a name that is not valid UTF-8 (as spelled on disk: its
    escaped name, :mod:`wiki_memory.wiki.oddnames`, is judged instead)."""
    if not name or name in (".", "..") or name.startswith(".") or bool(_TEMP_NAME.match(name)):
        return True
    return odd_name(name) is not None  # not valid UTF-8: never a page or an index row


def is_indexable(rel_path: str) -> bool:
    """True when ``rel_path`` (relative to ``wiki/``, ``/``-separated) names a page to index.

    Pages are ``*.md`` files. Excluded: anything under a dot directory (``.git/``,
    ``.obsidian/``, ``.trash/``), dotfiles (``.#x``, ``.x.swp``, our ``.x.wm-tmp*``
    files), editor temp files (``4913``, ``*~``, ``*.swp``, ``*___jb_tmp___``,
    ``*___jb_old___``, ``#x#``), absolute paths, ``..`` and names that are not valid
    UTF-8 as ``os`` spells them (:func:`~wiki_memory.wiki.paths.odd_name`; logged once:
    callers pass the escaped name, :func:`~wiki_memory.wiki.oddnames.page_name`). Symlinks are checked
    by :meth:`~wiki_memory.index.store.Index.sync_paths`, which needs the file system.
    """
    rel = rel_path.replace("\\", "/")
    if not rel or rel.startswith("/") or not rel.endswith(".md"):
        return False
    if odd_name(rel):
        report_odd_name(rel)
        return False
    return not any(ignored_part(part) for part in rel.split("/"))


def ignored_dir(rel_dir: str) -> bool:
    """True when a component of the wiki-relative directory ``rel_dir`` is ignored."""
    return any(ignored_part(part) for part in rel_dir.split("/") if rel_dir)


def inside(real: str, root_real: str) -> bool:
    """True when the real path ``real`` is ``root_real`` or below it."""
    return real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)


def relative(root: Path, given: str | os.PathLike[str]) -> str | None:
    """``given`` as a clean wiki-relative ``/`` path, ``""`` for the root, None if outside."""
    raw = os.fspath(given)
    if os.path.isabs(raw):
        rel = os.path.relpath(raw, root)
    else:
        rel = raw
    rel = rel.replace(os.sep, "/").strip("/")
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        return None
    return "/".join(parts)


# O_NONBLOCK: opening a FIFO named like a page must not wait for a writer.
_O_READ = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_BINARY", 0)
)


def read_file(path: Path) -> bytes | None:
    """The file's bytes, or None when it vanished or is not a regular file (no symlinks,
    FIFOs, sockets or devices: those are never opened for a blocking read)."""
    try:
        fd = os.open(path, _O_READ)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        with os.fdopen(fd, "rb", closefd=True) as f:
            return f.read()
    except OSError:
        return None


def sha256(data: bytes) -> str:
    """The sha256 hex digest of ``data``: what ``pages.hash`` stores for a page's bytes."""
    return hashlib.sha256(data).hexdigest()


def file_hash(path: Path) -> str | None:
    """:func:`sha256` of the file's bytes as :func:`read_file` reads them (what the
    index stores as the page's ``hash``); None when the file cannot be read that way."""
    raw = read_file(path)
    return None if raw is None else sha256(raw)


def acceptable(st: os.stat_result) -> bool:
    """A directory, or a regular file with one link: no symlink, no hard-linked file."""
    if stat.S_ISDIR(st.st_mode):
        return True
    return stat.S_ISREG(st.st_mode) and st.st_nlink <= 1


def walk(
    root: Path, root_real: str, rel_dir: str, files: bool = False
) -> Iterator[tuple[str, os.stat_result, bool]]:
    """Pages (and with ``files``, other files) under ``rel_dir`` as (rel path, lstat,
    is_page), never following symlinks and skipping hard-linked files."""
    if ignored_dir(rel_dir):
        return
    start = on_disk(root, rel_dir) if rel_dir else root
    try:
        if not inside(os.path.realpath(start), root_real):
            return
    except OSError:
        return
    stack = [(str(start), rel_dir, disk_rel(root, rel_dir) if rel_dir else "")]
    while stack:
        dir_path, dir_rel, disk_dir = stack.pop()
        try:
            entries = list(os.scandir(dir_path))
        except OSError:
            continue
        for entry in entries:
            name = entry.name
            if odd_name(name):  # not UTF-8: a page under its escaped name, if it has one
                disk = f"{disk_dir}/{name}" if disk_dir else name
                served = page_name(root, disk)
                if served is None or ignored_part(escaped(name)):
                    report_odd_name(disk)
                    continue
                report_escaped_name(disk)
                rel = served
            elif ignored_part(name):
                continue
            else:
                rel = f"{dir_rel}/{name}" if dir_rel else name
            try:
                if entry.is_symlink():
                    continue
                if entry.is_dir(follow_symlinks=False):
                    disk = f"{disk_dir}/{name}" if disk_dir else name
                    stack.append((entry.path, rel, disk))
                    continue
                is_page = name.endswith(".md")
                if not (is_page or files) or not entry.is_file(follow_symlinks=False):
                    continue
                st = entry.stat(follow_symlinks=False)
                if st.st_nlink > 1:
                    continue
                yield rel, st, is_page
            except OSError:
                continue
