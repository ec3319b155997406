"""Git bundles of the wiki, written and read with dulwich, streamed.

:func:`write_bundle` writes a v2 git bundle (``gitformat-bundle(5)``: the line
``# v2 git bundle``, one ``<hex id> <ref name>`` line per ref, a blank line, then a pack
of every object the refs reach, ``gitformat-pack(5)``); ``git clone wiki.bundle`` reads
it. :func:`read_bundle_into` creates a repository from one: the objects, the refs,
``HEAD`` and a checked-out working tree and index.

Memory: neither side maps a pack file or holds one whole. dulwich reads packs through a
memory map of the whole file, and every page it touches counts as the process's
resident memory until the map is closed (a 300 MB pack read once made a backup's peak
RSS 300 MB higher). So:

- writing, dulwich only walks the commits and trees from the refs (which objects to
  send); the pack entries of those objects are then copied from the repository's pack
  files with ordinary reads, 1 MiB at a time, still compressed and with their deltas
  kept (their CRC32 checked against the pack index on the way). An ``OFS_DELTA`` entry
  (base named by its position in the source pack) is rewritten as a ``REF_DELTA`` (base
  named by its id), which is valid anywhere in the new pack. Loose objects, and the rare
  delta whose base is not sent, are written whole (zlib), one at a time;
- reading, the pack inside the bundle is read once in sequence (dulwich's
  ``PackStreamReader``, which checks its trailing checksum), then its objects are
  inflated base before delta by dulwich's ``PackInflater`` reading the file at each
  entry's offset, and stored as loose objects one by one.

What grows with the size of the repository is bookkeeping: the ids of the objects to
send, and per source pack an array of its entries' offsets (about 60 bytes an object).
"""

from __future__ import annotations

import bisect
import os
import stat
import zlib
from array import array
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import BinaryIO

from dulwich.index import Index, index_entry_from_stat
from dulwich.object_format import ObjectFormat
from dulwich.object_store import DiskObjectStore, MissingObjectFinder, iter_tree_contents
from dulwich.objects import Blob, Commit, ObjectID, RawObjectID, sha_to_hex
from dulwich.pack import (
    OFS_DELTA,
    REF_DELTA,
    PackInflater,
    PackStreamReader,
    load_pack_index,
    pack_object_chunks,
    pack_object_header,
)
from dulwich.refs import Ref, check_ref_format
from dulwich.repo import Repo

from wiki_memory.wiki.border import Entry, Limits, Refusal, Source, check
from wiki_memory.wiki.inside import write_inside

__all__ = ["BundleRefused", "read_bundle_into", "write_bundle"]

_BLOCK = 1 << 20
_SIGNATURE = b"# v2 git bundle\n"


def write_bundle(wiki_dir: Path, out: BinaryIO) -> dict[str, str]:
    """Write a bundle of every ref of the repository in ``wiki_dir`` (branches, tags,
    remote-tracking refs) to ``out``, streamed (see the module docstring). Returns
    ``{ref name: commit id hex}`` plus ``HEAD`` (the ref name HEAD points to, or its id
    when detached). Raises ValueError when an object the refs reach is missing or a pack
    entry does not match its index's CRC32 (a damaged repository)."""
    repo = Repo(str(wiki_dir))
    try:
        refs = {
            name: sha for name, sha in sorted(repo.get_refs().items()) if name.startswith(b"refs/")
        }
        out.write(_SIGNATURE)
        for name, sha in refs.items():
            out.write(sha + b" " + name + b"\n")
        try:
            head_id: bytes | None = repo.head()
        except KeyError:  # a branch with no commit yet
            head_id = None
        if head_id is not None:
            out.write(head_id + b" HEAD\n")  # so that `git clone` checks it out
        out.write(b"\n")
        store = repo.object_store
        assert isinstance(store, DiskObjectStore)
        wanted: dict[ObjectID, bool] = {
            sha: False
            for sha, _hint in MissingObjectFinder(store, haves=(), wants=set(refs.values()))
        }
        store.close()  # unmaps the packs the walk read trees and commits from
        _write_pack(store, repo.object_format, wanted, out.write)
        head = repo.refs.read_ref(Ref(b"HEAD")) or b""
        shown = {n.decode("utf-8", "replace"): s.decode() for n, s in refs.items()}
        shown["HEAD"] = head.removeprefix(b"ref: ").decode("utf-8", "replace")
        return shown
    finally:
        repo.close()


