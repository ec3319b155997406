"""File names that are not valid UTF-8 (a vault from another system: Latin-1 names on
Linux): each is a page (or attachment) under its *escaped name*, and stays on disk and in
git under its exact bytes.

The escaped name writes each byte that is not part of valid UTF-8 as ``%XX`` (two
upper-case hex digits, ``80`` to ``FF``): ``notes/caf\\xe9.md`` on disk is the page
``notes/caf%E9.md`` in the index, recall and every answer (in a URL the ``%`` itself is
sent as ``%25``). In Python such a name is a ``str`` with lone surrogates
(``surrogateescape``, what ``os`` answers for a ``str`` folder); only this module turns one
form into the other.

Where a name is looked up, the exact spelling wins: a file really named ``caf%E9.md`` is
that page, and its odd twin is skipped (logged, listed by ``doctor``). An odd name whose
escaped form would not lead back to it (its bytes next to a literal ``%XX``) is skipped
the same way. Nothing here is ever renamed or moved.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

_SURROGATE = re.compile("[\udc80-\udcff]")
_ESCAPE = re.compile("%([89A-F][0-9A-F])")


def has_odd_bytes(rel: str) -> bool:
    """True when ``rel`` (as ``os`` answers it) holds bytes that are not UTF-8."""
    return _SURROGATE.search(rel) is not None


def escaped(rel: str) -> str:
    """``rel`` with each byte that is not UTF-8 as ``%XX``; a valid name unchanged."""
    return _SURROGATE.sub(lambda m: f"%{ord(m[0]) - 0xDC00:02X}", rel)


def unescaped(rel: str) -> str | None:
    """The on-disk name (with surrogates) whose escaped name is ``rel``, or None when
    ``rel`` is no escaped name (no ``%XX`` of a byte 80-FF, or the bytes it spells are
    valid UTF-8 after all)."""
    if "%" not in rel:
        return None
    raw = _ESCAPE.sub(lambda m: chr(0xDC00 + int(m[1], 16)), rel)
    if raw == rel:
        return None
    canonical = raw.encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape")
    return canonical if canonical != rel and escaped(canonical) == rel else None


def disk_rel(root: Path | str, rel: str) -> str:
    """The name under ``root`` that the page name ``rel`` reaches: ``rel`` itself when it
    exists (or is no escaped name), else its unescaped form when that exists, else
    ``rel`` (a new file)."""
    odd = unescaped(rel)
    if odd is None or os.path.lexists(os.path.join(root, rel)):
        return rel
    return odd if os.path.lexists(os.path.join(root, odd)) else rel


def on_disk(root: Path, rel: str) -> Path:
    """``root / disk_rel(root, rel)``: the file a page name reaches."""
    return root / disk_rel(root, rel)


def page_name(root: Path | str, rel: str) -> str | None:
    """The name the file found at ``rel`` under ``root`` (as ``os`` spells it) is served
    under: ``rel`` when it is valid UTF-8, else its escaped name; None when the escaped
    name leads elsewhere (a file of that exact name exists, or it does not unescape back
    to ``rel``): such a file is skipped."""
    if not has_odd_bytes(rel):
        return rel
    name = escaped(rel)
    if unescaped(name) != rel or os.path.lexists(os.path.join(root, name)):
        return None
    return name


def git_name(rel: str) -> bytes:
    """The bytes git stores for the on-disk name ``rel`` (surrogates back to bytes)."""
    return rel.encode("utf-8", "surrogateescape")


def page_names(root: Path | str, rels: Iterable[str]) -> list[str]:
    """:func:`page_name` of each of ``rels`` (as ``os`` or git spell them), the ones
    without a page name left out."""
    return [n for n in (page_name(root, r) for r in rels) if n is not None]
