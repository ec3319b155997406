"""The one admin gate of the core: an operation for the wiki's owner and admins only
(:func:`wiki_memory.identity.may_admin`) checks its caller here, so that a refusal is
recorded in the audit log and answered with the same typed error everywhere."""

from __future__ import annotations

from typing import Any, Protocol

from wiki_memory.core.scope import ScopeRule
from wiki_memory.errors import Forbidden
from wiki_memory.identity import Identity, may_admin

__all__ = ["Gated", "require_admin"]


class Gated(Protocol):
    """What the gate needs of the memory (:class:`~wiki_memory.core.memory.Memory`)."""

    @property
    def scope(self) -> ScopeRule: ...

    def audited(self, who: Any, op: str, target: str, result: str = "ok", **extra: Any) -> None:
        """One line of the audit log."""
        ...


def require_admin(
    memory: Gated, who: Identity | None, op: str, target: str, refusal: str
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
