r"""Who is asking, and which pages belong to one user alone: the rule every face obeys.

This module is the bottom layer of the access rule (no imports from the rest of the
package), so the index can store each page's personal owner and filter on it in SQL
before ranking (invariant 9) without importing upwards. The file-level half of the rule
(symbolic links, hard links, reading the bytes that are really there) is
:mod:`wiki_memory.core.scope`, which calls this module; nothing else decides.

A page belongs to one user alone when

- it lies under ``people/<user>/`` (the first two path segments; ``people`` and the
  user name compared with :func:`fold`, so ``People/ALICE/`` is still Alice's), or
- its frontmatter says ``visibility: personal``: it belongs to its frontmatter ``user``
  (a personal page with no ``user`` belongs to the wiki's owner).

Everything else is shared. Roles (``owner``, ``admin``, ``member``, ``reader``) and
per-project grants are carried by :class:`Identity` (the token store,
:mod:`wiki_memory.auth`, keeps them per user; docs/team-server.md has the table):

- the ``owner`` and ``admin``\ s read and write every project (never another user's
  personal page);
- a ``member`` reads the projects it holds a grant on (``"read"`` or ``"write"``) and
  writes those it holds ``"write"`` on, plus its own ``people/<user>/`` folder;
- a ``reader`` reads the projects it holds a grant on and writes nothing;
- pages outside ``projects/`` and ``people/`` (a vault's own folders) are read by every
  caller with a token and written by every member, admin and the owner.

``grants=None`` means every project (an identity built without the token store: the
in-process callers and tests); the token store always gives members and readers a
mapping, empty when they hold no grant.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

__all__ = [
    "ANONYMOUS",
    "Identity",
    "OWNER_KEY",
    "ROLES",
    "fold",
    "personal_owner",
    "project_of",
    "may_read",
    "may_write",
    "write_refusal",
    "may_pin",
    "may_admin",
    "is_pinned",
    "named",
    "of_request",
    "people_owner",
    "visible_sql",
]

ROLES = ("owner", "admin", "member", "reader")

#: the owner key stored for a personal page that names no ``user``: the wiki's owner's
OWNER_KEY = "\x00owner"


def fold(name: str) -> str:
    """``name`` folded for comparing user names: Unicode NFKC plus case folding (so
    ``ALICE``, ``Alice`` and fullwidth ``ａｌｉｃｅ`` are one name). Used only to
    refuse; a page's own path is never folded."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())


@dataclass(frozen=True)
class Identity:
    """The caller of an operation.

    ``user``: the name the token belongs to; ``role``: one of :data:`ROLES`;
    ``grants``: project name -> ``"read"`` or ``"write"`` (None: every project, as the
    role allows; ignored for ``owner`` and ``admin``, who have every project);
    ``token_id``: the token's id, for the audit log (None when unknown); ``face``: where
    the call came in (``http``, ``mcp``, ``web``, ``cli``; ``""`` when unknown);
    ``agent``: the request's ``User-Agent`` (at most 200 characters), for the audit log;
    ``address``: the client's address (behind a trusted proxy, the one it forwarded);
    ``tz``: the user's stored time zone (``token create --tz``), the default of a call
    that names none (:mod:`wiki_memory.zones`; ``""``: UTC).
    """

    user: str
    role: str = "member"
    grants: Mapping[str, str] | None = None
    token_id: str | None = None
    face: str = ""
    agent: str = ""
    address: str = ""
    tz: str = ""

    @property
    def every_project(self) -> bool:
        """True when this caller reads (and, unless a reader, writes) every project."""
        return self.role in ("owner", "admin") or self.grants is None

    def grant(self, project: str) -> str | None:
        """``"write"``, ``"read"`` or None: what this caller holds on ``project``."""
        if self.role in ("owner", "admin"):
            return "write"
        if self.role not in ("member", "reader"):
            return None
        if self.grants is None:
            return "read" if self.role == "reader" else "write"
        g = self.grants.get(project)
        if g is None:
            return None
        return "read" if self.role == "reader" or g != "write" else "write"

    @property
    def key(self) -> str:
        """The folded user name pages' owners are compared with (a key no page has for
        a caller with no user)."""
        return fold(self.user) if self.user else "\x00anonymous"

    def owns(self, owner_key: str | None) -> bool:
        """True when a page whose personal owner is ``owner_key`` (None: shared) is this
        caller's to see."""
        if owner_key is None:
            return True
        return owner_key == self.key or (owner_key == OWNER_KEY and self.role == "owner")