def _write_pack(
    store: DiskObjectStore,
    fmt: ObjectFormat,
    wanted: dict[ObjectID, bool],
    write: Callable[[bytes], object],
) -> None:
    """Write a version 2 pack of the objects ``wanted`` (id -> already written, all
    False on entry, all True on return) through ``write``: header, entries, trailing
    checksum (``gitformat-pack(5)``)."""
    digest = fmt.hash_func()

    def emit(data: bytes) -> None:
        digest.update(data)
        write(data)

    emit(b"PACK" + (2).to_bytes(4, "big") + len(wanted).to_bytes(4, "big"))
    pack_dir = Path(store.pack_dir)
    names = sorted(pack_dir.glob("pack-*.pack"), key=lambda p: p.stat().st_mtime, reverse=True)
    for pack_path in names:
        idx_path = pack_path.with_suffix(".idx")
        if idx_path.is_file():
            _copy_entries(pack_path, idx_path, fmt, wanted, emit)
    # loose objects (and any a pack could not give as it is), whole, one at a time
    for sha, done in wanted.items():
        if not done:
            obj = store[sha]  # KeyError: the repository lacks an object its refs reach
            for chunk in pack_object_chunks(obj.type_num, obj.as_raw_chunks(), fmt):
                emit(chunk)
            wanted[sha] = True
    write(digest.digest())


def _copy_entries(
    pack_path: Path,
    idx_path: Path,
    fmt: ObjectFormat,
    wanted: dict[ObjectID, bool],
    emit: Callable[[bytes], None],
) -> None:
    """Copy the entries of one pack file whose objects are wanted and not yet written,
    in the pack's own order, marking them written. A delta whose base is not wanted is
    left for the caller to write whole."""
    width = fmt.oid_length
    with closing(load_pack_index(idx_path, fmt)) as idx:
        count = len(idx)
        ids = bytearray(count * width)
        offsets = array("Q", bytes(8 * count))
        crcs = array("q", bytes(8 * count))
        for i, (raw, offset, crc) in enumerate(idx.iterentries()):
            ids[i * width : (i + 1) * width] = raw
            offsets[i] = offset
            crcs[i] = -1 if crc is None else crc
    order = array("L", sorted(range(count), key=offsets.__getitem__))
    starts = array("Q", (offsets[i] for i in order))
    with open(pack_path, "rb") as f:
        end_of_entries = os.fstat(f.fileno()).st_size - width
        for k, i in enumerate(order):
            sha = sha_to_hex(RawObjectID(bytes(ids[i * width : (i + 1) * width])))
            if wanted.get(sha, True):
                continue  # not sent, or already written from another pack
            start = starts[k]
            end = starts[k + 1] if k + 1 < count else end_of_entries
            f.seek(start)
            first = f.read(min(end - start, _BLOCK))
            crc = zlib.crc32(first)
            try:
                kind, size, used = _entry_header(first)
                if kind == OFS_DELTA:
                    base_offset, used = _ofs_base(first, used, start)
            except IndexError:
                raise ValueError(f"{pack_path.name}: object {sha.decode()} is damaged") from None
            if kind == OFS_DELTA:
                j = bisect.bisect_left(starts, base_offset)
                if j == len(starts) or starts[j] != base_offset:
                    raise ValueError(
                        f"{pack_path.name}: the delta base of {sha.decode()} is missing"
                    )
                b = order[j]
                base = RawObjectID(bytes(ids[b * width : (b + 1) * width]))
                if sha_to_hex(base) not in wanted:
                    continue  # written whole by the caller
                emit(bytes(pack_object_header(REF_DELTA, base, size, fmt)) + first[used:])
            elif kind == REF_DELTA:
                if sha_to_hex(RawObjectID(first[used : used + width])) not in wanted:
                    continue
                emit(first)
            else:
                emit(first)
            done = start + len(first)
            while done < end:
                block = f.read(min(end - done, _BLOCK))
                if not block:
                    raise ValueError(f"{pack_path.name} is cut short")
                crc = zlib.crc32(block, crc)
                emit(block)
                done += len(block)
            if crcs[i] >= 0 and crc != crcs[i]:
                raise ValueError(f"{pack_path.name}: object {sha.decode()} is damaged (CRC32)")
            wanted[sha] = True


