"""Safe page paths: every path a client names is resolved only inside ``wiki/``.

Refused: empty paths, NUL bytes, backslashes, absolute paths, ``..`` components (also
percent-encoded ones, after the web framework decoded them once), anything under
``.git/``, and anything that resolves (through symlinks) outside the wiki folder.

A page's own name is never folded: a path is looked up exactly as given. Only when
that spelling does not exist and exactly one entry of the folder is canonically equal
to it (the same NFC form: ``Café`` composed or decomposed) is that entry's own name
used, so a page listed under a decomposed name is read and written by that name, and
a write never makes a second, visually identical file (:func:`locate`).

File names found on disk that are not valid UTF-8 (:func:`odd_name`) are pages under
their escaped name (:mod:`wiki_memory.wiki.oddnames`: each such byte as ``%XX``), found
on disk through :func:`locate` and :func:`is_plain`, logged once each
(:func:`report_escaped_name`) and listed by ``doctor`` with the rename that fixes them;
one whose escaped name leads elsewhere is skipped (:func:`report_odd_name`). They are
never moved or renamed.
"""

from __future__ import annotations

import logging
import os
import stat
import tempfile
import threading
import unicodedata
from pathlib import Path, PurePosixPath
from typing import Any

from wiki_memory.errors import BadPath
from wiki_memory.wiki.oddnames import disk_rel, escaped

log = logging.getLogger("wiki_memory.paths")


#: the most parts (folders and the file name) a client's path may have
MAX_PATH_DEPTH = 64
#: the longest path a client may name, in UTF-8 bytes (the file system's own limit,
#: PATH_MAX 4096 on Linux, holds the wiki folder's own path too)
MAX_PATH_BYTES = 1024


class PathRefused(BadPath):
    """400 ``bad_path``: a path that names nothing a client may read or write. The
    message has no server path; ``field`` is ``path`` unless the caller names the
    request field the path came from."""

    def __init__(self, message: str = "", *, field: str | None = "path", **extra: Any) -> None:
        super().__init__(message, field=field, **extra)


def odd_name(rel: str) -> str | None:
    """Why a file name found on disk cannot be a page as it is spelled, or None when it
    can.

    ``rel`` is a name as ``os`` returns it for a ``str`` folder (bytes that are not
    UTF-8 are lone surrogates, ``surrogateescape``). Such a name cannot be stored in
    the index or named in JSON: it is a page under its escaped name
    (:func:`wiki_memory.wiki.oddnames.page_name`), never under this spelling."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return "the file name is not valid UTF-8"
    return None


def name_key(rel: str) -> str:
    """``rel`` as a case-insensitive file system sees it: NFC, case folded. Two names
    with one key are one file on macOS or Windows (a case-only rename keeps the key)."""
    return unicodedata.normalize("NFC", rel).casefold()


_reported: set[str] = set()
_reported_lock = threading.Lock()


def shown_name(rel: str) -> str:
    """``rel`` printable: bytes that are not UTF-8 shown as ``\\xNN``."""
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def report_odd_name(rel: str, reason: str | None = None) -> None:
    """Log, once per process and name, that the file ``rel`` is skipped and why."""
    reason = reason or odd_name(rel) or "cannot be a page"
    shown = shown_name(rel)
    with _reported_lock:
        if shown in _reported:
            return
        if len(_reported) > 10_000:
            _reported.clear()
        _reported.add(shown)
    log.warning(
        "skipping %s: %s; the file is left as it is (rename it to make it a page; "
        "`wiki-memory doctor` lists such files)",
        shown,
        reason,
    )


def report_escaped_name(rel: str) -> None:
    """Log, once per process and name, that the file ``rel`` (not valid UTF-8) is served
    under its escaped name."""
    shown = shown_name(rel)
    with _reported_lock:
        if ("escaped", shown) in _escaped_reported:
            return
        if len(_escaped_reported) > 10_000:
            _escaped_reported.clear()
        _escaped_reported.add(("escaped", shown))
    log.warning(
        "serving %s as %s: its name is not valid UTF-8 (rename it to a UTF-8 name to "
        "give it a name every tool shows; `wiki-memory doctor` lists such files)",
        shown,
        escaped(rel),
    )


_escaped_reported: set[tuple[str, str]] = set()


def clean_rel(path: str) -> str:
    """Validate a client path and return it as a repo-relative POSIX path, spelled exactly
    as given (never Unicode-normalized: see :func:`locate` for the lookup).

    Raises PathRefused for anything outside ``wiki/`` or inside ``.git/``, and for a
    path that is not valid UTF-8.
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
    if odd_name(path):
        raise PathRefused("path is not valid UTF-8")
    parts = [p for p in PurePosixPath(path).parts if p not in ("",)]
    if not parts:
        raise PathRefused("empty path")
    if len(parts) > MAX_PATH_DEPTH:
        raise PathRefused(f"a path may be at most {MAX_PATH_DEPTH} levels deep")
    if len(path.encode("utf-8")) > MAX_PATH_BYTES:
        raise PathRefused(f"a path may be at most {MAX_PATH_BYTES} bytes long")
    for p in parts:
        if len(p.encode("utf-8")) > 255:
            raise PathRefused("a path component is longer than 255 bytes")
        if p in ("..", "."):
            raise PathRefused("'..' or '.' in path")
        if p.lower() == ".git":
            raise PathRefused("path inside .git")
    return "/".join(parts)


