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

Pinning (frontmatter ``pinned``) changes only by the wiki's owner and admins
(:func:`wiki_memory.identity.may_pin`); a write that leaves ``pinned`` as stored is not
a pin change.

Roles and grants: a user name a face hands in is looked up in the ``directory`` (the token
store: :meth:`wiki_memory.auth.TokenStore.identity_of`) at every call, so a grant, a
role change or a revocation binds the very next request. A write the caller may read
but not write (a read-only grant, a reader) raises :class:`~wiki_memory.errors.Forbidden`
naming the grant it lacks (``grant`` in the JSON body); one it may not read raises
NotFound first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from wiki_memory.errors import BadRequest, Forbidden, NotFound
from wiki_memory.identity import (
    ANONYMOUS,
    OWNER_KEY,
    Identity,
    is_pinned,
    may_pin,
    may_read,
    may_write,
    named,
    people_owner,
    personal_owner,
    project_of,
    write_refusal,
)
from wiki_memory.plainfile import read_plain
from wiki_memory.wiki.frontmatter import FrontmatterError, set_keys
from wiki_memory.wiki.paths import clean_rel, is_plain, locate
from wiki_memory.wiki.personal import frontmatter_of as frontmatter_of
from wiki_memory.wiki.personal import page_owner

__all__ = ["Directory", "PageFile", "ScopeRule", "not_found", "no_write"]


def not_found(rel: str) -> NotFound:
    """The one answer for a page that is missing or hidden from the caller."""
    return NotFound(f"no such page: {rel}")


class Directory(Protocol):
    """Where roles and grants come from (:class:`wiki_memory.auth.TokenStore`)."""

    def identity_of(self, user: str) -> Identity | None:
        """The user's current role and grants, or None for a user with no token."""
        ...

    def grant(self, user: str, project: str, read_only: bool = False) -> str:
        """Grant ``user`` write (or read) on ``project``; returns the level stored."""
        ...


def no_write(path: str, lacking: str) -> Forbidden:
    """The one 403 for a page the caller may read but not write: ``grant`` names what
    it lacks (``"write on project atlas"``), ``project`` the project when there is one."""
    project = project_of(path)
    extra: dict[str, Any] = {"grant": lacking}
    if project is not None:
        extra["project"] = project
    return Forbidden(f"you may not write {path}: it needs {lacking}", **extra)


@dataclass(frozen=True)
class PageFile:
    """A page the caller may read: ``rel`` (clean wiki-relative path), ``full``
    (absolute path), ``data`` (its bytes), ``meta`` (its frontmatter, ``{}`` when none)."""

    rel: str
    full: Path
    data: bytes
    meta: Mapping[str, Any]


