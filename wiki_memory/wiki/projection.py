"""The shared projection of a repository's history: what may leave this machine
(docs/git.md, "Replication").

The local branch keeps every page, personal ones included. What leaves the machine is
:meth:`Shared.project` of it: each commit rebuilt with the personal pages
(``people/<user>/...`` and pages whose frontmatter says ``visibility: personal``) removed
from its tree, every page's frontmatter ``pinned`` removed (pins never travel,
:func:`unpinned`), and the personal paths removed from its message. The projection is
deterministic (same commit in, same commit out), so the shared history is stable across
syncs. A commit that changed only personal pages projects onto its parent's projection (no
empty commit betrays a personal edit), and a sync merge that brought in the remote's tip
unchanged projects onto that tip (so two servers stop trading merge commits once they
agree). :func:`personal_files` names the files of a tree the projection leaves out.

The git side of replication (remotes, fetch and push, history, merging) is
:mod:`wiki_memory.wiki.replicate`; :mod:`wiki_memory.core.sync` runs both.
"""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path
from typing import Any

from dulwich.objects import Blob, Commit, ObjectID, Tree
from dulwich.repo import Repo

from wiki_memory.plainfile import atomic_write
from wiki_memory.wiki.frontmatter import FrontmatterError, set_keys
from wiki_memory.wiki.page import parse_metadata
from wiki_memory.wiki.personal import frontmatter_head, is_people_folder, page_owner
from wiki_memory.wiki.replicate import Files, flat_tree, is_ancestor

__all__ = ["Shared", "personal_files", "unpinned", "with_pin"]


def unpinned(data: bytes) -> bytes | None:
    """``data`` (a page's bytes) without its frontmatter ``pinned`` key, every other byte
    kept; None when the page has no such key. Raises FrontmatterError when the key is
    there but the frontmatter cannot be edited, or when the page still reads as holding
    ``pinned`` once the key is removed (a YAML merge key ``<<:`` brings it in). The
    bytes are parsed unless their frontmatter cannot spell the key
    (:func:`~wiki_memory.wiki.personal.frontmatter_head`: no fence, or no ``pinned`` and
    no backslash in it)."""
    head = frontmatter_head(data)
    if head is None or (b"pinned" not in head and b"\\" not in head):
        return None
    if "pinned" not in parse_metadata(data):
        return None
    out = set_keys(data, {}, remove=["pinned"])
    if "pinned" in parse_metadata(out):
        raise FrontmatterError("the frontmatter's pinned key cannot be removed")
    return out


def with_pin(data: bytes, value: Any) -> bytes:
    """``data`` with frontmatter ``pinned: <value>`` set (every other byte kept). Raises
    FrontmatterError when the frontmatter cannot be edited."""
    return set_keys(data, {"pinned": value})


