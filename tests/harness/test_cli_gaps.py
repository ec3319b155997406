"""CLI gaps of the first hour: restore into a used directory says how to pick another,
export needs no flag for its one format, uninstall explains itself, has a dry run and
leaves no empty harness file behind, and setup's plan counts its steps."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support import make_memory

from wiki_memory.cli.common import CliError
from wiki_memory.cli.main import build_parser, main
from wiki_memory.cli.uninstall import SETUP_RECORD
from wiki_memory.config import load_settings
from wiki_memory.core.backup import backup

pytestmark = pytest.mark.fast


def _subparser(name: str) -> object:
    parser = build_parser()
    for action in parser._subparsers._group_actions:  # type: ignore[union-attr]
        choices = getattr(action, "choices", None)
        if choices and name in choices:
            return choices[name]
    raise AssertionError(name)


def test_restore_into_a_used_directory_names_data_dir(tmp_path: Path) -> None:
    src = tmp_path / "src"
    make_memory(src).stop()
    backup(load_settings(src), tmp_path / "b.wmbak")
    used = tmp_path / "used"
    used.mkdir()
    (used / "something").write_text("x")
    args = build_parser().parse_args(
        ["--data-dir", str(used), "restore", str(tmp_path / "b.wmbak")]
    )
    with pytest.raises(CliError) as err:
        args.fn(args)
    assert "--data-dir" in str(err.value), err.value


def test_export_needs_no_json_flag(tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_memory(data, files={"notes/a.md": "# a\n"}).stop()
    out = tmp_path / "pages.jsonl"
    assert main(["--data-dir", str(data), "export", str(out)]) == 0
    lines = [json.loads(ln) for ln in out.read_text().splitlines() if ln.strip()]
    assert lines


def test_uninstall_has_a_description_and_a_dry_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert getattr(_subparser("uninstall"), "description", None)
    data = tmp_path / "data"
    data.mkdir()
    left = tmp_path / "home" / ".codex" / "hooks.json"
    left.parent.mkdir(parents=True)
    left.write_text("{}\n")
    record = {"files": {str(left): {"sha256": "x", "created": True}}}
    (data / SETUP_RECORD).write_text(json.dumps(record))
    assert main(["--data-dir", str(data), "uninstall", "--dry-run"]) == 0
    assert left.exists() and (data / SETUP_RECORD).exists()
    assert "dry run" in capsys.readouterr().out
    # for real: the `{}` setup's own file was left with goes too (the next setup would
    # take it for an installed harness)
    assert main(["--data-dir", str(data), "uninstall"]) == 0
    assert not left.exists()


def test_setup_plan_numbers_steps_once_each_with_two_harnesses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".gemini").mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", str(tmp_path / "nobin"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    data = tmp_path / "data"
    assert main(["--data-dir", str(data), "setup", "--dry-run", "--port", "9"]) == 0
    out = capsys.readouterr().out
    steps = [int(n) for n in re.findall(r"^  (\d+)\. ", out, re.M)]
    assert steps == list(range(1, len(steps) + 1)), out
    assert len(steps) == 7, out
