"""Who is asking, and which pages belong to one user alone: the rule every face obeys.

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
per-project grants are carried by :class:`Identity`; until the team server assigns them,
the local owner's token is the ``owner`` and every other token a ``member`` with access
to every project.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
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
    "may_pin",
    "may_admin",
    "is_pinned",
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
    role allows); ``token_id``: the token's id, for the audit log (None when unknown).
    """

    user: str
    role: str = "member"
    grants: Mapping[str, str] | None = None
    token_id: str | None = None

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
    included; project pages: every project unless ``grants`` says otherwise."""
    if who is None:
        return True
    if not who.owns(personal_owner(path, meta)):
        return False
    if who.grants is not None:
        project = project_of(path)
        if project is not None and project not in who.grants:
            return False
    return True


def is_pinned(meta: Mapping[str, Any] | None) -> bool:
    """True when frontmatter ``pinned`` pins the page: ``true``, ``"true"``, ``"yes"``
    (any case) or 1."""
    value = (meta or {}).get("pinned")
    if isinstance(value, str):
        return value.strip().casefold() in ("true", "yes")
    return value is True or (type(value) is int and value == 1)


def may_pin(who: Identity | None) -> bool:
    """May ``who`` pin or unpin a page (frontmatter ``pinned``)? The wiki's owner
    alone (and the server itself)."""
    return who is None or who.role in ("owner",)


def may_admin(who: Identity | None) -> bool:
    """May ``who`` run admin operations (tokens, reindex, purge)? The wiki's owner
    (admins, when the team server brings roles), and the server itself."""
    return who is None or who.role in ("owner", "admin")


def visible_sql(alias: str, who: Identity | None) -> tuple[str, list[Any]]:
    """The SQL condition (and its arguments) that keeps the ``pages`` rows ``alias``
    that ``who`` may see, from the ``owner`` column the index fills with
    :func:`personal_owner`. ``("1", [])`` for the server itself."""
    if who is None:
        return "1", []
    extra = OWNER_KEY if who.role == "owner" else who.key
    cond = f"({alias}.owner IS NULL OR {alias}.owner IN (?, ?))"
    args: list[Any] = [who.key, extra]
    if who.grants is not None:
        ors = [f"{alias}.path NOT LIKE 'projects/%'"]
        ors += [f"{alias}.path LIKE ? ESCAPE '\\'" for _ in who.grants]
        cond += " AND (" + " OR ".join(ors) + ")"
        args.extend(_like(f"projects/{name}/") + "%" for name in sorted(who.grants))
    return cond, args


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
