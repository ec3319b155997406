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
primitives come from the ``cryptography`` package.

Nothing is held whole in memory: the bundle is streamed into a temporary file beside the
backup (its pack copied from the repository's pack files with ordinary reads, no memory
map, :mod:`wiki_memory.wiki.bundle`), every member is copied through in blocks, and
restore reads the stream once.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import struct
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO

from wiki_memory.config import Settings
from wiki_memory.wiki.bundle import read_bundle_into, write_bundle

__all__ = ["BackupError", "MAGIC", "WrongPassphrase", "backup", "restore", "verify"]

MAGIC = b"WIKI-MEMORY-BACKUP-ENCRYPTED-1\n"
CHUNK = 1 << 20
FORMAT = 1
SCRYPT = {"n": 1 << 15, "r": 8, "p": 1}
_BLOCK = 1 << 20


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
    """A read-only stream of the plain bytes of an encrypted backup."""

    def __init__(self, src: BinaryIO, passphrase: str) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self.header = src.readline(4096)
        try:
            h = json.loads(self.header)
            salt = base64.b64decode(h["salt"])
            self.prefix = base64.b64decode(h["nonce_prefix"])
            key = _key(passphrase, salt, int(h["n"]), int(h["r"]), int(h["p"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise BackupError(f"not a readable backup header: {exc}") from None
        self.aead = AESGCM(key)
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


def _open(path: Path, passphrase: str | None) -> tuple[BinaryIO, Any]:
    f = open(path, "rb")  # noqa: SIM115 - closed by the caller
    head = f.read(len(MAGIC))
    if head == MAGIC:
        if not passphrase:
            f.close()
            raise WrongPassphrase("this backup is encrypted: a passphrase is needed")
        return f, io.BufferedReader(_Opener(f, passphrase), _BLOCK)
    f.seek(0)
    return f, f


@dataclass
class _Entry:
    name: str
    sha256: str
    size: int


def _walk(path: Path, passphrase: str | None, extract: Path | None) -> dict[str, Any]:
    """Read the backup once, checking every member against the manifest; with
    ``extract``, write the members there (``wiki.bundle`` included). Returns the
    manifest."""
    f, stream = _open(path, passphrase)
    seen: dict[str, _Entry] = {}
    manifest: dict[str, Any] | None = None
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for info in tar:
                name = info.name
                if not info.isfile() or name.startswith("/") or ".." in name.split("/"):
                    raise BackupError(f"unexpected member in the backup: {name!r}")
                src = tar.extractfile(info)
                assert src is not None
                if name == "manifest.json":
                    manifest = json.loads(src.read())
                    continue
                digest = hashlib.sha256()
                out: Any = None
                if extract is not None:
                    dest = extract / name
                    dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                    out = open(dest, "wb")  # noqa: SIM115
                    os.chmod(dest, 0o600)
                try:
                    while block := src.read(_BLOCK):
                        digest.update(block)
                        if out is not None:
                            out.write(block)
                finally:
                    if out is not None:
                        out.close()
                seen[name] = _Entry(name, digest.hexdigest(), info.size)
    except tarfile.TarError as exc:
        raise BackupError(f"not a readable backup: {exc}") from None
    finally:
        f.close()
    if manifest is None or manifest.get("format") != FORMAT:
        raise BackupError("the backup has no manifest (cut short?)")
    for name, want in manifest["files"].items():
        got = seen.get(name)
        if got is None or got.sha256 != want["sha256"] or got.size != want["size"]:
            raise BackupError(f"{name} in the backup does not match its manifest")
    return manifest


def verify(path: Path, passphrase: str | None = None) -> dict[str, Any]:
    """Read the whole backup and check every member's size and sha256 against the
    manifest. Returns the manifest; raises WrongPassphrase or BackupError."""
    return _walk(Path(path), passphrase, None)


def restore(settings: Settings, path: Path, passphrase: str | None = None) -> dict[str, Any]:
    """Restore the backup ``path`` into the data directory of ``settings``, which must be
    empty or absent (BackupError otherwise): the wiki's repository with the same commit
    ids and a checked-out working tree, the spool, the tokens, the settings and the
    audit log. The index is built by the next start. Returns the manifest."""
    data = settings.data_dir
    if data.exists() and any(data.iterdir()):
        raise BackupError(f"{data} is not empty: restore goes into an empty data directory")
    data.mkdir(parents=True, exist_ok=True, mode=0o700)
    staging = Path(tempfile.mkdtemp(prefix=".restore-", dir=data))
    try:
        manifest = _walk(Path(path), passphrase, staging)
        read_bundle_into(staging / "wiki.bundle", settings.wiki_dir, manifest["refs"]["HEAD"])
        (staging / "wiki.bundle").unlink()
        for item in sorted(staging.rglob("*")):
            if item.is_file():
                dest = data / item.relative_to(staging)
                dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                os.replace(item, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest
