"""Enumerate what the faces offer, from the code itself: the CLI's commands (from the argparse
parser), the app's routes (from Starlette's route table) and the MCP tools (``tools/list``
over the SDK's in-memory client). Shared by the tests that must cover every one of them
(``test_scope_faces.py``: every face probed; ``test_docs_complete.py``: every face documented),
so a new command, route or tool is found without anyone adding it to a list.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any


def cli_commands() -> list[tuple[str, ...]]:
    """Every ``wiki-memory`` command as a tuple of words: ``("serve",)``, ``("token",)``,
    ``("token", "create")``, … Nested sub-parsers are walked; a command's positional
    argument with fixed ``choices`` (``handoff claim``, ``token revoke``) counts as its
    sub-commands too."""
    from wiki_memory.cli.main import build_parser

    out: list[tuple[str, ...]] = []

    def walk(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> None:
        for a in parser._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sub in a.choices.items():
                    out.append((*words, name))
                    walk(sub, (*words, name))
            elif words and not a.option_strings and a.choices:
                out.extend((*words, str(c)) for c in a.choices)

    walk(build_parser(), ())
    return out


def app_routes(tmp: Path, owner: str = "olivia") -> list[str]:
    """``METHOD path`` for every route of the app ``create_app`` builds over a fresh data
    directory under ``tmp`` (HEAD left out; mounts walked; anything that is not a plain
    route is listed as ``? path``)."""
    from starlette.routing import Mount, Route

    from wiki_memory.auth import TokenStore
    from wiki_memory.config import load_settings
    from wiki_memory.core.memory import Memory
    from wiki_memory.datadir import ensure_layout
    from wiki_memory.server.app import create_app

    settings = load_settings(tmp / "data", watch=False)
    ensure_layout(settings)
    tokens = TokenStore(settings.auth_dir, owner_user=owner)
    tokens.ensure_owner()
    app: Any = create_app(Memory(settings, owner_user=owner), tokens)
    seen = set()
    while not hasattr(app, "routes"):  # through the middleware to the Starlette app
        assert id(app) not in seen and hasattr(app, "app"), f"no route table in {app!r}"
        seen.add(id(app))
        app = app.app
    out: list[str] = []

    def walk(routes: list[Any], prefix: str) -> None:
        for r in routes:
            if isinstance(r, Mount):
                walk(list(r.routes), prefix + r.path)
            elif isinstance(r, Route):
                for m in sorted((r.methods or {"GET"}) - {"HEAD"}):
                    out.append(f"{m} {prefix}{r.path}")
            else:
                out.append(f"? {prefix}{getattr(r, 'path', repr(r))}")

    walk(list(app.routes), "")
    return out


def mcp_tool_names(tmp: Path, owner: str = "olivia") -> list[str]:
    """The names ``tools/list`` returns for the MCP server ``build_server`` makes over a
    fresh data directory under ``tmp`` (the SDK's in-memory client: no network)."""
    from mcp import Client

    from wiki_memory.config import load_settings
    from wiki_memory.core.memory import Memory
    from wiki_memory.datadir import ensure_layout
    from wiki_memory.mcp.tools import build_server

    settings = load_settings(tmp / "data", watch=False)
    ensure_layout(settings)
    server = build_server(Memory(settings, owner_user=owner))

    async def main() -> list[str]:
        async with Client(server) as c:
            return [t.name for t in (await c.list_tools()).tools]

    return asyncio.run(main())