def _existing_spelling(parent: Path, name: str) -> str:
    """``name`` when it exists in ``parent`` (or nothing canonically equal does), else the
    one entry of ``parent`` whose NFC form equals ``name``'s."""
    if os.path.lexists(parent / name):
        return name
    key = unicodedata.normalize("NFC", name)
    try:
        entries = os.listdir(parent)
    except OSError:
        return name
    same = [e for e in entries if e != name and unicodedata.normalize("NFC", e) == key]
    return same[0] if len(same) == 1 else name


def locate(wiki_dir: Path, path: str) -> tuple[str, Path]:
    """``(rel, absolute path)`` of a client path inside ``wiki_dir``.

    Each part is looked up as given; a part that does not exist while exactly one entry
    of its folder is canonically equal to it (NFC) takes that entry's spelling, so a
    read or write reaches the existing file instead of making a visually identical
    twin. The result is checked to stay inside ``wiki_dir`` after following symlinks.
    Raises PathRefused."""
    rel = clean_rel(path)
    root = wiki_dir.resolve()
    parts: list[str] = []
    for part in rel.split("/"):
        parts.append(_existing_spelling(root.joinpath(*parts), part))
    rel = "/".join(parts)
    return rel, _checked(root, rel)


def resolve(wiki_dir: Path, path: str) -> Path:
    """The absolute path of a client path (found as :func:`locate` does), checked to stay
    inside ``wiki_dir`` after following symlinks. Raises PathRefused."""
    return locate(wiki_dir, path)[1]


def _checked(root: Path, rel: str) -> Path:
    """The file ``rel`` (a page name: an escaped one reaches its file,
    :func:`~wiki_memory.wiki.oddnames.disk_rel`) under ``root``, checked to stay inside
    it after following symlinks and outside ``.git``."""
    rel = disk_rel(root, rel)
    try:
        full = (root / rel).resolve()
    except (RuntimeError, OSError):
        # a symbolic-link loop (RuntimeError before Python 3.13, OSError ELOOP after)
        raise PathRefused("the path runs into a loop of symbolic links") from None
    if full != root and root not in full.parents:
        raise PathRefused("path leads outside the wiki")
    if ".git" in full.relative_to(root).parts:
        raise PathRefused("path inside .git")
    return root / rel


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: temp file in the same folder, fsync, rename,
    fsync of the folder. The temp name matches ``.*.wm-tmp*`` so the watcher ignores it.
    A file that exists keeps its permission bits (a vault's own files are never
    narrowed); a new one is owner-only (0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        keep: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        keep = None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".wm-tmp", dir=path.parent)
    try:
        if keep is not None:
            os.fchmod(fd, keep)
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


def is_plain(root: Path, rel: str) -> bool:
    """True when no component of ``rel`` under ``root`` is a symbolic link and the last,
    if it exists, is a folder or a regular file with a single link: what the server may
    serve or commit (a link, or a file's second name, may lead to another user's page).
    A path that does not exist (yet) is plain. An escaped name
    (:mod:`wiki_memory.wiki.oddnames`) is checked on the file it reaches."""
    rel = disk_rel(root, rel)
    cur = str(root)
    parts = rel.split("/")
    for i, part in enumerate(parts):
        cur = os.path.join(cur, part)
        try:
            st = os.lstat(cur)
        except (FileNotFoundError, NotADirectoryError):
            return True
        except OSError:
            return False
        if stat.S_ISLNK(st.st_mode):
            return False
        if i < len(parts) - 1:
            if not stat.S_ISDIR(st.st_mode):
                return True  # nothing can exist below a file
            continue
        return stat.S_ISDIR(st.st_mode) or (stat.S_ISREG(st.st_mode) and st.st_nlink <= 1)
    return True
