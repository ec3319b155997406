"""The encrypted form of a backup file (docs/operations.md, "Backup and restore"): what
:mod:`wiki_memory.core.backup` writes through when given a passphrase, and how a backup
file, encrypted or not, is opened for reading.

With a passphrase the tar stream is encrypted as it is written (:class:`Sealer`):
``MAGIC``, one JSON header line (scrypt parameters and salt, the cipher, the chunk size,
a 4-byte nonce prefix), then records of a 4-byte big-endian length and one AES-256-GCM
ciphertext of at most ``CHUNK`` bytes of the stream; nonce = prefix + 8-byte record
number; the associated data is the header line, the record number and a final flag, so
records cannot be reordered, dropped or cut off unnoticed. The key is scrypt(passphrase,
salt, n=2^15, r=8, p=1, 32 bytes) (RFC 7914; 32 MiB of memory per guess). The
primitives come from the ``cryptography`` package. The header is not authenticated until
the first record opens, so its bounds (:data:`SCRYPT_MAX`, lengths) are checked before
any key derivation (:class:`BackupFile`).
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

__all__ = [
    "BLOCK",
    "CHUNK",
    "HEADER_MAX",
    "MAGIC",
    "SCRYPT",
    "SCRYPT_MAX",
    "BackupError",
    "BackupFile",
    "Sealer",
    "WrongPassphrase",
]

MAGIC = b"WIKI-MEMORY-BACKUP-ENCRYPTED-1\n"
CHUNK = 1 << 20
SCRYPT = {"n": 1 << 15, "r": 8, "p": 1}
#: the most an encrypted backup's header may ask for, checked before any key derivation:
#: scrypt takes 128 * r * n bytes (2^17 and 8: 128 MiB; a backup writes 2^15: 32 MiB)
SCRYPT_MAX = {"n": 1 << 17, "r": 8, "p": 1}
#: an encrypted backup's header line, at most
HEADER_MAX = 4096
#: the block size a backup's members are read and written in
BLOCK = 1 << 20


class BackupError(Exception):
    """A backup that cannot be written, read or restored (the message says why)."""


#: the shortest passphrase a new encrypted backup takes (characters); restore takes any
MIN_PASSPHRASE = 12


class WrongPassphrase(BackupError):
    """The passphrase does not open the backup (or the file was changed)."""


def _key(passphrase: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

    return Scrypt(salt=salt, length=32, n=n, r=r, p=p).derive(passphrase.encode("utf-8"))


class Sealer(io.RawIOBase):
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
    :class:`BackupFile`."""

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


class BackupFile:
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
            yield io.BufferedReader(_Opener(f, self.key, self.prefix, self.header), BLOCK)
