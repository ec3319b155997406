"""The CLI starts a project by writing (docs/cli.md "Starting a project"): ``remember``
and ``handoff create`` into an unknown name exit non-zero saying ``--new-project``, which
creates it; without ``--project`` inside a git repository the write is filed under that
repository's project (its id sent as the hook sends it), created if new."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from clikit import run_cli_here as run_cli
from serverproc import ServerProcess

pytestmark = pytest.mark.process


def cli_in(cwd: Path, data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``wiki-memory --data-dir DATA ARGS`` run from the folder ``cwd`` (in this process,
    which is in ``cwd`` for the command)."""
    before = Path.cwd()
    os.chdir(cwd)
    try:
        return run_cli(data, *args)
    finally:
        os.chdir(before)


def git_repo(folder: Path) -> str:
    """A git repository at ``folder`` with one commit; its root commit's id."""
    folder.mkdir(parents=True)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    for cmd in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "first"]):
        subprocess.run(["git", "-C", str(folder), *cmd], check=True, env=env)
    out = subprocess.run(
        ["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True, env=env
    )
    return out.stdout.strip()


def test_remember_starts_a_project_with_new_project_or_from_the_repository(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    r = cli_in(scratch, data, "remember", "deploys run on Fridays", "--project", "atlas")
    assert r.returncode == 4, (r.stdout, r.stderr)
    assert "--new-project" in r.stderr and "none yet" not in r.stderr
    assert not (data / "wiki" / "projects" / "atlas").exists()
    r = cli_in(
        scratch, data, "remember", "deploys run on Fridays", "--project", "atlas", "--new-project"
    )
    assert r.returncode == 0, r.stderr
    assert "remembered: projects/atlas/notes/" in r.stdout
    # no --project in a scratch folder: told to name one
    r = cli_in(scratch, data, "remember", "x")
    assert r.returncode == 2 and "--project" in r.stderr
    # no --project inside a repository: its project, bound to its root commit
    sha = git_repo(tmp_path / "src" / "billing")
    r = cli_in(tmp_path / "src" / "billing", data, "remember", "invoices are sent at 6")
    assert r.returncode == 0, r.stderr
    assert "remembered: projects/billing/notes/" in r.stdout
    index = (data / "wiki" / "projects" / "billing" / "index.md").read_text()
    assert f"root:{sha}" in index


def test_handoff_create_new_project_through_the_server(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with ServerProcess(data):
        r = run_cli(data, "handoff", "create", "--title", "wire CI", "--project", "borealis")
        assert r.returncode == 4, (r.stdout, r.stderr)
        assert "--new-project" in r.stderr
        r = run_cli(
            data,
            "handoff",
            "create",
            "--title",
            "wire CI",
            "--project",
            "borealis",
            "--new-project",
        )
        assert r.returncode == 0, r.stderr
        assert "(projects/borealis/handoffs/" in r.stdout
