"""The one admin gate of the core: an operation for the wiki's owner and admins only
(:func:`wiki_memory.identity.may_admin`) checks its caller here, so that a refusal is
recorded in the audit log and answered with the same typed error everywhere."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wiki_memory.errors import Forbidden
from wiki_memory.identity import Identity, may_admin

if TYPE_CHECKING:
    from wiki_memory.core.memory import Memory

__all__ = ["require_admin"]


def require_admin(
    memory: Memory, who: Identity | str | None, op: str, target: str, refusal: str
) -> Identity | None:
    """The caller ``who`` as an :class:`Identity` (None for None: the data directory's
    owner at the command line) when it may run an admin operation. Otherwise the refusal
    is audited as ``op`` on ``target`` (``denied``) and :class:`Forbidden` is raised with
    the message ``refusal`` and ``grant="admin"``."""
    ident = None if who is None else memory.scope.identity(who)
    if not may_admin(ident):
        memory.audited(ident, op, target, "denied")
        raise Forbidden(refusal, grant="admin")
    return ident
