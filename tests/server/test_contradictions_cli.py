"""``wiki-memory contradictions`` as a user runs it against their server: two notes of a
project that disagree are listed with what each says and how to resolve the flag; once a
side is superseded through ``remember --supersedes`` the list is empty."""

from __future__ import annotations

from pathlib import Path

import pytest
from clikit import run_cli_here as run_cli
from serverproc import ServerProcess

pytestmark = pytest.mark.process


def test_the_cli_lists_a_contradiction_until_a_side_is_superseded(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with ServerProcess(data):
        for text in (
            "The staging database listens on port 5432.",
            "The staging database listens on port 6543 since the pooler went in.",
        ):
            r = run_cli(data, "remember", text, "--project", "ops", "--new-project",
                        "--title", "Staging database")  # fmt: skip
            assert r.returncode == 0, r.stderr
        r = run_cli(data, "contradictions", "--project", "ops")
        assert r.returncode == 0, r.stderr
        assert "ops: numbers" in r.stdout, r.stdout
        assert "port 5432" in r.stdout and "port 6543" in r.stdout
        assert "1 contradiction(s)" in r.stdout
        first = [ln.split(":")[0].strip() for ln in r.stdout.splitlines() if "5432" in ln][0]
        r = run_cli(data, "remember", "The staging database listens on port 6543.",
                    "--project", "ops", "--title", "Staging database",
                    "--supersedes", first)  # fmt: skip
        assert r.returncode == 0, r.stderr
        r = run_cli(data, "contradictions")
        assert r.returncode == 0 and "no contradictions found" in r.stdout, r.stdout
