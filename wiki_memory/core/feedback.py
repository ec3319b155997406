"""Feedback on a page: the caller says it ``helped`` or was ``not_helpful``; one verdict
per user, page and day, the last given, kept in the use record and counted in the page's
strength (:mod:`wiki_memory.core.strength`; docs/knowledge.md, "Strength").

One operation every face calls (``POST /v1/feedback``, ``wiki-memory feedback``, MCP
``memory_feedback``). The page is read through the one door
(:meth:`wiki_memory.core.scope.ScopeRule.read`): a page the caller may not read answers
404 exactly as a missing one, and nothing is recorded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wiki_memory.core.scope import not_found
from wiki_memory.core.userecord import VERDICTS
from wiki_memory.errors import BadRequest
from wiki_memory.identity import Identity
from wiki_memory.states import refuse_forgotten

if TYPE_CHECKING:
    from wiki_memory.core.memory import Memory

__all__ = ["VERDICTS", "give_feedback"]


def give_feedback(memory: Memory, path: str, verdict: str, who: Identity | None) -> dict[str, Any]:
    """Record ``who``'s ``verdict`` (``helped`` or ``not_helpful``) on the page at
    ``path``. Returns ``{"path", "verdict", "day", "counted"}``: ``day`` the UTC day it
    counts for; ``counted`` False for an anonymous caller (only users' feedback counts,
    and nothing is recorded). Raises BadRequest (``verdict`` or ``path``), NotFound (a
    page missing, hidden from the caller, or not indexed as a page), PathRefused (a
    path outside the wiki), Gone (a forgotten page)."""
    if verdict not in VERDICTS:
        raise BadRequest("verdict must be 'helped' or 'not_helpful'", field="verdict")
    if not isinstance(path, str) or not path.strip():
        raise BadRequest("path must be a wiki page path", field="path")
    ident = memory.scope.identity(who)
    page = memory.scope.read(ident, path.strip())
    rel = page.rel
    refuse_forgotten(rel, page.meta, page.data)
    if memory.index.page_meta(rel, ident) is None:  # an attachment, or not indexed
        raise not_found(rel)
    if not ident.user:
        return {"path": rel, "verdict": verdict, "day": None, "counted": False}
    day = memory.use.feedback(rel, ident.user, verdict)
    return {"path": rel, "verdict": verdict, "day": day, "counted": True}
