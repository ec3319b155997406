"""File modes by directory (docs/team-server.md, "File modes"): nothing under the data
directory is reachable by another local account, checked as a second account where the
test may switch to one (root: the ``nobody`` uid, no account is created), else by the
modes along the path; an external vault's own files keep their modes."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.clikit import run_cli_here
from tests.serverproc import ServerProcess

NOBODY = 65534


@pytest.fixture
def open_parent() -> Iterator[Path]:
    """A folder every account can pass through (pytest's own temp folders are 0700,
    which would hide everything whatever the server does)."""
    d = Path(tempfile.mkdtemp(prefix="wm-modes-"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _as_other_account(root: Path) -> list[str] | None:
    """What another account can read under ``root``; None when the test cannot be one."""
    find = shutil.which("find", path="/usr/bin:/bin")
    if os.geteuid() != 0 or find is None:
        return None

    def drop() -> None:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)

    # GNU find's -readable asks the kernel (access(2)) as the account running it
    r = subprocess.run(
        [find, str(root), "-readable"],
        capture_output=True,
        text=True,
        preexec_fn=drop,
        timeout=60,
    )
    # find reports the folders it could not enter on stderr; what it prints is readable
    return [line for line in r.stdout.splitlines() if line]


def _modes_reach(root: Path) -> list[str]:
    """Entries under ``root`` readable by group or others through passable folders."""
    out = []
    for d, dirs, files in os.walk(root):
        if not all(os.stat(p).st_mode & 0o011 for p in [Path(d), *Path(d).parents]):
            dirs[:] = []
            continue
        for n in files + dirs:
            if os.lstat(os.path.join(d, n)).st_mode & 0o044:
                out.append(os.path.join(d, n))
    return out


@pytest.mark.process
def test_nothing_under_the_data_dir_is_reachable_by_another_account(open_parent: Path) -> None:
    data = open_parent / "data"
    with ServerProcess(data) as srv:
        h = srv.headers
        assert httpx.put(srv.url + "/v1/pages/notes/a.md", content="# a\n", headers=h).is_success
        httpx.post(srv.url + "/v1/recall", json={"query": "a"}, headers=h, timeout=60)
        assert (data / "index.db").exists() and (data / "logs").is_dir()
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
        assert stat.S_IMODE((data / "wiki" / ".git").stat().st_mode) == 0o700
        seen = _as_other_account(data)
        if seen is not None:
            assert seen == []
        assert _modes_reach(data) == []
        rep = json.loads(run_cli_here(data, "doctor", "--json").stdout)
        assert rep["reachable_by_others"] == []
    # doctor names what is reachable, and only that: widen the data directory
    os.chmod(data, 0o755)
    os.chmod(data / "logs", 0o755)
    rep = json.loads(run_cli_here(data, "doctor", "--json").stdout)
    assert str(data / "logs") in rep["reachable_by_others"]
    assert str(data / "auth" / "tokens.json") not in rep["reachable_by_others"]
    assert not any("auth" in p for p in rep["reachable_by_others"])


@pytest.mark.process
def test_external_vault_keeps_its_modes(open_parent: Path) -> None:
    vault = open_parent / "vault"
    (vault / "notes").mkdir(parents=True)
    os.chmod(vault, 0o755)
    os.chmod(vault / "notes", 0o755)
    page = vault / "notes" / "mine.md"
    page.write_text("# mine\nwritten by a person\n")
    os.chmod(page, 0o644)
    data = open_parent / "data"
    with ServerProcess(data, args=["--wiki", str(vault)]) as srv:
        digest = hashlib.sha256(page.read_bytes()).hexdigest()
        r = httpx.put(
            srv.url + "/v1/pages/notes/mine.md",
            content="# mine\nedited through the API\n",
            headers={**srv.headers, "If-Match": f'"{digest}"'},
        )
        assert r.status_code == 200, r.text
        assert "edited" in page.read_text()
        assert stat.S_IMODE(page.stat().st_mode) == 0o644
        assert stat.S_IMODE((vault / "notes").stat().st_mode) == 0o755
        assert stat.S_IMODE(vault.stat().st_mode) == 0o755
        # the repository the server made in the vault is the owner's alone
        assert stat.S_IMODE((vault / ".git").stat().st_mode) == 0o700
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
        seen = _as_other_account(vault / ".git")
        if seen is not None:
            assert seen == []
