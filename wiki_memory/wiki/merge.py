"""People's edits win (invariant 8): three-way merging of a server rendering into a page
a person changed, and writes that never replace bytes the server did not read.

:func:`merge3` merges line by line, like ``diff3``: the server's change (``base`` ->
``ours``) is applied to the person's version (``theirs``) wherever the two did not touch
the same lines. Where they did, the person's lines are kept and the server's lines are
reported as a conflict (the caller writes them beside the page). When both inserted text at
the same place, both are kept, the person's first.

:func:`replace_if_unchanged` is the compare-and-set at the end of every server write: the
new bytes replace the file only if it still holds what the server read.
"""

from __future__ import annotations

import ctypes
import difflib
import errno
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wiki_memory.plainfile import fsync_dir, read_plain, temp_beside

__all__ = ["Conflict3", "MergeResult", "changed_lines", "merge3", "replace_if_unchanged"]


@dataclass(frozen=True)
class Conflict3:
    """One place where both sides changed the same base lines.

    ``base_start``/``base_end`` are 0-based line indexes into ``base`` (end exclusive);
    ``ours`` and ``theirs`` are the two sides' lines there (``theirs`` was kept).
    """

    base_start: int
    base_end: int
    ours: tuple[str, ...]
    theirs: tuple[str, ...]


@dataclass(frozen=True)
class MergeResult:
    """``text`` is the merged text; ``conflicts`` the places where the person's lines won."""

    text: str
    conflicts: tuple[Conflict3, ...]


# A hunk: (base start, base end, replacement lines, side) with side 0 = ours, 1 = theirs.
_Hunk = tuple[int, int, list[str], int]


def _hunks(base: list[str], other: list[str], side: int) -> list[_Hunk]:
    sm = difflib.SequenceMatcher(None, base, other, autojunk=False)
    return [
        (i1, i2, other[j1:j2], side) for tag, i1, i2, j1, j2 in sm.get_opcodes() if tag != "equal"
    ]


def changed_lines(a: str, b: str) -> int:
    """How many lines differ between ``a`` and ``b`` (deleted plus inserted)."""
    la, lb = a.splitlines(keepends=True), b.splitlines(keepends=True)
    sm = difflib.SequenceMatcher(None, la, lb, autojunk=False)
    return sum((i2 - i1) + (j2 - j1) for tag, i1, i2, j1, j2 in sm.get_opcodes() if tag != "equal")


def _overlaps(a: _Hunk, b: _Hunk) -> bool:
    """Two hunks touch the same base lines (an insertion at a boundary does not)."""
    a1, a2, b1, b2 = a[0], a[1], b[0], b[1]
    if a1 == a2 and b1 == b2:
        return a1 == b1  # two insertions at one place
    if a1 == a2:
        return b1 < a1 < b2
    if b1 == b2:
        return a1 < b1 < a2
    return a1 < b2 and b1 < a2


def merge3(base: str, ours: str, theirs: str) -> MergeResult:
    """Merge the change ``base`` -> ``ours`` into ``theirs``, line by line.

    Lines keep their endings. Returns the merged text and the conflicts, where the
    ``theirs`` lines were kept. Two identical changes are applied once.
    """
    b = base.splitlines(keepends=True)
    o = ours.splitlines(keepends=True)
    t = theirs.splitlines(keepends=True)
    hunks = sorted(_hunks(b, o, 0) + _hunks(b, t, 1), key=lambda h: (h[0], h[1], -h[3]))
    # Group hunks that overlap (transitively) into regions of the base.
    groups: list[list[_Hunk]] = []
    for h in hunks:
        if groups and any(_overlaps(h, g) for g in groups[-1]):
            groups[-1].append(h)
        else:
            groups.append([h])
    out: list[str] = []
    conflicts: list[Conflict3] = []
    pos = 0
    for group in groups:
        start = min(h[0] for h in group)
        end = max(h[1] for h in group)
        out.extend(b[pos:start])
        sides = {h[3] for h in group}
        if len(sides) == 1:
            # one side only (hunks of one side never overlap each other)
            out.extend(_apply(b, start, end, group))
        else:
            mine = _apply(b, start, end, [h for h in group if h[3] == 0])
            yours = _apply(b, start, end, [h for h in group if h[3] == 1])
            if mine == yours:
                out.extend(yours)
            elif start == end:  # both inserted here: keep both, the person's first
                out.extend(yours)
                out.extend(mine)
            else:
                out.extend(yours)
                conflicts.append(Conflict3(start, end, tuple(mine), tuple(yours)))
        pos = end
    out.extend(b[pos:])
    return MergeResult("".join(out), tuple(conflicts))


def _apply(b: list[str], start: int, end: int, hunks: list[_Hunk]) -> list[str]:
    """Base lines [start, end) with one side's hunks applied."""
    out: list[str] = []
    cur = start
    for h1, h2, lines, _ in sorted(hunks, key=lambda h: (h[0], h[1])):
        out.extend(b[cur:h1])
        out.extend(lines)
        cur = h2
    out.extend(b[cur:end])
    return out


def _load_renameat2() -> Any:
    """libc's ``renameat2`` (Linux 3.15+, glibc 2.28+), or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_RENAMEAT2 = _load_renameat2()
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: str, b: str) -> bool:
    """Atomically swap the files at ``a`` and ``b``; False when the system cannot."""
    global _RENAMEAT2
    if _RENAMEAT2 is None:
        return False
    rc = _RENAMEAT2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        _RENAMEAT2 = None  # this kernel or file system cannot: check-then-replace from now on
        return False
    raise OSError(err, os.strerror(err), b)


def replace_if_unchanged(path: Path, data: bytes, expected: bytes | None) -> bool:
    """Write ``data`` to ``path`` atomically if the file still holds ``expected``.

    ``expected`` None means the file must not exist (created with a hard link of the
    temporary file, which fails if something appeared). The temporary file is written and
    made by :func:`~wiki_memory.plainfile.temp_beside` (fsynced, ``.<name>.*.wm-tmp``,
    ignored by the watcher and git). On Linux the new file is swapped in with ``renameat2
    (RENAME_EXCHANGE)``, which hands back exactly the bytes it replaced: if a person's save
    landed at any moment before the swap, it is swapped back and nothing is lost. Elsewhere
    the file is compared just before an ordinary rename. Returns False (and leaves the
    person's file in place) when the file changed. The folder is fsynced after. The
    replaced file's permission bits are kept (a vault's files are never narrowed); a
    new file is owner-only (0600).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_beside(path, data)
    try:
        if expected is None:
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
        elif read_plain(path) != expected:
            return False
        elif _exchange(tmp, str(path)):
            if read_plain(Path(tmp)) != expected:
                # a save landed after the check: give the person's file back. If yet
                # another save came after the swap, keep that newest one in place.
                _exchange(tmp, str(path))
                if read_plain(Path(tmp)) != data:
                    _exchange(tmp, str(path))
                return False
        else:
            os.replace(tmp, path)
            tmp = ""
    finally:
        if tmp:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    fsync_dir(path.parent)
    return True
