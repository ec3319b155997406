"""Safe page paths: every path a client names is resolved only inside ``wiki/``.

Refused: empty paths, NUL bytes, backslashes, absolute paths, ``..`` components (also
percent-encoded ones, after the web framework decoded them once), anything under
``.git/``, and anything that resolves (through symlinks) outside the wiki folder.
"""

from __future__ import annotations

import os
import tempfile
import unicodedata
from pathlib import Path, PurePosixPath

from wiki_memory.errors import BadPath


class PathRefused(BadPath):
    """400 ``bad_path``: a path that names nothing a client may read or write. The
    message has no server path."""


def clean_rel(path: str) -> str:
    """Validate a client path and return it as a normalised, NFC, repo-relative POSIX path.

    Raises PathRefused for anything outside ``wiki/`` or inside ``.git/``.
    """
    if not isinstance(path, str) or not path.strip():
        raise PathRefused("empty path")
    if "\x00" in path:
        raise PathRefused("NUL byte in path")
    if "\\" in path:
        raise PathRefused("backslash in path")
    if "%2e" in path.lower() or "%2f" in path.lower() or "%5c" in path.lower():
        raise PathRefused("encoded path separator or dot")
    if path.startswith("/") or (len(path) > 1 and path[1] == ":"):
        raise PathRefused("absolute path")
    parts = [p for p in PurePosixPath(unicodedata.normalize("NFC", path)).parts if p not in ("",)]
    if not parts:
        raise PathRefused("empty path")
    for p in parts:
        if len(p.encode("utf-8")) > 255:
            raise PathRefused("a path component is longer than 255 bytes")
        if p in ("..", "."):
            raise PathRefused("'..' or '.' in path")
        if p.lower() == ".git":
            raise PathRefused("path inside .git")
    return "/".join(parts)


def resolve(wiki_dir: Path, path: str) -> Path:
    """The absolute path of a client path, checked to stay inside ``wiki_dir`` after
    following symlinks. Raises PathRefused."""
    rel = clean_rel(path)
    root = wiki_dir.resolve()
    full = (root / rel).resolve()
    if full != root and root not in full.parents:
        raise PathRefused("path leads outside the wiki")
    if ".git" in full.relative_to(root).parts:
        raise PathRefused("path inside .git")
    return root / rel


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: temp file in the same folder, fsync, rename,
    fsync of the folder. The temp name matches ``.*.wm-tmp*`` so the watcher ignores it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".wm-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
