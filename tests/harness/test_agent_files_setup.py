"""``setup``'s step for the harnesses' files (docs/agent-files.md, "In setup"): it names
what it found and, without a terminal to ask on, imports nothing and says how to."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from wiki_memory.cli.agentfiles import setup_offer


def test_without_a_terminal_setup_names_the_files_and_imports_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    repo = home / "api"
    (repo / ".git").mkdir(parents=True)
    (repo / "CLAUDE.md").write_text("# Rules\n")
    (home / ".codex").mkdir()
    (home / ".codex" / "AGENTS.md").write_text("# Mine\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(repo)
    # no server answers here: an import would fail loudly, so nothing was sent
    setup_offer(argparse.Namespace(data_dir=str(tmp_path / "data")), "http://127.0.0.1:9")
    out = capsys.readouterr().out
    assert "instruction/memory files here: CLAUDE.md, ~/.codex/AGENTS.md" in out
    assert "import them with `wiki-memory import-agent-files`" in out
    assert "not imported:" not in out
    monkeypatch.chdir(tmp_path)  # outside the project: the per-user file alone
    setup_offer(argparse.Namespace(data_dir=str(tmp_path / "data")), "http://127.0.0.1:9")
    assert capsys.readouterr().out.splitlines()[0] == (
        "instruction/memory files here: ~/.codex/AGENTS.md"
    )
    (home / ".codex" / "AGENTS.md").unlink()  # none at all: setup says nothing
    setup_offer(argparse.Namespace(data_dir=str(tmp_path / "data")), "http://127.0.0.1:9")
    assert capsys.readouterr().out == ""
