"""Backup and restore of a whole data directory in one file (docs/operations.md,
"Backup and restore", which also describes the format).

A backup is a tar stream (POSIX ustar/pax, written with :mod:`tarfile` in streaming mode)
holding ``wiki.bundle`` (a git bundle of every ref, :mod:`wiki_memory.wiki.bundle`),
the spool (``spool/``: accepted observations not yet compiled, with their state and the
dedup log), the tokens (``auth/``), the settings (``config.toml``), the audit log
(``logs/audit.jsonl``) and last ``manifest.json`` (format version, time, refs, ``HEAD``
and the sha256 and size of every other member). The index is not in it: it is rebuilt
from the files.

With a passphrase the tar stream is encrypted as it is written; the encrypted form (its
header, records and scrypt bounds) and the opening of a backup file for reading are
:mod:`wiki_memory.core.backup_format`.

Nothing is held whole in memory: the bundle is streamed into a temporary file beside the
backup (its pack copied from the repository's pack files with ordinary reads, no memory
map, :mod:`wiki_memory.wiki.bundle`), every member is copied through in blocks. Restore
reads the stream twice: once to find the manifest (the last member), once to take the
members it lists and the border accepts (:func:`restore`), into a sibling folder renamed
into place at the end.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import resource
import shutil
import stat
import tarfile
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from dulwich.errors import ChecksumMismatch

from wiki_memory.config import Settings
from wiki_memory.core.backup_format import (
    BLOCK,
    MIN_PASSPHRASE,
    BackupError,
    BackupFile,
    Sealer,
)
from wiki_memory.core.backup_partial import BACKUP_PAUSE_ENV, Partial, clear_stale
from wiki_memory.core.backup_times import file_times, keep_file_times
from wiki_memory.core.pausepoint import pause
from wiki_memory.wiki.border import Entry, Limits, Refusal, Source, check
from wiki_memory.wiki.bundle import BundleRefused, read_bundle_into, write_bundle
from wiki_memory.wiki.inside import Outside, stream_inside

__all__ = [
    "CONNECTION_SETTINGS",
    "PAUSE_ENV",
    "Restored",
    "backup",
    "restore",
    "verify",
]

FORMAT = 2
"""The manifest's format: 2 adds the use record (``use/``); a backup of format 1 (without
it) restores as before."""
READABLE_FORMATS = (1, 2)
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
_SHOWN = 20


#: what a backup holds besides the bundle: (path in the data directory, recursive)
def _members(settings: Settings) -> Iterator[tuple[str, Path]]:
    data = settings.data_dir
    for sub in ("spool", "auth", "use"):
        root = data / sub
        if root.is_dir():
            for f in sorted(root.rglob("*")):
                if f.is_file() and not f.is_symlink() and not f.name.endswith(".lock"):
                    yield f.relative_to(data).as_posix(), f
    for rel in ("config.toml", "logs/audit.jsonl"):
        f = data / rel
        if f.is_file() and not f.is_symlink():
            yield rel, f


def _open_members(settings: Settings) -> list[tuple[str, IO[bytes], int]]:
    """Every member file (:func:`_members`) opened now, with its size now: what the
    backup holds is the data directory at this moment, whatever a running server
    appends, compiles or removes afterwards (an event acknowledged before is in the
    spool file then, or in a commit the bundle, written later, holds). The soft limit of
    open files is raised to the hard one for that. The caller closes the files."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass
    out: list[tuple[str, IO[bytes], int]] = []
    try:
        for rel, f in _members(settings):
            try:
                fh = open(f, "rb")  # noqa: SIM115 - closed by the caller
            except FileNotFoundError:
                continue  # gone since it was listed (a session compiled and dropped)
            out.append((rel, fh, os.fstat(fh.fileno()).st_size))
    except BaseException:
        for _rel, opened, _size in out:
            opened.close()
        raise
    return out


