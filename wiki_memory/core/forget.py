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
import re
from typing import TYPE_CHECKING, Any

from wiki_memory.capture.observation import project_name
from wiki_memory.core.forget_entry import forget_entry
from wiki_memory.core.scope import not_found
from wiki_memory.errors import BadRequest, NotFound
from wiki_memory.identity import Identity
from wiki_memory.states import page_state
from wiki_memory.wiki.entryforget import parse_anchor
from wiki_memory.wiki.frontmatter import FrontmatterError, set_keys
from wiki_memory.wiki.page import parse_page
from wiki_memory.wiki.paths import PathRefused, clean_rel
from wiki_memory.wiki.sessionparts import session_parts

if TYPE_CHECKING:
    from wiki_memory.core.memory import Memory

__all__ = [
    "MAX_QUERY_PAGES",
    "forget_bytes",
    "forget_page",
    "forget_query",
]

#: at most this many pages are listed or forgotten by one query
MAX_QUERY_PAGES = 200
#: sections of the index read for one query (each page once, best first)
_SCAN = 5000


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


def forget_page(memory: Memory, path: str, who: Identity | None) -> dict[str, Any]:
    """Forget the page at ``path`` for ``who`` (None: the server itself, as the owner).

    Returns ``{"path", "state": "forgotten", "changed"}`` (``changed`` False when it was
    forgotten already). ``path`` ``PAGE#^tN`` forgets one timeline entry of a session
    page instead (:func:`wiki_memory.core.forget_entry.forget_entry`; the answer adds
    ``entry``). Raises NotFound (missing or hidden, or no such entry), Forbidden (may
    read, may not write), PathRefused (a path that names no page), BadRequest
    (unreadable frontmatter).
    """
    rel, block = parse_anchor(path)
    if block is not None:
        return forget_entry(memory, rel, block, who)
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
    # a long session's parts are forgotten with it (wiki/sessionparts.py)
    for part in session_parts(memory.wiki_dir, clean_rel(path)):

        def part_fn(current: bytes | None, part: str = part) -> bytes | None:
            return None if current is None else forget_bytes(current, part, user, now)

        memory.update_page(
            part, part_fn, user=user, message=f"Forget {part}", who=ident, op="forget"
        )
    return {
        "path": res.paths[0] if res.paths else path,
        "state": "forgotten",
        "changed": res.value is not None,
    }


def _words(text: str) -> list[str]:
    return [w.casefold() for w in re.findall(r"\w+", text)]


def forget_query(
    memory: Memory,
    query: str,
    who: Identity | None,
    *,
    project: str | None = None,
    dry_run: bool = True,
) -> dict[str, Any]:
    """The pages to forget for ``query``, and with ``dry_run`` False forget them.

    A page is taken when the index finds it for ``query`` (among the best 5,000
    sections, in ``project`` when given), ``who`` may see it, and its text holds every
    word of ``query`` (case folded), so a page that matched one word of several is not
    forgotten. Near-duplicates, which recall groups, are each taken. Pages ``who`` may only read
    are listed under ``not_writable`` and never forgotten; at most
    :data:`MAX_QUERY_PAGES` are taken (``more``: True when there were others).

    Returns ``{"query", "dry_run", "pages": [{"path", "title"}], "not_writable": [paths],
    "more", "forgotten": [paths]}`` (``forgotten`` empty on a dry run). Raises BadRequest
    for a query without a word or a bad project; on a confirmed run each page is
    :func:`forget_page` (one commit and one audit line each)."""
    words = _words(query)
    if not words:
        raise BadRequest("query must hold at least one word", field="query")
    if project is not None and project_name(project) != project:
        raise BadRequest(f"project: {project!r} is not a valid project name", field="project")
    user = who if who is not None else memory.scope.local_owner
    # the index itself, not recall: recall groups near-duplicates, and each one counts here
    hits = memory.index.query(query, project=project, limit=_SCAN, mode="or")
    pages: list[dict[str, Any]] = []
    refused: list[str] = []
    seen: set[str] = set()
    more = False
    for hit in hits:
        if hit.path in seen:
            continue
        seen.add(hit.path)
        try:
            page = memory.scope.read(user, hit.path)
        except (NotFound, PathRefused):  # hidden from the caller, or gone since
            continue
        if page_state(page.meta) == "forgotten":
            continue
        text = page.data.decode("utf-8", errors="replace").casefold()
        if not all(w in text for w in words):
            continue
        if not memory.scope.writable(who, page.rel, page.meta):
            refused.append(page.rel)
            continue
        if len(pages) >= MAX_QUERY_PAGES:
            more = True
            break
        pages.append({"path": page.rel, "title": hit.title})
    forgotten: list[str] = []
    if not dry_run:
        for p in pages:
            if forget_page(memory, p["path"], who)["changed"]:
                forgotten.append(p["path"])
    return {
        "query": query,
        "dry_run": dry_run,
        "pages": pages,
        "not_writable": refused,
        "more": more,
        "forgotten": forgotten,
    }
