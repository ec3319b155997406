"""Numbers and claims in the docs that drift from the code: the MCP tool count and
table, the hook's home after an install, the error table's rows."""

from __future__ import annotations

import re

import pytest
from support import REPO

pytestmark = pytest.mark.fast

WORDS = {
    n: w
    for n, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen".split()
    )
}


def _tool_names() -> set[str]:
    src = "".join(p.read_text() for p in (REPO / "wiki_memory/mcp").glob("*_tools.py"))
    return set(re.findall(r"@server\.tool\([^)]*\)\s+def (\w+)\(", src))


def test_mcp_md_names_the_tools_the_server_has() -> None:
    doc = (REPO / "docs/mcp.md").read_text()
    tools = _tool_names()
    said = re.search(r"^(\w+) tools\. Every tool", doc, re.M)
    assert said is not None and said[1].lower() == WORDS[len(tools)], (said, sorted(tools))
    table = set(re.findall(r"^\| `((?:memory|page|handoff)_\w+)` \|", doc, re.M))
    assert table == tools


def test_hooks_md_says_an_installed_copy_installs_hooks() -> None:
    doc = (REPO / "docs/hooks.md").read_text()
    assert "cannot install hooks" not in doc


def test_each_error_code_has_one_row() -> None:
    doc = (REPO / "docs/api.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| \d{3} \|", doc, re.M)
    assert len(rows) == len(set(rows)), sorted(r for r in rows if rows.count(r) > 1)
