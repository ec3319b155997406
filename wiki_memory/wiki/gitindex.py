"""Keeping git's index file (``.git/index``) in step with the commits the store makes
(docs/git.md, "The index, fast").

:class:`IndexCache` keeps the parsed index in memory with every entry already
serialized, so a commit rewrites a 10k-entry index in about a millisecond;
:func:`load_index` reads it (or keeps the cached copy) while the caller holds
``index.lock``, and :func:`update_index` rewrites the entries of the committed paths with
their stat data and blob ids and writes the index into the held lock file (git's own
protocol: the lock file is renamed over the index). :class:`Leaf` and :data:`Changes`
are what a commit hands over: one stored file, or None for a path removed.
"""

from __future__ import annotations

import bisect
import io
import os
import struct
from dataclasses import dataclass
from typing import Any

from dulwich.index import (
    ConflictedIndexEntry,
    Index,
    IndexChecksumWriter,
    IndexEntry,
    IndexExtension,
    Stage,
    index_entry_from_stat,
    unchanged_entry_flags,
    write_cache_entry,
    write_index_dict,
)
from dulwich.objects import ObjectID

from wiki_memory.wiki.gitcommon import GitError

# Index extensions we keep when rewriting the index. The cache-tree (TREE) and the
# untracked cache (UNTR) describe the entries we change, so they would go stale; git
# rebuilds both when it needs them. EOIE/IEOT hold offsets into the old file.
_KEEP_EXTENSIONS = frozenset({b"REUC"})


@dataclass
class Leaf:
    """One file a commit stores: its git mode, blob id, and the stat taken before it
    was read (what its index entry records)."""

    mode: int
    sha: ObjectID
    st: os.stat_result


# One change per path: a file to store, or None to remove the path (file or subtree).
Changes = dict[bytes, Leaf | None]


class IndexCache:
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
        st = stat_key(path)
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


def stat_key(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


# --------------------------------------------------------------------------- the store


def load_index(cache: IndexCache, index_path: str) -> None:
    """Read the index (or reuse the cached copy) while holding its lock."""
    try:
        cache.load(index_path)
    except GitError:
        raise
    except Exception as exc:
        cache.key = None
        raise GitError(f"cannot read the git index ({type(exc).__name__})") from exc


def update_index(cache: IndexCache, lockfile: Any, changes: Changes, index_path: str) -> None:
    """Rewrite the index entries of ``changes`` while holding the index lock
    (``lockfile``): written into it and renamed over the index, or aborted when no
    entry changed."""
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
    cache.key = stat_key(index_path)
