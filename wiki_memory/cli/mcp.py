"""CLI subcommands of the MCP face: ``mcp`` (the stdio bridge, in
:mod:`wiki_memory.mcp.bridge`), ``install-mcp`` and ``uninstall-mcp``."""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

from wiki_memory.cli.declare import add_command, add_flag
from wiki_memory.cli.plans import show_or_apply
from wiki_memory.mcp.bridge import cmd_mcp

__all__ = ["cmd_install_mcp", "cmd_mcp", "register"]


def cmd_install_mcp(args: argparse.Namespace, uninstall: bool = False) -> int:
    """Print (and with ``--apply`` write) a client's MCP configuration with our server."""
    from pathlib import Path

    from wiki_memory.harness import mcp_install as mi

    planner = mi.plan_uninstall if uninstall else mi.plan_install
    return show_or_apply(
        lambda: planner(
            args.client,
            path=Path(args.config).expanduser() if args.config else None,
            scope=args.scope,
            python=args.python,
            script=getattr(args, "bridge_script", None),
            data_dir=Path(args.data_dir).expanduser().resolve() if args.data_dir else None,
            url=getattr(args, "url", None),
            token_file=getattr(args, "token_file", None),
            ca_file=getattr(args, "ca_file", None),
            name=args.name,
            force=getattr(args, "force", False),
        ),
        mi.describe,
        mi.apply,
        args.apply,
    )


def register(sub: Any) -> None:
    """Add ``mcp``, ``install-mcp`` and ``uninstall-mcp`` to the ``wiki-memory`` parser."""
    m = add_command(
        sub,
        "mcp",
        cmd_mcp,
        "stdio MCP bridge to the running server (for clients that spawn a process)",
        description="Forward MCP JSON-RPC between stdin/stdout and the server's /mcp "
        "endpoint. Stdout carries protocol frames only; logs go to stderr.",
    )
    m.add_argument("--url", help="server URL (default: the server running on the data dir)")
    m.add_argument(
        "--token-file", help="file holding the bearer token (default: the local owner's)"
    )
    m.add_argument(
        "--harness",
        help="the harness this bridge serves (install-mcp writes it; default: the client's name)",
    )
    m.add_argument(
        "--wait",
        type=float,
        default=8.0,
        help="seconds to wait for the server at start (default 8)",
    )

    from wiki_memory.harness.mcp_install import CLIENTS

    for verb in ("install-mcp", "uninstall-mcp"):
        removing = verb == "uninstall-mcp"
        p = add_command(
            sub,
            verb,
            partial(cmd_install_mcp, uninstall=True) if removing else cmd_install_mcp,
            "remove our MCP server from a client's configuration"
            if removing
            else "add the MCP server to a client's configuration",
        )
        p.add_argument("--client", required=True, choices=sorted(CLIENTS))
        add_flag(p, "--apply", "write the change (default: show it)")
        p.add_argument(
            "--scope",
            choices=["user", "project"],
            default="user",
            help="user-wide file (default) or the current project's (.mcp.json, "
            ".cursor/mcp.json, .gemini/settings.json, .codex/config.toml)",
        )
        p.add_argument("--config", help="the client's configuration file (default: its own)")
        p.add_argument("--name", default="wiki-memory", help="server name (default wiki-memory)")
        p.add_argument("--python", help="Python interpreter for the bridge command")
        p.add_argument("--bridge-script", help=argparse.SUPPRESS)
        if removing:
            add_flag(p, "--force", "remove our entry even if edited by hand")
        else:
            p.add_argument("--url", help="a team server's URL (default: the local server)")
            p.add_argument(
                "--token-file",
                help="for --url: a file holding your token (the token itself is never written)",
            )
