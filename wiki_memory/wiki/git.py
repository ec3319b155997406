"""Git history of the wiki: fast commits built directly from objects, with dulwich.

The server's one writer thread commits every change it makes to ``wiki/`` through a
:class:`GitStore`. A commit is built from the HEAD tree plus the named paths as they are
on disk now (blob -> tree -> commit objects written straight to the object store), the
branch ref is moved with a compare-and-swap, and the git index entries of those paths
are rewritten with their stat data so that ``git status`` (dulwich's or the stock git
binary's) is clean afterwards. No git binary is needed.

Concurrency with a person's own git (C21): the commit holds ``.git/index.lock`` from
just before it reads HEAD until the index is written, exactly like ``git commit``, so
the index and HEAD move together for every program that honours git's lock. A lock held
by somebody else is waited for (bounded, polling) and then reported as :class:`GitBusy`;
that lock is never removed by us. While it holds the lock, the store names it in a
sidecar file (``.git/wiki-memory-lock-owner.<pid>``), so that after a ``kill -9`` the
next server (``clear_stale_locks=True``) can tell its own dead lock from a live git's. The ref compare-and-swap also catches writers that
move HEAD without the index lock (``git update-ref``): the commit is rebuilt on the new
HEAD, so nothing is lost.

Paths are repo-relative POSIX strings (``notes/Café résumé.md``); they are stored in git
as UTF-8, in NFC when the file exists under its NFC name (C23). Times are UTC epoch
seconds. See docs/git.md for the measured speed and the reasons behind each choice.

This module owns :class:`GitStore` (creating a repository, building and committing,
packing) and is the git layer's public API: its parts are
:mod:`~wiki_memory.wiki.gitcommon` (errors, records, identities; re-exported here),
:mod:`~wiki_memory.wiki.gitread` (the read side, :class:`GitStore`'s base class),
:mod:`~wiki_memory.wiki.gitindex` (keeping ``.git/index`` in step),
:mod:`~wiki_memory.wiki.gittree` (building the trees of a commit) and
:mod:`~wiki_memory.wiki.locks` (the lock-owner sidecar, clearing our own stale locks).
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from dulwich.errors import NotTreeError
from dulwich.file import FileLocked, GitFile
from dulwich.ignore import IgnoreFilterManager
from dulwich.index import cleanup_mode
from dulwich.objects import Blob, Commit, ObjectID, SubmoduleEncountered, Tree
from dulwich.refs import HEADREF
from dulwich.repo import Repo

from wiki_memory.wiki import gitloose, placeholder
from wiki_memory.wiki.gitcommon import (
    DEFAULT_BRANCH,
    DEFAULT_EMAIL_DOMAIN,
    SYSTEM_AUTHOR,
    BlameLine,
    CommitInfo,
    GitBusy,
    GitError,
    author_email_for,
    author_identity,
    clean_message,
    decode_path,
    tz_offset,
    validate_path,
)
from wiki_memory.wiki.gitindex import Changes, IndexCache, Leaf, load_index, update_index
from wiki_memory.wiki.gitread import GitHistory
from wiki_memory.wiki.gittree import build_tree, tree_files
from wiki_memory.wiki.locks import OWNER_PREFIX, clear_recorded_locks, record_owner, unlink
from wiki_memory.wiki.oddnames import escaped, git_name, page_name, unescaped
from wiki_memory.wiki.paths import is_plain, odd_name, report_odd_name

__all__ = [
    "BlameLine",
    "CommitInfo",
    "GitBusy",
    "GitError",
    "GitStore",
    "DEFAULT_BRANCH",
    "DEFAULT_EMAIL_DOMAIN",
    "GITIGNORE_TEXT",
    "SYSTEM_AUTHOR",
    "author_email_for",
    "author_identity",
]

log = logging.getLogger(__name__)

#: Written to a NEW wiki and committed in its first commit.
GITIGNORE_TEXT = """\
# wiki-memory: files that never belong in the wiki's history
# Obsidian's per-device window layout
.obsidian/workspace*
# Obsidian's local trash
.trash/
# the server's temporary files during atomic writes
.*.wm-tmp*
"""

# Files in .git/ that mean a person's multi-step git operation is under way; committing
# on top of it would break their rebase/merge/bisect.
OPERATION_MARKERS = (
    ("rebase-merge", "a rebase"),
    ("rebase-apply", "a rebase"),
    ("MERGE_HEAD", "a merge"),
    ("CHERRY_PICK_HEAD", "a cherry-pick"),
    ("REVERT_HEAD", "a revert"),
    ("BISECT_LOG", "a bisect"),
)

_POLL_SECONDS = 0.05
_T = TypeVar("_T")
_MAX_CAS_ATTEMPTS = 50


# --------------------------------------------------------------------------- the store


class GitStore(GitHistory):
    """The wiki's git repository, written by one writer and read by anyone.

    ``GitStore(wiki_dir)`` opens the repository in ``wiki_dir`` (any branch, any history:
    commits go to whatever HEAD points to), or, when ``wiki_dir/.git`` does not exist,
    creates one with dulwich: branch ``main``, ``core.quotePath = false`` (so a person's
    ``git status`` shows Unicode names), a ``.gitignore`` (:data:`GITIGNORE_TEXT`), and a
    first commit by ``system_author`` holding the ``.gitignore`` and any files already
    in the folder.

    ``lock_wait_seconds``: how long a commit waits for another git's lock before raising
    :class:`GitBusy` with ``busy_retry_after_seconds``. All methods are thread-safe:
    writes are serialized by one lock, reads use their own repository handle.

    ``clear_stale_locks``: remove the locks an earlier wiki-memory process left when it
    was killed (see :meth:`clear_stale_locks`). Only for the server, which holds the data
    directory's exclusive lock, so no other wiki-memory process writes this repository.
    """

    def __init__(
        self,
        wiki_dir: Path | str,
        *,
        lock_wait_seconds: float = 5.0,
        busy_retry_after_seconds: int = 2,
        system_author: tuple[str, str] = SYSTEM_AUTHOR,
        clear_stale_locks: bool = False,
    ) -> None:
        self.wiki_dir = Path(wiki_dir)
        self.lock_wait_seconds = float(lock_wait_seconds)
        self.busy_retry_after_seconds = int(busy_retry_after_seconds)
        self._lock = threading.RLock()
        self._read_lock = threading.RLock()
        self._index = IndexCache()
        self._commits_since_pack = 0
        created = False
        if not (self.wiki_dir / ".git").exists():
            self.wiki_dir.mkdir(parents=True, exist_ok=True)
            repo = Repo.init(str(self.wiki_dir), default_branch=DEFAULT_BRANCH.encode())
            config = repo.get_config()
            config.set((b"core",), b"quotePath", False)
            config.write_to_path()
            repo.close()
            # the repository's objects hold every page: nothing in it for other accounts,
            # whatever modes git gives the files it writes (docs/team-server.md)
            os.chmod(self.wiki_dir / ".git", 0o700)
            created = True
        self._repo = gitloose.fast_loose(Repo(str(self.wiki_dir)))
        self._reader = Repo(str(self.wiki_dir))
        self._root = os.fsencode(self._repo.path)
        self._controldir = self._repo.controldir()
        self._index_path = os.path.join(self._controldir, "index")
        self._owner_path = os.path.join(self._controldir, f"{OWNER_PREFIX}{os.getpid()}")
        if clear_stale_locks:
            self.clear_stale_locks()
        # Loose objects left by earlier runs count towards the next pack (a commit
        # writes about four: blob, trees, commit), so restarts do not postpone it.
        self._commits_since_pack = self._count_loose_objects() // 4
        if created:
            gi = self.wiki_dir / ".gitignore"
            if not gi.exists():
                gi.write_text(GITIGNORE_TEXT, encoding="utf-8")
            self._commit_tree_root(system_author, "Initialize wiki")

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Release file handles (pack files) held by dulwich."""
        with self._lock, self._read_lock:
            self._repo.close()
            self._reader.close()

    def reopen(self) -> None:
        """Open the repository afresh (after a history rewrite replaced its packs:
        :mod:`wiki_memory.wiki.purge`); the cached index is read again."""
        with self._lock, self._read_lock:
            self._repo.close()
            self._reader.close()
            self._repo = Repo(str(self.wiki_dir))
            self._reader = Repo(str(self.wiki_dir))
            self._index = IndexCache()

    def __enter__(self) -> GitStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def clear_stale_locks(self) -> list[str]:
        """Remove the locks a killed wiki-memory process left in ``.git``; returns their
        paths (relative to ``.git``). Call only while no other wiki-memory process
        writes this repository (the server holds the data directory's lock).

        * ``index.lock`` and the branch's ref lock are removed only when a sidecar
          ``wiki-memory-lock-owner.<pid>`` names them (the same inode for index.lock)
          and that process is gone. A lock nobody recorded may be a live git's (C21): left.
        * dulwich's loose-object locks (``objects/xx/<sha>.lock``; stock git never
          writes these) are removed: only a wiki-memory process writes through them.
        """
        with self._lock:
            removed = clear_recorded_locks(self._controldir, self._index_path)
        if removed:
            log.warning(
                "removed %d git lock file(s) left by a wiki-memory process that was killed: %s",
                len(removed),
                ", ".join(removed[:5]),
            )
        return removed

    def _record_owner(self, lockfile: Any) -> None:
        """Name the index.lock we hold (and the ref lock we may take) in the sidecar."""
        record_owner(self._owner_path, lockfile, self._repo.refs)

    def commit(
        self,
        paths: Sequence[str],
        author_name: str,
        author_email: str,
        message: str,
        when: float | None = None,
        only_if: Mapping[str, bytes] | None = None,
    ) -> str | None:
        """Commit exactly ``paths`` (repo-relative POSIX) as they are on disk now.

        ``only_if`` maps some of ``paths`` to the bytes the caller expects there: such a
        path is committed only when the file holds exactly those bytes when it is read
        (under the index lock); otherwise it is left out of this commit, as it is in
        HEAD, and shows as modified. The server uses it so that a person's save landing
        between its decision and the commit is never committed under the server's name.

        A path that no longer exists is removed from the tree (a whole subtree when it
        was a folder); a path that is a folder commits every file below it. Untracked
        paths matched by ``.gitignore`` are skipped. The author (also the committer) is
        ``author_name <author_email>``; ``when`` is UTC epoch seconds (default: now),
        written with the server's local UTC offset. Returns the new commit's sha (hex),
        or None when the resulting tree equals HEAD's.

        Raises ValueError for a path that is absolute, contains ``..``/``.``/empty
        parts, or points into ``.git``; :class:`GitBusy` when another git holds the
        index lock or a branch lock for longer than ``lock_wait_seconds``, or a
        rebase/merge/cherry-pick/revert/bisect is in progress. A file whose name is not
        valid UTF-8 is named by its escaped name (or as ``os`` spells it) and committed
        under its exact bytes (:mod:`wiki_memory.wiki.oddnames`); one whose escaped name
        leads elsewhere is skipped (logged once).
        """
        kept = []
        for p in paths:
            if odd_name(p):
                served = page_name(self.wiki_dir, p)
                if served is None:
                    report_odd_name(p)  # left on disk as it is, never committed
                    continue
                p = served
            kept.append(validate_path(p))
        if not kept and paths:
            return None
        expect = None
        if only_if:
            expect = {self._resolve(validate_path(p)): data for p, data in only_if.items()}
        with self._lock:
            return self._commit(kept, author_name, author_email, message, when, expect)

    def commit_many(
        self, groups: Sequence[tuple[str, str, str, Sequence[str]]], when: float | None = None
    ) -> list[str | None]:
        """Commit each ``(author_name, author_email, message, paths)`` group in order,
        one commit per group; returns each group's sha (None when it changed nothing).
        A :class:`GitBusy` from a group stops the run; earlier groups stay committed."""
        with self._lock:
            return [self.commit(list(p), n, e, m, when) for n, e, m, p in groups]

    def maybe_pack(self, every: int = 500) -> int:
        """Pack the loose objects once ``every`` commits have been made through this
        store since the last pack; returns how many objects were packed (0 when it was
        not time yet). Call it after each commit (``Settings.pack_every_commits``)."""
        with self._lock:
            if self._commits_since_pack < max(1, every):
                return 0
            return self.pack()

    def pack(self) -> int:
        """Move all loose objects into one new pack file now; returns how many.

        Readers are paused meanwhile: a reader between "not in the packs it knows" and
        "not loose any more" would otherwise miss an object."""
        with self._lock, self._read_lock:
            n = self._repo.object_store.pack_loose_objects()
            self._commits_since_pack = 0
            log.info("packed %d loose git objects", n)
            return n

    def _count_loose_objects(self) -> int:
        objects = os.path.join(self._controldir, "objects")
        n = 0
        for prefix in range(256):
            try:
                n += len(os.listdir(os.path.join(objects, f"{prefix:02x}")))
            except FileNotFoundError:
                continue
        return n

    def tracked(self, path: str) -> bool:
        """True when ``path`` (repo-relative) is a file in HEAD's tree."""
        with self._read_lock:
            return self._tracked(self._head_tree(), path.encode("utf-8")) is not None

    # ------------------------------------------------------------------ internals

    def _check_operations(self) -> None:
        for marker, what in OPERATION_MARKERS:
            if os.path.exists(os.path.join(self._controldir, marker)):
                raise GitBusy(max(30, self.busy_retry_after_seconds), f"{what} is in progress")

    def _resolve(self, rel: str) -> bytes:
        """The bytes to store for ``rel``: NFC when the NFC name exists on disk (or
        neither form does), else the name exactly as on disk; for a name that is not
        UTF-8 (as ``os`` spells it, or its escaped name when no file has that name) its
        exact bytes."""
        if odd_name(rel):
            return git_name(rel)  # as os spells it: its exact bytes
        odd = unescaped(rel)  # an escaped name: its file's exact bytes, on disk or in HEAD
        if odd is not None and not os.path.lexists(os.path.join(self._root, rel.encode())):
            raw = git_name(odd)
            if os.path.lexists(os.path.join(self._root, raw)) or (
                self._tracked(self._head_tree(), raw) is not None
                and self._tracked(self._head_tree(), rel.encode()) is None
            ):
                return raw
        nfc = unicodedata.normalize("NFC", rel)
        if nfc == rel and rel.isascii():
            return rel.encode()
        for candidate in (nfc, rel, unicodedata.normalize("NFD", rel)):
            if os.path.lexists(os.path.join(self._root, candidate.encode())):
                return candidate.encode()
        return nfc.encode()

    def _head_tree(self) -> ObjectID | None:
        sha = self._repo.refs.follow(HEADREF)[1]
        if sha is None:
            return None
        c = self._repo[sha]
        assert isinstance(c, Commit)
        tree: ObjectID = c.tree
        return tree

    def _tracked(self, tree_id: ObjectID | None, path: bytes) -> tuple[int, ObjectID] | None:
        if tree_id is None:
            return None
        try:
            found: tuple[int, ObjectID] = self._repo.object_store[tree_id].lookup_path(  # type: ignore[attr-defined]
                self._repo.object_store.__getitem__, path
            )
        except (KeyError, NotTreeError, SubmoduleEncountered):
            return None
        return found

    def _collect(
        self, paths: Iterable[bytes], expect: Mapping[bytes, bytes] | None = None
    ) -> Changes:
        """Read the named paths from disk and store their blobs. Stat is taken BEFORE
        the read, so a file changed during the read looks modified to git afterwards
        (never falsely clean). A file named in ``expect`` whose bytes differ from the
        expected ones is left out (see :meth:`commit`'s ``only_if``)."""
        head_tree = self._head_tree()
        ignore: IgnoreFilterManager | None = None

        def ignored(p: bytes, is_dir: bool = False) -> bool:
            nonlocal ignore
            if ignore is None:
                ignore = IgnoreFilterManager.from_repo(self._repo)
            return bool(ignore.is_ignored(decode_path(p) + ("/" if is_dir else "")))

        changes: Changes = {}
        todo = list(paths)
        while todo:
            rel = todo.pop()
            full = os.path.join(self._root, rel)
            try:
                st = os.lstat(full)
            except (FileNotFoundError, NotADirectoryError):
                if not placeholder.evicted(self._root, rel):  # evicted by a sync client: kept
                    changes[rel] = None
                continue
            if stat.S_ISDIR(st.st_mode):
                if rel and os.path.lexists(os.path.join(full, b".git")):
                    continue  # a nested repository: not ours to commit
                if not rel:
                    tracked: tuple[int, ObjectID] | None = (
                        (stat.S_IFDIR, head_tree) if head_tree is not None else None
                    )
                else:
                    tracked = self._tracked(head_tree, rel)
                if tracked is not None and stat.S_ISDIR(tracked[0]):
                    # tracked files below the folder that are gone from disk
                    for sub in tree_files(self._repo.object_store, tracked[1], rel):
                        gone = not os.path.lexists(os.path.join(self._root, sub))
                        if gone and not placeholder.evicted(self._root, sub):
                            changes[sub] = None
                elif tracked is not None:
                    changes[rel] = None  # a tracked file became a folder
                for name in os.listdir(full):
                    if name == b".git" or placeholder.is_stub(name):
                        continue
                    child = rel + b"/" + name if rel else name
                    if odd_name(decode_path(name)) and (
                        page_name(self.wiki_dir, decode_path(child)) is None
                    ):
                        report_odd_name(decode_path(child))  # left on disk, never committed
                        continue
                    try:
                        is_dir = stat.S_ISDIR(os.lstat(os.path.join(self._root, child)).st_mode)
                    except FileNotFoundError:
                        continue  # gone since listdir
                    if self._tracked(head_tree, child) is None and ignored(child, is_dir):
                        continue
                    todo.append(child)
                continue
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                raise ValueError(f"not a regular file or symlink: {decode_path(rel)!r}")
            tracked = self._tracked(head_tree, rel)
            if tracked is None and ignored(rel):
                continue
            if placeholder.is_stub(rel.rpartition(b"/")[2]) or (
                tracked is not None
                and placeholder.dataless(st, self._size(tracked[1]) if not st.st_size else None)
            ):
                continue  # a sync client's stub, or a page whose bytes it evicted: HEAD's stays
            if stat.S_ISLNK(st.st_mode):
                data = os.readlink(full)
                mode = stat.S_IFLNK
            else:
                with open(full, "rb") as fh:
                    data = fh.read()
                mode = cleanup_mode(st.st_mode)
                if expect is not None and rel in expect and expect[rel] != data:
                    continue  # changed since the caller looked: not the caller's to commit
            blob = Blob.from_string(data)
            if tracked is None or tracked[1] != blob.id:
                self._repo.object_store.add_object(blob)
            changes[rel] = Leaf(mode, blob.id, st)
        return changes

    def _size(self, sha: ObjectID) -> int:
        """The size of a stored blob (0 when it is missing)."""
        try:
            return len(self._repo[sha].as_raw_string())
        except KeyError:
            return 0

    def _acquire_index_lock(self) -> Any:
        deadline = time.monotonic() + self.lock_wait_seconds
        return self._while_locked("repository", deadline, lambda: GitFile(self._index_path, "wb"))

    def _while_locked(self, what: str, deadline: float, fn: Callable[[], _T]) -> _T:
        """``fn()``, retried while another git holds its lock; GitBusy after ``deadline``."""
        while True:
            try:
                return fn()
            except FileLocked:
                if time.monotonic() >= deadline:
                    log.warning(
                        "git %s busy for %.1f s; answering busy", what, self.lock_wait_seconds
                    )
                    raise GitBusy(self.busy_retry_after_seconds) from None
                time.sleep(_POLL_SECONDS)

    def _commit(
        self,
        paths: list[str],
        author_name: str,
        author_email: str,
        message: str,
        when: float | None,
        expect: Mapping[bytes, bytes] | None = None,
    ) -> str | None:
        self._check_operations()
        ident = author_identity(author_name, author_email)
        t = time.time() if when is None else float(when)
        tz = tz_offset(t)
        body = clean_message(escaped(message))  # a file name not UTF-8: as its page name
        # The files are read only once the index lock is ours: another git (a checkout
        # rewriting a thousand files) holds that lock while it writes, and files read
        # before it finished would be committed half old, half new on top of its HEAD.
        lockfile = self._acquire_index_lock()
        self._record_owner(lockfile)
        try:
            changes = self._collect((self._resolve(p) for p in paths), expect)
            if not changes:
                lockfile.abort()
                return None
            items = [(p.split(b"/"), leaf) for p, leaf in changes.items()]
            self._load_index()
            deadline = time.monotonic() + self.lock_wait_seconds
            for _attempt in range(_MAX_CAS_ATTEMPTS):
                old = self._repo.refs.follow(HEADREF)[1]
                base = None
                if old is not None:
                    oc = self._repo[old]
                    assert isinstance(oc, Commit)
                    base = oc.tree
                new_tree = build_tree(self._repo.object_store, base, items)
                if new_tree is None:
                    empty = Tree()
                    self._repo.object_store.add_object(empty)
                    new_tree = empty.id
                if old is not None and new_tree == base:
                    result = None
                    break
                c = Commit()
                c.tree = new_tree
                c.parents = [old] if old is not None else []
                c.author = c.committer = ident
                c.author_time = c.commit_time = int(t)
                c.author_timezone = c.commit_timezone = tz
                c.message = body.encode("utf-8")
                self._repo.object_store.add_object(c)
                reflog = (b"commit (initial): " if old is None else b"commit: ") + c.message.split(
                    b"\n", 1
                )[0]
                ok = self._swap_ref(old, c.id, ident, int(t), tz, reflog, deadline)
                if ok:
                    result = c.id.decode("ascii")
                    self._commits_since_pack += 1
                    break
                log.info("HEAD moved during a commit; rebuilding on the new HEAD")
            else:
                raise GitBusy(self.busy_retry_after_seconds, "HEAD keeps moving")
            self._update_index(lockfile, changes)
        except BaseException:
            lockfile.abort()
            raise
        finally:
            unlink(self._owner_path)
        return result

    def _swap_ref(
        self,
        old: ObjectID | None,
        new: ObjectID,
        ident: bytes,
        when: int,
        tz: int,
        reflog: bytes,
        deadline: float,
    ) -> bool:
        """Move HEAD's branch from ``old`` to ``new`` (compare-and-swap); False when HEAD
        is no longer ``old``. Waits for another git's ref lock until ``deadline``."""
        refs = self._repo.refs

        def swap() -> bool:
            if old is None:
                return refs.add_if_new(
                    HEADREF, new, committer=ident, timestamp=when, timezone=tz, message=reflog
                )
            return refs.set_if_equals(
                HEADREF, old, new, committer=ident, timestamp=when, timezone=tz, message=reflog
            )

        return self._while_locked("branch", deadline, swap)

    def _load_index(self) -> None:
        """Read the index (or reuse the cached copy) while holding its lock."""
        load_index(self._index, self._index_path)

    def _update_index(self, lockfile: Any, changes: Changes) -> None:
        """Rewrite the index entries of ``changes`` while holding the index lock."""
        update_index(self._index, lockfile, changes, self._index_path)

    def _commit_tree_root(self, author: tuple[str, str], message: str) -> None:
        """First commit of a new wiki: the .gitignore and whatever is already there, but
        never a symbolic link or a file with more than one hard link (its other name may
        be a personal page, which git history would then serve: as_of recall reads it)."""
        with self._lock:
            changes = self._collect([b""])
            plain = (n for n in (decode_path(p) for p in changes) if is_plain(self.wiki_dir, n))
            names = sorted(n for n in (page_name(self.wiki_dir, p) for p in plain) if n)
            if not names:
                return
            self._commit(names, author[0], author[1], message, None)
