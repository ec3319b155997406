"""A listing of handoffs shows each one by the same keys on every face that lists many:
what to act on (who left it, for whom, its state, its claim, its offer), never the
stored state, the session page or what only ``show`` returns (sections, metadata)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support import as_user

from wiki_memory.core.handoffs import list_entry
from wiki_memory.core.memory import Memory

pytestmark = pytest.mark.fast

LISTED = [
    "id",
    "path",
    "title",
    "project",
    "status",
    "user",
    "harness",
    "session",
    "to",
    "visibility",
    "created",
    "updated",
    "expires",
    "claimed_by",
    "claimed_harness",
    "claimed_session",
    "claimed_at",
    "done_at",
    "auto",
    "offered_to",
]


def test_a_listed_handoff_keeps_what_to_act_on_in_order(mem: Memory) -> None:
    bob = as_user(mem, "bob")
    mem.handoffs.create(bob, project="p", title="Finish the deploy", where_we_left_off="half")
    (rec,) = mem.handoffs.list(bob, project="p")
    full = mem.handoffs.show(bob, rec["id"])
    entry = list_entry(full)
    assert list(entry) == LISTED
    assert entry["title"] == "Finish the deploy" and entry["user"] == "bob"
    assert "sections" in full and "stored_status" in full  # the input is not changed
    assert list(list_entry(rec)) == LISTED


def test_the_mcp_handoff_list_shows_the_listed_keys(mem: Memory) -> None:
    from mcp import Client

    from wiki_memory.mcp.tools import build_server

    mem.handoffs.create(as_user(mem, "alice"), project="p", title="Pick up the release")

    async def main() -> Any:
        async with Client(build_server(mem)) as c:
            return await c.call_tool("handoff_list", {"project": "p"})

    res = asyncio.run(main())
    assert not res.is_error, res
    (shown,) = res.structured_content["handoffs"]
    assert list(shown) == LISTED
    assert shown["title"] == "Pick up the release"
