"""What the MCP tool list costs a session's context: ``tools/list`` in bytes and cl100k
tokens, whole and per tool (description, input schema, output schema).

Counted the way ``tests/mcp/test_tool_list.py`` bounds it: the ``tools/list`` result as the
official SDK client receives it from this project's server (in process), serialized as
compact JSON, counted with :func:`wiki_memory.recall.tokens.count_tokens` (cl100k). Not a
speed measurement; it prints one table. Policy (case C43): at most 2,000 tokens.

    python bench/mcp_tools.py
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support import make_memory  # noqa: E402

from wiki_memory.mcp.tools import build_server  # noqa: E402
from wiki_memory.recall.tokens import count_tokens  # noqa: E402

BUDGET = 2000


def compact(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def tools_list(data: Path) -> dict[str, Any]:
    """The ``tools/list`` result (JSON-safe dict) of a server over a fresh data dir."""
    from mcp import Client

    memory = make_memory(data)
    try:

        async def main() -> Any:
            async with Client(build_server(memory)) as c:
                return await c.list_tools()

        res = asyncio.run(main())
    finally:
        memory.stop()
    body: dict[str, Any] = res.model_dump(by_alias=True, mode="json", exclude_none=True)
    body.pop("_meta", None)
    return body


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        body = tools_list(Path(tmp) / "data")
    whole = compact(body)
    print(f"{'tool':<18} {'tokens':>6} {'descr':>6} {'input':>6} {'output':>6}  required")
    for t in body["tools"]:
        print(
            f"{t['name']:<18} {count_tokens(compact(t)):>6}"
            f" {count_tokens(t.get('description') or ''):>6}"
            f" {count_tokens(compact(t['inputSchema'])):>6}"
            f" {count_tokens(compact(t['outputSchema'])) if 'outputSchema' in t else 0:>6}"
            f"  {','.join(t['inputSchema'].get('required') or [])}"
        )
    n = count_tokens(whole)
    print(
        f"\n{len(body['tools'])} tools, {len(whole.encode())} bytes, {n} tokens"
        f" (budget {BUDGET}; {n / BUDGET:.2f} of it)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
