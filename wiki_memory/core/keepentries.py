"""A session page or part the server did not write keeps the entries it holds
(docs/sessions.md, "Parts"; docs/git.md, "Merging").

When no rendering of a page of a long session is known (a page pulled from a hub that
another replica captured, or the first compile after a start), the server's new
rendering is not spliced over the page: the page on disk is taken as the hub's side
of an entry-by-entry merge (:func:`wiki_memory.wiki.pagemerge.merge_page`) and the
server's rendering as this side's. Every entry the page holds stays with its number;
the server's entries the page lacks are added, those it numbered the same as another
entry renumbered after the session's highest number over all its pages, as a sync
merge does. So a replica that captures a session another replica already wrote does
not drop that replica's entries from a part it had already closed.
"""

from __future__ import annotations

import re
from pathlib import Path

from wiki_memory.plainfile import read_plain
from wiki_memory.wiki.pagemerge import merge_page
from wiki_memory.wiki.sessionparts import part_paths, session_of_part

__all__ = ["keep_entries", "session_top"]

_ENTRY_ID = re.compile(rb"^\^t(\d+)r?[ \t]*\r?$", re.M)
#: one timeline entry: its first line (the clock and the kind) to its block id line
_ENTRY = re.compile(rb"^(\*\*[^\n]*)\n.*?^\^(t\d+r?)[ \t]*$", re.M | re.S)
_TIMELINE = b"\n## Timeline\n"


def _entries(data: bytes) -> dict[tuple[bytes, bytes], bytes]:
    at = data.find(_TIMELINE)
    if at < 0:
        return {}
    return {(m[2], m[1]): m[0] for m in _ENTRY.finditer(data, at)}


def _renewed(current: bytes, fresh: bytes) -> bytes:
    """``current`` with each entry the server rendered again (the same block id and first
    line, the clock and the kind of one event: a tool call whose result arrived) as
    ``fresh`` has it, so the new text replaces the old rather than standing beside it."""
    new = _entries(fresh)
    at = current.find(_TIMELINE)
    if at < 0 or not new:
        return current

    def swap(m: re.Match[bytes]) -> bytes:
        return new.get((m[2], m[1]), m[0])

    return current[:at] + _ENTRY.sub(swap, current[at:])


def session_top(wiki_dir: Path, path: str, *more: bytes) -> int:
    """The highest entry number (``^tN``) on the session page of ``path`` (a session page
    or part, wiki-relative) and its parts on disk under ``wiki_dir``, and in ``more``
    (pages' bytes not written yet); 0 when there is none."""
    session = session_of_part(path)[0]
    top = 0
    for rel in [session, *part_paths(wiki_dir, session)]:
        try:
            data = read_plain(wiki_dir / rel)
        except (OSError, ValueError):
            data = None
        top = max([top, *(int(n) for n in _ENTRY_ID.findall(data or b""))])
    for data in more:
        top = max([top, *(int(n) for n in _ENTRY_ID.findall(data))])
    return top


def keep_entries(
    wiki_dir: Path, path: str, current: bytes, fresh: bytes, base: bytes | None = None
) -> bytes | None:
    """``current`` (the page at ``path`` on disk, not the server's writing) with the
    server's rendering ``fresh`` merged in entry by entry: the page's entries kept with
    their numbers, the rendering's entries it lacks added (renumbered after the
    session's highest number where theirs is taken), the owned keys and head of the
    later ``updated``. ``base``: the server's rendering this page was last merged from
    (None: none known; the page itself is then the ancestor, so the server's keys and
    head are taken). None where this does not apply (not a session page, a version not
    UTF-8, a hand-written tail the two disagree on): the caller splices as before."""
    stem = path.rsplit("/", 1)[-1].removesuffix(".md").encode("utf-8", "surrogateescape")
    moved: dict[int, int] = {}
    floor = session_top(wiki_dir, path, current, fresh)
    current = _renewed(current, fresh)
    old = current if base is None else base
    return merge_page(old, fresh, current, moved, stem, floor, entries_only=True)
