"""Backup and restore of a whole data directory in one file (docs/operations.md,
"Backup and restore", which also describes the format).

A backup is a tar stream (POSIX ustar/pax, written with :mod:`tarfile` in streaming mode)
holding ``wiki.bundle`` (a git bundle of every ref, :mod:`wiki_memory.wiki.bundle`),
the spool (``spool/``: accepted observations not yet compiled, with their state and the
dedup log), the tokens (``auth/``), the settings (``config.toml``), the audit log
(``logs/audit.jsonl``) and last ``manifest.json`` (format version, time, refs, ``HEAD``
and the sha256 and size of every other member). The index is not in it: it is rebuilt
from the files.

With a passphrase the tar stream is encrypted as it is written (:class:`_Sealer`):
``MAGIC``, one JSON header line (scrypt parameters and salt, the cipher, the chunk size,
a 4-byte nonce prefix), then records of a 4-byte big-endian length and one AES-256-GCM
ciphertext of at most ``CHUNK`` bytes of the stream; nonce = prefix + 8-byte record
number; the associated data is the header line, the record number and a final flag, so
records cannot be reordered, dropped or cut off unnoticed. The key is scrypt(passphrase,
salt, n=2^15, r=8, p=1, 32 bytes) (RFC 7914; 32 MiB of memory per guess). The
primitives come from the ``cryptography`` package. The header is not authenticated until
the first record opens, so its bounds (:data:`SCRYPT_MAX`, lengths) are checked before
any key derivation.

Nothing is held whole in memory: the bundle is streamed into a temporary file beside the
backup (its pack copied from the repository's pack files with ordinary reads, no memory
map, :mod:`wiki_memory.wiki.bundle`), every member is copied through in blocks. Restore
reads the stream twice: once to find the manifest (the last member), once to take the
members it lists and the border accepts (:func:`restore`), into a sibling folder renamed
into place at the end.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import os
import shutil
import stat
import struct
import sys
import tarfile
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO

from dulwich.errors import ChecksumMismatch

from wiki_memory.config import Settings
from wiki_memory.wiki.border import Entry, Limits, Refusal, Source, check
from wiki_memory.wiki.bundle import BundleRefused, read_bundle_into, write_bundle
from wiki_memory.wiki.inside import Outside, stream_inside

__all__ = [
    "CONNECTION_SETTINGS",
    "MAGIC",
    "PAUSE_ENV",
    "SCRYPT_MAX",
    "BackupError",
    "Restored",
    "WrongPassphrase",
    "backup",
    "restore",
    "verify",
]

MAGIC = b"WIKI-MEMORY-BACKUP-ENCRYPTED-1\n"
CHUNK = 1 << 20
FORMAT = 1
SCRYPT = {"n": 1 << 15, "r": 8, "p": 1}
#: the most an encrypted backup's header may ask for, checked before any key derivation:
#: scrypt takes 128 * r * n bytes (2^17 and 8: 128 MiB; a backup writes 2^15: 32 MiB)
SCRYPT_MAX = {"n": 1 << 17, "r": 8, "p": 1}
#: an encrypted backup's header line, at most
HEADER_MAX = 4096
#: a manifest, at most (about 150 bytes a member)
MANIFEST_MAX = 64 << 20
#: the members of one backup, at most (the first read notes each name)
MEMBERS_MAX = 200_000
#: room kept free on the disk besides what a restore writes
SPACE_MARGIN = 64 << 20
#: the settings a restore names when its config.toml sets them: who may connect, and how
CONNECTION_SETTINGS = (
    "host",
    "port",
    "auth",
    "allowed_hosts",
    "mcp_allowed_hosts",
    "insecure_http",
    "web_local_owner",
    "trusted_proxies",
    "tls_cert",
    "tls_key",
)
#: a test's kill point: restore stops (sleeps) at the step this names (docs/operations.md)
PAUSE_ENV = "WIKI_MEMORY_RESTORE_PAUSE_AT"
_BLOCK = 1 << 20
_SHOWN = 20


class BackupError(Exception):
    """A backup that cannot be written, read or restored (the message says why)."""


#: the shortest passphrase a new encrypted backup takes (characters); restore takes any
MIN_PASSPHRASE = 12


class WrongPassphrase(BackupError):
    """The passphrase does not open the backup (or the file was changed)."""


def _key(passphrase: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

    return Scrypt(salt=salt, length=32, n=n, r=r, p=p).derive(passphrase.encode("utf-8"))


class _Sealer(io.RawIOBase):
    """A write-only stream that encrypts what is written, record by record, into ``out``."""

    def __init__(self, out: BinaryIO, passphrase: str) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        salt, self.prefix = os.urandom(16), os.urandom(4)
        header = {
            "kdf": "scrypt",
            **SCRYPT,
            "salt": base64.b64encode(salt).decode(),
            "cipher": "AES-256-GCM",
            "chunk": CHUNK,
            "nonce_prefix": base64.b64encode(self.prefix).decode(),
        }
        self.header = json.dumps(header, sort_keys=True).encode() + b"\n"
        self.aead = AESGCM(_key(passphrase, salt, **SCRYPT))
        self.out = out
        self.buf = bytearray()
        self.n = 0
        out.write(MAGIC + self.header)

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.buf += bytes(data)
        while len(self.buf) > CHUNK:
            self._record(bytes(self.buf[:CHUNK]), False)
            del self.buf[:CHUNK]
        return len(data)

    def _record(self, plain: bytes, final: bool) -> None:
        nonce = self.prefix + struct.pack(">Q", self.n)
        aad = self.header + struct.pack(">QB", self.n, final)
        sealed = self.aead.encrypt(nonce, plain, aad)
        self.out.write(struct.pack(">I", len(sealed)) + sealed)
        self.n += 1

    def close(self) -> None:
        if not self.closed:
            self._record(bytes(self.buf), True)
            self.buf.clear()
        super().close()


class _Opener(io.RawIOBase):
    """A read-only stream of the plain bytes of an encrypted backup, from its first record
    on (``src`` positioned there); ``key``, ``prefix`` and ``header`` from
    :class:`_Backup`."""

    def __init__(self, src: BinaryIO, key: bytes, prefix: bytes, header: bytes) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self.aead = AESGCM(key)
        self.prefix, self.header = prefix, header
        self.src = src
        self.n = 0
        self.buf = b""
        self.done = False

    def readable(self) -> bool:
        return True

    def _next(self) -> None:
        from cryptography.exceptions import InvalidTag

        raw = self.src.read(4)
        if len(raw) < 4:
            raise BackupError("the backup is cut short")
        (size,) = struct.unpack(">I", raw)
        if size > CHUNK + 16:  # a record is at most one chunk and its 16-byte tag
            raise BackupError(f"the backup is damaged (record {self.n} is too long)")
        sealed = self.src.read(size)
        nonce = self.prefix + struct.pack(">Q", self.n)
        for final in (False, True):
            try:
                aad = self.header + struct.pack(">QB", self.n, final)
                self.buf += self.aead.decrypt(nonce, sealed, aad)
            except InvalidTag:
                continue
            self.n += 1
            self.done = final
            return
        if self.n == 0:
            raise WrongPassphrase("wrong passphrase (or not this backup)")
        raise BackupError(f"the backup is damaged (record {self.n})")

    def readinto(self, b: Any) -> int:
        while not self.buf and not self.done:
            self._next()
        k = min(len(b), len(self.buf))
        b[:k] = self.buf[:k]
        self.buf = self.buf[k:]
        return k


def _int(h: dict[str, Any], key: str) -> int:
    value = h[key]
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{key} is not a number")
    return value


def _header(line: bytes) -> tuple[bytes, bytes, int, int, int]:
    """``(salt, nonce prefix, n, r, p)`` of an encrypted backup's header line, every bound
    checked before any work: the line at most 4 KiB, scrypt's ``n`` a power of two up to
    ``SCRYPT_MAX["n"]``, ``r`` and ``p`` up to theirs, a salt of 16-64 bytes, a nonce
    prefix of 4. Raises BackupError naming what is wrong."""
    if len(line) > HEADER_MAX or not line.endswith(b"\n"):
        raise BackupError("not a readable backup header: over 4 KiB or cut short")
    try:
        h = json.loads(line)
        if not isinstance(h, dict):
            raise TypeError("not an object")
        if h.get("kdf") != "scrypt" or h.get("cipher") != "AES-256-GCM":
            raise ValueError("an unknown key derivation or cipher")
        if _int(h, "chunk") != CHUNK:
            raise ValueError("an unknown record size")
        n, r, p = _int(h, "n"), _int(h, "r"), _int(h, "p")
        salt = base64.b64decode(h["salt"], validate=True)
        prefix = base64.b64decode(h["nonce_prefix"], validate=True)
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise BackupError(f"not a readable backup header: {exc}") from None
    if not (2 <= n <= SCRYPT_MAX["n"] and n & (n - 1) == 0) or not (
        1 <= r <= SCRYPT_MAX["r"] and 1 <= p <= SCRYPT_MAX["p"]
    ):
        raise BackupError(
            f"the backup asks for scrypt n={n}, r={r}, p={p}: over the bounds this program "
            "reads (n a power of two up to 2^17, r up to 8, p 1)"
        )
    if not 16 <= len(salt) <= 64 or len(prefix) != 4:
        raise BackupError("not a readable backup header: a salt or nonce of the wrong length")
    return salt, prefix, n, r, p


class _Backup:
    """A backup file opened for reading, as many times as needed: the passphrase's key is
    derived once (after :func:`_header` checked its bounds)."""

    def __init__(self, path: Path, passphrase: str | None) -> None:
        self.path = path
        self.key: bytes | None = None
        self.prefix = self.header = b""
        self.body = 0
        with open(path, "rb") as f:
            if f.read(len(MAGIC)) != MAGIC:
                return
            if not passphrase:
                raise WrongPassphrase("this backup is encrypted: a passphrase is needed")
            self.header = f.readline(HEADER_MAX + 1)
            salt, self.prefix, n, r, p = _header(self.header)
            self.body = f.tell()
        self.key = _key(passphrase, salt, n, r, p)

    @contextlib.contextmanager
    def stream(self) -> Iterator[BinaryIO]:
        """The plain tar stream, from its start."""
        with open(self.path, "rb") as f:
            if self.key is None:
                yield f
                return
            f.seek(self.body)
            yield io.BufferedReader(_Opener(f, self.key, self.prefix, self.header), _BLOCK)


#: what a backup holds besides the bundle: (path in the data directory, recursive)
def _members(settings: Settings) -> Iterator[tuple[str, Path]]:
    data = settings.data_dir
    for sub in ("spool", "auth"):
        root = data / sub
        if root.is_dir():
            for f in sorted(root.rglob("*")):
                if f.is_file() and not f.is_symlink() and not f.name.endswith(".lock"):
                    yield f.relative_to(data).as_posix(), f
    for rel in ("config.toml", "logs/audit.jsonl"):
        f = data / rel
        if f.is_file() and not f.is_symlink():
            yield rel, f


def _add(tar: tarfile.TarFile, name: str, f: IO[bytes], size: int, sums: dict[str, Any]) -> None:
    """Add ``size`` bytes of ``f`` as ``name``, recording their sha256."""
    digest = hashlib.sha256()

    class _Tee(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, b: Any) -> int:
            data = f.read(len(b))
            digest.update(data)
            b[: len(data)] = data
            return len(data)

    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o600, int(time.time())
    tar.addfile(info, io.BufferedReader(_Tee(), _BLOCK))
    sums[name] = {"sha256": digest.hexdigest(), "size": size}


def backup(settings: Settings, target: Path, passphrase: str | None = None) -> dict[str, Any]:
    """Write a backup of the data directory of ``settings`` to ``target`` (created with
    mode 0600, replaced only once complete and verified) and return its manifest.
    Raises BackupError (a passphrase under :data:`MIN_PASSPHRASE` characters, the wiki
    has no git repository or a damaged one, the file cannot be written)."""
    wiki = settings.wiki_dir
    if passphrase is not None and len(passphrase) < MIN_PASSPHRASE:
        raise BackupError(f"a passphrase needs at least {MIN_PASSPHRASE} characters")
    if not (wiki / ".git").exists():
        raise BackupError(f"{wiki} is not a git repository")
    target = Path(target)
    fd, tmp_name = tempfile.mkstemp(prefix=".backup-", dir=target.parent)
    tmp = Path(tmp_name)
    bundle_tmp = target.parent / (tmp.name + ".bundle")
    try:
        os.fchmod(fd, 0o600)
        bfd = os.open(bundle_tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(bfd, "wb") as bf:
            try:
                refs = write_bundle(wiki, bf)
            except (ValueError, KeyError) as exc:  # a missing or damaged object
                raise BackupError(f"the wiki's repository cannot be read whole: {exc}") from None
        sums: dict[str, Any] = {}
        with os.fdopen(fd, "wb") as raw:
            fd = -1
            sink: Any = _Sealer(raw, passphrase) if passphrase else raw
            with tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                with open(bundle_tmp, "rb") as bf:
                    _add(tar, "wiki.bundle", bf, bundle_tmp.stat().st_size, sums)
                for rel, f in _members(settings):
                    with open(f, "rb") as src:
                        _add(tar, rel, src, os.fstat(src.fileno()).st_size, sums)
                manifest = {
                    "format": FORMAT,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "refs": refs,
                    "files": sums,
                }
                body = json.dumps(manifest, indent=1, sort_keys=True).encode()
                _add(tar, "manifest.json", io.BytesIO(body), len(body), {})
            if passphrase:
                sink.close()
            raw.flush()
            os.fsync(raw.fileno())
        verify(tmp, passphrase)
        os.replace(tmp, target)
        return manifest
    finally:
        if fd >= 0:
            os.close(fd)
        for p in (tmp, bundle_tmp):
            try:
                p.unlink()
            except FileNotFoundError:
                pass


@dataclass(frozen=True)
class _Listed:
    """One member as the manifest records it."""

    sha256: str
    size: int


@dataclass
class _Scan:
    """What the first read of a backup found: the manifest (checked for shape), its
    members as listed, each tar member's mode (as ``st_mode``) by name, and the names of
    members the manifest does not list (at most ``_SHOWN``) with their count."""

    manifest: dict[str, Any]
    listed: dict[str, _Listed]
    modes: dict[str, int]
    digest: str
    unlisted: list[str]
    unlisted_count: int


def _st_mode(info: tarfile.TarInfo) -> int:
    """A tar member's type and permission bits as ``st_mode`` (0 for a hard link)."""
    kinds = (
        (info.isfile(), stat.S_IFREG),
        (info.issym(), stat.S_IFLNK),
        (info.isdir(), stat.S_IFDIR),
        (info.ischr(), stat.S_IFCHR),
        (info.isblk(), stat.S_IFBLK),
        (info.isfifo(), stat.S_IFIFO),
    )
    for yes, kind in kinds:
        if yes:
            return kind | (info.mode & 0o7777)
    return 0


