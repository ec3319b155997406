"""``--wiki PATH`` as the owner's commands take it (``doctor``, ``export``, ``reindex``):
a path that is not a folder is a usage error naming the option and the
path, exit status 2, before anything is read or written; a folder is the wiki used."""

from __future__ import annotations

from pathlib import Path

import pytest
from clikit import run_cli_here as run_cli


@pytest.mark.parametrize(
    "command",
    [["doctor"], ["export"], ["reindex", "--quiet"]],
    ids=["doctor", "export", "reindex"],
)
def test_a_wiki_that_is_not_a_folder_is_refused(tmp_path: Path, command: list[str]) -> None:
    data = tmp_path / "data"
    missing = tmp_path / "nowhere"
    afile = tmp_path / "notes.md"
    afile.write_text("# a file, not a vault\n", encoding="utf-8")
    for bad in (missing, afile):
        r = run_cli(data, *command, "--wiki", str(bad))
        assert r.returncode == 2, (command, r.stdout, r.stderr)
        assert f"--wiki {bad}: not a folder" in r.stderr, r.stderr
    assert not missing.exists()


def test_export_reads_the_folder_wiki_names(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Deploy.md").write_text("# Deploy\n\nTuesdays.\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    r = run_cli(tmp_path / "data", "export", str(out), "--wiki", str(vault))
    assert r.returncode == 0, r.stderr
    assert "exported 1 pages" in r.stderr, r.stderr
    assert '"Deploy.md"' in out.read_text(encoding="utf-8")