class Shared:
    """The shared projection of a repository's history (what may leave this machine).

    ``project(sha)`` returns the id of the commit whose tree is ``sha``'s without personal
    pages (``people/<user>/`` at the top, and any ``.md`` page whose frontmatter makes it
    personal: :func:`wiki_memory.identity.personal_owner`), whose parents are its parents'
    projections, and whose message has every personal path replaced by
    ``[personal page]``; author, committer and dates are kept. Results are cached in
    ``cache_path`` (JSON, old id -> projected id) and memoized per tree and blob, so a
    sync projects only the commits made since the last one.
    """

    def __init__(self, repo: Repo, cache_path: Path | None = None) -> None:
        self.repo = repo
        self.cache_path = cache_path
        self.map: dict[ObjectID, ObjectID] = {}
        if cache_path is not None and cache_path.is_file():
            try:
                raw = json.loads(cache_path.read_text("ascii"))
                self.map = {k.encode(): v.encode() for k, v in raw.items()}
            except (ValueError, OSError):
                self.map = {}
        self._blob_personal: dict[ObjectID, bool] = {}
        #: page blob -> the blob it is shared as (without ``pinned``)
        self._unpinned: dict[ObjectID, ObjectID] = {}
        #: objects made by the projection, written as one pack by :meth:`flush` (a loose
        #: object per new tree cost ~6 ms each here: 11 s for 200 commits)
        self._pending: dict[ObjectID, Any] = {}
        self._trees: dict[ObjectID, tuple[ObjectID | None, list[bytes]]] = {}

    def _get(self, sha: ObjectID) -> Any:
        obj = self._pending.get(sha)
        return obj if obj is not None else self.repo[sha]

    def _add(self, obj: Any) -> None:
        self._pending[obj.id] = obj

    def flush(self) -> None:
        """Write the objects made so far to the repository, as one pack."""
        if self._pending:
            self.repo.object_store.add_objects([(o, None) for o in self._pending.values()])
            self._pending.clear()

    def save(self) -> None:
        """Write the pending objects and the cache (atomically)."""
        self.flush()
        if self.cache_path is None:
            return
        body = json.dumps({k.decode(): v.decode() for k, v in self.map.items()})
        atomic_write(self.cache_path, body.encode("utf-8"))

    def personal_blob(self, path: bytes, sha: ObjectID) -> bool:
        """True when the page at ``path`` with blob ``sha`` is personal by its frontmatter
        (False for an object that is missing or not a blob)."""
        if not path.lower().endswith(b".md"):
            return False
        if sha not in self._blob_personal:
            self._blob_out(sha)
        return self._blob_personal[sha]

    def shared_blob(self, sha: ObjectID) -> ObjectID:
        """The blob a page blob ``sha`` is shared as (itself, or without ``pinned``)."""
        return self._blob_out(sha)

    def _blob_out(self, sha: ObjectID) -> ObjectID:
        """The blob a page ``sha`` is shared as: itself, or a new blob without its
        frontmatter ``pinned`` (pins never travel between servers, docs/git.md). Records
        whether the page is personal on the way (one read of each blob)."""
        out = self._unpinned.get(sha)
        if out is not None:
            return out
        try:
            blob = self.repo[sha]
        except KeyError:
            blob = None
        out, personal = sha, False
        if isinstance(blob, Blob):
            data = blob.data
            personal = page_owner("shared/x.md", data) is not None
            try:
                stripped = None if personal else unpinned(data)
            except FrontmatterError:
                stripped = None  # a page whose frontmatter cannot be edited goes as it is
            if stripped is not None:
                new = Blob.from_string(stripped)
                self._add(new)
                out = new.id
        self._blob_personal[sha] = personal
        self._unpinned[sha] = out
        return out

    def adopt(self, sha: ObjectID) -> None:
        """Record every commit reachable from ``sha`` (a hub's branch, fetched) as its own
        projection: what is on the hub already is shared as it is, never rewritten (so a
        hub's commits stay ancestors of what this server pushes). Commits already mapped
        are kept as they are."""
        todo = [sha]
        while todo:
            s = todo.pop()
            if s in self.map:
                continue
            try:
                c = self.repo[s]
            except KeyError:
                continue
            if not isinstance(c, Commit):
                continue
            self.map[s] = s
            todo.extend(c.parents)

    def _filter(self, tree_id: ObjectID, top: bool) -> tuple[ObjectID | None, list[bytes]]:
        """The tree without personal pages and with every page's ``pinned`` removed (None
        when nothing is left) and the removed paths, relative to this tree. Memoized by
        tree id below the top (what is removed there depends on the bytes alone)."""
        if not top and tree_id in self._trees:
            return self._trees[tree_id]
        try:
            tree = self._get(tree_id)
        except KeyError:
            tree = None
        if not isinstance(tree, Tree):
            return (tree_id, [])  # a hub's odd entry (a folder mode on no tree): as it is
        new = Tree()
        removed: list[bytes] = []
        changed = False
        for item in tree.iteritems():
            if top and is_people_folder(item.path) and stat.S_ISDIR(item.mode):
                removed.extend(item.path + b"/" + p for p in flat_tree(self.repo, item.sha))
                changed = True
                continue
            if stat.S_ISDIR(item.mode):
                sub, gone = self._filter(item.sha, False)
                removed.extend(item.path + b"/" + g for g in gone)
                if sub != item.sha:
                    changed = True
                if sub is not None:
                    new.add(item.path, item.mode, sub)
                continue
            if stat.S_ISREG(item.mode) and item.path.lower().endswith(b".md"):
                shared = self._blob_out(item.sha)
                if self._blob_personal[item.sha]:
                    removed.append(item.path)
                    changed = True
                    continue
                if shared != item.sha:
                    changed = True
                new.add(item.path, item.mode, shared)
                continue
            new.add(item.path, item.mode, item.sha)
        if not changed:
            out: tuple[ObjectID | None, list[bytes]] = (tree_id, [])
        elif not new.items() and not top:
            out = (None, removed)
        else:
            self._add(new)
            out = (new.id, removed)
        if not top:
            self._trees[tree_id] = out
        return out

    def project(self, sha: ObjectID) -> ObjectID:
        """The projection of commit ``sha`` (see the class); computed parents first."""
        order: list[ObjectID] = []
        todo: list[tuple[ObjectID, bool]] = [(sha, False)]
        seen: set[ObjectID] = set()
        while todo:
            s, done = todo.pop()
            if done:
                order.append(s)
                continue
            if s in self.map or s in seen:
                continue
            seen.add(s)
            todo.append((s, True))
            c = self.repo[s]
            assert isinstance(c, Commit)
            todo.extend((p, False) for p in c.parents if p not in self.map)
        for s in order:
            self.map[s] = self._project_one(s)
        self.flush()
        return self.map[sha]

    def _project_one(self, sha: ObjectID) -> ObjectID:
        c = self.repo[sha]
        assert isinstance(c, Commit)
        tree, removed = self._filter(c.tree, True)
        if tree is None:
            empty = Tree()
            self._add(empty)
            tree = empty.id
        parents = [self.map[p] for p in c.parents]
        unique: list[ObjectID] = []
        for p in parents:
            if p not in unique:
                unique.append(p)
        if tree == c.tree and unique == list(c.parents):
            return sha
        # a commit that changed only personal pages, or a merge that took one parent's
        # tree whole while the others are its ancestors, adds nothing to share
        for p in unique:
            pc = self._get(p)
            assert isinstance(pc, Commit)
            if pc.tree == tree and len(unique) > 1:
                self.flush()  # the ancestry walk reads the projected commits
            if pc.tree == tree and all(q == p or is_ancestor(self.repo, q, p) for q in unique):
                return p
        new = Commit()
        new.tree = tree
        new.parents = unique
        new.author, new.committer = c.author, c.committer
        new.author_time, new.commit_time = c.author_time, c.commit_time
        new.author_timezone, new.commit_timezone = c.author_timezone, c.commit_timezone
        new.encoding = c.encoding
        message = c.message
        for path in sorted(removed, key=len, reverse=True):
            if path in message:
                message = message.replace(path, b"[personal page]")
        if b"people/" in message:
            message = re.sub(rb"people/[^\s,]+", b"[personal page]", message)
        if b"Handoff P-" in message:  # a personal handoff's line (its title, before)
            message = re.sub(rb"Handoff P-[0-9a-f]+[^\n]*", b"[personal page]", message)
        new.message = message
        self._add(new)
        return new.id


def personal_files(shared: Shared, files: Files) -> Files:
    """The entries of ``files`` that the projection leaves out (personal pages)."""
    out = {}
    for path, (mode, sha) in files.items():
        if (is_people_folder(path.split(b"/", 1)[0]) and b"/" in path) or (
            stat.S_ISREG(mode) and shared.personal_blob(path, sha)
        ):
            out[path] = (mode, sha)
    return out
