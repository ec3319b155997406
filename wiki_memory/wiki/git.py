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
"""

from __future__ import annotations

import bisect
import glob
import io
import json
import logging
import os
import re
import stat
import struct
import threading
import time
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dulwich.diff_tree import tree_changes
from dulwich.errors import NotTreeError
from dulwich.file import FileLocked, GitFile
from dulwich.ignore import IgnoreFilterManager
from dulwich.index import (
    ConflictedIndexEntry,
    Index,
    IndexChecksumWriter,
    IndexEntry,
    IndexExtension,
    Stage,
    cleanup_mode,
    index_entry_from_stat,
    unchanged_entry_flags,
    write_cache_entry,
    write_index_dict,
)
from dulwich.objects import Blob, Commit, ObjectID, SubmoduleEncountered, Tree
from dulwich.objectspec import parse_commit
from dulwich.patch import write_object_diff
from dulwich.refs import HEADREF
from dulwich.repo import Repo

from wiki_memory.errors import Unavailable
from wiki_memory.wiki.paths import is_plain, odd_name, report_odd_name

__all__ = [
    "BlameLine",
    "CommitInfo",
    "GitBusy",
    "GitError",
    "GitStore",
    "DEFAULT_EMAIL_DOMAIN",
    "GITIGNORE_TEXT",
    "author_email_for",
    "author_identity",
]

log = logging.getLogger(__name__)

DEFAULT_BRANCH = "main"
DEFAULT_EMAIL_DOMAIN = "wiki-memory.local"
SYSTEM_AUTHOR = ("wiki-memory", "wiki-memory@" + DEFAULT_EMAIL_DOMAIN)

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
_OPERATION_MARKERS = (
    ("rebase-merge", "a rebase"),
    ("rebase-apply", "a rebase"),
    ("MERGE_HEAD", "a merge"),
    ("CHERRY_PICK_HEAD", "a cherry-pick"),
    ("REVERT_HEAD", "a revert"),
    ("BISECT_LOG", "a bisect"),
)

# Index extensions we keep when rewriting the index. The cache-tree (TREE) and the
# untracked cache (UNTR) describe the entries we change, so they would go stale; git
# rebuilds both when it needs them. EOIE/IEOT hold offsets into the old file.
_KEEP_EXTENSIONS = frozenset({b"REUC"})

_POLL_SECONDS = 0.05
_MAX_CAS_ATTEMPTS = 50

# While a commit holds index.lock, this sidecar in .git names the lock (inode) and the
# branch whose ref lock it may take, with the owner's pid and a per-process token.
_OWNER_PREFIX = "wiki-memory-lock-owner."
_PROCESS_TOKEN = os.urandom(8).hex()
# dulwich writes a loose object through "objects/xx/<rest>.lock" (git itself never does)
_LOOSE_LOCK = re.compile(r"^[0-9a-f]{2}$")


class GitError(Exception):
    """A git operation failed for a reason the caller cannot retry away."""


class GitBusy(GitError, Unavailable):
    """503 ``busy``: another git program holds the repository; try again later.

    ``retry_after_seconds`` (int, >= 1) is sent as the HTTP ``Retry-After`` header;
    ``reason`` says what is going on, in words safe to show a client (no file paths).
    """

    code = "busy"

    def __init__(
        self, retry_after_seconds: int, reason: str = "another git command is running"
    ) -> None:
        self.retry_after_seconds = max(1, int(retry_after_seconds))
        self.reason = reason
        Unavailable.__init__(
            self,
            f"the wiki's git repository is busy ({reason}); retry in {self.retry_after_seconds} s",
            headers={"Retry-After": str(self.retry_after_seconds)},
        )


@dataclass(frozen=True)
class CommitInfo:
    """One commit as the faces show it.

    ``time`` is the author time in UTC epoch seconds; ``paths`` are the repo-relative
    paths changed against the first parent (all paths for a root commit), sorted.
    """

    sha: str
    author_name: str
    author_email: str
    time: int
    message: str
    paths: list[str] = field(default_factory=list)
    parents: tuple[str, ...] = ()


@dataclass(frozen=True)
class BlameLine:
    """One line of a file with the commit that last changed it (``time``: UTC epoch s)."""

    sha: str
    author_name: str
    author_email: str
    time: int
    line: str


# --------------------------------------------------------------------------- identity

_EMAIL_UNSAFE = re.compile(r"[\s<>@\"',;:\\()\[\]]+")
_NAME_CRUD = "".join(chr(c) for c in range(33)) + ".,:;<>\"\\'"


def author_email_for(
    user: str,
    *,
    emails: Mapping[str, str] | None = None,
    domain: str = DEFAULT_EMAIL_DOMAIN,
) -> str:
    """Return the commit e-mail for ``user``: ``emails[user]`` if configured, else
    ``<user>@<domain>`` (``alice@wiki-memory.local``).

    The local part is the NFC user name with spaces and characters that are not
    allowed unquoted in an address replaced by ``-``; an empty result becomes
    ``unknown``.
    """
    if emails and user in emails and emails[user].strip():
        return _clean_email(emails[user])
    local = _EMAIL_UNSAFE.sub("-", unicodedata.normalize("NFC", user)).strip("-.")
    return f"{local or 'unknown'}@{domain}"


def _clean_email(email: str) -> str:
    return re.sub(r"[\s<>\x00]+", "", unicodedata.normalize("NFC", email))


def author_identity(name: str, email: str) -> bytes:
    """Return ``b"Name <email>"`` as git writes it: NFC UTF-8, with ``<``, ``>``, newlines
    and NUL removed and git's "crud" stripped from the ends of the name. An empty name
    becomes the e-mail's local part."""
    clean_email = _clean_email(email)
    clean_name = re.sub(r"[<>\x00\r\n]+", "", unicodedata.normalize("NFC", name)).strip(_NAME_CRUD)
    if not clean_name:
        clean_name = clean_email.split("@", 1)[0] or "unknown"
    return f"{clean_name} <{clean_email}>".encode()


