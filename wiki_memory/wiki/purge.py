"""Removing a page's content from every commit of a wiki's git history (dulwich only).

:func:`purge_history` rewrites every commit reachable from any ref (branches, tags,
remote-tracking refs) so that one path either no longer exists (``text=None``) or no longer holds ``text`` (each
occurrence replaced by :data:`MARK`), moves the refs to the rewritten commits, keeps the
working tree file and git's index in step, empties the reflogs and prunes every object
nothing reaches any more (``dulwich.porcelain.gc`` with no grace period), so that
``git cat-file --batch-all-objects`` lists no object holding the content. Commits that
did not hold the content keep their ids only when none of their ancestors changed; the
rest get new ids with the same author, committer, dates and message (a signature is
dropped: it signed the old tree). docs/operations.md ("Purge") has the guarantees.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from dulwich import porcelain
from dulwich.index import index_entry_from_stat
from dulwich.objects import Blob, Commit, ObjectID, Tag, Tree
from dulwich.repo import Repo

__all__ = ["MARK", "PurgeReport", "purge_history"]

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
    #: the ids (hex) of every stored version the purge removed or scrubbed
    blobs: list[str] = field(default_factory=list)


def _scrub(data: bytes, text: bytes | None) -> bytes | None:
    """The blob's new bytes: None to drop the file, ``data`` when untouched."""
    if text is None:
        return None
    return data.replace(text, MARK)


class _Rewriter:
    def __init__(self, repo: Repo, parts: list[bytes], text: bytes | None) -> None:
        self.repo = repo
        self.store = repo.object_store
        self.parts = parts
        self.text = text
        self.trees: dict[tuple[ObjectID, int], ObjectID | None] = {}
        self.blobs: dict[ObjectID, ObjectID | None] = {}

    def blob(self, sha: ObjectID) -> ObjectID | None:
        if sha not in self.blobs:
            old = self.store[sha]
            assert isinstance(old, Blob)
            new = _scrub(old.data, self.text)
            if new is None:
                self.blobs[sha] = None
            elif new == old.data:
                self.blobs[sha] = sha
            else:
                b = Blob.from_string(new)
                self.store.add_object(b)
                self.blobs[sha] = b.id
        return self.blobs[sha]

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
                new_child = self.blob(child) if not (mode & 0o040000) else child
            elif mode & 0o040000:
                new_child = self.tree(child, depth + 1)
            else:
                new_child = child
            if new_child != child:
                t = Tree()
                for item in old.items():
                    if item.path != name:
                        t.add(item.path, item.mode, item.sha)
                if new_child is not None:
                    t.add(name, mode, new_child)
                if len(t) == 0 and depth > 0:
                    out = None
                else:
                    self.store.add_object(t)
                    out = t.id
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


def purge_history(wiki_dir: Path, rel: str, text: bytes | None = None) -> PurgeReport:
    """Remove ``rel`` (a clean wiki-relative path) from every commit of the repository in
    ``wiki_dir`` (``text=None``), or every occurrence of ``text`` from every version of
    it, and from the working tree and the index; then expire the reflogs and prune.

    The caller holds the repository's writer (no commit runs meanwhile) and reopens any
    ``Repo`` it keeps (packs are rewritten). Raises ValueError for an empty ``text``.
    """
    if text is not None and not text:
        raise ValueError("the text to purge is empty")
    parts = rel.encode("utf-8").split(b"/")
    report = PurgeReport()
    repo = Repo(str(wiki_dir))
    try:
        config = repo.get_config()
        for section in config.sections():
            if len(section) == 2 and section[0] == b"remote":
                try:
                    url = config.get(section, b"url").decode("utf-8", "replace")
                except KeyError:
                    url = ""
                report.remotes[section[1].decode("utf-8", "replace")] = url
        refs = {name: sha for name, sha in repo.get_refs().items() if name.startswith(b"refs/")}
        heads = [c for c in (_peel(repo, s) for s in refs.values()) if c is not None]
        rw = _Rewriter(repo, parts, text)
        mapped: dict[ObjectID, ObjectID] = {}
        for sha in _topo(repo, heads):
            commit = repo[sha]
            assert isinstance(commit, Commit)
            tree = rw.tree(commit.tree)
            if tree is None:  # the page was the only file: keep an empty root tree
                empty = Tree()
                repo.object_store.add_object(empty)
                tree = empty.id
            parents = [mapped.get(p, p) for p in commit.parents]
            if tree == commit.tree and parents == commit.parents:
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
            new.message = commit.message
            repo.object_store.add_object(new)
            mapped[sha] = new.id
            report.commits[sha.decode()] = new.id.decode()
        report.versions = sum(1 for old, new in rw.blobs.items() if new != old)
        report.blobs = sorted(old.decode() for old, new in rw.blobs.items() if new != old)
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
        _working_tree(repo, wiki_dir, rel, text)
        expire_reflogs(repo)
        drop_stale(repo, set(mapped) - set(mapped.values()))
        porcelain.gc(repo, prune=True, grace_period=0)
    finally:
        repo.close()
    return report


def _working_tree(repo: Repo, wiki_dir: Path, rel: str, text: bytes | None) -> None:
    """The file itself and its entry in git's index."""
    full = Path(wiki_dir) / rel
    index = repo.open_index()
    key = rel.encode("utf-8")
    if text is None:
        if full.is_file() and not full.is_symlink():
            full.unlink()
        if key in index:
            del index[key]
    elif full.is_file() and not full.is_symlink():
        data = full.read_bytes()
        new = data.replace(text, MARK)
        if new != data:
            tmp = full.with_name(full.name + ".purge-tmp")
            tmp.write_bytes(new)
            os.replace(tmp, full)
        blob = Blob.from_string(new)
        repo.object_store.add_object(blob)
        if key in index:
            old = index[key]
            mode = getattr(old, "mode", 0o100644)
            index[key] = index_entry_from_stat(os.lstat(full), blob.id, mode)
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
