"""``wiki-memory edit`` on a data directory with no server running: the same core
operation as ``POST /v1/edit``, as the wiki's owner; a retried edit id edits once, a
stale section hash exits with the conflict status and names the current hash."""

from __future__ import annotations

from pathlib import Path

from clikit import run_cli_here as run_cli

from wiki_memory.errors import TABLE
from wiki_memory.wiki.sections import find_section, section_hash

# the command runs in this process (clikit): what it does and says is the point

PAGE = "projects/demo/plan.md"
TEXT = "# Plan\n\n## Todo\n- [ ] one\n\n## Done\n"


def test_cli_edit_appends_once_and_refuses_a_stale_hash(tmp_path: Path) -> None:
    data = tmp_path / "data"
    full = data / "wiki" / PAGE
    full.parent.mkdir(parents=True)
    full.write_text(TEXT, encoding="utf-8")
    for _ in range(2):
        r = run_cli(
            data, "edit", "item", PAGE, "--section", "Todo", "--text", "two", "--edit-id", "x1"
        )
        assert r.returncode == 0, r.stderr
    assert "already done (same edit id)" in r.stdout
    assert (
        full.read_text(encoding="utf-8") == "# Plan\n\n## Todo\n- [ ] one\n- [ ] two\n\n## Done\n"
    )
    now = full.read_text(encoding="utf-8")
    current = section_hash(now, find_section(now, "Done"))
    r = run_cli(
        data,
        "edit",
        "replace_section",
        PAGE,
        "--section",
        "Done",
        "--text",
        "x",
        "--hash",
        "0" * 64,
    )
    assert r.returncode == TABLE["conflict"].exit, (r.returncode, r.stderr)
    assert current in r.stderr
    r = run_cli(data, "edit", "rename", PAGE)
    assert r.returncode == 2 and "--to" in r.stderr
