"""Portable page file names made from titles (case C27).

A title can hold anything (``Sync On/Off Toggle``, ``Q&A: what ships next?``, ``CON``); a
file name must work on Windows, macOS and Linux, in git and as an Obsidian link target.
:func:`file_stem` maps a title to such a name; the exact title stays in the page's
frontmatter, and links by title resolve through the index (``wiki_memory.wiki.links``).

Rules of :func:`file_stem` (applied in order):

1. NFC normalisation; control characters become spaces.
2. ``/`` and ``\\`` become ``-`` (``On/Off`` -> ``On-Off``: one name, never a folder).
3. ``< > : " | ? *`` (forbidden on Windows) and ``# ^ [ ]`` (they break Obsidian links to
   the file name) become spaces.
4. Runs of whitespace become one space; leading and trailing spaces and dots are removed
   (Windows drops trailing ones; a leading dot would hide the file).
5. Reserved device names (``CON``, ``PRN``, ``AUX``, ``NUL``, ``COM1``-``COM9``,
   ``LPT1``-``LPT9``, any case, also before a dot: ``con.txt``) get a ``_`` after that
   part (``CON_``, ``con_.txt``).
6. At most :data:`MAX_STEM_BYTES` UTF-8 bytes, cut at a character boundary.
7. An empty result is ``Untitled``.

:func:`unique_page_path` adds `` 2``, `` 3``, ... when another file already has the name,
compared case-insensitively (macOS and Windows file systems fold case), so a page is never
overwritten by another with the same (or a similar) title.
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path

__all__ = [
    "MAX_STEM_BYTES",
    "RESERVED_NAMES",
    "file_stem",
    "is_portable",
    "new_name_refusal",
    "unportable_parts",
    "unique_page_path",
]

#: longest file stem in UTF-8 bytes (file systems allow 255 for the whole name; room is
#: left for a `` 999`` suffix, ``.md`` and the server's temporary-file prefix and suffix)
MAX_STEM_BYTES = 180

RESERVED_NAMES = frozenset(
    ["CON", "PRN", "AUX", "NUL"]
    + [f"COM{i}" for i in range(1, 10)]
    + [f"LPT{i}" for i in range(1, 10)]
)

_SLASHES = re.compile(r"[/\\]")
_FORBIDDEN = re.compile(r'[<>:"|?*#^\[\]\x00-\x1f\x7f]')
_SPACES = re.compile(r"\s+")


def _reserved(stem: str) -> bool:
    base = stem.split(".", 1)[0].rstrip(" ")
    return base.upper() in RESERVED_NAMES


def _cut(text: str, max_bytes: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    return data[:max_bytes].decode("utf-8", errors="ignore")


def _tidy(stem: str) -> str:
    return stem.strip(" .")


def file_stem(title: str) -> str:
    """A portable file name (without ``.md``) for ``title``; see the module docstring.

    >>> file_stem("Sync On/Off Toggle"), file_stem("Q&A: what ships next?"), file_stem("CON")
    ('Sync On-Off Toggle', 'Q&A what ships next', 'CON_')
    """
    s = unicodedata.normalize("NFC", title)
    s = _SLASHES.sub("-", s)
    s = _FORBIDDEN.sub(" ", s)
    s = _SPACES.sub(" ", s)
    s = _tidy(s)
    s = _tidy(_cut(s, MAX_STEM_BYTES))
    if not s:
        s = "Untitled"
    if _reserved(s):
        base, dot, rest = s.partition(".")
        s = base.rstrip(" ") + "_" + dot + rest
    return s


def is_portable(name: str) -> bool:
    """True when the file name ``name`` (with its extension) is legal on Windows, macOS and
    Linux: no ``<>:"/\\|?*`` or control characters, no reserved device name, no trailing
    dot or space, not empty, at most 255 UTF-8 bytes."""
    if not name or name in (".", "..") or len(name.encode("utf-8")) > 255:
        return False
    if re.search(r'[<>:"/\\|?*\x00-\x1f\x7f]', name):
        return False
    if name[-1] in " .":
        return False
    return not _reserved(name)


def _why_unportable(name: str) -> str | None:
    if _reserved(name):
        return (
            f"{name!r} is a device name Windows reserves (CON, PRN, AUX, NUL, COM1-COM9, "
            "LPT1-LPT9, in any case and with any extension): Windows cannot check it out"
        )
    if name and name[-1] in " .":
        return f"{name!r} ends with a dot or a space, which Windows drops: it cannot be checked out"
    if not is_portable(name):
        return f'{name!r} holds a character Windows forbids in file names (<>:"|?* or control)'
    return None


def unportable_parts(rel: str) -> list[str]:
    """The parts of the wiki-relative path ``rel`` (folders and file name) that
    :func:`is_portable` refuses."""
    return [p for p in rel.split("/") if p and not is_portable(p)]


def new_name_refusal(wiki_dir: Path, rel: str) -> str | None:
    """Why a page may not be *created* at ``rel`` (a message naming the rule), or None.

    Every part of the path that does not exist yet in ``wiki_dir`` must be a name
    Windows can check out (:func:`is_portable`: no reserved device name with any
    extension or case, no trailing dot or space, no forbidden character). Parts that
    already exist on disk are not judged: a vault's existing files keep working."""
    here = wiki_dir
    for part in [p for p in rel.split("/") if p]:
        here = here / part
        if os.path.lexists(here):
            continue
        why = _why_unportable(part)
        if why is not None:
            return why
    return None


def unique_page_path(wiki_dir: Path, folder: str, title: str) -> str:
    """A wiki-relative path ``<folder>/<file_stem(title)>.md`` that no file uses yet.

    Existing names are compared case-insensitively after NFC (``Notes.md`` blocks
    ``notes.md``); on a clash `` 2``, `` 3``, ... is appended to the stem. ``folder`` is
    wiki-relative (``""`` for the root). The folder need not exist.
    """
    folder = folder.strip("/")
    stem = file_stem(title)
    d = wiki_dir / folder if folder else wiki_dir
    try:
        taken = {unicodedata.normalize("NFC", n).casefold() for n in os.listdir(d)}
    except OSError:
        taken = set()
    n = 1
    while True:
        name = f"{stem}.md" if n == 1 else f"{stem} {n}.md"
        if name.casefold() not in taken:
            return f"{folder}/{name}" if folder else name
        n += 1
