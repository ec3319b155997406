"""Forgetting one timeline entry of a session page: ``forget PATH#^tN`` (every face
through :func:`wiki_memory.core.forget.forget_page`; docs/knowledge.md).

The entry's text becomes a stub that keeps its block id (:mod:`wiki_memory.wiki.entryforget`),
so links to ``PATH#^tN`` still land on it; the index takes the page again, so its words
match nothing. Where this server's spool holds the session, the block id is recorded in
the session's state (``forgotten_entries``) and the page is compiled again at once from
the render the server last wrote: the compiler writes the stub in place of the entry for
every later compile (new events, a resume, a compile from scratch) and leaves the entry's
events out of the summary, the title and the ``files`` and ``tools`` keys. Without the
spool (a page captured by another replica) the head lines that quote the entry are
removed instead. A merge with another replica's copy keeps the stub
(:mod:`wiki_memory.wiki.sessionmerge`).

Who may: whoever may write the page (the scope rule, through
:meth:`~wiki_memory.core.memory.Memory.update_page`): a page the caller may not see is
404, one it may only read 403. One commit (author: the caller) and one audit line
``forget``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from wiki_memory.core.scope import not_found
from wiki_memory.core.writer import Author, WriteResult
from wiki_memory.errors import NotFound
from wiki_memory.identity import Identity
from wiki_memory.plainfile import read_plain
from wiki_memory.wiki.entryforget import scrub_head, stub_entry
from wiki_memory.wiki.git import author_email_for
from wiki_memory.wiki.paths import clean_rel
from wiki_memory.wiki.sessionparts import entry_pages, part_owner

if TYPE_CHECKING:
    from wiki_memory.core.memory import Memory

__all__ = ["forget_entry"]


def _session_of(memory: Memory, rel: str) -> tuple[str | None, bool]:
    """The spool key of the session whose page (or one of whose parts) is ``rel`` (None:
    not in this spool), and whether the server's last rendering of it can be compiled
    again."""
    rel, _ = part_owner(memory.wiki_dir, rel)
    for key, info in list(memory.spool.sessions.items()):
        if info.state.get("path") == rel:
            return key, bool(info.state.get("renders"))
    return None, False


def _holder(memory: Memory, rel: str, block: str) -> str:
    """The page that holds entry ``block`` of the session whose page or part is ``rel``:
    a long session's entry may be on one of its parts (:mod:`wiki_memory.wiki.sessionparts`);
    ``rel`` itself when none holds it (the write then says there is no such entry)."""
    line = re.compile(rb"^\^" + re.escape(block.encode()) + rb"[ \t]*\r?$", re.M)
    parts = memory.settings.session_part_events
    for where in entry_pages(memory.wiki_dir, rel, f"^{block}", parts):
        raw = read_plain(memory.wiki_dir / where)
        if raw is not None and line.search(raw):
            return where
    return rel


def forget_entry(memory: Memory, path: str, block: str, who: Identity | None) -> dict[str, Any]:
    """Forget entry ``block`` (``t7``, ``t7r``) of the session page ``path`` for ``who``
    (None: the server itself, as the owner).

    Returns ``{"path", "entry", "state": "forgotten", "changed"}`` (``changed`` False
    when the entry was a stub already). Raises NotFound (no such page or entry, or a page
    hidden from ``who``), Forbidden (may read, may not write), PathRefused."""
    ident = None if who is None else memory.scope.identity(who)
    user = ident.user if ident is not None else memory.owner
    asked = clean_rel(path)
    # the scope rule on the session page decides first: a caller who may not see it
    # gets the 404 of a page that does not exist, naming only the path it sent (no part)
    # (the server itself, None, may see every page)
    session, _ = part_owner(memory.wiki_dir, asked)
    try:
        if ident is not None:
            memory.scope.read(ident, session)
    except NotFound:
        raise not_found(asked) from None
    rel = _holder(memory, asked, block)
    message = f"Forget {rel}#^{block}"
    author = Author(user, author_email_for(user))

    def job() -> WriteResult:
        key, replay = _session_of(memory, rel)
        code: list[str] = []

        def fn(current: bytes | None) -> bytes | None:
            if current is None:
                raise not_found(rel)
            text = current.decode("utf-8", "surrogateescape")
            new, c, old = stub_entry(text, block)
            code[:] = [c]
            if old and not replay:  # no compile will extract the summary again
                new = scrub_head(new, old)
            return None if new == text else new.encode("utf-8", "surrogateescape")

        res = memory.update_page(rel, fn, user=user, message=message, who=ident, op="forget")
        paths = list(res.paths)
        info = memory.spool.sessions.get(key) if key is not None else None
        if info is not None and code:
            assert key is not None
            state = dict(info.state)
            gone = dict(state.get("forgotten_entries") or {})
            if gone.get(block) != code[0]:
                gone[block] = code[0]
                memory.spool.write_state(key, {**state, "forgotten_entries": gone})
            if replay:  # the summary, title and files without the entry's events
                paths += memory.sessions.compile_job(key, False, remerge=True).paths
        return WriteResult(
            paths=sorted(set(paths)),
            author=author,
            message=message,
            value=res.value is not None,
            commit_now=True,
        )

    res = memory.writer.call(job)
    return {"path": rel, "entry": block, "state": "forgotten", "changed": bool(res.value)}
