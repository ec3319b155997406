"""Writing a long session's part pages (docs/sessions.md, "Parts";
:mod:`wiki_memory.wiki.sessionparts` renders them).

A compile hands every part it rendered; only those whose bytes differ from what the
server last wrote there are written, indexed and committed, so a turn writes the
session page and its open part, and a closed part only when one of its entries
changed. A part that is not what the server last wrote there (a person's edit, a
forgotten mark) keeps that change: the server's change since its last rendering is
merged into it line by line (their lines win where both changed), or, when no
rendering is known (a part pulled from a hub that another replica wrote, or after a
restart), merged entry by entry (:mod:`wiki_memory.core.keepentries`): every entry it
holds stays, the server's entries it lacks are added (the server's ``## Timeline`` and
owned keys are spliced into it only where that merge does not apply).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any, Protocol

from wiki_memory.core.keepentries import keep_entries
from wiki_memory.core.pagehost import PageWriteHost
from wiki_memory.core.text import replace_section
from wiki_memory.plainfile import page_hash
from wiki_memory.wiki.frontmatter import FrontmatterError, dump_page, set_keys
from wiki_memory.wiki.sessionparts import Part

log = logging.getLogger("wiki_memory.core")

__all__ = ["PartWriter", "part_bytes"]


class Host(PageWriteHost, Protocol):
    """What :class:`PartWriter` uses of the Memory that owns it: the page writers' part."""


def part_bytes(part: Part) -> bytes:
    """A part page as the server renders it (no person's edits)."""
    return dump_page(part.metadata, part.body).encode("utf-8")


class PartWriter:
    """Writes the part pages of the sessions compiled last and remembers the bytes it
    wrote (at most ``size`` sessions' parts; used on the writer thread only)."""

    def __init__(self, host: Host, size: int = 4) -> None:
        self.host = host
        self.size = size
        #: session page path -> {part path: (the part, the server's last bytes there)}
        self._last: OrderedDict[str, dict[str, tuple[Part, bytes]]] = OrderedDict()
        #: session page path -> what its page held when written last (:meth:`page_kept`)
        self._heads: OrderedDict[str, tuple[Any, ...]] = OrderedDict()
        #: parts last written by an entry-by-entry merge (:mod:`~wiki_memory.core.keepentries`)
        self._kept: set[str] = set()

    def page_kept(self, comp: Any, extra: tuple[Any, ...], remerge: bool) -> bool:
        """Whether the session page of ``comp`` (a :class:`~wiki_memory.wiki.compiler.Compiled`
        with parts) may stay as it was written last: its timeline (the first part), its
        parts, its title and ``extra`` (status, end) are the same, so only its summary's
        running lines (files, commands, the last reply, ``updated``) would change, and
        the page is on disk. A session without parts, a merge with a person's edit and the
        first compile after a start always write the page."""
        if not comp.parts or remerge:
            self._heads.pop(comp.path, None)
            return False
        if self._heads.get(comp.path) != self._head(comp, extra):
            return False
        return (self.host.wiki_dir / str(comp.path)).is_file()  # a deleted page: written

    def page_written(self, comp: Any, extra: tuple[Any, ...]) -> None:
        """The session page of ``comp`` was written (see :meth:`page_kept`)."""
        self._heads.pop(comp.path, None)
        if comp.parts:
            self._heads[comp.path] = self._head(comp, extra)
            while len(self._heads) > 16:
                self._heads.popitem(last=False)

    @staticmethod
    def _head(comp: Any, extra: tuple[Any, ...]) -> tuple[Any, ...]:
        return (comp.timeline, [p.path for p in comp.parts], comp.metadata.get("title"), extra)

    def forget(self, session_path: str | None = None) -> None:
        """Forget what was written (one session's parts, or all: after a purge)."""
        if session_path is None:
            self._last.clear()
            self._kept.clear()
        else:
            self._last.pop(session_path, None)

    def write(self, session_path: str, parts: list[Part]) -> list[str]:
        """Write ``parts`` of the session page ``session_path`` where they changed; returns
        the paths written (to be committed with the session page). Raises what the page
        writes raise (OSError, Conflict)."""
        last = self._last.pop(session_path, {})
        self._last[session_path] = last
        while len(self._last) > self.size:
            self._last.popitem(last=False)
        written_paths: list[str] = []
        for part in parts:
            had = last.get(part.path)
            if had is not None and had[0] is part:
                continue  # the same rendering as last time (a closed part)
            fresh = part_bytes(part)
            base = had[1] if had is not None else None
            if base == fresh:
                last[part.path] = (part, fresh)
                continue
            full = self.host.wiki_dir / part.path

            def merged(
                cur: bytes | None,
                part: Part = part,
                fresh: bytes = fresh,
                base: bytes | None = base,
            ) -> bytes:
                if cur is None or cur == base:
                    return fresh  # absent, or what the server last wrote there
                if base is None or part.path in self._kept:
                    # pulled from a hub, or after a start: every entry it holds stays
                    kept = keep_entries(self.host.wiki_dir, part.path, cur, fresh, base)
                    if kept is not None:
                        self._kept.add(part.path)
                        return kept
                return _merge_edit(part, cur, base, fresh)

            _, written = self.host._cas_write(part.path, full, merged)
            last[part.path] = (part, fresh)
            if written is not None:
                self.host.server_hashes[part.path] = page_hash(written)
                self.host.index.upsert_page(part.path, written)
                written_paths.append(part.path)
        return written_paths


def _merge_edit(part: Part, current: bytes, base: bytes | None, fresh: bytes) -> bytes:
    """A part a person edited, with the server's new rendering merged in."""
    from wiki_memory.wiki.merge import merge3

    text = current.decode("utf-8", "surrogateescape")
    if base is not None:
        res = merge3(
            base.decode("utf-8", "surrogateescape"), fresh.decode("utf-8", "surrogateescape"), text
        )
        if res.conflicts:
            log.warning("%s: a hand edit and the server changed the same lines", part.path)
        return res.text.encode("utf-8", "surrogateescape")
    try:
        current = set_keys(current, part.metadata)
    except FrontmatterError:
        pass
    text = current.decode("utf-8", "surrogateescape")
    timeline = part.body.split("## Timeline\n\n", 1)[-1].rstrip("\n")
    return replace_section(text, "Timeline", timeline).encode("utf-8", "surrogateescape")
