"""Backup and restore of a whole data directory (docs/operations.md), with a real server
and an open session: the restored wiki has the same files byte for byte and the same
commit ids, the observations that were pending are compiled after restore, and the
tokens work; an encrypted backup does not open with a wrong passphrase (one line, a
non-zero exit); restore refuses a data directory that is not empty; the file is owner-only."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from appkit import AppServer, http
from clikit import run_cli_here
from support import files_of, refs_of, run_cli, wait_for
from teamkit import make_token

pytestmark = pytest.mark.process

PASS = {"WIKI_MEMORY_BACKUP_PASSPHRASE": "correct horse battery staple"}


def event(kind: str, **payload: object) -> dict[str, object]:
    return {
        "harness": "codex",
        "event": kind,
        "session_id": "open-1",
        "cwd": "/x/proj",
        "payload": payload,
    }


def test_backup_restore_round_trip(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "wiki" / "notes").mkdir(parents=True)
    (data / "wiki" / "notes" / "a.md").write_text("# A\n\nalpha page\n", encoding="utf-8")
    (data / "wiki" / "notes" / "b.md").write_bytes("# B\r\n\r\nbeta \u00e9t\u00e9\r\n".encode())
    # the servers: the app in this process (its stop runs the same shutdown as a
    # server's); the backups in this process; the restores, which change the process's
    # data directory, as processes
    srv = AppServer(data)
    srv.start()
    try:
        member = make_token(data, "wes", "member", "proj", here=True)
        # a finished session (compiled, committed) and an open one with pending events
        done = {
            **event("UserPromptSubmit", prompt="finished work on the walrus"),
            "session_id": "s0",
        }
        assert srv.post("/v1/observations", done).status_code == 202
        assert (
            srv.post("/v1/observations", {**event("Stop"), "session_id": "s0"}).status_code == 202
        )
        wait_for(lambda: any("walrus" in t.decode("utf-8", "replace")
                             for t in files_of(data / "wiki").values()), 60)  # fmt: skip
        assert (
            srv.post(
                "/v1/observations", event("UserPromptSubmit", prompt="pending narwhal plan")
            ).status_code
            == 202
        )
        srv.stop()  # a Stop-less session stays open: its events stay pending in the spool
        before_files = files_of(data / "wiki")
        before_refs = refs_of(data / "wiki")
        assert not any(b"narwhal" in t for t in before_files.values())  # still pending

        plain = tmp_path / "b.wmb"
        out = run_cli_here(data, "backup", str(plain))
        assert out.returncode == 0, out.stderr
        assert stat.S_IMODE(plain.stat().st_mode) == 0o600
        sealed = tmp_path / "b.wmb.enc"
        out = run_cli_here(data, "backup", str(sealed), "--encrypt", env=PASS)
        assert out.returncode == 0, out.stderr
        assert b"narwhal" not in sealed.read_bytes() and b"narwhal" in plain.read_bytes()

        # a wrong passphrase: one clear line, a non-zero exit, nothing restored
        wrong = run_cli(tmp_path / "x", "restore", str(sealed),
                        env={"WIKI_MEMORY_BACKUP_PASSPHRASE": "wrong"})  # fmt: skip
        assert wrong.returncode != 0
        assert wrong.stderr.strip().count("\n") == 0 and "wrong passphrase" in wrong.stderr
        # a data directory that is not empty is refused
        assert run_cli(data, "restore", str(plain)).returncode != 0

        for name, backup_file, env in (("r1", plain, None), ("r2", sealed, PASS)):
            target = tmp_path / name
            out = run_cli(target, "restore", str(backup_file), env=env)
            assert out.returncode == 0, out.stderr
            assert files_of(target / "wiki") == before_files
            assert refs_of(target / "wiki") == before_refs
        target = tmp_path / "r1"
        srv2 = AppServer(target)
        srv2.start()
        try:
            assert srv2.token == srv.token  # the owner's token came back
            r = http(srv2).get(
                srv2.url + "/v1/pages", headers={"Authorization": f"Bearer {member}"}
            )
            assert r.status_code == 200, r.text
            # the pending observation is there, and compiled once its session ends
            assert srv2.post("/v1/observations", event("Stop")).status_code == 202
            wait_for(lambda: any("narwhal" in t.decode("utf-8", "replace")
                                 for t in files_of(target / "wiki").values()), 60)  # fmt: skip
        finally:
            srv2.stop()
    finally:
        srv.stop()


@pytest.mark.skipif(shutil.which("git") is None, reason="stock git binary not installed")
def test_a_damaged_repository_is_not_backed_up(tmp_path: Path) -> None:
    """A page whose packed bytes were changed on disk: backup says so in one line, exits
    non-zero and leaves no file (nor a temporary one) beside the target."""
    wiki = tmp_path / "data" / "wiki"
    wiki.mkdir(parents=True)
    (wiki / "page.md").write_text("walrus " * 20000, encoding="utf-8")
    env = {**os.environ, "GIT_AUTHOR_NAME": "w", "GIT_AUTHOR_EMAIL": "w@example.org",
           "GIT_COMMITTER_NAME": "w", "GIT_COMMITTER_EMAIL": "w@example.org"}  # fmt: skip
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "one"], ["gc", "-q"]):
        subprocess.run(["git", "-C", str(wiki), *args], check=True, env=env)
    pack = next((wiki / ".git" / "objects" / "pack").glob("*.pack"))
    raw = bytearray(pack.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # inside one of the packed objects
    pack.chmod(0o644)
    pack.write_bytes(bytes(raw))

    out = run_cli_here(tmp_path / "data", "backup", str(tmp_path / "b.wmb"))
    assert out.returncode != 0
    assert out.stderr.strip().count("\n") == 0, out.stderr
    assert "backup failed: the wiki's repository cannot be read whole" in out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]