def _add(tar: tarfile.TarFile, name: str, f: IO[bytes], size: int, sums: dict[str, Any]) -> None:
    """Add the first ``size`` bytes of ``f`` as ``name``, recording their sha256 (bytes
    appended to the file since its size was taken are not read)."""
    digest = hashlib.sha256()
    left = [size]

    class _Tee(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, b: Any) -> int:
            data = f.read(min(len(b), left[0]))
            left[0] -= len(data)
            digest.update(data)
            b[: len(data)] = data
            return len(data)

    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o600, int(time.time())
    tar.addfile(info, io.BufferedReader(_Tee(), BLOCK))
    sums[name] = {"sha256": digest.hexdigest(), "size": size}


def _step(step: str) -> None:
    pause(BACKUP_PAUSE_ENV, "backup", step)


def backup(
    settings: Settings,
    target: Path,
    passphrase: str | None = None,
    cleared: list[Path] | None = None,
) -> dict[str, Any]:
    """Write a backup of the data directory of ``settings`` to ``target`` (created with
    mode 0600, replaced only once complete and verified) and return its manifest.

    First the temporary files a stopped backup left beside ``target`` are removed
    (:func:`wiki_memory.core.backup_partial.clear_stale`; appended to ``cleared`` when
    given). A backup killed at any step leaves ``target`` as it was (or absent) and
    only such temporary files. Raises BackupError (a passphrase under
    :data:`MIN_PASSPHRASE` characters, the wiki has no git repository or a damaged one,
    the file cannot be written)."""
    wiki = settings.wiki_dir
    if passphrase is not None and len(passphrase) < MIN_PASSPHRASE:
        raise BackupError(f"a passphrase needs at least {MIN_PASSPHRASE} characters")
    if not (wiki / ".git").exists():
        raise BackupError(f"{wiki} is not a git repository")
    target = Path(target)
    _step("started")
    gone = clear_stale(target.parent)
    if cleared is not None:
        cleared.extend(gone)
    _step("cleared")
    part = Partial(target.parent)
    fd, tmp, bundle_tmp = part.fd, part.path, part.bundle
    held: list[tuple[str, IO[bytes], int]] = []
    try:
        os.fchmod(fd, 0o600)
        _step("temporary")
        held = _open_members(settings)
        _step("opened")
        bfd = os.open(bundle_tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(bfd, "wb") as bf:
            try:
                refs = write_bundle(wiki, bf)
            except (ValueError, KeyError) as exc:  # a missing or damaged object
                raise BackupError(f"the wiki's repository cannot be read whole: {exc}") from None
        _step("bundle")
        sums: dict[str, Any] = {}
        with os.fdopen(fd, "wb") as raw:
            fd = -1
            sink: Any = Sealer(raw, passphrase) if passphrase else raw
            with tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                with open(bundle_tmp, "rb") as bf:
                    _add(tar, "wiki.bundle", bf, bundle_tmp.stat().st_size, sums)
                _step("member")
                for rel, src, size in held:
                    _add(tar, rel, src, size, sums)
                _step("members")
                manifest = {
                    "format": FORMAT,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "refs": refs,
                    "files": sums,
                    "mtimes": file_times(wiki),
                }
                body = json.dumps(manifest, indent=1, sort_keys=True).encode()
                _add(tar, "manifest.json", io.BytesIO(body), len(body), {})
                _step("manifest")
            if passphrase:
                sink.close()
            raw.flush()
            os.fsync(raw.fileno())
        bundle_tmp.unlink()
        _step("written")
        verify(tmp, passphrase)
        _step("verified")
        os.replace(tmp, target)
        _fsync_dir(target.parent)
        _step("replaced")
        return manifest
    finally:
        if fd >= 0:
            os.close(fd)
        for _rel, src, _size in held:
            src.close()
        part.close()


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
    if not isinstance(manifest, dict) or manifest.get("format") not in READABLE_FORMATS:
        raise BackupError("the backup's manifest is not of format 1 or 2")
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


def _scan(src: BackupFile) -> _Scan:
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
    src: BackupFile,
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
                    while block := member.read(BLOCK):
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
    src = BackupFile(Path(path), passphrase)
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
    pause(PAUSE_ENV, "restore", step)


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
    src = BackupFile(Path(path), passphrase)
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
        keep_file_times(staging / "wiki", scan.manifest.get("mtimes"))
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