class ScopeRule:
    """The access rule over one wiki folder.

    ``owner`` is the local owner's user name; ``directory`` where roles and grants come
    from (None: in-process callers and tests). Every caller arrives as the
    :class:`Identity` its door built (:func:`wiki_memory.identity.named` for a door that
    holds only a name: :meth:`named`).
    """

    def __init__(self, wiki_dir: Path, owner: str, directory: Directory | None = None) -> None:
        self.wiki_dir = Path(wiki_dir)
        self.owner = owner
        self.directory = directory
        #: told ``(identity, op, clean path, error)`` of each refusal of
        #: :meth:`write_check` (the Memory writes it to the audit log)
        self.refused: Callable[[Identity, str, str, Exception], None] | None = None

    # -- who ---------------------------------------------------------------------------
    def identity(self, who: Identity | None) -> Identity:
        """``who`` as the caller the rule judges: the :class:`Identity` the door built
        (the HTTP middleware, the MCP caller, the CLI), or
        :data:`~wiki_memory.identity.ANONYMOUS` for None, who sees shared pages only.
        The core never turns a user name into an identity. (The server's own reads and
        writes do not go through here.)"""
        return ANONYMOUS if who is None else who

    @property
    def local_owner(self) -> Identity:
        """The wiki's owner as a caller (what an operation run for no caller acts as
        where it needs one)."""
        return Identity(user=self.owner, role="owner")

    def named(self, user: str | None, face: str = "") -> Identity:
        """The caller a door acts for when it holds only the user name ``user`` (the
        CLI, the MCP server on standard input, a session the spool recorded):
        :func:`wiki_memory.identity.named` with this wiki's owner and directory."""
        lookup = None if self.directory is None else self.directory.identity_of
        return named(user, self.owner, lookup, face)

    def require_write(self, who: Identity | None, rel: str) -> None:
        """Raise :func:`no_write` (403) when ``who`` may not write ``rel``; the caller has
        already made sure ``who`` may read it. None (the server itself) may."""
        if who is None:
            return
        lacking = write_refusal(self.identity(who), rel)
        if lacking is not None:
            raise no_write(rel, lacking)

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

    def writable(self, who: Identity | None, path: str, meta: Mapping[str, Any] | None) -> bool:
        """May ``who`` read and write the page at ``path`` (as stored) with frontmatter
        ``meta`` (:func:`wiki_memory.identity.may_write`)? None: the server itself."""
        return who is None or may_write(self.identity(who), path, meta)

    # -- reading -----------------------------------------------------------------------
    def visible(self, who: Identity | None, path: str, meta: Mapping[str, Any] | None) -> bool:
        """May ``who`` see the page at ``path`` (as stored, e.g. an index row) with
        frontmatter ``meta``? For rows whose file was already checked when indexed."""
        return may_read(self.identity(who), path, meta)

    def read(self, who: Identity | None, path: str) -> PageFile:
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
        if not may_read(ident, page.rel, page.meta) or not ident.owns(
            page_owner(page.rel, page.data)  # a personal line YAML did not read
        ):
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
            data = read_plain(full)
        except OSError:
            data = None
        if data is None:
            raise not_found(rel)
        return PageFile(rel, full, data, frontmatter_of(data, rel))

    # -- writing -----------------------------------------------------------------------
    def check_target(self, who: Identity | None, path: str) -> tuple[str, Path]:
        """Before a write: the clean and absolute path, or NotFound when the folder is
        another user's, the project one ``who`` may not read, or the path passes through
        a link (404 whether or not the page or its user exists); Forbidden
        (:func:`no_write`) when ``who`` may read there but not write. Raises PathRefused
        (400) for a path that can name no page."""
        ident = self.identity(who)
        asked = clean_rel(path)
        rel, full = self.locate(path)
        for p in (asked, rel):
            owner = people_owner(p)
            if owner is not None and not ident.owns(owner):
                raise not_found(asked)
            if not may_read(ident, p, None):
                raise not_found(asked)
        if not self.plain(rel):
            raise not_found(asked)
        lacking = write_refusal(ident, rel)
        if lacking is not None:
            raise no_write(asked, lacking)
        return rel, full

    def write_check(
        self, who: Identity | None, path: str, op: str = "page.write"
    ) -> tuple[str, Path]:
        """May ``who`` write the page at ``path``? :meth:`check_target`, with a refusal
        told to :attr:`refused` (the audit log). Every face asks this before it reads or
        scans a body it was sent (DESIGN.md invariant 13), and
        ``Memory.update_page`` before its job; :meth:`check_write` decides again on the
        bytes on disk, inside the write."""
        ident = self.identity(who)
        try:
            return self.check_target(ident, path)
        except (NotFound, Forbidden) as exc:
            if self.refused is not None:
                self.refused(ident, op, clean_rel(path), exc)
            raise

    def stamp_owner(self, who: Identity | None, rel: str, new: bytes) -> bytes:
        """``new`` with frontmatter ``user`` set to the writer when it marks the page
        ``visibility: personal`` without naming a user and the writer is not the wiki's
        owner (such a page would be the owner's, and refused to the writer): a personal
        page is its writer's. Only that
        key is spliced in (:func:`~wiki_memory.wiki.frontmatter.set_keys`); every other
        byte stays. Bytes whose frontmatter cannot be spliced are returned as they are
        (:meth:`check_write` decides on them)."""
        ident = self.identity(who)
        if not ident.user or ident.owns(OWNER_KEY) or people_owner(rel) is not None:
            return new
        if personal_owner(rel, frontmatter_of(new, rel)) != OWNER_KEY:
            return new
        try:
            return set_keys(new, {"user": ident.user})
        except FrontmatterError:
            return new

    def check_write(
        self, who: Identity | None, rel: str, current: bytes | None, new: bytes | None
    ) -> None:
        """Inside the write (on the writer thread, on the bytes really on disk): raise
        NotFound when ``current`` is a page ``who`` may not see; Forbidden
        (:func:`no_write`) when ``who`` may see but not write it; BadRequest when ``new``
        would make the page another user's; Forbidden when it pins or unpins and ``who``
        may not (:func:`wiki_memory.identity.may_pin`)."""
        ident = self.identity(who)
        if not self.plain(rel):
            raise not_found(rel)
        cur_meta = frontmatter_of(current, rel)
        if current is not None and (
            not may_read(ident, rel, cur_meta) or not ident.owns(page_owner(rel, current))
        ):
            raise not_found(rel)
        lacking = write_refusal(ident, rel)
        if lacking is not None:
            raise no_write(rel, lacking)
        if new is None:
            return
        new_meta = frontmatter_of(new, rel)
        if not ident.owns(personal_owner(rel, new_meta)) or not ident.owns(page_owner(rel, new)):
            raise BadRequest(
                "a personal page can only be written by its own user (its frontmatter "
                "valid YAML, naming it in `user`)",
                field="visibility",
            )
        if is_pinned(cur_meta) != is_pinned(new_meta) and not may_pin(ident):
            raise Forbidden(
                "only the wiki's owner and admins may pin or unpin a page",
                field="pinned",
                grant="admin",
            )