# --------------------------------------------------------------------------- paths


def _validate(path: str) -> str:
    """Check a repo-relative POSIX path; return it unchanged. Raises ValueError."""
    if not isinstance(path, str) or not path:
        raise ValueError("empty path")
    if "\x00" in path or path.startswith("/") or "\\" in path:
        raise ValueError(f"not a repo-relative POSIX path: {path!r}")
    parts = path.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise ValueError(f"not a normalized repo-relative path: {path!r}")
        if part.lower() == ".git":
            raise ValueError(f"path inside .git: {path!r}")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"path is not valid UTF-8: {path!r}") from None
    return path


_MESSAGE_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _clean_message(message: str) -> str:
    """A commit message as git wants it: CRLF as LF, no other control character (a NUL
    would make the commit object unreadable to git), a final newline."""
    text = _MESSAGE_CONTROL.sub("", message.replace("\r\n", "\n"))
    return text if text.endswith("\n") else text + "\n"


def _decode(path: bytes) -> str:
    return path.decode("utf-8", "surrogateescape")


def _tz_offset(when: float) -> int:
    return time.localtime(when).tm_gmtoff or 0


@dataclass
class _Leaf:
    mode: int
    sha: ObjectID
    st: os.stat_result


# One change per path: a file to store, or None to remove the path (file or subtree).
_Changes = dict[bytes, _Leaf | None]


