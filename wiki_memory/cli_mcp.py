"""CLI subcommands of the mcp face."""

from __future__ import annotations

from typing import Any


def register(sub: Any) -> None:
    """Add this module's subcommands to the ``wiki-memory`` parser's subparsers."""
    del sub
