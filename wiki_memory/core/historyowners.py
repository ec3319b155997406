"""Whose each path of a commit was, found once per commit: a history view judges every
path a listed commit changed by that path's version in the commit (or in its parent,
for a path the commit deleted), and a commit never changes, so the owner read once
serves every later view, for every caller. A vault imported in one commit of N pages
made each page's history view read N blobs; now the first view does.

Only the owner is kept (``wiki_memory.wiki.personal.page_owner``: a folded user name,
or None for a shared page), never a caller's verdict: who may see a path is still
decided per caller, per view (``core/reader.py``)."""

from __future__ import annotations

import threading

from wiki_memory.wiki.git import CommitInfo, GitStore
from wiki_memory.wiki.personal import page_owner

#: what a path unreadable at a commit (a damaged object, an odd name) is kept as
UNREADABLE = "\0unreadable"


class CommitOwners:
    """``(commit sha, path) -> owner`` for the paths history views judged, at most
    ``size`` of them (65,536 by default, about 10 MB; when full it starts again, since
    views of one page's history ask for the same commits in a row)."""

    def __init__(self, git: GitStore, size: int = 65_536) -> None:
        self.git = git
        self.size = size
        self._owners: dict[tuple[str, str], str | None] = {}
        self._lock = threading.Lock()

    def owner(self, rel: str, c: CommitInfo) -> str | None:
        """The owner of ``rel`` as commit ``c`` left it (its version in ``c``, else in
        ``c``'s first parent), None for a shared page, or :data:`UNREADABLE` when git
        cannot read it (KeyError or ValueError from the object store)."""
        key = (c.sha, rel)
        with self._lock:
            if key in self._owners:
                return self._owners[key]
        try:
            data = self.git.read_at(rel, c.sha)
            if data is None and c.parents:
                data = self.git.read_at(rel, c.parents[0])
            found: str | None = page_owner(rel, data)
        except (KeyError, ValueError):
            found = UNREADABLE
        with self._lock:
            if len(self._owners) >= self.size:
                self._owners.clear()
            self._owners[key] = found
        return found

    def __len__(self) -> int:
        """How many ``(commit, path)`` owners are kept."""
        return len(self._owners)

    def forget(self, _rel: str = "") -> None:
        """Drop every kept owner (called after a purge: the paths of the rewritten
        commits leave memory with them)."""
        with self._lock:
            self._owners.clear()