class _IndexCache:
    """The parsed index, kept in memory between commits with each entry already
    serialized (v2/v3 entries do not depend on their neighbours), so a commit rewrites
    a 10k-entry index in about a millisecond instead of re-reading (~70 ms) and
    re-serializing (~50 ms) it with dulwich. Valid while the index file's (inode, size,
    mtime) match ``key``; anything else (a person's git) makes the next commit re-read
    it."""

    def __init__(self) -> None:
        self.key: tuple[int, int, int] | None = None
        self.version = 2
        self.extensions: list[IndexExtension] = []
        self.entries: dict[bytes, IndexEntry | ConflictedIndexEntry] = {}
        self.order: list[bytes] = []  # sorted names, as the index stores them
        self.chunks: list[bytes] = []  # serialized entries, aligned with ``order``
        self.dirty: set[bytes] = set()  # names whose chunk must be serialized again
        self.extra = 0  # conflicted names take one index entry per stage
        self.dirs: set[bytes] = set()  # folders that have (or had) entries below them

    def load(self, path: str) -> None:
        st = _stat_key(path)
        if st is not None and st == self.key:
            return
        self.entries, self.extensions, self.dirs = {}, [], set()
        self.version = 2
        if st is not None:
            idx = Index(path)
            self.version = getattr(idx, "_version", None) or 2
            self.extensions = [
                e for e in getattr(idx, "_extensions", []) if e.signature in _KEEP_EXTENSIONS
            ]
            self.entries = dict(idx.items())
        self.order = sorted(self.entries)
        self.dirty = set()
        self.extra = sum(_stages(e) - 1 for e in self.entries.values())
        for name in self.order:
            self._add_dirs(name)
        if 2 <= self.version <= 3:
            self.chunks = [self._serialize(name) for name in self.order]
            # Extensions whose name starts with a lowercase letter must be understood
            # by whoever rewrites the index (split index "link", sparse index "sdir").
            # dulwich does not; refuse rather than drop the entries they stand for.
            sig = b""
            end = 12 + sum(len(c) for c in self.chunks)
            if st is not None and end + 8 <= st[1] - 20:  # room for an extension header
                with open(path, "rb") as fh:
                    fh.seek(end)
                    sig = fh.read(4)
            if len(sig) == 4 and 97 <= sig[0] <= 122:
                self.key = None
                raise GitError(
                    f"the git index uses the {sig.decode('ascii', 'replace')!r} extension, "
                    "which wiki-memory cannot update; run: git update-index --no-split-index"
                    " (and git sparse-checkout disable)"
                )
        else:
            self.chunks = [b""] * len(self.order)
            self.dirty = set(self.order)
        self.key = st

    def _add_dirs(self, name: bytes) -> None:
        i = name.rfind(b"/")
        while i > 0:
            d = name[:i]
            if d in self.dirs:
                return
            self.dirs.add(d)
            i = d.rfind(b"/")

    def _serialize(self, name: bytes) -> bytes:
        value = self.entries[name]
        buf = io.BytesIO()
        if isinstance(value, ConflictedIndexEntry):
            for stage, sub in (
                (Stage.MERGE_CONFLICT_ANCESTOR, value.ancestor),
                (Stage.MERGE_CONFLICT_THIS, value.this),
                (Stage.MERGE_CONFLICT_OTHER, value.other),
            ):
                if sub is not None:
                    start = buf.tell()
                    write_cache_entry(_Offset(buf, start), sub.serialize(name, stage), self.version)
        else:
            write_cache_entry(_Offset(buf, 0), value.serialize(name, Stage.NORMAL), self.version)
        return buf.getvalue()

    def set(self, name: bytes, entry: IndexEntry) -> None:
        old = self.entries.get(name)
        if old is None:
            pos = bisect.bisect_left(self.order, name)
            self.order.insert(pos, name)
            self.chunks.insert(pos, b"")
            self._add_dirs(name)
        else:
            self.extra -= _stages(old) - 1
        self.entries[name] = entry
        self.dirty.add(name)
        if entry.extended_flags and self.version < 3:
            self.version = 3  # as git does; every entry is serialized again
            self.dirty = set(self.order)

    def remove(self, name: bytes) -> bool:
        """Remove ``name`` and every entry below ``name/``; True when anything went."""
        gone = [name] if name in self.entries else []
        if name in self.dirs:
            self.dirs.discard(name)
            prefix = name + b"/"
            i = bisect.bisect_left(self.order, prefix)
            while i < len(self.order) and self.order[i].startswith(prefix):
                gone.append(self.order[i])
                i += 1
        for k in gone:
            self._drop(k)
        return bool(gone)

    def _drop(self, name: bytes) -> None:
        pos = bisect.bisect_left(self.order, name)
        del self.order[pos]
        del self.chunks[pos]
        self.extra -= _stages(self.entries.pop(name)) - 1
        self.dirty.discard(name)

    def write(self, f: Any) -> None:
        """Write the index to ``f`` (the held lock file) and close it (rename)."""
        writer = IndexChecksumWriter(f)
        if self.version >= 4 or self.version < 2:
            write_index_dict(writer, self.entries, version=self.version, extensions=self.extensions)
            writer.close()
            return
        for name in self.dirty:
            self.chunks[bisect.bisect_left(self.order, name)] = self._serialize(name)
        self.dirty.clear()
        count = len(self.order) + self.extra
        writer.write(b"DIRC" + struct.pack(">LL", self.version, count))
        writer.write(b"".join(self.chunks))
        for ext in self.extensions:
            data = ext.to_bytes()
            writer.write(ext.signature + struct.pack(">I", len(data)) + data)
        writer.close()


def _stages(entry: IndexEntry | ConflictedIndexEntry) -> int:
    if isinstance(entry, ConflictedIndexEntry):
        return sum(1 for e in (entry.ancestor, entry.this, entry.other) if e is not None)
    return 1


class _Offset:
    """Makes ``write_cache_entry`` pad each entry relative to the entry's own start."""

    def __init__(self, buf: io.BytesIO, start: int) -> None:
        self._buf = buf
        self._start = start

    def write(self, data: bytes) -> int:
        return self._buf.write(data)

    def tell(self) -> int:
        return self._buf.tell() - self._start

    def close(self) -> None:  # pragma: no cover - protocol completeness
        pass


