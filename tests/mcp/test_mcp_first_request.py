"""The MCP face starts at its first request (docs/mcp.md, "Start-up"): a server that is
never asked over MCP never loads the SDK, and starts in about half the time; the first
requests, however many arrive at once, are each answered by one tool server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from appkit import AppServer
from mcpkit import mcp_connect
from serverproc import ServerProcess
from support import MCP_TOOL_NAMES


def _imported(stderr: str) -> set[str]:
    """The modules ``-X importtime`` (``PYTHONPROFILEIMPORTTIME``) reported so far."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }


@pytest.mark.process
def test_a_server_loads_the_sdk_at_its_first_mcp_request(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "d", env={"PYTHONPROFILEIMPORTTIME": "1"}) as srv:
        r = srv.post(
            "/v1/remember",
            {"text": "The kiln runs at 1240 degrees.", "project": "pots", "create_project": True},
        )
        assert r.status_code in (200, 201), r.text
        assert srv.post("/v1/recall", {"query": "kiln"}).status_code == 200
        before = _imported(srv.stderr())
        assert "wiki_memory.server.app" in before  # the report is real
        assert not {n for n in before if n == "mcp" or n.startswith("mcp.")}

        async def ask() -> str:
            async with mcp_connect(srv) as c:
                r = await c.call_tool("memory_recall", {"query": "kiln", "project": "pots"})
                assert not r.is_error
                return str(r.content[0].text)

        assert "1240" in asyncio.run(ask())
        assert "mcp.server.streamable_http_manager" in _imported(srv.stderr())


def test_first_requests_at_once_are_all_answered(tmp_path: Path) -> None:
    """Six clients open their sessions at the same moment on an app that has not loaded
    the MCP face yet: each is answered, with every tool listed."""
    with AppServer(tmp_path / "d") as srv:

        async def one(n: int) -> set[str]:
            async with mcp_connect(srv) as c:
                tools = await c.list_tools()
                r = await c.call_tool("memory_recall", {"query": f"anything {n}"})
                assert not r.is_error
                return {t.name for t in tools.tools}

        async def main() -> list[set[str]]:
            return list(await asyncio.gather(*(one(n) for n in range(6))))

        assert asyncio.run(main()) == [set(MCP_TOOL_NAMES)] * 6
