"""The door: every page read or write, on every face, asks this module first.

:mod:`wiki_memory.identity` says which pages belong to one user alone, from a page's
path and frontmatter. This module applies that rule to the file that will really be
read or written, never to the spelling a caller sent:

- the caller's path is cleaned (:func:`wiki_memory.wiki.paths.clean_rel`: doubled and
  trailing slashes collapse; ``..``, ``.``, NUL, backslashes and ``.git`` are refused
  with 400 whether or not anything is there);
- every component under ``wiki/`` is checked with ``lstat``: a path through a symbolic
  link (a directory link that a ``git pull`` brought, say) is refused, and so is a
  regular file with more than one hard link (its other name may be a personal page);
- the ``people/<user>/`` folder and frontmatter ``visibility: personal`` are decided on
  the bytes read (or, for a write, on the bytes on disk and the bytes to be written);
- whatever the caller may not see raises :class:`~wiki_memory.errors.NotFound` with the
  same message a missing page gets (``no such page: <clean path>``): no 403, 412 or
  428 that confirms it, no hash.

Pinning (frontmatter ``pinned``) changes only by the wiki's owner
(:func:`wiki_memory.identity.may_pin`); a write that leaves ``pinned`` as stored is not
a pin change.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wiki_memory.errors import BadRequest, Forbidden, NotFound
from wiki_memory.identity import (
    ANONYMOUS,
    Identity,
    fold,
    is_pinned,
    may_pin,
    may_read,
    people_owner,
    personal_owner,
)
from wiki_memory.wiki.page import parse_page
from wiki_memory.wiki.paths import clean_rel, is_plain, locate

__all__ = ["PageFile", "ScopeRule", "not_found"]

_O_READ = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)


def not_found(rel: str) -> NotFound:
    """The one answer for a page that is missing or hidden from the caller."""
    return NotFound(f"no such page: {rel}")


@dataclass(frozen=True)
class PageFile:
    """A page the caller may read: ``rel`` (clean wiki-relative path), ``full``
    (absolute path), ``data`` (its bytes), ``meta`` (its frontmatter, ``{}`` when none)."""

    rel: str
    full: Path
    data: bytes
    meta: Mapping[str, Any]


def frontmatter_of(data: bytes | None, rel: str) -> dict[str, Any]:
    """The frontmatter mapping of a page's bytes (``{}`` when absent or unreadable)."""
    if data is None:
        return {}
    meta = parse_page(data, rel).metadata
    return meta if isinstance(meta, dict) else {}


class ScopeRule:
    """The access rule over one wiki folder.

    ``owner`` is the local owner's user name: a plain user name given to
    :meth:`identity` becomes an ``owner`` identity for that name and a ``member`` with
    every project for any other (until roles and grants come from tokens).
    """

    def __init__(self, wiki_dir: Path, owner: str) -> None:
        self.wiki_dir = Path(wiki_dir)
        self.owner = owner

    # -- who ---------------------------------------------------------------------------
    def identity(self, who: Identity | str | None) -> Identity:
        """``who`` as an :class:`Identity`: a user name becomes the owner or a member;
        None (and ``""``) is :data:`~wiki_memory.identity.ANONYMOUS`, who sees shared
        pages only. (The server's own reads and writes do not go through here.)"""
        if isinstance(who, Identity):
            return who
        if not who:
            return ANONYMOUS
        role = "owner" if fold(who) == fold(self.owner) else "member"
        return Identity(user=who, role=role)

    # -- paths -------------------------------------------------------------------------
    def locate(self, path: str) -> tuple[str, Path]:
        """``(relative path, absolute path)`` of the file a client path names: the
        existing spelling when only its Unicode form differs
        (:func:`wiki_memory.wiki.paths.locate`); raises PathRefused (400)."""
        return locate(self.wiki_dir, path)

    def plain(self, rel: str) -> bool:
        """True when no component of ``rel`` under the wiki is a symbolic link and the
        last, if it exists, is a folder or a regular file with a single link
        (:func:`wiki_memory.wiki.paths.is_plain`)."""
        return is_plain(self.wiki_dir, rel)

    # -- reading -----------------------------------------------------------------------
    def visible(
        self, who: Identity | str | None, path: str, meta: Mapping[str, Any] | None
    ) -> bool:
        """May ``who`` see the page at ``path`` (as stored, e.g. an index row) with
        frontmatter ``meta``? For rows whose file was already checked when indexed."""
        return may_read(self.identity(who), path, meta)

    def read(self, who: Identity | str | None, path: str) -> PageFile:
        """Read a page for ``who``. Raises PathRefused (400) for a path that can name
        no page and NotFound when the page is absent, not a plain file, or hidden."""
        ident = self.identity(who)
        asked = clean_rel(path)  # every refusal names the path as the caller spelled it
        rel, _full = self.locate(path)
        for p in (asked, rel):
            owner = people_owner(p)
            if owner is not None and not ident.owns(owner):
                raise not_found(asked)
        try:
            page = self.read_file(rel)
        except NotFound:
            raise not_found(asked) from None
        if not may_read(ident, page.rel, page.meta):
            raise not_found(asked)
        return page

    def read_file(self, path: str) -> PageFile:
        """The server's own read of a page: the file checks of :meth:`read` (no link
        on the way, one hard link, a regular file) without a caller's scope. Raises
        PathRefused or NotFound."""
        rel, full = self.locate(path)
        if not self.plain(rel):
            raise not_found(rel)
        try:
            fd = os.open(full, _O_READ)
        except OSError:
            raise not_found(rel) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise not_found(rel)
            with os.fdopen(fd, "rb") as f:
                fd = -1
                data = f.read()
        finally:
            if fd >= 0:
                os.close(fd)
        return PageFile(rel, full, data, frontmatter_of(data, rel))

    # -- writing -----------------------------------------------------------------------
    def check_target(self, who: Identity | str | None, path: str) -> tuple[str, Path]:
        """Before a write: the clean and absolute path, or NotFound when the folder is
        another user's or the path passes through a link (404 whether or not the page or
        its user exists). Raises PathRefused (400) for a path that can name no page."""
        ident = self.identity(who)
        asked = clean_rel(path)
        rel, full = self.locate(path)
        for p in (asked, rel):
            owner = people_owner(p)
            if owner is not None and not ident.owns(owner):
                raise not_found(asked)
        if not self.plain(rel):
            raise not_found(asked)
        return rel, full

    def check_write(
        self, who: Identity | str | None, rel: str, current: bytes | None, new: bytes | None
    ) -> None:
        """Inside the write (on the writer thread, on the bytes really on disk): raise
        NotFound when ``current`` is a page ``who`` may not see; BadRequest when ``new``
        would make the page another user's; Forbidden when it pins or unpins and ``who``
        may not (:func:`wiki_memory.identity.may_pin`)."""
        ident = self.identity(who)
        if not self.plain(rel):
            raise not_found(rel)
        cur_meta = frontmatter_of(current, rel)
        if current is not None and not may_read(ident, rel, cur_meta):
            raise not_found(rel)
        if new is None:
            return
        new_meta = frontmatter_of(new, rel)
        if not ident.owns(personal_owner(rel, new_meta)):
            raise BadRequest(
                "a personal page can only be written by its own user", field="visibility"
            )
        if is_pinned(cur_meta) != is_pinned(new_meta) and not may_pin(ident):
            raise Forbidden("only the wiki's owner may pin or unpin a page", field="pinned")