#: a caller with no user (no token behind it): sees shared pages only
ANONYMOUS = Identity(user="", role="anonymous")


def of_request(scope: Mapping[str, Any]) -> Identity:
    """The caller of an HTTP request from its ASGI ``scope``: the :class:`Identity` the
    authentication middleware built (``scope["state"]["identity"]``, the one the routes
    of every face hand to the core), :data:`ANONYMOUS` when it built none (an open
    path), who sees shared pages only and writes nothing."""
    found = (scope.get("state") or {}).get("identity")
    return found if isinstance(found, Identity) else ANONYMOUS


def named(
    user: str | None,
    owner: str,
    lookup: Callable[[str], Identity | None] | None = None,
    face: str = "",
) -> Identity:
    """The caller a door acts for when all it has is a user name (the CLI's local user,
    the MCP server on standard input, a session the spool recorded): the owner's name
    (folded) is an ``owner``; any other name has the role and grants ``lookup`` (the
    token store's ``identity_of``) returns now, a ``member`` with no grant when it knows
    none, and a ``member`` with every project when there is no ``lookup``; None or ``""``
    is :data:`ANONYMOUS`. ``face`` is stamped for the audit log. The doors build the
    caller once with this and pass the :class:`Identity` down; the core takes no names."""
    if not user:
        return ANONYMOUS
    if fold(user) == fold(owner):
        return Identity(user=user, role="owner", face=face)
    if lookup is None:
        return Identity(user=user, role="member", face=face)
    found = lookup(user)
    if found is None:
        return Identity(user=user, role="member", grants={}, face=face)
    return found if not face else replace(found, face=face)


def personal_owner(path: str, meta: Mapping[str, Any] | None) -> str | None:
    """The folded name of the user a page belongs to alone, or None for a shared page.

    ``path`` is the page's wiki-relative POSIX path as stored; ``meta`` its frontmatter
    (None or ``{}`` when it has none). :data:`OWNER_KEY` for a personal page with no
    ``user``."""
    folder = people_owner(path)
    if folder is not None:
        return folder
    if meta and isinstance(meta.get("visibility"), str):
        if meta["visibility"].strip().casefold() == "personal":
            user = meta.get("user")
            if isinstance(user, str) and user.strip():
                return fold(user.strip())
            return OWNER_KEY
    return None


def people_owner(path: str) -> str | None:
    """The folded user of a ``people/<user>/...`` path (a folder that is one user's
    alone), or None for any other path; decided on the path alone."""
    parts = path.split("/")
    if len(parts) >= 3 and fold(parts[0]) == "people":
        return fold(parts[1])
    return None


def project_of(path: str) -> str | None:
    """The project a ``projects/<project>/...`` path belongs to, else None."""
    parts = path.split("/")
    return parts[1] if len(parts) >= 3 and parts[0] == "projects" else None


def may_read(who: Identity | None, path: str, meta: Mapping[str, Any] | None) -> bool:
    """May ``who`` see the page at ``path`` with frontmatter ``meta``? None is the
    server itself (sees everything). Personal pages: their user alone, owner and admins
    included; project pages: the owner and admins every project, members and readers
    the projects they hold a grant on (:meth:`Identity.grant`)."""
    if who is None:
        return True
    if not who.owns(personal_owner(path, meta)):
        return False
    if not who.every_project:
        project = project_of(path)
        if project is not None and who.grant(project) is None:
            return False
    return True


