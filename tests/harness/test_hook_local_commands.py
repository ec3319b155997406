"""The hook spells the commands the brief prints as the console script beside its own
interpreter when ``wiki-memory`` is not on the agent's PATH (a venv install), and
leaves them alone when it is."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest
from support import REPO

pytestmark = pytest.mark.fast

BRIEF = (
    "## Memory brief: project `wiki-memory`\n"
    "claim it: run `wiki-memory handoff claim wmo_abc` or call MCP handoff_claim\n"
    'More: `wiki-memory recall "<words>" --project wiki-memory` finds earlier sessions.\n'
)


def _hooklib() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "hooklib_under_test", REPO / "hooks" / "wiki_memory_hooklib.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _venv(tmp_path: Path) -> tuple[str, Path]:
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python3"
    script = bin_dir / "wiki-memory"
    for f in (python, script):
        f.write_text("#!/bin/sh\n")
        os.chmod(f, 0o755)
    return str(python), script


def test_commands_use_the_script_beside_the_interpreter_when_not_on_path(tmp_path: Path) -> None:
    h = _hooklib()
    python, script = _venv(tmp_path)
    out = h.local_commands(BRIEF, exe=python, path=str(tmp_path / "empty"))
    assert f"run `{script} handoff claim wmo_abc`" in out
    assert f'`{script} recall "<words>"' in out
    assert "project `wiki-memory`" in out  # a project's name is not a command


def test_commands_stay_when_the_name_resolves(tmp_path: Path) -> None:
    h = _hooklib()
    python, script = _venv(tmp_path)
    assert h.local_commands(BRIEF, exe=python, path=str(script.parent)) == BRIEF


def test_setup_says_how_to_put_it_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from wiki_memory.cli.setup import path_hint

    python, script = _venv(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    hint = path_hint(python)
    assert hint is not None and str(script.parent) in hint and "PATH" in hint
    monkeypatch.setenv("PATH", str(script.parent))
    assert path_hint(python) is None
