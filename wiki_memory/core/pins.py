"""Pinning and unpinning a page (frontmatter ``pinned``), and reading the audit log: the
admin operations that act on the wiki's files (docs/team-server.md).

Both go through the one door: :meth:`~wiki_memory.core.memory.Memory.update_page` with
the caller, so the scope rule decides (a page the caller may not see is 404;
:func:`wiki_memory.identity.may_pin` refuses anyone but the owner and admins with 403)
and the change is one line of the audit log (``pin`` / ``unpin``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wiki_memory.audit import parse_since
from wiki_memory.core.admin import require_admin
from wiki_memory.errors import BadRequest, Forbidden, NotFound
from wiki_memory.identity import Identity, may_pin
from wiki_memory.wiki.frontmatter import FrontmatterError, set_keys
from wiki_memory.wiki.page import parse_page

if TYPE_CHECKING:
    from wiki_memory.core.memory import Memory

__all__ = ["pin_bytes", "read_audit", "set_pinned"]


def pin_bytes(raw: bytes, pinned: bool) -> bytes:
    """``raw`` with frontmatter ``pinned: true`` set (``pinned``) or the key removed;
    every other byte kept. Raises BadRequest when the frontmatter cannot be edited."""
    try:
        if pinned:
            return set_keys(raw, {"pinned": True})
        if "pinned" not in parse_page(raw, "x.md").metadata:
            return raw
        return set_keys(raw, {}, remove=["pinned"])
    except FrontmatterError as exc:
        raise BadRequest(f"cannot edit the frontmatter: {exc}", field="path") from None


def set_pinned(memory: Memory, path: str, pinned: bool, who: Identity | None) -> dict[str, Any]:
    """Pin or unpin the page at ``path`` for ``who`` (None: the server itself). Returns
    ``{"path", "pinned", "changed"}``. Raises NotFound (missing or hidden), Forbidden
    (not the owner or an admin: ``grant`` is ``admin``), PathRefused, BadRequest."""
    ident = None if who is None else memory.scope.identity(who)
    op = "pin" if pinned else "unpin"
    if ident is not None and not may_pin(ident):
        # the page must still be one the caller may see, else 404 as for any page; either
        # refusal is a line of the audit log
        try:
            memory.scope.read(ident, path)
        except NotFound:
            memory.audited(ident, op, path, "not_found")
            raise
        memory.audited(ident, op, path, "denied")
        raise Forbidden("only the wiki's owner and admins may pin or unpin a page", grant="admin")

    def fn(current: bytes | None) -> bytes | None:
        if current is None:
            from wiki_memory.core.scope import not_found

            raise not_found(path)
        return pin_bytes(current, pinned)

    user = ident.user if ident is not None else memory.owner
    res = memory.update_page(
        path, fn, user=user, message=f"{op.capitalize()} {path}", who=ident, op=op
    )
    return {
        "path": res.paths[0] if res.paths else path,
        "pinned": pinned,
        "changed": res.value is not None,
    }


def read_audit(
    memory: Memory,
    who: Identity | None,
    user: str | None = None,
    since: str | None = None,
    limit: int = 1000,
) -> list[dict[str, Any]]:
    """The audit log's lines (oldest first, the newest ``limit``) of ``user`` since
    ``since`` (ISO 8601 or epoch seconds), for an admin (Forbidden otherwise; BadRequest
    naming ``since`` for a time that does not parse)."""
    require_admin(memory, who, "audit.read", "", "the audit log is for the wiki's owner and admins")
    try:
        cut = parse_since(since) if since else None
    except ValueError:
        raise BadRequest("since must be ISO 8601 or epoch seconds", field="since") from None
    return memory.audit.read(user=user, since=cut, limit=limit)