def write_refusal(who: Identity | None, path: str) -> str | None:
    """Why ``who`` may not write the page at ``path`` although it may read it, or None
    when it may: the grant it lacks, as a short phrase (``"write on project atlas"``,
    ``"write (a reader writes nothing)"``). Callers check
    :func:`may_read` first (a page that may not be read answers 404, never this 403).
    None is the server itself."""
    if who is None:
        return None
    if who.role == "reader":
        return "write (a reader writes nothing)"
    if who.role not in ("owner", "admin", "member"):
        return "write (no user)"
    project = project_of(path)
    if project is not None:
        return None if who.grant(project) == "write" else f"write on project {project}"
    folder = people_owner(path)
    if folder is not None:
        return None if folder == who.key else "write on another user's folder"
    return None  # shared pages outside projects/: no grant governs them


def may_write(who: Identity | None, path: str, meta: Mapping[str, Any] | None) -> bool:
    """May ``who`` write the page at ``path`` (frontmatter ``meta`` as on disk)? Both
    :func:`may_read` and no :func:`write_refusal`."""
    return may_read(who, path, meta) and write_refusal(who, path) is None


def is_pinned(meta: Mapping[str, Any] | None) -> bool:
    """True when frontmatter ``pinned`` pins the page: ``true``, ``"true"``, ``"yes"``
    (any case) or 1."""
    value = (meta or {}).get("pinned")
    if isinstance(value, str):
        return value.strip().casefold() in ("true", "yes")
    return value is True or (type(value) is int and value == 1)


def may_pin(who: Identity | None) -> bool:
    """May ``who`` pin or unpin a page (frontmatter ``pinned``)? The wiki's owner and
    admins (and the server itself)."""
    return who is None or who.role in ("owner", "admin")


def creation_refusal(who: Identity | None, setting: str = "members") -> str | None:
    """Why ``who`` may not create a project (what it lacks, a short phrase), or None when
    it may: the owner and admins always; a member unless the setting
    ``project_creation`` is ``"admins"``; a reader or a caller with no user never. The
    one rule for capture into a new name and for a write that asks to create one."""
    if who is None or who.role in ("owner", "admin"):
        return None
    if who.role == "member":
        return None if setting != "admins" else "project creation (reserved to admins)"
    return "project creation (a reader creates none)"


def may_admin(who: Identity | None) -> bool:
    """May ``who`` run admin operations (tokens, reindex, purge, the audit log)? The
    wiki's owner and admins, and the server itself."""
    return who is None or who.role in ("owner", "admin")


def sees_every_shared_page(who: Identity | None) -> bool:
    """True when :func:`visible_sql` keeps every shared page (``owner`` NULL) for ``who``:
    the server itself and a caller who reads every project. Recall's count of matches
    relies on it (:func:`wiki_memory.index.tail.count_own`)."""
    return who is None or who.every_project


def visible_sql(alias: str, who: Identity | None) -> tuple[str, list[Any]]:
    """The SQL condition (and its arguments) that keeps the ``pages`` rows ``alias``
    that ``who`` may see, from the ``owner`` column the index fills with
    :func:`personal_owner`. ``("1", [])`` for the server itself."""
    if who is None:
        return "1", []
    extra = OWNER_KEY if who.role == "owner" else who.key
    cond = f"({alias}.owner IS NULL OR {alias}.owner IN (?, ?))"
    args: list[Any] = [who.key, extra]
    if not who.every_project:
        names = sorted(p for p in (who.grants or {}) if who.grant(p) is not None)
        # substr, not LIKE: LIKE folds ASCII case, and project names are compared exactly
        ors = [
            f"substr({alias}.path, 1, 9) != 'projects/'",
            f"instr(substr({alias}.path, 10), '/') = 0",  # projects/x.md: no project
        ]
        for name in names:
            prefix = f"projects/{name}/"
            ors.append(f"substr({alias}.path, 1, ?) = ?")
            args.extend([len(prefix), prefix])
        cond += " AND (" + " OR ".join(ors) + ")"
    return cond, args
