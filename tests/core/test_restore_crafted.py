"""Restore of backups someone crafted (docs/operations.md, "Backup and restore";
docs/team-server.md, "Backups from elsewhere"): only what the manifest lists and the border
accepts is written, the wiki's git configuration and hooks are restore's own, a hostile
encrypted header is refused before any key derivation, a bundle whose tree names ``..``
fails cleanly, and the data directory is as it was after every failure and every kill."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import signal
import stat
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from dulwich import porcelain
from dulwich.objects import Blob, Commit, Tree
from dulwich.repo import Repo
from serverproc import ServerProcess
from support import REPO, files_of, refs_of

from wiki_memory.auth import TokenStore
from wiki_memory.config import load_settings
from wiki_memory.core.backup import backup, restore
from wiki_memory.core.backup_format import MAGIC, BackupError, WrongPassphrase

CONFIG = 'host = "0.0.0.0"\nallowed_hosts = "wiki.example"\ninsecure_http = true\nport = 9999\n'
ZERO_ID = b"0" * 40


def _tree(repo: Repo, entries: dict[bytes, object]) -> bytes:
    """A tree of ``{name: (mode, bytes) | {subtree}}``, names written as given."""
    tree = Tree()
    for name, value in entries.items():
        if isinstance(value, dict):
            tree.add(name, 0o040000, _tree(repo, value))
        else:
            mode, data = value  # type: ignore[misc]
            blob = Blob.from_string(data)
            repo.object_store.add_object(blob)
            tree.add(name, mode, blob.id)
    repo.object_store.add_object(tree)
    return tree.id


def make_data(root: Path, tree: dict[bytes, object] | None = None) -> Path:
    """A data directory with a one-commit wiki (``tree``), tokens, spool, settings and an
    audit log, as a server leaves it."""
    data = root / "data"
    wiki = data / "wiki"
    wiki.mkdir(parents=True)
    repo = Repo.init(str(wiki))
    try:
        tree = tree or {
            b"notes": {b"a.md": (0o100644, b"# A\n\nalpha\n")},
            b"people": {b"alice": {b"private.md": (0o100644, b"# mine\n")}},
            b"run.sh": (0o100755, b"#!/bin/sh\necho hi\n"),
        }
        c = Commit()
        c.tree = _tree(repo, tree)
        c.author = c.committer = b"alice <alice@example.org>"
        c.author_time = c.commit_time = 1_700_000_000
        c.author_timezone = c.commit_timezone = 0
        c.message = b"one\n"
        repo.object_store.add_object(c)
        repo.refs[b"refs/heads/master"] = c.id
    finally:
        repo.close()
    TokenStore(data / "auth").ensure_owner()
    (data / "spool" / "proj").mkdir(parents=True)
    (data / "spool" / "proj" / "s1.jsonl").write_text('{"event": "x"}\n')
    (data / "logs").mkdir()
    (data / "logs" / "audit.jsonl").write_text('{"op": "x"}\n')
    (data / "config.toml").write_text(CONFIG)
    return data


def make_backup(root: Path, passphrase: str | None = None, **kw: object) -> tuple[Path, Path]:
    data = make_data(root, **kw)  # type: ignore[arg-type]
    out = root / ("b.wmb.enc" if passphrase else "b.wmb")
    backup(load_settings(data), out, passphrase)
    return data, out


class _Zeros(io.RawIOBase):
    def __init__(self, n: int) -> None:
        self.left = n

    def readable(self) -> bool:
        return True

    def readinto(self, b: object) -> int:
        view = memoryview(b)  # type: ignore[arg-type]
        k = min(len(view), self.left)
        view[:k] = bytes(k)
        self.left -= k
        return k


def _info(
    name: str, size: int, mode: int = 0o600, kind: bytes = tarfile.REGTYPE
) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.type = size, mode, kind
    return info


def craft(
    src: Path,
    dst: Path,
    planted: list[tuple[tarfile.TarInfo, bytes]],
    listed: list[tuple[tarfile.TarInfo, bytes]] = (),  # type: ignore[assignment]
    big: int = 0,
    change: dict[str, bytes] | None = None,
) -> None:
    """Copy the plain backup ``src`` to ``dst`` with ``planted`` members the manifest does
    not list, ``listed`` ones added to the manifest with their true hash and size, a
    member ``big.bin`` of ``big`` zero bytes (unlisted), and members whose bytes
    ``change`` replaces (the manifest left as it was)."""
    with tarfile.open(src, "r:") as tin:
        members = [(m, tin.extractfile(m).read()) for m in tin.getmembers()]  # type: ignore[union-attr]
    manifest = json.loads(dict((m.name, d) for m, d in members)["manifest.json"])
    for info, data in listed:
        manifest["files"][info.name] = {
            "sha256": hashlib.sha256(data).hexdigest(),
            "size": len(data),
        }
    with tarfile.open(dst, "w", format=tarfile.PAX_FORMAT) as tout:
        for m, data in members:
            if m.name == "manifest.json":
                continue
            data = (change or {}).get(m.name, data)
            tout.addfile(_info(m.name, len(data)), io.BytesIO(data))
        for info, data in [*planted, *listed]:
            tout.addfile(info, io.BytesIO(data) if info.isfile() else None)
        if big:
            tout.addfile(_info("big.bin", big), io.BufferedReader(_Zeros(big), 1 << 20))
        body = json.dumps(manifest).encode()
        tout.addfile(_info("manifest.json", len(body)), io.BytesIO(body))


def every_file(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if not p.is_dir()}


def siblings(target: Path) -> list[str]:
    return sorted(p.name for p in target.parent.iterdir() if ".restoring-" in p.name)


@pytest.mark.fast
def test_a_crafted_plain_backup_restores_only_what_its_manifest_lists(tmp_path: Path) -> None:
    data, plain = make_backup(tmp_path)
    before = refs_of(data / "wiki")
    evil_config = b'[core]\n\tfsmonitor = "touch pwned"\n'
    hook = b"#!/bin/sh\ntouch pwned\n"
    planted = [
        (_info("wiki/.git/config", len(evil_config)), evil_config),
        (_info("wiki/.git/hooks/post-checkout", len(hook), 0o755), hook),
        (_info("wiki/planted.md", 5), b"# hi\n"),
        (_info("auth/extra.token", 4), b"wmo_"),
        (_info("../outside.txt", 3), b"out"),
        (_info("auth/link", 0, 0o777, tarfile.SYMTYPE), b""),
    ]
    planted[-1][0].linkname = "/etc/passwd"
    listed = [
        (_info("wiki/.git/hooks/pre-commit", len(hook), 0o755), hook),
        (_info("spool/x/../../../escape", 3), b"esc"),
        (_info("notes.md", 3), b"top"),
        (_info("auth/setuid", 3, 0o4755), b"run"),
        (_info("logs/server.log", 3), b"log"),
    ]
    crafted = tmp_path / "crafted.wmb"
    craft(plain, crafted, planted, listed, big=200 * 1024 * 1024)
    target = tmp_path / "restored"
    t0 = time.monotonic()
    done = restore(load_settings(target), crafted)
    took = time.monotonic() - t0

    assert {r.path: r.reason for r in done.refused} == {
        "wiki/.git/hooks/pre-commit": "path: .git",
        "spool/x/../../../escape": "path: '..'",
        "notes.md": "place: not a part of a backup",
        "auth/setuid": "mode: set-id or sticky bits",
        "logs/server.log": "place: not a part of a backup",
    }
    assert done.unlisted_count == 7 and "big.bin" in done.unlisted
    assert done.connection == {
        "host": "0.0.0.0",
        "port": 9999,
        "allowed_hosts": "wiki.example",
        "insecure_http": True,
    }
    outside = {f for f in every_file(target) if not f.startswith("wiki/.git/")}
    auth = {f"auth/{p.name}" for p in (data / "auth").iterdir() if not p.name.endswith(".lock")}
    assert "auth/owner.token" in auth
    assert outside == auth | {
        "spool/proj/s1.jsonl",
        "logs/audit.jsonl",
        "config.toml",
        "wiki/notes/a.md",
        "wiki/people/alice/private.md",  # the owner's own personal page comes back
        "wiki/run.sh",
    }
    git_dir = target / "wiki" / ".git"
    assert b"fsmonitor" not in (git_dir / "config").read_bytes()
    assert not [p for p in (git_dir / "hooks").rglob("*") if p.is_file()]
    assert not (tmp_path / "outside.txt").exists() and not (tmp_path / "escape").exists()
    assert (target / "wiki" / "run.sh").stat().st_mode & 0o100
    assert stat.S_IMODE((target / "auth" / "owner.token").stat().st_mode) == 0o600
    assert stat.S_IMODE((target / "auth").stat().st_mode) == 0o700
    assert refs_of(target / "wiki") == before
    st = porcelain.status(str(target / "wiki"))
    assert st.staged == {"add": [], "delete": [], "modify": []}, st.staged
    assert not st.unstaged and not st.untracked
    assert siblings(target) == []
    assert took < 30  # the 200 MB member is skipped, never written
    assert (target.parent / "restored").is_dir() and not list(tmp_path.glob("**/big.bin"))


@pytest.mark.fast
def test_a_bundle_whose_tree_names_dotdot_fails_and_leaves_the_target(tmp_path: Path) -> None:
    tree = {
        b"ok.md": (0o100644, b"fine\n"),
        b"..": {b"escaped.md": (0o100644, b"out\n")},
        b"notes": {b".GIT": {b"config": (0o100644, b"[core]\n")}},
        b"link.md": (0o120000, b"/etc/passwd"),
    }
    _data, plain = make_backup(tmp_path, tree=tree)
    target = tmp_path / "restored"
    target.mkdir()  # an empty folder: replaced only by a complete restore
    with pytest.raises(BackupError) as err:
        restore(load_settings(target), plain)
    text = str(err.value)
    assert "'../escaped.md' (path: '..')" in text
    assert "'notes/.GIT/config' (path: .git)" in text
    assert "'link.md' (mode: symbolic link)" in text
    assert "nothing restored" in text
    assert target.is_dir() and not list(target.iterdir())
    assert not (tmp_path / "escaped.md").exists()
    assert siblings(target) == []


@pytest.mark.fast
def test_a_member_that_does_not_match_its_manifest_leaves_the_target(tmp_path: Path) -> None:
    _data, plain = make_backup(tmp_path)
    crafted = tmp_path / "changed.wmb"
    craft(plain, crafted, [], change={"auth/owner.token": b"wmo_someone_elses_token_000000001\n"})
    target = tmp_path / "restored"
    with pytest.raises(BackupError, match="auth/owner.token.*does not match its manifest"):
        restore(load_settings(target), crafted)
    assert not target.exists() and siblings(target) == []
    # a folder that is not empty is refused before anything is read
    (target / "wiki").mkdir(parents=True)
    with pytest.raises(BackupError, match="is not empty"):
        restore(load_settings(target), plain)
    assert every_file(target) == set() and siblings(target) == []


def sealed_with(header: dict[str, object], tail: bytes = b"") -> bytes:
    return MAGIC + json.dumps(header).encode() + b"\n" + tail


def header(**kw: object) -> dict[str, object]:
    h: dict[str, object] = {
        "kdf": "scrypt",
        "n": 1 << 15,
        "r": 8,
        "p": 1,
        "salt": base64.b64encode(b"s" * 16).decode(),
        "cipher": "AES-256-GCM",
        "chunk": 1 << 20,
        "nonce_prefix": base64.b64encode(b"pref").decode(),
    }
    h.update(kw)
    return h


@pytest.mark.fast
@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"n": 1 << 20}, "scrypt n=1048576"),
        ({"n": 1 << 40}, "scrypt n="),
        ({"r": 1 << 10}, "r=1024"),
        ({"p": 16}, "p=16"),
        ({"n": 3 << 14}, "power of two"),
        ({"n": True}, "not a number"),
        ({"salt": base64.b64encode(b"s" * 4000).decode()}, "over 4 KiB"),
        ({"salt": base64.b64encode(b"s").decode()}, "salt or nonce"),
        ({"chunk": 1 << 40}, "record size"),
        ({"kdf": "argon2"}, "unknown key derivation"),
    ],
)
def test_a_hostile_encrypted_header_is_refused_before_any_key_derivation(
    tmp_path: Path, fields: dict[str, object], message: str
) -> None:
    f = tmp_path / "hostile.wmb"
    f.write_bytes(sealed_with(header(**fields), b"\0" * 64))
    t0 = time.monotonic()
    with pytest.raises(BackupError, match=message) as err:
        restore(load_settings(tmp_path / "t"), f, "a passphrase")
    assert not isinstance(err.value, WrongPassphrase)
    assert time.monotonic() - t0 < 0.5
    assert not (tmp_path / "t").exists() and siblings(tmp_path / "t") == []


@pytest.mark.fast
def test_a_record_length_over_one_chunk_is_refused_before_it_is_read(tmp_path: Path) -> None:
    f = tmp_path / "long.wmb"
    f.write_bytes(sealed_with(header(n=16, r=1), (0xFFFFFFFF).to_bytes(4, "big") + b"\0" * 64))
    with pytest.raises(BackupError, match="record 0 is too long"):
        restore(load_settings(tmp_path / "t"), f, "a passphrase")


_MEASURE = """
import resource, sys, time
from pathlib import Path
from wiki_memory.auth import TokenStore
from wiki_memory.config import load_settings
from wiki_memory.core.backup import restore
from wiki_memory.core.backup_format import BackupError
t0 = time.monotonic()
try:
    restore(load_settings(Path(sys.argv[2])), Path(sys.argv[1]), "not the passphrase")
    outcome = "restored"
