"""A contradiction through MCP as an agent meets it (the SDK's real Client against the
MCP server, in process): ``memory_recall`` returns both notes, each naming the other
after ``CONTRADICTS`` in its text and under ``contradicts`` in its structured item, and
keeps the mark on a compact handle when the budget is small (docs/knowledge.md,
"Contradictions")."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from wiki_memory.core.memory import Memory
from wiki_memory.mcp.tools import build_server

pytestmark = pytest.mark.fast

A, B = "projects/ops/notes/queue.md", "projects/ops/notes/queue-now.md"


def recall(mem: Memory, budget: int) -> Any:
    from mcp import Client

    async def main() -> Any:
        async with Client(build_server(mem)) as c:
            return await c.call_tool(
                "memory_recall", {"query": "jobs queued", "project": "ops", "budget_tokens": budget}
            )

    return asyncio.run(main())


def test_both_sides_come_back_each_naming_the_other(mem: Memory) -> None:
    for path, text in ((A, "Jobs are queued in RabbitMQ."), (B, "Jobs are queued in Kafka.")):
        mem.write_page(path, f"---\ntitle: Message queue\n---\n{text}\n".encode(), user="alice",
                       message="w")  # fmt: skip
    r = recall(mem, 4000)
    items = {i["path"]: i for i in r.structured_content["items"]}
    assert items[A]["contradicts"] == [B] and items[B]["contradicts"] == [A]
    text = "\n".join(c.text for c in r.content if c.type == "text")
    assert f"CONTRADICTS {B}" in text and f"CONTRADICTS {A}" in text
    small = recall(mem, 60).structured_content["items"]
    assert small and all(i.get("compact") for i in small), small
    assert all(i.get("contradicts") for i in small), small
