"""Compiling a project's topic pages on the writer thread (docs/sessions.md, "Topic
pages"): called once when a session of the project ends, in that session's commit, when
the ``topic_pages`` setting is on.

Sources are the project's shared pages only: ``projects/<p>/sessions/`` for entries and
the project's other pages for supersession values; a personal page (``visibility:
personal``) or another project's page is never read. The compiled part
(:mod:`wiki_memory.wiki.topics`) goes below each page's marker; the text above it is
the person's. A topic no longer seen in two sessions loses its page when nobody edited
it, else its compiled part says so and links nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from wiki_memory.config import Settings
from wiki_memory.core.pagehost import PageWriteHost
from wiki_memory.plainfile import page_hash, read_plain
from wiki_memory.wiki import topics as tp
from wiki_memory.wiki.personal import page_owner

log = logging.getLogger("wiki_memory.core")

GONE = "- **Seen in:** fewer than two sessions now; nothing is linked.\n"
"""The compiled part of a topic page a person edited whose topic is no longer seen."""


class Host(PageWriteHost, Protocol):
    """What compiling topic pages uses of the Memory that owns it."""

    settings: Settings


def folder_of(project: str) -> str:
    """The topics folder of ``project``: ``projects/<project>/topics``."""
    return f"projects/{project}/topics"


def _shared_pages(wiki_dir: Path, folder: str) -> list[tuple[str, bytes]]:
    """``(path, bytes)`` of every shared ``.md`` page below ``folder`` (sorted)."""
    base = wiki_dir / folder
    if not base.is_dir():
        return []
    out = []
    for full in sorted(base.rglob("*.md")):
        rel = full.relative_to(wiki_dir).as_posix()
        if any(part.startswith(".") for part in rel.split("/")):
            continue
        raw = read_plain(full)
        if raw is None or page_owner(rel, raw) is not None:
            continue
        out.append((rel, raw))
    return out


def compile_project(
    host: Host,
    project: str,
    before_write: Callable[[str, bytes | None], None] | None = None,
) -> list[str]:
    """Compile ``project``'s topic pages in ``host``'s wiki; returns the paths written or
    removed (for the caller's commit). ``before_write(path, current)`` runs before a page
    a person saved is written over (it commits their save first). A project of ""
    (sessions without one) has no topic pages: returns []."""
    if not project:
        return []
    folder = folder_of(project)
    sessions: list[tp.Session] = []
    notes: list[tp.Note] = []
    for rel, raw in _shared_pages(host.wiki_dir, f"projects/{project}"):
        if rel.startswith(folder + "/"):
            continue
        s = tp.read_session(rel, raw)
        if s is not None:
            sessions.append(s)
            continue
        n = tp.read_note(rel, raw)
        if n is not None:
            notes.append(n)
    pages = tp.compiled_pages(sessions, notes, folder)
    changed: list[str] = []
    for rel, (head, compiled) in sorted(pages.items()):
        if _write(host, rel, head, compiled, before_write):
            changed.append(rel)
    for rel, raw in _shared_pages(host.wiki_dir, folder):
        if rel in pages or not tp.is_topic_page(raw, rel):
            continue
        if tp.untouched(raw, _head_of(raw)) and _server_made(host, rel, raw):
            (host.wiki_dir / rel).unlink()
            host.server_hashes.pop(rel, None)
            host.index.sync_paths(host.wiki_dir, [rel])
            changed.append(rel)
        elif _write(host, rel, "", GONE, before_write):
            changed.append(rel)
    return changed


def _write(
    host: Host,
    rel: str,
    head: str,
    compiled: str,
    before_write: Callable[[str, bytes | None], None] | None,
) -> bool:
    def fn(cur: bytes | None) -> bytes | None:
        new = tp.merge_page(cur, head, compiled)
        if new is not None and new != cur and cur is not None and before_write is not None:
            before_write(rel, cur)
        return new

    _, written = host._cas_write(rel, host.wiki_dir / rel, fn)
    if written is None:
        return False
    host.server_hashes[rel] = page_hash(written)
    host.index.upsert_page(rel, written)
    return True


def _head_of(raw: bytes) -> str:
    """The head the compiler wrote for the page's own title and kind."""
    from wiki_memory.wiki.page import parse_page

    md: Any = parse_page(raw, "topic.md").metadata
    name = str(md.get("title") or "") if isinstance(md, dict) else ""
    kind = str(md.get("topic") or "") if isinstance(md, dict) else ""
    return tp.head_for(tp.Topic(name, kind))


def _server_made(host: Host, rel: str, raw: bytes) -> bool:
    """True unless the page's bytes are a save the server did not make (a person's)."""
    known = host.server_hashes.get(rel)
    return known is None or known == page_hash(raw)


def compile_guarded(
    host: Host, project: str, before_write: Callable[[str, bytes | None], None] | None = None
) -> list[str]:
    """:func:`compile_project` when the ``topic_pages`` setting is on (else []), logging
    instead of raising: a failed topic compile never fails the session's own compile (the
    next session end of the project tries again)."""
    if not host.settings.topic_pages:
        return []
    try:
        return compile_project(host, project, before_write)
    except Exception:
        log.exception("compiling the topic pages of project %r failed", project)
        return []
