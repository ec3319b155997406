"""A new install starts a project through the MCP tools (docs/mcp.md "Project"): an
unknown name is an error that says how (``create_project``), and ``create_project``
starts it; the whole tool list stays within its token budget (test_tool_list.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from wiki_memory.mcp.tools import build_server

pytestmark = pytest.mark.fast


def text_of(res: Any) -> str:
    return "\n".join(c.text for c in res.content if c.type == "text")


def test_a_new_install_starts_a_project_through_the_tools(mem):
    """memory_remember and handoff_create into a name nothing has captured yet: the
    error says how (create_project), and create_project starts the project."""

    async def main() -> list[Any]:
        from mcp import Client

        async with Client(build_server(mem)) as c:
            return [
                await c.call_tool("memory_remember", {"text": "a", "project": "atlas"}),
                await c.call_tool(
                    "memory_remember", {"text": "a", "project": "atlas", "create_project": True}
                ),
                await c.call_tool("handoff_create", {"title": "t", "project": "borealis"}),
                await c.call_tool(
                    "handoff_create",
                    {"title": "t", "project": "borealis", "create_project": True},
                ),
            ]

    out = asyncio.run(main())
    assert out[0].is_error and text_of(out[0]) == (
        "unknown_project: project 'atlas' does not exist; pass create_project: true"
        " (CLI: --new-project) to create it; there are no projects yet"
    )
    assert not out[1].is_error, text_of(out[1])
    assert out[1].structured_content["path"].startswith("projects/atlas/notes/")
    assert out[2].is_error and "create_project" in text_of(out[2])
    assert not out[3].is_error, text_of(out[3])
    assert sorted(p.name for p in (mem.wiki_dir / "projects").iterdir()) == ["atlas", "borealis"]