def _stat_key(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


# --------------------------------------------------------------------------- the store


class GitStore:
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
        self._index = _IndexCache()
        self._commits_since_pack = 0
        created = False
        if not (self.wiki_dir / ".git").exists():
            self.wiki_dir.mkdir(parents=True, exist_ok=True)
            repo = Repo.init(str(self.wiki_dir), default_branch=DEFAULT_BRANCH.encode())
            config = repo.get_config()
            config.set((b"core",), b"quotePath", False)
            config.write_to_path()
            repo.close()
            created = True
        self._repo = Repo(str(self.wiki_dir))
        self._reader = Repo(str(self.wiki_dir))
        self._root = os.fsencode(self._repo.path)
        self._controldir = self._repo.controldir()
        self._index_path = os.path.join(self._controldir, "index")
        self._owner_path = os.path.join(self._controldir, f"{_OWNER_PREFIX}{os.getpid()}")
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
          and that process is gone. A lock nobody recorded may belong to a live git
          (C21): it is left alone and waited on as always.
        * dulwich's loose-object locks (``objects/xx/<sha>.lock``; stock git never
          writes these) are removed: only a wiki-memory process writes through them.
        """
        removed: list[str] = []
        with self._lock:
            for side in glob.glob(os.path.join(glob.escape(self._controldir), _OWNER_PREFIX + "*")):
                try:
                    with open(side, encoding="utf-8") as fh:
                        rec = json.load(fh)
                    pid = int(rec["pid"])
                except (OSError, ValueError, KeyError, TypeError):
                    rec, pid = {}, -1
                if pid > 0 and _owner_alive(pid, str(rec.get("token", ""))):
                    continue
                removed += self._remove_recorded_locks(rec)
                _unlink(side)
            objects = os.path.join(self._controldir, "objects")
            for sub in os.listdir(objects) if os.path.isdir(objects) else []:
                if not _LOOSE_LOCK.match(sub):
                    continue
                for name in os.listdir(os.path.join(objects, sub)):
                    if name.endswith(".lock") and _unlink(os.path.join(objects, sub, name)):
                        removed.append(f"objects/{sub}/{name}")
        if removed:
            log.warning(
                "removed %d git lock file(s) left by a wiki-memory process that was killed: %s",
                len(removed),
                ", ".join(removed[:5]),
            )
        return removed

    def _remove_recorded_locks(self, rec: dict[str, Any]) -> list[str]:
        out: list[str] = []
        index_lock = self._index_path + ".lock"
        try:
            st = os.stat(index_lock)
        except OSError:
            return out  # released before the kill: any ref lock now is somebody else's
        if rec.get("ino") != st.st_ino or st.st_mtime_ns < int(rec.get("since_ns", 0)):
            return out  # not the file we created
        ref = rec.get("ref_lock")
        if (
            isinstance(ref, str)
            and (ref == "HEAD.lock" or ref.startswith("refs/"))
            and ".." not in ref
        ):
            full = os.path.join(self._controldir, *ref.split("/"))
            try:
                if os.stat(full).st_mtime_ns >= int(rec.get("since_ns", 0)) and _unlink(full):
                    out.append(ref)
            except OSError:
                pass
        if _unlink(index_lock):
            out.append("index.lock")
        return out

    def _record_owner(self, lockfile: Any) -> None:
        """Name the index.lock we hold (and the ref lock we may take) in the sidecar.
        Not fsynced: a killed process loses no page-cache writes, and after a power loss
        a lock without its sidecar is only waited on (as any foreign lock)."""
        try:
            st = os.fstat(lockfile.fileno())
            names = self._repo.refs.follow(HEADREF)[0]
            last = names[-1] if names else HEADREF
            rec = {
                "pid": os.getpid(),
                "token": _PROCESS_TOKEN,
                "ino": st.st_ino,
                "since_ns": st.st_mtime_ns,
                "ref_lock": _decode(last) + ".lock",
            }
            with open(self._owner_path, "w", encoding="utf-8") as fh:
                json.dump(rec, fh)
        except Exception:  # noqa: BLE001 - only the clean-up after a crash depends on it
            log.debug("cannot record the git lock owner", exc_info=True)

    # ------------------------------------------------------------------ writing

    def commit(
        self,
        paths: Sequence[str],
        author_name: str,
        author_email: str,
        message: str,
        when: float | None = None,
    ) -> str | None:
        """Commit exactly ``paths`` (repo-relative POSIX) as they are on disk now.

        A path that no longer exists is removed from the tree (a whole subtree when it
        was a folder); a path that is a folder commits every file below it. Untracked
        paths matched by ``.gitignore`` are skipped. The author (also the committer) is
        ``author_name <author_email>``; ``when`` is UTC epoch seconds (default: now),
        written with the server's local UTC offset. Returns the new commit's sha (hex),
        or None when the resulting tree equals HEAD's.

        Raises ValueError for a path that is absolute, contains ``..``/``.``/empty
        parts, or points into ``.git``; :class:`GitBusy` when another git holds the
        index lock or a branch lock for longer than ``lock_wait_seconds``, or a
        rebase/merge/cherry-pick/revert/bisect is in progress. A path whose name is not
        valid UTF-8 is skipped (logged once, see :func:`~wiki_memory.wiki.paths.odd_name`).
        """
        kept = []
        for p in paths:
            if odd_name(p):
                report_odd_name(p)  # not UTF-8: left on disk as it is, never committed
                continue
            kept.append(_validate(p))
        if not kept and paths:
            return None
        with self._lock:
            return self._commit(kept, author_name, author_email, message, when)

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

    # ------------------------------------------------------------------ reading

    def head(self) -> str | None:
        """The commit sha HEAD resolves to, or None before the first commit."""
        with self._read_lock:
            sha = self._reader.refs.follow(HEADREF)[1]
            return sha.decode("ascii") if sha else None

    def branch(self) -> str | None:
        """The branch HEAD points to (``main``), or None when HEAD is detached."""
        with self._read_lock:
            names = self._reader.refs.follow(HEADREF)[0]
            last = names[-1] if names else b"HEAD"
            return _decode(last[len(b"refs/heads/") :]) if last.startswith(b"refs/heads/") else None

    def log(self, path: str | None = None, limit: int = 50) -> list[CommitInfo]:
        """The newest ``limit`` commits reachable from HEAD, newest first; with ``path``
        (a file or folder), only commits that changed it."""
        with self._read_lock:
            head = self._reader.refs.follow(HEADREF)[1]
            if head is None or limit <= 0:
                return []
            walk_paths = [_validate(path).encode()] if path else None
            walker = self._reader.get_walker(include=[head], paths=walk_paths, max_entries=limit)
            return [self._info(entry.commit) for entry in walker]

    def commit_info(self, rev: str = "HEAD") -> CommitInfo:
        """The :class:`CommitInfo` of one commit. Raises KeyError for an unknown rev."""
        with self._read_lock:
            return self._info(self._commit_of(rev))

    def read_at(self, path: str, rev: str = "HEAD") -> bytes | None:
        """The bytes of ``path`` in commit ``rev`` (sha, short sha, branch, ``HEAD``), or
        None when the path does not exist there (or is a folder). Raises KeyError for
        an unknown rev."""
        with self._read_lock:
            c = self._commit_of(rev)
            return self._blob_at(c.tree, _validate(path).encode())

    def read_as_of(self, path: str, when_epoch: float) -> bytes | None:
        """The bytes of ``path`` as committed at UTC epoch ``when_epoch``: its content in
        the newest commit on HEAD's history whose commit time is <= ``when_epoch``.
        None when there was no such commit or the path did not exist then. Cost grows
        with the number of commits made after ``when_epoch``."""
        with self._read_lock:
            head = self._reader.refs.follow(HEADREF)[1]
            if head is None:
                return None
            bpath = _validate(path).encode()
            for entry in self._reader.get_walker(include=[head]):
                if entry.commit.commit_time <= when_epoch:
                    return self._blob_at(entry.commit.tree, bpath)
            return None

    def diff(self, path: str, rev: str = "HEAD") -> str:
        """Unified diff (git format, ``a/`` and ``b/`` prefixes) of ``path`` between the
        first parent of ``rev`` and ``rev``; "" when ``rev`` did not change it. Paths are
        shown as plain Unicode, never quoted or escaped; content is decoded as UTF-8
        (undecodable bytes become U+FFFD). Raises KeyError for an unknown rev."""
        with self._read_lock:
            c = self._commit_of(rev)
            bpath = _validate(path).encode()
            new = self._entry_at(c.tree, bpath)
            old = None
            if c.parents:
                parent = self._reader[c.parents[0]]
                assert isinstance(parent, Commit)
                old = self._entry_at(parent.tree, bpath)
            if old == new:
                return ""
            buf = io.BytesIO()
            write_object_diff(
                buf,
                self._reader.object_store,
                (bpath if old else None, old[0] if old else None, old[1] if old else None),
                (bpath if new else None, new[0] if new else None, new[1] if new else None),
            )
            return buf.getvalue().decode("utf-8", "replace")

    def blame(self, path: str, rev: str = "HEAD") -> list[BlameLine]:
        """Each line of ``path`` at ``rev`` with the commit that last changed it (renames
        followed). Empty when the path does not exist at ``rev``."""
        from dulwich.annotate import annotate_lines

        with self._read_lock:
            c = self._commit_of(rev)
            bpath = _validate(path).encode()
            if self._entry_at(c.tree, bpath) is None:
                return []
            out = []
            for (commit, _entry), line in annotate_lines(self._reader.object_store, c.id, bpath):
                name, email = _split_ident(commit.author)
                out.append(
                    BlameLine(
                        sha=commit.id.decode("ascii"),
                        author_name=name,
                        author_email=email,
                        time=commit.author_time,
                        line=line.decode("utf-8", "replace").rstrip("\r\n"),
                    )
                )
            return out

    def changed_paths(self, old_sha: str | None, new_sha: str | None) -> list[str]:
        """Sorted repo-relative paths that differ between two commits (None = empty
        tree), e.g. after HEAD moved under the server (``git pull``/``checkout``)."""
        with self._read_lock:
            old_tree = self._commit_of(old_sha).tree if old_sha else None
            new_tree = self._commit_of(new_sha).tree if new_sha else None
            return self._tree_diff_paths(old_tree, new_tree)

    def is_clean(self, include_untracked: bool = False) -> bool:
        """True when the index and the working tree match HEAD. Untracked files count
        only with ``include_untracked`` (files matched by .gitignore never count). Uses
        dulwich's status (it walks the whole tree: not for the hot path) without taking
        any lock."""
        from dulwich import porcelain

        with self._read_lock:
            st = porcelain.status(
                self._reader,
                untracked_files="all" if include_untracked else "no",
                optional_locks=False,
            )
        if any(st.staged.values()) or st.unstaged:
            return False
        return not (include_untracked and st.untracked)

    def dirty_paths(self) -> list[str]:
        """Sorted repo-relative paths whose working-tree state differs from HEAD: modified,
        deleted, staged, and untracked files not matched by ``.gitignore``. Walks the whole
        tree (dulwich status): for start-up recovery, not the hot path."""
        from dulwich import porcelain

        with self._read_lock:
            st = porcelain.status(self._reader, untracked_files="all", optional_locks=False)
        out: set[str] = set()
        for group in st.staged.values():
            out.update(_decode(p) if isinstance(p, bytes) else str(p) for p in group)
        out.update(_decode(p) if isinstance(p, bytes) else str(p) for p in st.unstaged)
        out.update(_decode(p) if isinstance(p, bytes) else str(p) for p in st.untracked)
        return sorted(p.rstrip("/") for p in out)

    def tracked(self, path: str) -> bool:
        """True when ``path`` (repo-relative) is a file in HEAD's tree."""
        with self._read_lock:
            return self._tracked(self._head_tree(), path.encode("utf-8")) is not None

    # ------------------------------------------------------------------ internals

    def _commit_of(self, rev: str | bytes) -> Commit:
        if isinstance(rev, str):
            rev = rev.encode("utf-8")
        try:
            c = parse_commit(self._reader, rev)
        except (KeyError, ValueError) as exc:
            raise KeyError(f"unknown revision: {rev.decode('utf-8', 'replace')}") from exc
        return c

    def _entry_at(self, tree_id: ObjectID, path: bytes) -> tuple[int, ObjectID] | None:
        try:
            mode, sha = self._reader.object_store[tree_id].lookup_path(  # type: ignore[attr-defined]
                self._reader.object_store.__getitem__, path
            )
        except (KeyError, NotTreeError, SubmoduleEncountered):
            return None
        if stat.S_ISDIR(mode):
            return None
        return mode, sha

    def _blob_at(self, tree_id: ObjectID, path: bytes) -> bytes | None:
        found = self._entry_at(tree_id, path)
        if found is None:
            return None
        blob = self._reader.object_store[found[1]]
        return blob.as_raw_string() if isinstance(blob, Blob) else None

    def _tree_diff_paths(self, old_tree: ObjectID | None, new_tree: ObjectID | None) -> list[str]:
        out: set[bytes] = set()
        for ch in tree_changes(self._reader.object_store, old_tree, new_tree):
            if ch.old is not None and ch.old.path is not None:
                out.add(ch.old.path)
            if ch.new is not None and ch.new.path is not None:
                out.add(ch.new.path)
        return sorted(_decode(p) for p in out)

    def _info(self, c: Commit) -> CommitInfo:
        parent_tree = None
        if c.parents:
            parent = self._reader[c.parents[0]]
            assert isinstance(parent, Commit)
            parent_tree = parent.tree
        name, email = _split_ident(c.author)
        return CommitInfo(
            sha=c.id.decode("ascii"),
            author_name=name,
            author_email=email,
            time=int(c.author_time),
            message=c.message.decode(_encoding(c), "replace").rstrip("\n"),
            paths=self._tree_diff_paths(parent_tree, c.tree),
            parents=tuple(p.decode("ascii") for p in c.parents),
        )

    # -- building a commit

    def _check_operations(self) -> None:
        for marker, what in _OPERATION_MARKERS:
            if os.path.exists(os.path.join(self._controldir, marker)):
                raise GitBusy(max(30, self.busy_retry_after_seconds), f"{what} is in progress")

    def _resolve(self, rel: str) -> bytes:
        """The bytes to store for ``rel``: NFC when the NFC name exists on disk (or
        neither form does), else the name exactly as on disk."""
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
        return c.tree

    def _tracked(self, tree_id: ObjectID | None, path: bytes) -> tuple[int, ObjectID] | None:
        if tree_id is None:
            return None
        try:
            return self._repo.object_store[tree_id].lookup_path(  # type: ignore[attr-defined]
                self._repo.object_store.__getitem__, path
            )
        except (KeyError, NotTreeError, SubmoduleEncountered):
            return None

    def _collect(self, paths: Iterable[bytes]) -> _Changes:
        """Read the named paths from disk and store their blobs. Stat is taken BEFORE
        the read, so a file changed during the read looks modified to git afterwards
        (never falsely clean)."""
        head_tree = self._head_tree()
        ignore: IgnoreFilterManager | None = None

        def ignored(p: bytes, is_dir: bool = False) -> bool:
            nonlocal ignore
            if ignore is None:
                ignore = IgnoreFilterManager.from_repo(self._repo)
            return bool(ignore.is_ignored(_decode(p) + ("/" if is_dir else "")))

        changes: _Changes = {}
        todo = list(paths)
        while todo:
            rel = todo.pop()
            full = os.path.join(self._root, rel)
            try:
                st = os.lstat(full)
            except (FileNotFoundError, NotADirectoryError):
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
                    for sub in self._tree_files(tracked[1], rel):
                        if not os.path.lexists(os.path.join(self._root, sub)):
                            changes[sub] = None
                elif tracked is not None:
                    changes[rel] = None  # a tracked file became a folder
                for name in os.listdir(full):
                    if name == b".git":
                        continue
                    child = rel + b"/" + name if rel else name
                    if odd_name(_decode(name)):
                        report_odd_name(_decode(child))  # left on disk, never committed
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
                raise ValueError(f"not a regular file or symlink: {_decode(rel)!r}")
            tracked = self._tracked(head_tree, rel)
            if tracked is None and ignored(rel):
                continue
            if stat.S_ISLNK(st.st_mode):
                data = os.readlink(full)
                mode = stat.S_IFLNK
            else:
                with open(full, "rb") as fh:
                    data = fh.read()
                mode = cleanup_mode(st.st_mode)
            blob = Blob.from_string(data)
            if tracked is None or tracked[1] != blob.id:
                self._repo.object_store.add_object(blob)
            changes[rel] = _Leaf(mode, blob.id, st)
        return changes

    def _tree_files(self, tree_id: ObjectID, prefix: bytes) -> Iterable[bytes]:
        tree = self._repo.object_store[tree_id]
        assert isinstance(tree, Tree)
        for item in tree.iteritems():
            child = prefix + b"/" + item.path if prefix else item.path
            if stat.S_ISDIR(item.mode):
                yield from self._tree_files(item.sha, child)
            else:
                yield child

    def _build_tree(
        self, tree_id: ObjectID | None, items: list[tuple[list[bytes], _Leaf | None]]
    ) -> ObjectID | None:
        store = self._repo.object_store
        if tree_id is not None:
            old = store[tree_id]
            assert isinstance(old, Tree)
            tree = old.copy()
            assert isinstance(tree, Tree)
        else:
            tree = Tree()
        direct: dict[bytes, _Leaf | None] = {}
        nested: dict[bytes, list[tuple[list[bytes], _Leaf | None]]] = {}
        for parts, leaf in items:
            if len(parts) == 1:
                direct[parts[0]] = leaf
            else:
                nested.setdefault(parts[0], []).append((parts[1:], leaf))
        changed = False
        for name, leaf in direct.items():
            if name in nested and leaf is None:
                continue  # handled below: the folder's own changes decide
            current = tree[name] if name in tree else None
            if leaf is None:
                if current is not None:
                    del tree[name]
                    changed = True
            elif current != (leaf.mode, leaf.sha):
                tree[name] = (leaf.mode, leaf.sha)
                changed = True
        for name, sub in nested.items():
            if direct.get(name) is not None:
                continue  # a file and a folder of the same name: the file is on disk
            current = tree[name] if name in tree else None
            sub_id = current[1] if current is not None and stat.S_ISDIR(current[0]) else None
            new_id = self._build_tree(sub_id, sub)
            if new_id is None:
                if current is not None:
                    del tree[name]
                    changed = True
            elif current != (stat.S_IFDIR, new_id):
                tree[name] = (stat.S_IFDIR, new_id)
                changed = True
        if not changed and tree_id is not None:
            return tree_id
        if not tree.items():
            return None
        store.add_object(tree)
        return tree.id

    def _acquire_index_lock(self) -> Any:
        deadline = time.monotonic() + self.lock_wait_seconds
        while True:
            try:
                return GitFile(self._index_path, "wb")
            except FileLocked:
                if time.monotonic() >= deadline:
                    log.warning(
                        "git repository busy for %.1f s; answering busy", self.lock_wait_seconds
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
    ) -> str | None:
        self._check_operations()
        ident = author_identity(author_name, author_email)
        t = time.time() if when is None else float(when)
        tz = _tz_offset(t)
        body = _clean_message(message)
        # The files are read only once the index lock is ours: another git (a checkout
        # rewriting a thousand files) holds that lock while it writes, and files read
        # before it finished would be committed half old, half new on top of its HEAD.
        lockfile = self._acquire_index_lock()
        self._record_owner(lockfile)
        try:
            changes = self._collect(self._resolve(p) for p in paths)
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
                new_tree = self._build_tree(base, items)
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
            _unlink(self._owner_path)
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
        while True:
            try:
                if old is None:
                    return refs.add_if_new(
                        HEADREF, new, committer=ident, timestamp=when, timezone=tz, message=reflog
                    )
                return refs.set_if_equals(
                    HEADREF, old, new, committer=ident, timestamp=when, timezone=tz, message=reflog
                )
            except FileLocked:
                if time.monotonic() >= deadline:
                    log.warning(
                        "git branch busy for %.1f s; answering busy", self.lock_wait_seconds
                    )
                    raise GitBusy(self.busy_retry_after_seconds) from None
                time.sleep(_POLL_SECONDS)

    def _load_index(self) -> None:
        """Read the index (or reuse the cached copy) while holding its lock."""
        try:
            self._index.load(self._index_path)
        except GitError:
            raise
        except Exception as exc:
            self._index.key = None
            raise GitError(f"cannot read the git index ({type(exc).__name__})") from exc

    def _update_index(self, lockfile: Any, changes: _Changes) -> None:
        """Rewrite the index entries of ``changes`` while holding the index lock."""
        cache = self._index
        dirty = False
        for path, leaf in changes.items():
            if leaf is None:
                dirty |= cache.remove(path)
                continue
            flags, ext = unchanged_entry_flags(cache.entries, path, leaf.sha, leaf.mode)
            entry = index_entry_from_stat(leaf.st, leaf.sha, leaf.mode, flags, ext)
            if cache.entries.get(path) != entry:
                cache.remove(path)  # also entries below it, if it was a folder
                parts = path.split(b"/")
                for i in range(1, len(parts)):  # a parent that was a file
                    parent = b"/".join(parts[:i])
                    if parent in cache.entries:
                        cache.remove(parent)
                cache.set(path, entry)
                dirty = True
        if not dirty:
            lockfile.abort()
            return
        try:
            cache.write(lockfile)  # closes the lock file: renamed over the index
        except BaseException:
            cache.key = None
            raise
        cache.key = _stat_key(self._index_path)

    def _commit_tree_root(self, author: tuple[str, str], message: str) -> None:
        """First commit of a new wiki: the .gitignore and whatever is already there, but
        never a symbolic link or a file with more than one hard link (its other name may
        be a personal page, which git history would then serve: as_of recall reads it)."""
        with self._lock:
            changes = self._collect([b""])
            names = sorted(n for n in (_decode(p) for p in changes) if is_plain(self.wiki_dir, n))
            if not names:
                return
            self._commit(names, author[0], author[1], message, None)


def _unlink(path: str) -> bool:
    try:
        os.unlink(path)
        return True
    except OSError:
        return False


def _owner_alive(pid: int, token: str) -> bool:
    """True when the process that wrote a lock-owner sidecar may still run."""
    if pid == os.getpid():
        return token == _PROCESS_TOKEN  # else: an earlier process that had our pid
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by another user
    return True


def _split_ident(ident: bytes) -> tuple[str, str]:
    text = ident.decode("utf-8", "replace")
    if "<" in text and text.endswith(">"):
        name, email = text[:-1].rsplit("<", 1)
        return name.strip(), email.strip()
    return text.strip(), ""


def _encoding(c: Commit) -> str:
    enc = c.encoding.decode("ascii", "replace") if c.encoding else "utf-8"
    try:
        "".encode(enc)
    except LookupError:
        return "utf-8"
    return enc