def _entry_header(data: bytes) -> tuple[int, int, int]:
    """(type number, inflated size, header length) of a pack entry starting ``data``."""
    c = data[0]
    kind, size, shift, n = (c >> 4) & 7, c & 15, 4, 1
    while c & 0x80:
        c = data[n]
        size |= (c & 0x7F) << shift
        shift += 7
        n += 1
    return kind, size, n


def _ofs_base(data: bytes, n: int, start: int) -> tuple[int, int]:
    """The absolute offset of an ``OFS_DELTA``'s base (its distance is encoded after the
    header at ``data[n:]``, gitformat-pack(5)) and the position after it."""
    c = data[n]
    distance = c & 0x7F
    n += 1
    while c & 0x80:
        c = data[n]
        distance = ((distance + 1) << 7) | (c & 0x7F)
        n += 1
    return start - distance, n


class _Window:
    """The part of a file from ``start`` on, as a file of its own (read, seek, tell)."""

    def __init__(self, f: BinaryIO, start: int) -> None:
        self.f, self.start = f, start

    def read(self, n: int = -1) -> bytes:
        return self.f.read(n)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_SET:
            offset += self.start
        return self.f.seek(offset, whence) - self.start

    def tell(self) -> int:
        return self.f.tell() - self.start


def _read_header(f: BinaryIO) -> dict[bytes, bytes]:
    """The refs of a v2 bundle's header (``{ref name: hex id}``), leaving ``f`` at the
    pack. Raises ValueError for another format or a bundle with prerequisites."""
    if f.readline() != _SIGNATURE:
        raise ValueError("not a v2 git bundle")
    refs: dict[bytes, bytes] = {}
    while line := f.readline():
        if line == b"\n":
            return refs
        if line.startswith(b"-"):
            raise ValueError("the bundle is incomplete: it needs other objects")
        sha, _, name = line.rstrip(b"\n").partition(b" ")
        refs[name] = sha
    raise ValueError("the bundle's header is cut short")


class BundleRefused(ValueError):
    """A bundle whose refs or checked-out tree the border refuses: ``refused`` lists every
    :class:`~wiki_memory.wiki.border.Refusal` (paths as the tree spells them)."""

    def __init__(self, message: str, refused: list[Refusal]) -> None:
        super().__init__(message)
        self.refused = refused


def _ref_name(name: bytes) -> bool:
    return name.startswith(b"refs/") and check_ref_format(Ref(name))


def _hex_id(value: bytes, width: int) -> bool:
    return len(value) == width and all(c in b"0123456789abcdef" for c in value)


