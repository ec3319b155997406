"""The writer-thread half of a sync (docs/git.md, "Replication"): merging a fetched
hub's branch into the local one, the border's verdict on what the hub sent, writing the
changed files and moving the branch.

:class:`SyncMerge` runs as jobs on the server's writer thread (invariant 2), between the
fetch and the push that :class:`wiki_memory.core.sync.SyncService` runs off it:
:meth:`SyncMerge.merge_write` merges ``theirs`` with the shared projection of the local
branch (:mod:`wiki_memory.wiki.projection`) per file (:mod:`wiki_memory.wiki.replicate`),
after every entry the hub sent passed the border (:mod:`wiki_memory.wiki.border`; refused
ones keep this server's version and are recorded once in
``.git/wiki-memory-refused.json``), and returns what to push; :meth:`SyncMerge.project_job`
only refreshes the projection (a forced push after a purge).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from dulwich import porcelain
from dulwich.file import FileLocked
from dulwich.index import index_entry_from_stat
from dulwich.objects import Blob, Commit, ObjectID
from dulwich.refs import HEADREF
from dulwich.repo import Repo

from wiki_memory.audit import escape
from wiki_memory.core import syncconflicts, syncrefusals, topicmerge
from wiki_memory.core import syncguard as guard
from wiki_memory.core.syncrefusals import tree_of
from wiki_memory.core.syncstate import REFUSED as _REFUSED
from wiki_memory.core.syncstate import refused_entries, utc_stamp
from wiki_memory.core.writer import WriteResult
from wiki_memory.plainfile import atomic_write
from wiki_memory.recall import rank
from wiki_memory.wiki import border, placeholder
from wiki_memory.wiki import replicate as rp
from wiki_memory.wiki.frontmatter import FrontmatterError
from wiki_memory.wiki.gitcommon import SYSTEM_AUTHOR, author_identity, tz_offset
from wiki_memory.wiki.inside import Outside, read_inside, remove_inside, write_inside
from wiki_memory.wiki.page import parse_metadata
from wiki_memory.wiki.projection import Shared, personal_files, unpinned, with_pin
from wiki_memory.wiki.purge import drop_stale, expire_reflogs

__all__ = ["CACHE", "SyncMerge"]

# the sync's log, whichever half of it writes
log = logging.getLogger("wiki_memory.core.sync")

#: the projection's cache file inside ``wiki/.git`` (old commit id -> projected id)
CACHE = "wiki-memory-shared.json"


class SyncMerge:
    """The merge jobs of one Memory's sync, run on its writer thread (see the module).
    ``state_lock`` is the sync service's lock over the files in ``wiki/.git`` it writes
    (the refusal record here)."""

    def __init__(self, memory: Any, state_lock: threading.Lock) -> None:
        #: the :class:`~wiki_memory.core.memory.Memory` (typed loosely: it builds the
        #: sync, and the rooms allow no import cycle)
        self.memory = memory
        self.wiki_dir: Path = Path(memory.wiki_dir)
        self._state_lock = state_lock
        #: the last merge's files a person saved during it: path -> the incoming copy
        self.kept_beside: dict[str, str] = {}
        #: the last merge's conflict copies: copy -> whose version is where
        self.notes: dict[str, str] = {}

    @property
    def _control(self) -> Path:
        return self.wiki_dir / ".git"

    def project_job(self) -> ObjectID:
        """On the writer thread: project the local branch (nothing fetched or merged),
        point :data:`~wiki_memory.wiki.replicate.SHARED_REF` at it and return it."""
        with Repo(str(self.wiki_dir)) as repo:
            head = repo.refs.follow(HEADREF)[1]
            assert head is not None
            shared = Shared(repo, self._control / CACHE)
            out = shared.project(head)
            shared.save()
            repo.refs[rp.SHARED_REF] = out
        return out

    def merge_write(
        self,
        name: str,
        theirs: ObjectID | None,
        seen: str | None,
        squash: bool = False,
        follow: bool = False,
        accept: bool = False,
    ) -> WriteResult:
        """The writer job of one merge, on the writer thread: merge the fetched ``theirs``
        into the local branch; its value is (what to push: the new shared projection, or
        ``theirs`` when the two differ only where the border refused the hub's entries;
        the action, the conflicts, the refusals new in this sync, and the :attr:`notes`:
        conflict copy -> whose version is where).

        What the hub sends passes :meth:`_admit` (the border) first: a refused entry
        takes the local version, or stays absent; a page's ``pinned`` never comes in, and
        the pages pinned here keep their pin (:meth:`_repin`).

        ``squash`` (after a purge, when the remote moved): take ``theirs``'s changes
        since ``seen`` as one commit on the local branch, without ``theirs`` as a parent,
        then drop the fetched history again.

        A hub that no longer holds ``seen`` (rewritten) is followed only with ``follow``
        (a verified purge announcement) or ``accept`` (``sync --accept-deletions``); an
        unrelated history is merged as a union; a merge deleting more shared pages than
        the limits allow stops unless ``accept``. Stopping raises
        :class:`~wiki_memory.core.syncguard.SyncStop` before anything is written.
        Tombstoned versions (purged here) never come in.

        Hand edits the watcher has not committed yet are not walked for (a status walk
        of the whole wiki cost ~1 s at 1,000 pages): :meth:`_apply` leaves every file
        whose bytes are not the old commit's as the person saved it, and the watcher
        commits it; the next sync carries it."""
        self.notes = {}
        with Repo(str(self.wiki_dir)) as repo:
            local = repo.refs.follow(HEADREF)[1]
            assert local is not None
            shared = Shared(repo, self._control / CACHE)
            if theirs is not None and not squash:
                shared.adopt(theirs)  # the hub's commits are shared as they are
            mine = shared.project(local)
            conflicts: dict[str, str] = {}
            rewritten = False
            if squash:
                rewritten = True
            elif seen and theirs is not None and seen.encode() != theirs:
                try:
                    rewritten = not rp.is_ancestor(repo, ObjectID(seen.encode()), theirs)
                except KeyError:
                    rewritten = True
            unrelated = (
                rewritten
                and not squash
                and theirs is not None
                and rp.merge_base(repo, mine, theirs) is None
            )
            if unrelated:
                rewritten = False  # a union: nothing of ours is dropped, nothing deleted
            if (
                not squash
                and not rewritten
                and (theirs is None or theirs == mine or rp.is_ancestor(repo, theirs, mine))
            ):
                repo.refs[rp.SHARED_REF] = mine
                shared.save()
                if theirs is not None and syncrefusals.only_refused(
                    self.wiki_dir, repo, mine, theirs
                ):
                    return WriteResult(value=(theirs, "up to date", conflicts, [], {}))
                out = syncrefusals.keep_refused(
                    self.wiki_dir, repo, name, self._commit, mine, theirs
                )
                return WriteResult(value=(out, "up to date", conflicts, [], {}))
            assert theirs is not None
            local_files = rp.flat_tree(repo, tree_of(repo, local))
            personal = personal_files(shared, local_files)
            their_raw = rp.flat_tree(repo, tree_of(repo, theirs), rp.MAX_TREE_ENTRIES)
            mine_files = rp.flat_tree(repo, tree_of(repo, mine), rp.MAX_TREE_ENTRIES)
            their_files, refusals = self._admit(repo, their_raw, mine_files)
            stones = guard.load_tombstones(self.wiki_dir)
            for p in guard.tombstoned(repo, their_files, mine_files, stones):
                their_files.pop(p, None)  # purged here: never comes back, no deletion
                if p in mine_files:
                    their_files[p] = mine_files[p]
            if unrelated:
                log.warning(
                    "sync with %s: the hub holds an unrelated history; merged as a union "
                    "(nothing deleted)",
                    name,
                )
                merged = topicmerge.merge_trees(repo, {}, mine_files, their_files, name)
                parents = [local, theirs]
                action = "merged unrelated history"
            elif rewritten:
                base_sha = ObjectID(seen.encode()) if seen else None
                try:
                    base = (
                        rp.flat_tree(repo, tree_of(repo, base_sha), rp.MAX_TREE_ENTRIES)
                        if base_sha
                        else {}
                    )
                except KeyError:
                    base = their_files
                merged = topicmerge.merge_trees(repo, base, mine_files, their_files, name)
                assert theirs is not None
                if not (squash or follow or accept):
                    gone = guard.deleted_pages(mine_files, merged.files, stones)
                    raise guard.SyncStop(
                        "rewrite",
                        f"{name}'s history was rewritten (rewound or force-pushed) with no "
                        f"valid purge announcement; following it would delete {gone} of "
                        f"{len(mine_files)} shared page(s): nothing was changed; an admin "
                        "decides with `wiki-memory sync --accept-deletions`",
                        gone,
                        len(mine_files),
                    )
                parents = [local] if squash else [theirs]
                action = "squashed after purge" if squash else "followed rewrite"
            elif rp.is_ancestor(repo, mine, theirs):
                merged = rp.MergeResult(dict(their_files))
                parents = [local, theirs]
                action = "pulled"
            else:
                base_sha = rp.merge_base(repo, mine, theirs)
                base = (
                    rp.flat_tree(repo, tree_of(repo, base_sha), rp.MAX_TREE_ENTRIES)
                    if base_sha
                    else {}
                )
                merged = topicmerge.merge_trees(repo, base, mine_files, their_files, name)
                parents = [local, theirs]
                action = "merged"
            gone = guard.deleted_pages(mine_files, merged.files, stones)
            s = self.memory.settings
            if not (squash or follow or accept) and guard.too_many(
                gone, len(mine_files), s.sync_max_delete_fraction, s.sync_max_delete_pages
            ):
                raise guard.SyncStop(
                    "deletions",
                    f"the merge with {name} would delete {gone} of {len(mine_files)} shared "
                    "page(s), over the limits (sync_max_delete_fraction, "
                    "sync_max_delete_pages): nothing was changed; an admin decides with "
                    "`wiki-memory sync --accept-deletions`",
                    gone,
                    len(mine_files),
                )
            conflicts = dict(merged.conflicts)
            files = dict(merged.files)
            files.update(personal)
            self._repin(repo, shared, local_files, files)
            refusals += self._no_clash(files, their_raw)
            fresh = self._record(name, refusals, their_raw)
            new = self._commit(repo, files, parents, f"Sync with {name}: {action}")
            self.kept_beside.clear()
            changed = self._apply(name, repo, local_files, files, local, new)
            arrived = [r for r in changed if r.encode() not in local_files]
            conflicts, self.notes = syncconflicts.merge_notes(
                name, conflicts, dict(self.kept_beside), arrived,
                syncconflicts.blob_reader(repo, mine_files), self.wiki_dir,
            )  # fmt: skip
            self.memory.git.reopen()
            out = shared.project(new)
            repo.refs[rp.SHARED_REF] = out
            if rewritten:
                self._drop_old_history(repo, None if squash else name)
                shared.map.clear()
                if not squash:
                    shared.adopt(theirs)
                out = shared.project(new)
            shared.save()
            if out != theirs and syncrefusals.only_refused(self.wiki_dir, repo, out, theirs):
                out = theirs  # nothing to send but reverts of what the border refused
            else:
                out = syncrefusals.keep_refused(
                    self.wiki_dir, repo, name, self._commit, out, theirs
                )
        self.memory.git.reopen()
        if rewritten:
            self._forget_caches()
        elif changed:
            self.memory.index.sync_paths(self.wiki_dir, changed)
        log.info("sync with %s: %s, %d file(s) changed", name, action, len(changed))
        return WriteResult(value=(out, action, conflicts, fresh, dict(self.notes)))

    # ------------------------------------------------------------------ the border
    def _admit(
        self,
        repo: Repo,
        theirs: rp.Files,
        mine: rp.Files,
    ) -> tuple[rp.Files, list[border.Refusal]]:
        """The hub's flat tree ``theirs`` as the merge may use it, and the refusals.

        Every entry that is not exactly ``mine``'s (the local projection's) goes through
        :func:`wiki_memory.wiki.border.check` (source ``HUB``, this server's size limits);
        a refused one is replaced by ``mine``'s version at its path (and below it, for a
        folder entry), or left out when there is none: a refusal never reads as a
        deletion or a change. An accepted page carrying ``pinned`` comes in without it
        (recorded as a refusal of the pin: pins never travel)."""
        s = self.memory.settings
        limits = border.Limits(s.max_incoming_blob_bytes, s.max_fetch_bytes)

        read: dict[str, bytes] = {}

        def content(entry: border.Entry) -> bytes:
            data = read.get(entry.blob)
            if data is not None:
                return data
            obj = repo[ObjectID(entry.blob.encode())]
            if not isinstance(obj, Blob):
                raise TypeError("not a blob")
            return bytes(obj.data)

        entries = rp.incoming_entries(repo, theirs, mine, keep=read)
        verdict = border.check(entries, border.Source.HUB, limits=limits, content=content)
        out = dict(theirs)
        refused = list(verdict.refused)

        gone: set[bytes] = set()

        def keep_mine(path: str) -> None:
            key = path.encode("utf-8", "surrogateescape")
            out.pop(key, None)
            if key in mine:
                out[key] = mine[key]
            gone.add(key)

        for r in verdict.refused:
            keep_mine(r.path)
        for e in verdict.accepted:
            if not e.path.lower().endswith(".md"):
                continue
            try:
                stripped = unpinned(content(e))
            except FrontmatterError:
                keep_mine(e.path)
                refused.append(border.Refusal(e.path, e.blob, "scope: pinned, unreadable"))
                continue
            if stripped is None:
                continue
            blob = Blob.from_string(stripped)
            repo.object_store.add_object(blob)
            key = e.path.encode("utf-8", "surrogateescape")
            out[key] = (out[key][0], blob.id)
            refused.append(border.Refusal(e.path, e.blob, "scope: pin (came in without it)"))
        if gone:
            # what this server holds below a refused entry (a link or gitlink where it has
            # a folder) stays too: the hub's tree cannot hold both, and that is no deletion
            for p, v in mine.items():
                parts = p.split(b"/")
                if any(b"/".join(parts[:i]) in gone for i in range(1, len(parts))):
                    out[p] = v
        return out, refused

    @staticmethod
    def _no_clash(
        files: rp.Files,
        theirs: rp.Files,
    ) -> list[border.Refusal]:
        """Drop (in place) every file of the merged ``files`` whose path is also a folder
        of another file (a tree cannot hold both: one side made a file where the other
        has a folder). When the file came from ``theirs``, the folder side stays and the
        file is returned as refused, so it is reported and never pushed back over. When
        the file is this server's (a personal page the hub never saw, a page changed
        here), the files below it that came from ``theirs`` are the refused ones: a hub
        never deletes this server's file by making a folder of its path."""
        folders: set[bytes] = set()
        for p in files:
            parts = p.split(b"/")
            folders.update(b"/".join(parts[:i]) for i in range(1, len(parts)))
        out = []

        def refuse(path: bytes, reason: str) -> None:
            entry = files.pop(path)
            out.append(
                border.Refusal(path.decode("utf-8", "surrogateescape"), entry[1].decode(), reason)
            )

        for p in [p for p in files if p in folders]:
            if theirs.get(p) == files[p]:
                refuse(p, "path: a file where this server has a folder")
                continue
            below = [q for q in files if q.startswith(p + b"/")]
            for q in below:
                if theirs.get(q) == files[q]:
                    refuse(q, "path: a folder where this server has a file")
            if any(q in files for q in below):
                files.pop(p)  # this server's own on both sides: the folder stays
        return out

    def _repin(
        self,
        repo: Repo,
        shared: Shared,
        local: rp.Files,
        files: rp.Files,
    ) -> None:
        """Give the pages pinned here their pin back in the merged ``files`` (in place):
        the merge saw every page without ``pinned`` (the projection strips it), so a page
        the hub did not change gets its local bytes back exactly, and one it changed gets
        the local ``pinned`` value set into the incoming bytes."""
        for path, (mode, sha) in list(files.items()):
            before = local.get(path)
            if before is None or before[1] == sha or not path.lower().endswith(b".md"):
                continue
            old = repo[before[1]]
            if not isinstance(old, Blob) or b"pinned" not in old.data:
                continue
            meta = parse_metadata(old.data)
            if "pinned" not in meta:
                continue
            if shared.shared_blob(before[1]) == sha:
                files[path] = before
                continue
            incoming = repo[sha]
            if not isinstance(incoming, Blob):
                continue
            try:
                data = with_pin(incoming.data, meta["pinned"])
            except FrontmatterError:
                continue
            blob = Blob.from_string(data)
            repo.object_store.add_object(blob)
            files[path] = (mode, blob.id)

    def _record(
        self,
        name: str,
        refusals: list[border.Refusal],
        theirs: rp.Files,
    ) -> list[dict[str, str]]:
        """Update the refusal record (``.git/wiki-memory-refused.json``) for remote
        ``name``: its rows the hub no longer carries are dropped, the new (path, blob)
        pairs added, each logged and written to the audit log (by the server: the
        border decided, not the caller). Returns the new ones, path escaped, for the
        report."""
        with self._state_lock:
            rows = refused_entries(self.wiki_dir)
            keep = []
            for r in rows:
                if r["remote"] == name:
                    now = theirs.get(r["path"].encode("utf-8", "surrogateescape"))
                    if now is None or now[1].decode() != r["blob"]:
                        continue
                keep.append(r)
            known = {(r["path"], r["blob"]) for r in keep}
            fresh: list[dict[str, str]] = []
            for ref in refusals:
                if (ref.path, ref.blob) in known:
                    continue
                known.add((ref.path, ref.blob))
                keep.append({**ref.to_json(), "remote": name, "first_seen": utc_stamp()})
                fresh.append({**ref.to_json(), "path": escape(ref.path)})
                log.warning("sync with %s refused %s: %s", name, escape(ref.path), ref.reason)
                # audited here, once, even when the push that follows fails
                self.memory.audited(
                    None,
                    "sync refused",
                    escape(ref.path),
                    "refused",
                    remote=name,
                    blob=ref.blob,
                    reason=ref.reason,
                )
            path = self._control / _REFUSED
            atomic_write(path, json.dumps({"refused": keep}, indent=1).encode("utf-8"))
        return fresh

    def _commit(
        self,
        repo: Repo,
        files: rp.Files,
        parents: list[ObjectID],
        message: str,
    ) -> ObjectID:
        c = Commit()
        c.tree = rp.build_tree(repo, files)
        c.parents = parents
        c.author = c.committer = author_identity(*SYSTEM_AUTHOR)
        t = int(time.time())
        c.author_time = c.commit_time = t
        c.author_timezone = c.commit_timezone = tz_offset(t)
        c.message = (message + "\n").encode("utf-8")
        repo.object_store.add_object(c)
        return c.id

    def _apply(
        self,
        remote: str,
        repo: Repo,
        old: rp.Files,
        new: rp.Files,
        old_head: ObjectID,
        new_head: ObjectID,
    ) -> list[str]:
        """Write the files that differ between the trees, move the branch from
        ``old_head`` to ``new_head`` and update git's index for them. A file whose bytes
        on disk are not the old tree's (a person saved it a moment ago) is left as it is:
        their edit wins and is committed as a hand edit afterwards; the incoming version
        is written beside it as a conflict copy (recorded in :attr:`kept_beside`)."""
        changed: list[str] = []
        root = self.wiki_dir
        for path in sorted(set(old) | set(new)):
            if old.get(path) == new.get(path):
                continue
            rel = path.decode("utf-8", "surrogateescape")
            before = old.get(path)
            try:
                disk = read_inside(root, rel)
            except Outside:
                disk = None
            except OSError:
                disk = None
            disk_id = Blob.from_string(disk).id if disk is not None else None
            if disk is None and placeholder.evicted(os.fsencode(root), path) and before:
                disk_id = before[1]  # evicted by a cloud client: no person's save
            try:
                if disk_id != (before[1] if before else None) and disk_id != (
                    new[path][1] if path in new else None
                ):
                    log.warning("sync left %s as a person saved it", escape(rel))
                    if path in new and new[path] != before:
                        # keep both: the incoming version beside the person's (invariant 8)
                        copy = rp.conflict_name(path, remote, new[path][1])
                        blob = repo[new[path][1]]
                        assert isinstance(blob, Blob)
                        copy_rel = copy.decode("utf-8", "surrogateescape")
                        write_inside(root, copy_rel, syncconflicts.marked(blob.data, rel, remote))
                        self.kept_beside[rel] = copy_rel
                    continue
                if path in new:
                    blob = repo[new[path][1]]
                    assert isinstance(blob, Blob)
                    write_inside(root, rel, blob.data, executable=new[path][0] == 0o100755)
                else:
                    remove_inside(root, rel)
            except (Outside, IsADirectoryError, NotADirectoryError) as exc:
                # the border let nothing like this through: a bug, or the disk changed
                log.error("sync did not write %s: %s", escape(rel), exc)
                continue
            changed.append(rel)
        if changed:
            os.sync()  # one flush for every file written, before the branch names them
        if not repo.refs.set_if_equals(HEADREF, old_head, new_head, message=b"sync"):
            raise rp.RemoteError("the branch moved during the sync; try again")
        deadline = time.monotonic() + 5
        while True:
            try:
                index = repo.open_index()
                for rel in changed:
                    key = rel.encode("utf-8", "surrogateescape")
                    full = self.wiki_dir / rel
                    if key in new and full.is_file():
                        index[key] = index_entry_from_stat(os.lstat(full), new[key][1], new[key][0])
                    elif key in index:
                        del index[key]
                index.write()
                break
            except FileLocked:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        return changed

    def _drop_old_history(self, repo: Repo, name: str | None) -> None:
        """After following a rewritten remote (``name``: its tracking ref stays) or
        squashing after a purge (None): nothing may keep the old commits alive."""
        keep = f"refs/remotes/{name}/".encode() if name else b"\0"
        for ref in list(repo.refs.allkeys()):
            if ref.startswith(b"refs/remotes/") and not ref.startswith(keep):
                repo.refs.remove_if_equals(ref, None)
        expire_reflogs(repo)
        drop_stale(repo, set())
        porcelain.gc(repo, prune=True, grace_period=0)

    def _forget_caches(self) -> None:
        """The index and the caches of page text may hold what the rewrite removed."""
        m = self.memory
        m.index.rebuild(self.wiki_dir)
        m.index.checkpoint()
        shutil.rmtree(Path(m.settings.index_path).parent / "as-of", ignore_errors=True)
        rank.clear_caches()