def _members_of(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    """The members of a tar stream, one at a time, none kept (tarfile keeps a list)."""
    while (info := tar.next()) is not None:
        tar.members.clear()  # type: ignore[attr-defined]  # a list tarfile keeps
        yield info


def _listing(manifest: Any) -> dict[str, _Listed]:
    """The manifest's ``files``, every value checked for shape. Raises BackupError."""
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupError("the backup's manifest is not of format 1")
    files, refs = manifest.get("files"), manifest.get("refs")
    if not isinstance(files, dict) or not isinstance(refs, dict):
        raise BackupError("the backup's manifest has no list of files or refs")
    if not isinstance(refs.get("HEAD"), str):
        raise BackupError("the backup's manifest names no HEAD")
    out: dict[str, _Listed] = {}
    for name, rec in files.items():
        sha = rec.get("sha256") if isinstance(rec, dict) else None
        size = rec.get("size") if isinstance(rec, dict) else None
        if (
            not isinstance(sha, str)
            or len(sha) != 64
            or any(c not in "0123456789abcdef" for c in sha)
            or not isinstance(size, int)
            or isinstance(size, bool)
            or size < 0
        ):
            raise BackupError(f"the manifest's record of {name!r} is not a hash and a size")
        out[name] = _Listed(sha, size)
    if "wiki.bundle" not in out:
        raise BackupError("the backup's manifest lists no wiki.bundle")
    return out


def _scan(src: _Backup) -> _Scan:
    """First read: find the manifest (the last member), note every member's mode and size,
    and check that each listed member is in the stream once with its recorded size.
    Nothing is written and no member's bytes are kept. Raises BackupError, WrongPassphrase."""
    manifest_raw: bytes | None = None
    seen: dict[str, tuple[int, int, int]] = {}  # name -> (st_mode, size, times seen)
    try:
        with src.stream() as stream, tarfile.open(fileobj=stream, mode="r|") as tar:
            for info in _members_of(tar):
                if len(seen) >= MEMBERS_MAX:
                    raise BackupError(f"the backup holds more than {MEMBERS_MAX} members")
                mode, _size, times = seen.get(info.name, (0, 0, 0))
                seen[info.name] = (_st_mode(info), info.size, times + 1)
                if info.name == "manifest.json" and info.isfile():
                    if info.size > MANIFEST_MAX or manifest_raw is not None:
                        raise BackupError("the backup's manifest is too large or twice there")
                    member = tar.extractfile(info)
                    assert member is not None
                    manifest_raw = member.read()
    except tarfile.TarError as exc:
        raise BackupError(f"not a readable backup: {exc}") from None
    if manifest_raw is None:
        raise BackupError("the backup has no manifest (cut short?)")
    try:
        manifest = json.loads(manifest_raw)
    except (ValueError, RecursionError):
        raise BackupError("the backup's manifest is not JSON") from None
    listed = _listing(manifest)
    for name, want in listed.items():
        mode, size, times = seen.get(name, (0, -1, 0))
        if times != 1 or size != want.size:
            raise BackupError(f"{name!r} in the backup does not match its manifest")
    unlisted = sorted(n for n in seen if n not in listed and n != "manifest.json")
    return _Scan(
        manifest,
        listed,
        {name: seen[name][0] for name in listed},
        hashlib.sha256(manifest_raw).hexdigest(),
        unlisted[:_SHOWN],
        len(unlisted),
    )


def _copy(
    src: _Backup,
    scan: _Scan,
    wanted: dict[str, _Listed],
    into: Path | None,
    first: Callable[[], None] | None = None,
) -> None:
    """Second read: the members ``wanted`` (listed ones the border accepted), each read
    once, its size and sha256 checked against the manifest, written under ``into`` with
    :func:`stream_inside` (mode 0600) when given; every other member is skipped unread.
    ``first()`` runs after the first member is written. Raises BackupError."""
    done: set[str] = set()
    try:
        with src.stream() as stream, tarfile.open(fileobj=stream, mode="r|") as tar:
            for info in _members_of(tar):
                if info.name == "manifest.json" and info.isfile():
                    member = tar.extractfile(info)
                    assert member is not None
                    if hashlib.sha256(member.read(MANIFEST_MAX + 1)).hexdigest() != scan.digest:
                        raise BackupError("the backup changed while it was read")
                    continue
                want = wanted.get(info.name)
                if want is None or not info.isfile():
                    continue  # not listed, or refused: never read, never written
                if info.name in done or info.size != want.size:
                    raise BackupError(f"{info.name!r} in the backup does not match its manifest")
                member = tar.extractfile(info)
                assert member is not None
                digest = hashlib.sha256()

                def blocks(member: IO[bytes] = member, digest: Any = digest) -> Iterator[bytes]:
                    while block := member.read(_BLOCK):
                        digest.update(block)
                        yield block

                if into is None:
                    for _block in blocks():
                        pass
                else:
                    try:
                        stream_inside(into, info.name, blocks(), perm=0o600)
                    except (Outside, IsADirectoryError, NotADirectoryError, FileExistsError):
                        # listed twice in effect: a file and a folder of that name
                        raise BackupError(f"{info.name!r} clashes with another member") from None
                if digest.hexdigest() != want.sha256:
                    raise BackupError(f"{info.name!r} in the backup does not match its manifest")
                done.add(info.name)
                if len(done) == 1 and first is not None:
                    first()
    except tarfile.TarError as exc:
        raise BackupError(f"not a readable backup: {exc}") from None
    missing = sorted(set(wanted) - done)
    if missing:
        raise BackupError(f"{missing[0]!r} in the backup does not match its manifest")


def verify(path: Path, passphrase: str | None = None) -> dict[str, Any]:
    """Read the whole backup and check every member's size and sha256 against the
    manifest. Returns the manifest; raises WrongPassphrase or BackupError."""
    src = _Backup(Path(path), passphrase)
    scan = _scan(src)
    _copy(src, scan, scan.listed, None)
    return scan.manifest


@dataclass
class Restored:
    """What :func:`restore` did: the backup's ``manifest``; the listed members the border
    ``refused`` (not written); the members the manifest does not list (``unlisted``, the
    first 20 names, and their count; never read); the ``connection`` settings of the
    restored ``config.toml`` (name -> value, only those it sets, see
    :data:`CONNECTION_SETTINGS`); ``warnings`` (a ``config.toml`` that is not valid TOML)."""

    manifest: dict[str, Any]
    refused: list[Refusal]
    unlisted: list[str]
    unlisted_count: int
    connection: dict[str, Any]
    warnings: list[str]


def _pause(step: str) -> None:
    """Stop at the restore step named by ``$WIKI_MEMORY_RESTORE_PAUSE_AT`` (a test's kill
    point): one line on standard error, then sleep."""
    if os.environ.get(PAUSE_ENV) == step:
        sys.stderr.write(f"restore paused at {step}\n")
        sys.stderr.flush()
        time.sleep(3600)


def _connection(config: Path) -> tuple[dict[str, Any], list[str]]:
    try:
        raw = config.read_bytes()
    except FileNotFoundError:
        return {}, []
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return {}, [
            f"the restored config.toml is not valid TOML ({exc}): the server says so at start"
        ]
    return {k: doc[k] for k in CONNECTION_SETTINGS if k in doc}, []


def _shown(refused: list[Refusal]) -> str:
    text = ", ".join(f"{r.path!r} ({r.reason})" for r in refused[:_SHOWN])
    return text + (f" and {len(refused) - _SHOWN} more" if len(refused) > _SHOWN else "")


def restore(settings: Settings, path: Path, passphrase: str | None = None) -> Restored:
    """Restore the backup ``path`` into the data directory of ``settings``, which must be
    absent or an empty folder (BackupError otherwise): the wiki's repository with the same
    commit ids and a checked-out working tree, the spool, the tokens, the settings and the
    audit log. The index is built by the next start.

    Only what the manifest lists is taken, each member passing the border
    (:func:`wiki_memory.wiki.border.check`, ``Source.OWN``, ``data_dir=True``) and its
    recorded size and sha256; the wiki comes from ``wiki.bundle`` alone, with a git
    configuration of restore's own. Everything is written into a sibling folder
    (``<data dir>.restoring-<random>``) that is renamed into place at the end, so a
    failure, or a kill, leaves the data directory as it was (a killed restore leaves that
    sibling folder behind). Raises WrongPassphrase or BackupError (nothing placed)."""
    data = Path(os.path.abspath(settings.data_dir))
    if settings.wiki_path is not None and Path(os.path.abspath(settings.wiki_path)) != (
        data / "wiki"
    ):
        raise BackupError("restore puts the wiki in <data dir>/wiki: unset wiki_path")
    if data.is_symlink() or (data.exists() and (not data.is_dir() or any(data.iterdir()))):
        raise BackupError(f"{data} is not empty: restore goes into an empty data directory")
    src = _Backup(Path(path), passphrase)
    scan = _scan(src)
    _pause("scanned")
    data.parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(data.parent).free
    total = sum(m.size for m in scan.listed.values())
    need = total + 2 * scan.listed["wiki.bundle"].size + SPACE_MARGIN
    if need > free:
        raise BackupError(f"not enough space: restoring needs about {need} bytes, {free} are free")
    limits = Limits(max_entry_bytes=free, max_total_bytes=free)
    verdict = check(
        (Entry(name, scan.modes[name], m.size, m.sha256) for name, m in scan.listed.items()),
        Source.OWN,
        limits=limits,
        data_dir=True,
    )
    wanted = {e.path: scan.listed[e.path] for e in verdict.accepted}
    if "wiki.bundle" not in wanted:
        raise BackupError(f"the backup's wiki is refused: {_shown(verdict.refused)}")
    staging = Path(tempfile.mkdtemp(prefix=f"{data.name}.restoring-", dir=data.parent))
    try:
        _pause("staging")
        top = os.open(staging, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            for folder in sorted({n.split("/")[0] for n in wanted if "/" in n}):
                os.mkdir(folder, 0o700, dir_fd=top)  # owner-only: tokens, spool, logs
        finally:
            os.close(top)
        _copy(src, scan, wanted, staging, lambda: _pause("member"))
        _pause("members")
        bundle = staging / "wiki.bundle"
        try:
            read_bundle_into(
                bundle, staging / "wiki", scan.manifest["refs"]["HEAD"], limits=limits, step=_pause
            )
        except BundleRefused as exc:
            raise BackupError(f"{exc}: {_shown(exc.refused)}; nothing restored") from None
        except (ValueError, KeyError, ChecksumMismatch) as exc:
            raise BackupError(f"the backup's wiki cannot be read: {exc}") from None
        bundle.unlink()
        _pause("checked-out")
        connection, warnings = _connection(staging / "config.toml")
        _fsync_dir(staging)
        _pause("before-rename")
        try:
            os.rename(staging, data)  # absent, or an empty folder: replaced at once
        except OSError as exc:
            raise BackupError(f"cannot put the restored data directory at {data}: {exc}") from None
        _fsync_dir(data.parent)
        _pause("renamed")
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone already when it was renamed
    return Restored(
        scan.manifest, verdict.refused, scan.unlisted, scan.unlisted_count, connection, warnings
    )


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
