"""Conflict copies, recognised by name (docs/git.md, "Conflict copies").

Two kinds of file hold a second version of a page beside it:

* the copies sync's merge keeps for a true overlap (:func:`wiki_memory.wiki.replicate.conflict_name`:
  ``deploy.conflict-origin-1a2b3c4.md``), marked in their frontmatter with ``conflict_of``
  (the page's path) and ``conflict_side`` (whose version: the remote);
* the copies file-sync tools leave when two machines changed one file:
  Syncthing's ``deploy.sync-conflict-20260102-030405-ABCDEF1.md``, Dropbox's and Google
  Drive's ``deploy (Alice's conflicted copy 2026-01-02).md``, and iCloud Drive's
  ``deploy 2.md``. Their bytes are the tool's, never rewritten: the index gives them the
  same marks (:func:`marks`) as if their frontmatter carried them.

An iCloud name (`` 2`` .. `` 99`` before ``.md``) is also how the server itself names a
second page with the same title (:func:`wiki_memory.wiki.names.unique_page_path`), so such
a file counts as a copy only beside its original with the same frontmatter ``id``, or,
with no ``id`` on either, the same title (:func:`same_page`).

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "MARK_KEYS",
    "copy_title",
    "mark_parsed",
    "icloud_original",
    "mark_bytes",
    "marks",
    "named_copy",
    "same_page",
]

#: the frontmatter keys that mark a conflict copy
MARK_KEYS = ("conflict_of", "conflict_side")

_OWN = re.compile(r"\.conflict-(?P<side>[A-Za-z0-9._-]+)-[0-9a-f]{7}(?P<ext>\.[^/]*)?$")
_SYNCTHING = re.compile(
    r"\.sync-conflict-\d{8}-\d{6}-(?P<dev>[A-Z0-9]{7})(?P<ext>\.[^/.]*)?$", re.IGNORECASE
)
_CONFLICTED = re.compile(
    r" \((?P<who>[^/]*?)(?:'s)? ?conflicted copy[^/]*\)(?P<ext>\.[^/.()]*)?$", re.IGNORECASE
)
_ICLOUD = re.compile(r"^(?P<stem>[^/]+?) (?P<n>[2-9]|[1-9][0-9])(?P<ext>\.md)$", re.IGNORECASE)


def named_copy(path: str) -> tuple[str, str] | None:
    """``(the original's path, whose version)`` for a file named as a conflict copy by
    sync or by Syncthing, Dropbox or Drive; None for any other name (an iCloud `` 2``
    name too: see :func:`icloud_original`). ``path`` is wiki-relative.

    >>> named_copy("a/deploy.sync-conflict-20260102-030405-ABCDEF1.md")
    ('a/deploy.md', 'Syncthing device ABCDEF1')"""
    head, sep, name = path.rpartition("/")
    m = _OWN.search(name)
    if m and m.start() > 0:
        return head + sep + name[: m.start()] + (m.group("ext") or ""), m.group("side")
    m = _SYNCTHING.search(name)
    if m and m.start() > 0:
        side = f"Syncthing device {m.group('dev')}"
        return head + sep + name[: m.start()] + (m.group("ext") or ""), side
    m = _CONFLICTED.search(name)
    if m and m.start() > 0:
        who = m.group("who").strip()
        side = f"{who} via Dropbox or Drive" if who else "Dropbox or Drive"
        return head + sep + name[: m.start()] + (m.group("ext") or ""), side
    return None


def icloud_original(path: str) -> str | None:
    """The page an iCloud-style name could be a copy of (``notes/deploy 2.md`` ->
    ``notes/deploy.md``), else None. Whether it is one: :func:`same_page`."""
    head, sep, name = path.rpartition("/")
    m = _ICLOUD.match(name)
    return head + sep + m.group("stem") + m.group("ext") if m else None


def same_page(
    copy_meta: Mapping[str, Any], copy_title: str, orig_meta: Mapping[str, Any], orig_title: str
) -> bool:
    """Is a file with an iCloud-style name a copy of the original beside it? The same
    frontmatter ``id``; or, with an ``id`` on neither, the same title."""
    a, b = copy_meta.get("id"), orig_meta.get("id")
    if a is not None or b is not None:
        return a is not None and str(a) == str(b)
    return bool(copy_title) and copy_title == orig_title


def marks(path: str, meta: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(conflict_of, conflict_side)`` of a page: its frontmatter's marks, else those
    its name gives (:func:`named_copy`); None for a page that is no copy."""
    of = meta.get("conflict_of")
    if isinstance(of, str) and of.strip():
        side = meta.get("conflict_side")
        return of.strip(), str(side) if side is not None else "another replica"
    return named_copy(path)


def copy_title(title: str, side: str) -> str:
    """A copy's own title: ``Deploy`` -> ``Deploy (conflict copy from origin)``
    (unchanged when it says so already), so a list never shows two pages titled alike."""
    if "(conflict copy" in title:
        return title
    return f"{title} (conflict copy from {side})"


def mark_bytes(data: bytes, path: str, side: str) -> bytes:
    """A copy's bytes: ``data`` (a version of the page at ``path``) with ``conflict_of``,
    ``conflict_side`` and, when its frontmatter has a title, the copy's own
    (:func:`copy_title`) set in its frontmatter; every other byte kept. Raises
    :class:`~wiki_memory.wiki.frontmatter.FrontmatterError` when the frontmatter cannot
    be spliced (the caller keeps the bytes as they are)."""
    from wiki_memory.wiki.frontmatter import set_keys  # the page model imports this module
    from wiki_memory.wiki.page import parse_metadata

    updates: dict[str, Any] = {}
    title = parse_metadata(data).get("title") if data.startswith(b"---") else None
    if isinstance(title, str) and title.strip():
        updates["title"] = copy_title(title, side)
    updates.update({"conflict_of": path, "conflict_side": side})
    return set_keys(data, updates)


def mark_parsed(path: str, meta: dict[str, Any], title: str) -> tuple[dict[str, Any], str, bool]:
    """A parsed page as the index keeps it: for a file named as a conflict copy
    (:func:`named_copy`), ``meta`` with its marks (``conflict_of``, ``conflict_side``) and
    the copy's own title (:func:`copy_title`), and True; any other page unchanged, and
    False."""
    copy = marks(path, meta) if named_copy(path) else None
    if copy is None:
        return meta, title, False
    return (
        {**meta, "conflict_of": copy[0], "conflict_side": copy[1]},
        copy_title(title, copy[1]),
        True,
    )
