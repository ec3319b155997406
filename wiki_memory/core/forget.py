"""Forgetting a page: frontmatter ``state: forgotten`` (:mod:`wiki_memory.states`).

A forgotten page leaves recall, the brief and every listing for every user, and keeps
its history in git (a later version can be read with the page history as before). It is
an ordinary write through the one door (:meth:`~wiki_memory.core.memory.Memory.update_page`
with the caller), so any user who may write the page may forget it: a page the caller may
not see answers 404, one it may read but not write 403 naming the grant it lacks. The
change is one commit (author: the caller) and one audit line (operation ``forget``).
docs/operations.md has the guarantees.
"""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING, Any

from wiki_memory.core.scope import not_found
from wiki_memory.errors import BadRequest
from wiki_memory.identity import Identity
from wiki_memory.states import page_state
from wiki_memory.wiki.frontmatter import FrontmatterError, set_keys
from wiki_memory.wiki.page import parse_page

if TYPE_CHECKING:
    from wiki_memory.core.memory import Memory

__all__ = ["forget_bytes", "forget_page"]


def forget_bytes(raw: bytes, rel: str, user: str, when: str) -> bytes:
    """``raw`` with ``state: forgotten``, ``forgotten_by: <user>`` and ``forgotten_at:
    <when>`` (ISO 8601 UTC) set in its frontmatter, every other byte kept; ``raw`` itself
    when the page is already forgotten. Raises BadRequest when the frontmatter cannot be
    edited (invalid YAML)."""
    if page_state(parse_page(raw, rel).metadata) == "forgotten":
        return raw
    try:
        return set_keys(raw, {"state": "forgotten", "forgotten_by": user, "forgotten_at": when})
    except FrontmatterError as exc:
        raise BadRequest(f"cannot edit the frontmatter: {exc}", field="path") from None


def forget_page(memory: Memory, path: str, who: Identity | str | None) -> dict[str, Any]:
    """Forget the page at ``path`` for ``who`` (None: the server itself, as the owner).

    Returns ``{"path", "state": "forgotten", "changed"}`` (``changed`` False when it was
    forgotten already). Raises NotFound (missing or hidden), Forbidden (may read, may not
    write), PathRefused (a path that names no page), BadRequest (unreadable frontmatter).
    """
    ident = None if who is None else memory.scope.identity(who)
    user = ident.user if ident is not None else memory.owner
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def fn(current: bytes | None) -> bytes | None:
        if current is None:
            raise not_found(path)
        return forget_bytes(current, path, user, now)

    res = memory.update_page(
        path, fn, user=user, message=f"Forget {path}", who=ident, op="forget", commit_now=True
    )
    return {
        "path": res.paths[0] if res.paths else path,
        "state": "forgotten",
        "changed": res.value is not None,
    }