def read_bundle_into(
    bundle_path: Path,
    wiki_dir: Path,
    head: str,
    *,
    limits: Limits | None = None,
    step: Callable[[str], None] | None = None,
) -> None:
    """Create the repository ``wiki_dir`` (which must not hold one) from the bundle file:
    every object (stored loose) and ref, ``HEAD`` pointing to ``head`` (a ref name,
    or an id), the working tree and index checked out from it.

    The repository's configuration is this function's own (``git init``'s plus
    ``core.quotePath``); nothing of the bundle reaches ``.git/`` but objects and refs. Every
    entry of the tree to check out passes the border (:func:`wiki_memory.wiki.border.check`,
    ``Source.OWN``, ``limits``) before any file is written, and each file is written
    through :func:`wiki_memory.wiki.inside.write_inside`. ``step(name)`` is called after
    ``"objects"`` are stored, after the ``"refs"`` are set and after the first file of the
    ``"checkout"`` (a restore's pause points).

    Raises BundleRefused (a ValueError) for a ref name git would refuse, a ``head`` that is
    neither a ref name nor an id, or a tree with an entry the border refuses
    (each named); ValueError for a bundle that needs objects it does not hold
    (prerequisites) or that is not a v2 bundle, and dulwich's ``ChecksumMismatch`` for a
    damaged pack. On an error, what was written in ``wiki_dir`` stays: the caller writes
    into a folder of its own (a restore's sibling directory)."""
    wiki_dir.mkdir(parents=True, exist_ok=True)
    repo = Repo.init(str(wiki_dir))
    try:
        config = repo.get_config()
        config.set((b"core",), b"quotePath", False)
        config.write_to_path()
        fmt = repo.object_format
        width = fmt.hex_length
        with open(bundle_path, "rb") as f:
            refs = _read_header(f)
            bad = [
                Refusal(name.decode("utf-8", "surrogateescape"), sha.decode("ascii", "replace"),
                        "ref: not a valid ref name or id")
                for name, sha in refs.items()
                if not _hex_id(sha, width)
                or (name != b"HEAD" and not _ref_name(name))
            ]  # fmt: skip
            wanted = head.encode("utf-8", "surrogateescape")
            if head and not _ref_name(wanted) and not _hex_id(wanted, width):
                bad.append(Refusal(head, "", "ref: HEAD is neither a ref name nor an id"))
            if bad:
                raise BundleRefused("the bundle's refs are refused", bad)
            pack = _Window(f, f.tell())
            inflater = PackInflater(pack, fmt.hash_func, object_format=fmt)  # type: ignore[arg-type]
            for entry in PackStreamReader(fmt.hash_func, pack.read).read_objects():
                inflater.record(entry)  # keeps offsets and delta links, not the data
            for obj in inflater:
                repo.object_store.add_object(obj)
        if step is not None:
            step("objects")
        for name, sha in refs.items():
            if name.startswith(b"refs/"):
                repo.refs[Ref(name)] = ObjectID(sha)
        if head.startswith("refs/"):
            repo.refs.set_symbolic_ref(Ref(b"HEAD"), Ref(wanted))
        elif head:
            repo.refs[Ref(b"HEAD")] = ObjectID(wanted)
        if step is not None:
            step("refs")
        if (wanted in refs and _ref_name(wanted)) or _hex_id(wanted, width):
            commit = repo[repo.head()]
            if not isinstance(commit, Commit):
                raise BundleRefused(
                    "HEAD is not a commit", [Refusal(head, "", "ref: not a commit")]
                )
            _checkout(repo, wiki_dir, commit.tree, limits, step)
    finally:
        repo.close()


def _checkout(
    repo: Repo,
    wiki_dir: Path,
    tree_id: ObjectID,
    limits: Limits | None,
    step: Callable[[str], None] | None,
) -> None:
    """Write the tree ``tree_id`` into the empty working tree ``wiki_dir`` and its git
    index, every entry checked by the border first (BundleRefused naming each refusal)."""
    store = repo.object_store
    tree = list(iter_tree_contents(store, tree_id))

    def entries() -> Iterator[Entry]:
        for item in tree:
            assert item.path is not None and item.mode is not None and item.sha is not None
            path = item.path.decode("utf-8", "surrogateescape")
            if stat.S_ISREG(item.mode):
                _kind, raw = store.get_raw(item.sha)  # one blob at a time, for its size
                size = len(raw)
            else:
                size = 0  # a link or gitlink: refused by its mode, never read
            yield Entry(path, item.mode, size, item.sha.decode("ascii"))

    verdict = check(entries(), Source.OWN, limits=limits)
    if verdict.refused:
        raise BundleRefused(
            f"the wiki in the bundle holds {len(verdict.refused)} entries that may not be written",
            verdict.refused,
        )
    index = Index(repo.index_path(), read=False, object_format=repo.object_format)
    for n, entry in enumerate(verdict.accepted):
        blob = store[ObjectID(entry.blob.encode("ascii"))]
        assert isinstance(blob, Blob)
        write_inside(wiki_dir, entry.path, blob.as_raw_string(),
                     executable=bool(entry.mode & 0o111))  # fmt: skip
        st = os.lstat(wiki_dir / entry.path)  # a read: the file was just written inside
        index[entry.path.encode("utf-8", "surrogateescape")] = index_entry_from_stat(
            st, entry.blob.encode("ascii")
        )  # the mode as the file has it, as dulwich's own checkout does
        if n == 0 and step is not None:
            step("checkout")
    index.write()
