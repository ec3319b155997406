"""Clear answers at start: a taken port, a vault without git, a vault that
another server serves, and a recall without a query."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from appkit import AppServer
from serverproc import ServerProcess, free_port

# tiers per test: the ones that need a real server process are marked process


def serve(data: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WIKI_MEMORY_HOME": str(data)}
    return subprocess.run(
        [sys.executable, "-m", "wiki_memory.cli.main", "--data-dir", str(data), "serve", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


@pytest.mark.process
def test_serve_checks_its_port_before_announcing_itself(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = serve(tmp_path / "data", "--port", str(port))
    assert r.returncode == 3
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in lines[0]
    if Path("/proc/net/tcp").exists():
        assert f"pid {os.getpid()}" in lines[0]
    assert "serving" not in r.stderr


@pytest.mark.process
def test_serve_wiki_on_a_folder_without_git_says_it_creates_a_repository(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "a.md").write_text("# a\n")
    srv = ServerProcess(tmp_path / "data", args=["--wiki", str(vault)])
    with srv:
        pass
    assert "is not a git repository: creating one" in srv.stderr()
    assert (vault / ".git").is_dir()
    srv2 = ServerProcess(tmp_path / "data", args=["--wiki", str(vault)])
    with srv2:
        pass
    assert "is not a git repository" not in srv2.stderr()  # said only the first time


@pytest.mark.process
def test_a_second_server_on_the_same_vault_is_refused(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "a.md").write_text("# a\n")
    with ServerProcess(tmp_path / "one", args=["--wiki", str(vault)]):
        r = serve(tmp_path / "two", "--wiki", str(vault), "--port", str(free_port()))
        assert r.returncode == 3, r.stderr
        assert "another wiki-memory server is serving" in r.stderr
        assert str(tmp_path / "one") in r.stderr


@pytest.mark.fast
@pytest.mark.parametrize("body", [{}, {"query": None}, {"budget_tokens": 100}])
def test_recall_without_a_query_is_a_400_naming_the_field(tmp_path: Path, body) -> None:
    with AppServer(tmp_path / "data") as srv:
        r = srv.post("/v1/recall", body)
        assert r.status_code == 400
        assert r.json()["field"] == "query"
        assert srv.post("/v1/recall", {"query": ""}).status_code == 200


@pytest.mark.process
def test_the_first_run_says_what_to_do_next(tmp_path: Path) -> None:
    """The first start (the owner's token is created) names the web view's address and
    `wiki-memory status`; later starts do not repeat it (docs/operations.md)."""
    srv = ServerProcess(tmp_path / "data")
    with srv:
        pass
    assert f"next: the web view is {srv.url}/" in srv.stderr()
    assert "`wiki-memory status`" in srv.stderr()
    again = ServerProcess(tmp_path / "data")
    with again:
        pass
    assert "next:" not in again.stderr()
