"""Case C43: the tool list a model can afford and fill in.

The whole ``tools/list`` result, as the official SDK client receives it, stays within
2,000 cl100k tokens counted with the project's tokenizer (tools later issues add count
too); no schema has a top-level combinator; every required parameter is something a model
can know (the user's words, or another tool's output); no description shows a sample id;
arguments that fail validation answer one sentence naming the field. Step 4 of C43 (the
project from the bridge's working directory) is in ``test_projects_mcp.py``.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from wiki_memory.core.memory import Memory
from wiki_memory.mcp.tools import build_server
from wiki_memory.recall.tokens import count_tokens

#: Policy (C43): the whole tools/list result, cl100k tokens
TOOLS_LIST_BUDGET = 2000

#: For each tool, where a model gets each REQUIRED parameter (C43 step 3): (a) the
#: user's words, (b) another tool's output. A new tool or required parameter must be
#: added here, with its source; (c) server-side values and (d) hook internals must never
#: be required.
REQUIRED_SOURCES: dict[str, dict[str, str]] = {
    "memory_recall": {"query": "a: the user's words"},
    "memory_expand": {"ids": "b: memory_recall"},
    "memory_brief": {},
    "memory_remember": {"text": "a: the fact to keep"},
    "memory_feedback": {"path": "b: memory_recall", "verdict": "a: whether it helped the task"},
    "page_read": {"path": "b: memory_recall, page_list"},
    "page_list": {},
    "page_write": {"path": "b: page_list, or a: a new page", "text": "a: the page's text"},
    "page_edit": {"op": "a: what to change", "path": "b: memory_recall, page_list"},
    "page_forget": {"path": "b: memory_recall, page_list"},
    "handoff_create": {"title": "a: the work left"},
    "handoff_list": {},
    "handoff_claim": {"id": "b: the brief's offer code (memory_brief), handoff_list"},
    "handoff_update": {"id": "b: handoff_list, handoff_claim", "action": "a: what to do"},
}


def tools_list(memory: Memory) -> dict[str, Any]:
    """The ``tools/list`` result as a JSON-safe dict, from the SDK's client."""
    from mcp import Client

    async def main() -> Any:
        async with Client(build_server(memory)) as c:
            return await c.list_tools()

    body: dict[str, Any] = asyncio.run(main()).model_dump(
        by_alias=True, mode="json", exclude_none=True
    )
    body.pop("_meta", None)
    return body


def compact(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def test_the_whole_tool_list_is_within_the_token_budget(mem):
    body = tools_list(mem)
    n = count_tokens(compact(body))
    per_tool = {t["name"]: count_tokens(compact(t)) for t in body["tools"]}
    print(f"tools/list: {len(body['tools'])} tools, {n} tokens; per tool {per_tool}")
    assert n <= TOOLS_LIST_BUDGET, (n, per_tool)


def test_no_top_level_combinators_and_no_unknowable_required_parameter(mem):
    tools = tools_list(mem)["tools"]
    assert {t["name"] for t in tools} == set(REQUIRED_SOURCES)
    for t in tools:
        schema = t["inputSchema"]
        assert schema["type"] == "object", t["name"]
        for key in ("oneOf", "anyOf", "allOf", "not", "if"):
            assert key not in schema, (t["name"], key)
        required = set(schema.get("required") or [])
        assert required == set(REQUIRED_SOURCES[t["name"]]), t["name"]
        for hidden in ("harness", "session_id", "session", "cwd"):
            assert hidden not in schema["properties"], (t["name"], hidden)


def test_no_sample_ids_in_descriptions_or_schemas(mem):
    text = compact(tools_list(mem))
    for pattern in (
        r"\bH-\d{3,}",  # handoff ids
        r"\bses_[0-9a-f]{4,}",  # session page ids
        r"\^t\d+",  # timeline anchors
        r"\bwmo_[a-z0-9]{4,}",  # offer codes
        r"\bh[0-9a-f]{10}\b",  # recall handles
        r'"examples?"',
    ):
        assert not re.search(pattern, text), pattern


def test_bad_arguments_answer_one_sentence_naming_the_field(mem):
    from mcp import Client

    async def main() -> list[Any]:
        async with Client(build_server(mem)) as c:
            return [
                await c.call_tool("memory_recall", {"query": "x", "budget_tokens": -1}),
                await c.call_tool("memory_recall", {}),
                await c.call_tool("handoff_update", {"id": "H-1", "action": "finish"}),
                await c.call_tool("page_list", {"limit": "many"}),
            ]

    texts = ["\n".join(c.text for c in r.content) for r in asyncio.run(main())]
    assert texts[0] == "bad_request: budget_tokens: input should be greater than or equal to 0"
    assert texts[1] == "bad_request: query: is required"
    assert texts[2].startswith("bad_request: action: input should be 'complete', 'release'")
    assert texts[3].startswith("bad_request: limit: input should be a valid integer")
    for t in texts:
        assert "\n" not in t and "validation error" not in t and "pydantic" not in t, t
