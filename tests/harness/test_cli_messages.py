"""What the CLI prints when a command ends, as a user sees it in a terminal: one line for
a mistake, never a traceback, and nothing from the git library's clean-up at exit."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import run_cli

pytestmark = pytest.mark.process


def test_a_command_without_a_server_ends_without_the_git_librarys_exit_noise(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    r = run_cli(data, "remember", "The build cache lives in /var/cache/ci.", "--project",
                "demo", "--new-project")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "Exception ignored" not in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_port_out_of_range_and_an_export_nowhere_are_one_line_each(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert run_cli(data, "remember", "A note to export.", "--project", "demo",
                   "--new-project").returncode == 0  # fmt: skip
    for args, said in (
        (("serve", "--port", "99999"), "99999 is not a TCP port"),
        (("export", str(tmp_path / "missing" / "x.jsonl")), "No such file or directory"),
        (("export", str(tmp_path)), "Is a directory"),
    ):
        r = run_cli(data, *args, timeout=60)
        assert r.returncode != 0 and said in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr, r.stderr
