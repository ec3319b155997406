"""Removing a page's content from every commit of a wiki's git history (dulwich only).

:func:`purge_history` rewrites every commit reachable from any ref (branches, tags,
remote-tracking refs) so that one path either no longer exists (``text=None``) or no longer holds ``text`` (each
occurrence replaced by :data:`MARK`), moves the refs to the rewritten commits, keeps the
working tree file and git's index in step, empties the reflogs and prunes every object
nothing reaches any more (``dulwich.porcelain.gc`` with no grace period), so that
``git cat-file --batch-all-objects`` lists no object holding the content. In the same
pass (:class:`Rewrite`) the page can get a new file name in every commit, every other
page's wikilinks to it are pointed at that name (or replaced by :data:`MARK` when the page
is removed), and commit messages are rewritten. The page's versions under other paths (an
earlier name, a move, a conflict copy: :mod:`wiki_memory.wiki.purgealias`) are treated as
the page. Commits that did not change keep their
ids only when none of their ancestors changed; the rest get new ids with the same author,
committer and dates (a signature is dropped: it signed the old tree). docs/operations.md ("Purge") has the guarantees.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dulwich import porcelain
from dulwich.errors import NotTreeError
from dulwich.index import index_entry_from_stat
from dulwich.object_store import tree_lookup_path
from dulwich.objects import Blob, Commit, ObjectID, Tag, Tree
from dulwich.repo import Repo

from wiki_memory.plainfile import atomic_write, read_plain
from wiki_memory.wiki.links import rename_links, unlink
from wiki_memory.wiki.purgealias import Aliases, find_aliases
from wiki_memory.wiki.replicate import config_remotes, flat_tree

__all__ = ["MARK", "PurgeReport", "Rewrite", "purge_history"]

#: what each purged occurrence of a text becomes, in history and in the working tree
MARK = b"[purged]"


@dataclass
class PurgeReport:
    """What :func:`purge_history` did: ``commits`` (old id hex -> new id hex, for the
    commits that changed), ``versions`` (how many distinct stored versions of the page
    held the content), ``refs`` (ref names moved), ``remotes`` (name -> URL of every
    configured remote: copies there are not touched)."""

    commits: dict[str, str] = field(default_factory=dict)
    versions: int = 0
    refs: list[str] = field(default_factory=list)
    remotes: dict[str, str] = field(default_factory=dict)
    #: the ids (hex) of every stored version the purge removed or scrubbed (the page's,
    #: and other pages' whose links to it were rewritten)
    blobs: list[str] = field(default_factory=list)
    #: how many commits held the page under the file name the purge replaced
    file_names: int = 0
    #: how many stored versions of other pages had their links to the page rewritten
    links: int = 0
    #: how many commit messages were rewritten
    messages: int = 0


@dataclass
class Rewrite:
    """What a purge changes beside the page's own bytes, in every commit: ``new_name``
    (the page's new file name, one path component, when its name held the text), the
    wikilinks in every other page whose target key (:func:`~wiki_memory.wiki.links.
    target_key`) is in ``link_keys`` (pointed at ``link_target``, or replaced by
    :data:`MARK` whole when it is None: the page is removed), and ``message``: each commit message's
    new bytes from its old ones and whether that commit changed the page."""

    new_name: str | None = None
    link_keys: frozenset[str] = frozenset()
    #: the name the links are pointed at (None: replaced by the mark whole)
    link_target: str | None = None
    message: Callable[[bytes, bool], bytes] | None = None
    #: whether a file name (its stem) holds the purged text (a text purge): the page's
    #: versions under such earlier names get neutral names too
    holds: Callable[[str], bool] | None = None


def _scrub(data: bytes, text: bytes | None) -> bytes | None:
    """The blob's new bytes: None to drop the file, ``data`` when untouched."""
    if text is None:
        return None
    return data.replace(text, MARK)


class _Rewriter:
    def __init__(
        self,
        repo: Repo,
        parts: list[bytes],
        text: bytes | None,
        rewrite: Rewrite,
        aliases: Aliases | None = None,
    ) -> None:
        self.repo = repo
        self.store = repo.object_store
        self.parts = parts
        self.text = text
        self.rewrite = rewrite
        #: the page under other paths (before a rename or a move, a copy of it)
        self.aliases = aliases or Aliases()
        self.new_name = None if rewrite.new_name is None else rewrite.new_name.encode("utf-8")
        self.trees: dict[tuple[ObjectID, int], ObjectID | None] = {}
        self.walked: dict[tuple[ObjectID, tuple[bytes, ...]], ObjectID | None] = {}
        self.blobs: dict[ObjectID, ObjectID | None] = {}
        self.linked: dict[tuple[ObjectID, bytes], ObjectID] = {}

    def root(self, sha: ObjectID) -> ObjectID | None:
        """The commit tree ``sha`` rewritten: the page's entry only, or every page's
        links and the page's versions under other names too when there are any."""
        if self.rewrite.link_keys or self.aliases.versions:
            return self.walk(sha, ())
        return self.tree(sha)

    def is_alias(self, path: bytes, sha: ObjectID) -> bool:
        """True when the file at ``path`` (not the page's) holds version ``sha`` of the
        page."""
        return sha in self.aliases.versions.get(path, ())

    def relink(self, data: bytes, path: str) -> bytes:
        """A page's bytes with its links to the purged page rewritten."""
        if b"[[" not in data:
            return data
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data
        new = text
        groups = [(self.rewrite.link_keys, self.rewrite.link_target), *self.aliases.links]
        for keys, target in groups:
            if not keys:
                continue
            if target is None:
                new = unlink(new, keys, MARK.decode(), path)
            else:
                new = rename_links(new, keys, target, path)
        return data if new == text else new.encode("utf-8")

    def link_blob(self, sha: ObjectID, path: bytes) -> ObjectID:
        if not (self.rewrite.link_keys or self.aliases.links):
            return sha
        key = (sha, path)
        if key not in self.linked:
            new = self.rewritten(
                sha, lambda data: self.relink(data, path.decode("utf-8", "replace"))
            )
            assert new is not None  # relinking keeps every page
            self.linked[key] = new
        return self.linked[key]

    def walk(self, sha: ObjectID, prefix: tuple[bytes, ...]) -> ObjectID | None:
        """The tree ``sha`` at ``prefix`` with the page rewritten (and renamed) and every
        other page's links rewritten; None when it becomes empty."""
        key = (sha, prefix)
        if key in self.walked:
            return self.walked[key]
        old = self.store[sha]
        assert isinstance(old, Tree)
        depth = len(prefix)
        here = depth == len(self.parts) - 1 and list(prefix) == self.parts[:depth]
        t = Tree()
        changed = False
        for item in old.items():
            name, mode, child = item.path, item.mode, item.sha
            new_name = name
            new_child: ObjectID | None = child
            if stat.S_ISDIR(mode):
                new_child = self.walk(child, (*prefix, name))
            elif here and name == self.parts[-1] and stat.S_ISREG(mode):
                new_child = self.blob(child)
                new_name = self.new_name or name
            elif stat.S_ISREG(mode) and self.is_alias(b"/".join((*prefix, name)), child):
                new_child = self.blob(child)  # the page under another name: scrubbed too
                moved = self.aliases.renames.get(b"/".join((*prefix, name)))
                new_name = name if moved is None else moved.rsplit(b"/", 1)[-1]
            elif stat.S_ISREG(mode) and name.lower().endswith(b".md"):
                new_child = self.link_blob(child, b"/".join((*prefix, name)))
            if new_child != child or new_name != name:
                changed = True
            if new_child is not None:
                t.add(new_name, mode, new_child)
        out = self.stored(t, depth) if changed else sha
        self.walked[key] = out
        return out

    def blob(self, sha: ObjectID) -> ObjectID | None:
        if sha not in self.blobs:
            self.blobs[sha] = self.rewritten(sha, lambda data: _scrub(data, self.text))
        return self.blobs[sha]

    def stored(self, t: Tree, depth: int) -> ObjectID | None:
        """The id of the rewritten tree ``t`` at ``depth`` (0: the root), stored; None
        when it is empty below the root (its folder goes)."""
        if len(t) == 0 and depth > 0:
            return None
        self.store.add_object(t)
        return t.id

    def rewritten(self, sha: ObjectID, fn: Callable[[bytes], bytes | None]) -> ObjectID | None:
        """The blob ``sha`` with its content put through ``fn``: ``sha`` itself when
        that changes nothing, None when ``fn`` gives None (the file goes), else the new
        blob's id (stored)."""
        old = self.store[sha]
        assert isinstance(old, Blob)
        new = fn(old.data)
        if new is None or new == old.data:
            return None if new is None else sha
        b = Blob.from_string(new)
        self.store.add_object(b)
        return b.id

    def tree(self, sha: ObjectID, depth: int = 0) -> ObjectID | None:
        """The tree ``sha`` with the path's entry (at ``depth``) rewritten; None when the
        tree becomes empty."""
        key = (sha, depth)
        if key in self.trees:
            return self.trees[key]
        old = self.store[sha]
        assert isinstance(old, Tree)
        name = self.parts[depth]
        out: ObjectID | None = sha
        if name in old:
            mode, child = old[name]
            last = depth == len(self.parts) - 1
            if last:
                new_child = self.blob(child) if not stat.S_ISDIR(mode) else child
            elif stat.S_ISDIR(mode):
                new_child = self.tree(child, depth + 1)
            else:
                new_child = child
            new_name = self.new_name if last and self.new_name else name
            if new_child != child or new_name != name:
                t = Tree()
                for item in old.items():
                    if item.path != name:
                        t.add(item.path, item.mode, item.sha)
                if new_child is not None:
                    t.add(new_name, mode, new_child)
                out = self.stored(t, depth)
        self.trees[key] = out
        return out


def _topo(repo: Repo, heads: list[ObjectID]) -> list[ObjectID]:
    """Every commit reachable from ``heads``, parents before children."""
    order: list[ObjectID] = []
    seen: set[ObjectID] = set()
    stack: list[tuple[ObjectID, bool]] = [(h, False) for h in heads]
    while stack:
        sha, done = stack.pop()
        if done:
            order.append(sha)
            continue
        if sha in seen:
            continue
        seen.add(sha)
        stack.append((sha, True))
        commit = repo[sha]
        assert isinstance(commit, Commit)
        stack.extend((p, False) for p in commit.parents if p not in seen)
    return order


def _peel(repo: Repo, sha: ObjectID) -> ObjectID | None:
    obj = repo[sha]
    while isinstance(obj, Tag):
        obj = repo[obj.object[1]]
    return obj.id if isinstance(obj, Commit) else None


def purge_history(
    wiki_dir: Path, rel: str, text: bytes | None = None, rewrite: Rewrite | None = None
) -> PurgeReport:
    """Remove ``rel`` (a clean wiki-relative path) from every commit of the repository in
    ``wiki_dir`` (``text=None``), or every occurrence of ``text`` from every version of
    it, and from the working tree and the index; then expire the reflogs and prune.
    ``rewrite`` renames the page, rewrites links to it and commit messages in the same
    pass (:class:`Rewrite`).

    The caller holds the repository's writer (no commit runs meanwhile) and reopens any
    ``Repo`` it keeps (packs are rewritten). Raises ValueError for an empty ``text``.
    """
    if text is not None and not text:
        raise ValueError("the text to purge is empty")
    parts = rel.encode("utf-8").split(b"/")
    report = PurgeReport()
    repo = Repo(str(wiki_dir))
    try:
        report.remotes.update(config_remotes(repo))
        refs = {name: sha for name, sha in repo.get_refs().items() if name.startswith(b"refs/")}
        heads = [c for c in (_peel(repo, s) for s in refs.values()) if c is not None]
        rewrite = rewrite or Rewrite()
        order = _topo(repo, heads)
        aliases = find_aliases(repo, order, parts, text is None, rewrite.holds, wiki_dir)
        rw = _Rewriter(repo, parts, text, rewrite, aliases)
        try:
            old_head: ObjectID | None = repo.head()
        except KeyError:
            old_head = None
        mapped: dict[ObjectID, ObjectID] = {}
        for sha in order:
            commit = repo[sha]
            assert isinstance(commit, Commit)
            tree = rw.root(commit.tree)
            mine = _entry(repo, commit.tree, parts)
            if mine is not None and rw.new_name is not None:
                report.file_names += 1
            message = commit.message
            for old, new_bytes in aliases.subs:  # the page's other names, before its own
                message = message.replace(old, MARK if new_bytes is None else new_bytes)
            if rewrite.message is not None:
                first = repo[commit.parents[0]] if commit.parents else None
                before = _entry(repo, first.tree, parts) if isinstance(first, Commit) else None
                message = rewrite.message(message, mine != before)
            if message != commit.message:
                report.messages += 1
            if tree is None:  # the page was the only file: keep an empty root tree
                empty = Tree()
                repo.object_store.add_object(empty)
                tree = empty.id
            parents = [mapped.get(p, p) for p in commit.parents]
            if tree == commit.tree and parents == commit.parents and message == commit.message:
                mapped[sha] = sha
                continue
            new = Commit()
            new.tree = tree
            new.parents = parents
            new.author, new.committer = commit.author, commit.committer
            new.author_time, new.commit_time = commit.author_time, commit.commit_time
            new.author_timezone = commit.author_timezone
            new.commit_timezone = commit.commit_timezone
            new.encoding = commit.encoding
            new.message = message
            repo.object_store.add_object(new)
            mapped[sha] = new.id
            report.commits[sha.decode()] = new.id.decode()
        report.versions = sum(1 for old, new in rw.blobs.items() if new != old)
        report.blobs = sorted(old.decode() for old, new in rw.blobs.items() if new != old)
        linked = {old.decode() for (old, _p), new in rw.linked.items() if new != old}
        report.links = len(linked)
        report.blobs = sorted(set(report.blobs) | linked)
        for name, sha in refs.items():
            obj = repo[sha]
            if isinstance(obj, Commit):
                target = mapped.get(sha, sha)
            elif isinstance(obj, Tag):
                peeled = _peel(repo, sha)
                if peeled is None or mapped.get(peeled, peeled) == peeled:
                    continue
                tag = Tag()
                tag.name, tag.message = obj.name, obj.message
                tag.tagger, tag.tag_time, tag.tag_timezone = (
                    obj.tagger,
                    obj.tag_time,
                    obj.tag_timezone,
                )
                tag.object = (Commit, mapped[peeled])
                repo.object_store.add_object(tag)
                target = tag.id
            else:
                continue
            if target != sha:
                repo.refs.set_if_equals(name, sha, target)
                report.refs.append(name.decode("utf-8", "replace"))
        new_head = None if old_head is None else mapped.get(old_head, old_head)
        _working_tree(repo, wiki_dir, rw, old_head, new_head)
        expire_reflogs(repo)
        drop_stale(repo, set(mapped) - set(mapped.values()))
        porcelain.gc(repo, prune=True, grace_period=0)
    finally:
        repo.close()
    return report


def _entry(repo: Repo, tree: ObjectID, parts: list[bytes]) -> ObjectID | None:
    """The object at ``parts`` in ``tree``, or None."""
    try:
        return tree_lookup_path(repo.object_store.__getitem__, tree, b"/".join(parts))[1]
    except (KeyError, NotTreeError):
        return None


def _commit_tree(repo: Repo, sha: ObjectID | None) -> ObjectID | None:
    if sha is None:
        return None
    c = repo[sha]
    return c.tree if isinstance(c, Commit) else None


def _working_tree(
    repo: Repo, wiki_dir: Path, rw: _Rewriter, old: ObjectID | None, new: ObjectID | None
) -> None:
    """The working tree and git's index follow HEAD's rewrite: every file HEAD's rewrite
    changed gets the same change in its working copy (a person's unsaved edit of it is
    kept, rewritten the same way), at its new name when it was renamed."""
    before = flat_tree(repo, _commit_tree(repo, old))
    after = flat_tree(repo, _commit_tree(repo, new))
    page = b"/".join(rw.parts)
    renamed = page if rw.new_name is None else b"/".join((*rw.parts[:-1], rw.new_name))
    index = repo.open_index()
    for path in sorted({p for p in before if after.get(p) != before[p]} | {page}):
        full = Path(wiki_dir) / path.decode("utf-8")
        data = read_plain(full)
        target, new_data = path, data
        if path == page:
            target = renamed
            new_data = None if rw.text is None or data is None else data.replace(rw.text, MARK)
        elif path in rw.aliases.renames and data is not None and rw.text is not None:
            target = rw.aliases.renames[path]  # the page under an earlier name that held it
            new_data = rw.relink(data.replace(rw.text, MARK), path.decode("utf-8", "replace"))
        elif path not in after:
            new_data = None  # the page under another name, removed with it
        elif data is not None:
            own = data  # the page under another name: scrubbed as the page is
            if path in rw.aliases.versions and rw.text is not None:
                own = data.replace(rw.text, MARK)
            new_data = rw.relink(own, path.decode("utf-8", "replace"))
        if path != target or new_data is None:
            if data is not None:
                full.unlink()
            if path in index:
                del index[path]
        if new_data is None:
            continue
        dest = Path(wiki_dir) / target.decode("utf-8")
        if new_data != data or dest != full:
            atomic_write(dest, new_data)
        blob = Blob.from_string(new_data)
        repo.object_store.add_object(blob)
        mode = after.get(target, (0o100644, blob.id))[0]
        index[target] = index_entry_from_stat(os.lstat(dest), blob.id, mode)
    index.write()


def drop_stale(repo: Repo, old: set[ObjectID]) -> None:
    """Files that name old commits: ``ORIG_HEAD`` and friends pointing at one, and git's
    commit-graph (a cache of commit ids that git rebuilds when it wants it)."""
    control = Path(repo.controldir())
    for name in ("ORIG_HEAD", "FETCH_HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD"):
        f = control / name
        if f.is_file() and any(bytes(sha) in f.read_bytes() for sha in old):
            f.unlink()
    info = control / "objects" / "info"
    for name in ("commit-graph", "commit-graphs"):
        target = info / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()


def expire_reflogs(repo: Repo) -> None:
    """Every reflog emptied: they name the old commits, which keeps them reachable."""
    logs = Path(repo.controldir()) / "logs"
    if logs.is_dir():
        shutil.rmtree(logs)
