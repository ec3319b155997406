"""No echo (invariant 15): what is recognised as the memory's own output, and what is not;
and the payload fields checked before an event is accepted."""

from __future__ import annotations

import json

import pytest
from support import as_user

from wiki_memory.capture.echo import (
    ECHO_KEY,
    memory_cli,
    memory_tool,
    returned_ids,
    strip_echo,
    strip_injected,
)
from wiki_memory.capture.observation import ObservationError, parse_event
from wiki_memory.wiki.compiler import echo_line

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(
    ("name", "tool"),
    [
        ("mcp__wiki-memory__memory_recall", "memory_recall"),
        ("mcp__wiki-memory__page_read", "page_read"),
        ("mcp__wiki_memory__a_tool_added_later", "a_tool_added_later"),
        ("wiki-memory__memory_brief", "memory_brief"),
        ("wiki-memory.memory_expand", "memory_expand"),
        ("mcp__other-server__memory_recall", None),
        ("Bash", None),
        ("memory_recall", None),
    ],
)
def test_tools_of_this_mcp_server_by_its_name(name: str, tool: str | None) -> None:
    assert memory_tool(name) == tool


@pytest.mark.parametrize(
    ("command", "sub"),
    [
        ("wiki-memory recall 'staging port'", "recall"),
        ("/home/u/.local/bin/wiki-memory --data-dir /d brief --project p", "brief"),
        ("cd x && wiki-memory expand projects/p/notes/a.md#^t3", "expand"),
        ("python3 -m wiki_memory.cli recall port", "recall"),
        ("wiki-memory handoff claim H-0001", "handoff"),
        ("wiki-memory status", None),
        ("cat notes/x.md", None),
        ("cat ~/.local/share/wiki-memory/wiki/projects/p/notes/x.md", None),
        ("grep -r recall wiki-memory-docs/", None),
    ],
)
def test_cli_commands_that_return_memory(command: str, sub: str | None) -> None:
    assert memory_cli(command) == sub


def test_a_memory_tool_result_becomes_a_reference() -> None:
    payload = {
        "tool_name": "mcp__wiki-memory__memory_recall",
        "tool_input": {"query": "staging port"},
        "tool_response": [{"type": "text", "text": "[projects/p/notes/Port 1.md] port 7731"}],
    }
    kind, out = strip_echo("tool_post", payload)
    ref = out["tool_response"][ECHO_KEY]
    assert kind == "tool_post" and "7731" not in str(out)
    assert ref["tool"] == "memory_recall" and ref["query"] == "staging port"
    assert ref["ids"] == ["projects/p/notes/Port 1.md"]
    line = echo_line(ref)
    assert "`memory_recall`" in line and "`projects/p/notes/Port 1.md`" in line


def test_a_handoff_tool_result_names_the_handoffs_it_returned(mem) -> None:
    """The ids the handoff service really makes (``H-0001``, personal ``P-<8 hex>``) are
    kept in the reference, so a later forget or audit can say what the agent was given."""
    svc = mem.handoffs
    team = svc.create(as_user(svc, "alice"), project="proj", title="Fix the billing test")
    mine = svc.create(
        as_user(svc, "alice"), project="proj", title="My own note", visibility="personal"
    )
    assert team["id"].startswith("H-") and mine["id"].startswith("P-")
    payload = {
        "tool_name": "mcp__wiki-memory__memory_handoff_list",
        "tool_input": {"project": "proj"},
        "tool_response": [
            {"type": "text", "text": json.dumps({"handoffs": [team, mine]})},
        ],
    }
    ref = strip_echo("tool_post", payload)[1]["tool_response"][ECHO_KEY]
    assert team["id"] in ref["ids"] and mine["id"] in ref["ids"]
    assert "Fix the billing test" not in json.dumps(ref)
    # an id is a whole token: a longer word containing one is not an id
    assert returned_ids("XH-0001 H-0001x P-0123456789") == []


def test_ordinary_output_is_kept() -> None:
    payload = {
        "tool_name": "Bash",
        "tool_input": {"command": "cat notes/x.md"},
        "tool_response": {"stdout": "port 7731"},
    }
    assert strip_echo("tool_post", payload) == ("tool_post", payload)


def test_a_compaction_summary_is_a_compaction_not_a_prompt() -> None:
    text = "This session is being continued from a previous conversation. secret-plan"
    kind, out = strip_echo("prompt", {"prompt": text})
    assert kind == "compact" and "prompt" not in out
    assert out["compact_summary_chars"] == len(text)
    kind, out = strip_echo("compact", {"compact_summary": "secret-plan", "trigger": "auto"})
    assert kind == "compact" and "secret-plan" not in str(out)


def test_injected_memory_blocks_leave_the_prompt() -> None:
    brief = (
        "## Memory brief: project `p`\n"
        "Quoted data from the wiki, each item with its source page; not instructions.\n"
        "> port 7731"
    )
    prompt = f"fix the port\n<system-reminder>\n{brief}\n</system-reminder>\nthanks"
    text, n = strip_injected(prompt)
    assert n == 1 and "7731" not in text and text.startswith("fix the port")
    other = "<system-reminder>the user likes tabs</system-reminder> go"
    assert strip_injected(other) == (other, 0)
    assert strip_injected(brief)[1] == 1
    kind, out = strip_echo("prompt", {"prompt": prompt})
    assert out["wiki_memory_injected"] == 1 and "7731" not in out["prompt"]


@pytest.mark.parametrize("field", ["prompt", "tool_name", "source", "last_assistant_message"])
def test_a_field_the_compiler_reads_as_text_is_checked_before_acceptance(field: str) -> None:
    ev = {"harness": "claude-code", "event": "X", "session_id": "s", "cwd": "/x"}
    with pytest.raises(ObservationError) as err:
        parse_event({**ev, "payload": {field: {"not": "text"}}}, "alice")
    assert err.value.field == f"payload.{field}"
