"""``wiki-memory feedback PATH helped|not_helpful`` as a user runs it against their
server: the verdict is recorded and shows in the user's own use rows; a missing page exits
with the not-found status and records nothing; a verdict other than the two is a usage
error."""

from __future__ import annotations

from pathlib import Path

import pytest
from clikit import run_cli_here as run_cli
from serverproc import ServerProcess

pytestmark = pytest.mark.process


def test_the_cli_records_a_verdict_and_refuses_a_missing_page(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with ServerProcess(data) as srv:
        r = run_cli(data, "remember", "Deploys go out on Tuesdays.", "--project", "ops",
                    "--new-project", "--title", "Deploy day")  # fmt: skip
        assert r.returncode == 0, r.stderr
        (path,) = [p["path"] for p in srv.get("/v1/pages?project=ops").json()["pages"]
                   if p["title"] == "Deploy day"]  # fmt: skip
        r = run_cli(data, "feedback", path, "helped")
        assert r.returncode == 0, r.stderr
        assert f"{path}: helped (counted for" in r.stdout, r.stdout
        rows = srv.get("/v1/use?days=1").json()["rows"]
        assert [(x["path"], x["helped"]) for x in rows if x["helped"]] == [(path, 1)]
        r = run_cli(data, "feedback", "projects/ops/notes/nosuch.md", "helped")
        assert r.returncode == 4 and "no such page" in r.stderr, (r.returncode, r.stderr)
        r = run_cli(data, "feedback", path, "great")
        assert r.returncode == 2 and "verdict" in r.stderr, r.stderr
