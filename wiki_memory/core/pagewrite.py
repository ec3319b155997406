"""The server's page writes outside the session compiler: several pages in one commit,
all or nothing (the door :meth:`wiki_memory.core.memory.Memory.update_pages` opens: a
supersession changes the newer page and every older one together, or none of them,
docs/knowledge.md), and a person's saves committed as theirs
(:func:`commit_hand_edits_now`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from wiki_memory.audit import audit_result
from wiki_memory.capture.sanitize import redact_text
from wiki_memory.core.scope import ScopeRule
from wiki_memory.core.sessions import plain_or_gone
from wiki_memory.core.usemoves import follow_moves
from wiki_memory.core.writer import Author, Writer, WriteResult
from wiki_memory.errors import Conflict, Forbidden, NotFound
from wiki_memory.identity import Identity
from wiki_memory.index.store import Index
from wiki_memory.plainfile import page_hash, read_plain
from wiki_memory.wiki.git import author_email_for
from wiki_memory.wiki.merge import replace_if_unchanged
from wiki_memory.wiki.oddnames import on_disk
from wiki_memory.wiki.paths import PathRefused, clean_rel, locate

__all__ = ["commit_hand_edits_now", "follow_moves", "update_pages"]


class Host(Protocol):
    """What :func:`update_pages` uses of the Memory."""

    wiki_dir: Path
    scope: ScopeRule
    index: Index
    writer: Writer
    server_hashes: dict[str, str]

    def audited(
        self, who: Identity | None, op: str, target: str, result: str = "ok", **extra: Any
    ) -> None: ...


def update_pages(
    memory: Host,
    changes: list[tuple[str, Callable[[bytes | None], bytes | None]]],
    *,
    user: str,
    message: str,
    who: Identity | None = None,
    op: str = "page.write",
    timeout: float = 60,
) -> WriteResult:
    """:meth:`wiki_memory.core.memory.Memory.update_page` for several pages in one commit, all or nothing: every
    target passes the scope rule before the job (NotFound, Forbidden), and inside it
    every ``fn(current)`` runs and every result passes the rule before any file is
    replaced, so a refusal (or an error ``fn`` raises) changes nothing. A person's
    save in between runs the ``fn``s again on their version (each ``fn`` pure,
    as for :meth:`wiki_memory.core.memory.Memory.update_page`). Committed at once with ``user`` as author; the
    result's ``paths`` are those written, ``value`` the sha256 of the first one's new
    bytes (None when it was not written)."""
    ident = None if who is None else memory.scope.identity(who)
    located: list[tuple[str, Path, Callable[[bytes | None], bytes | None]]] = []
    for path, fn in changes:
        try:
            rel, full = (
                locate(memory.wiki_dir, path)
                if ident is None
                else memory.scope.check_target(ident, path)
            )
        except (NotFound, Forbidden) as exc:
            if ident is not None:
                memory.audited(ident, op, clean_rel(path), audit_result(exc))
            raise
        if redact_text(rel)[1]:
            raise PathRefused("the path holds what looks like a secret")
        located.append((rel, full, fn))

    def job() -> WriteResult:
        for _ in range(20):
            plan: list[tuple[str, Path, bytes | None, bytes | None]] = []
            for rel, full, fn in located:
                current = read_plain(full)
                if ident is not None:
                    memory.scope.check_write(ident, rel, current, None)
                new = fn(current)
                if ident is not None and new is not None and new != current:
                    memory.scope.check_write(ident, rel, current, new)
                plan.append((rel, full, current, new))
            if all(replace_if_unchanged(f, n, c) for _r, f, c, n in plan if n not in (None, c)):
                break
        else:
            raise Conflict("pages kept changing while the server wrote them", None)
        written = [(r, n) for r, _f, c, n in plan if n is not None and n != c]
        for rel, new in written:
            memory.server_hashes[rel] = page_hash(new)
            memory.index.upsert_page(rel, new)
        first = plan[0]
        return WriteResult(
            paths=[r for r, _n in written],
            author=Author(user, author_email_for(user)),
            message=message,
            value=page_hash(first[3]) if first[3] not in (None, first[2]) else None,
            commit_now=True,
        )

    try:
        res = memory.writer.call(job, timeout=timeout)
    except (NotFound, Forbidden, Conflict) as exc:
        if ident is not None:
            for rel, _f, _fn in located:
                memory.audited(ident, op, rel, audit_result(exc))
        raise
    for rel in res.paths:
        memory.audited(ident, op, rel, "ok", user=None if ident is not None else user)
    return res


def commit_hand_edits_now(memory: Any, paths: list[str]) -> str | None:
    """:meth:`wiki_memory.core.memory.Memory.commit_hand_edits` on the writer thread.
    Paths whose bytes are the server's own (echoes), symlinks and hard-linked files are left out. A session page
    saved by hand gets the server's latest rendering merged back in (the person's
    editor may have saved over a newer server write); not after a checkout or pull,
    which makes no commit."""
    real: list[str] = []
    seen: dict[str, str | None] = {}
    for p in paths:
        full = on_disk(memory.wiki_dir, p)
        if not plain_or_gone(full):
            continue
        data = read_plain(full) if full.is_file() else None
        if data is not None and memory.server_wrote(p, data):
            continue
        real.append(p)
        seen[p] = page_hash(data) if data is not None else None
    if not real:
        return None
    follow_moves(memory, real)  # a page moved by a person: its use rows follow it
    sha: str | None = memory.sessions.commit_by_hand(real)
    for p in real:
        digest = seen[p]
        if digest is None:
            memory.server_hashes.pop(p, None)
        else:
            memory.server_hashes[p] = digest
    for p in real if sha else []:
        key = _session_of(memory, p)
        if key is not None:
            memory.writer.submit(functools.partial(memory.sessions.compile_job, key, False, True))
    return sha


def _session_of(memory: Any, path: str) -> str | None:
    for key, info in memory.spool.sessions.items():
        if info.state.get("path") == path:
            return str(key)
    return None