except BackupError as exc:
    outcome = type(exc).__name__ + ": " + str(exc)
took = time.monotonic() - t0
print(took, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, outcome, sep="\\n")
"""


@pytest.mark.serial
@pytest.mark.process
@pytest.mark.parametrize(
    ("n", "r", "expect"),
    [(1 << 20, 8, "BackupError: the backup asks for scrypt"), (1 << 17, 8, "WrongPassphrase")],
)
def test_memory_and_time_before_the_passphrase_check_are_bounded(
    tmp_path: Path, n: int, r: int, expect: str
) -> None:
    """A header asking for scrypt n=2^20 (1 GiB) is refused at once; the most this program
    reads (n=2^17, r=8: 128 MiB) reaches the passphrase check within the bounds too."""
    f = tmp_path / "hostile.wmb"
    f.write_bytes(sealed_with(header(n=n, r=r), (100).to_bytes(4, "big") + b"\0" * 100))
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(f), str(tmp_path / "t")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert out.returncode == 0, out.stderr
    took, peak, outcome = out.stdout.strip().split("\n", 2)
    print(f"scrypt n={n} r={r}: {float(took):.3f} s, peak RSS {int(peak) / 2**20:.0f} MiB")
    assert outcome.startswith(expect), outcome
    assert float(took) <= 5.0
    assert int(peak) <= 256 * 1024 * 1024


STEPS = [
    "scanned",
    "staging",
    "member",
    "members",
    "objects",
    "refs",
    "checkout",
    "checked-out",
    "before-rename",
    "renamed",
]


def _paused(proc: subprocess.Popen[str], step: str, timeout: float = 90) -> Iterator[str]:
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        yield line
        if line.strip() == f"restore paused at {step}":
            return
    raise AssertionError(f"restore never paused at {step}")


@pytest.mark.process
def test_a_restore_killed_at_any_step_leaves_nothing_half_restored(tmp_path: Path) -> None:
    data, plain = make_backup(tmp_path)
    restore(load_settings(tmp_path / "reference"), plain)  # what a whole restore gives
    want_files, want_refs = files_of(tmp_path / "reference" / "wiki"), refs_of(data / "wiki")
    assert set(want_files) == {"notes/a.md", "people/alice/private.md", "run.sh"}
    for i, step in enumerate(STEPS):
        target = tmp_path / f"t{i}"
        if i % 2:
            target.mkdir()  # an empty folder the restore may replace
        proc = subprocess.Popen(
            [sys.executable, "-m", "wiki_memory.cli.main", "--data-dir", str(target),
             "restore", str(plain)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "WIKI_MEMORY_RESTORE_PAUSE_AT": step},
        )  # fmt: skip
        try:
            list(_paused(proc, step))
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            proc.stdout.close()  # type: ignore[union-attr]
            proc.stderr.close()  # type: ignore[union-attr]
        if step != "renamed":
            # as it was: absent, or the empty folder; only a sibling folder is left behind
            assert (target.is_dir() and not list(target.iterdir())) == bool(i % 2), step
            assert target.exists() == bool(i % 2), step
            continue
        # renamed: the whole restore is in place, and a server serves all of it
        assert files_of(target / "wiki") == want_files
        assert refs_of(target / "wiki") == want_refs
        srv = ServerProcess(target)
        srv.start()
        try:
            assert srv.token == (data / "auth" / "owner.token").read_text().strip()
            r = httpx.get(srv.url + "/v1/pages/notes/a.md", headers=srv.headers)
            assert r.status_code == 200, r.text
            assert "alpha" in r.text
        finally:
            srv.stop()
    # a later restore into a fresh target is not troubled by the folders the kills left
    out = subprocess.run(
        [sys.executable, "-m", "wiki_memory.cli.main", "--data-dir", str(tmp_path / "last"),
         "restore", str(plain)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "connection settings restored (config.toml)" in out.stdout
    assert '  host = "0.0.0.0"' in out.stdout and "  insecure_http = true" in out.stdout
    assert files_of(tmp_path / "last" / "wiki") == want_files
    # the command names what it left out
    crafted = tmp_path / "crafted.wmb"
    craft(plain, crafted, [(_info("wiki/x.md", 1), b"x")], [(_info("notes.md", 1), b"n")])
    out = subprocess.run(
        [sys.executable, "-m", "wiki_memory.cli.main", "--data-dir", str(tmp_path / "c"),
         "restore", str(crafted)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "not restored: 'notes.md' (place: not a part of a backup)" in out.stderr
    assert "not restored: 1 member the manifest does not list: 'wiki/x.md'" in out.stderr
    assert not (tmp_path / "c" / "wiki" / "x.md").exists()


@pytest.mark.fast
def test_members_listed_as_a_file_and_a_folder_of_one_name_fail_as_a_backup_error(
    tmp_path: Path,
) -> None:
    _data, plain = make_backup(tmp_path)
    crafted = tmp_path / "clash.wmb"
    craft(
        plain, crafted, [], listed=[(_info("spool/x", 3), b"abc"), (_info("spool/x/y", 3), b"def")]
    )
    target = tmp_path / "restored"
    with pytest.raises(BackupError, match="spool/x/y"):
        restore(load_settings(target), crafted)
    assert not target.exists() and siblings(target) == []
