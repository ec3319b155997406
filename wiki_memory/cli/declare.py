"""How a ``wiki-memory`` subcommand is declared: :func:`add_command` makes its parser
(name, the function that runs it, its line of help) and :func:`add_flag` adds an on/off
option. Every command module's ``register`` calls them, so a subcommand's parts are
written one way. Neither raises beyond argparse's own errors for a name or option
declared twice (``argparse.ArgumentError``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

__all__ = ["add_command", "add_flag"]


def add_command(
    sub: Any, name: str, fn: Callable[[argparse.Namespace], int], help: str, **kw: Any
) -> argparse.ArgumentParser:
    """A subcommand ``name`` on ``sub`` (the ``wiki-memory`` parser's subparsers, or a
    command's own): ``help`` is its line in the parent's list, ``kw`` argparse's other
    parser settings (``description``, ``epilog``, ``formatter_class``); ``fn`` runs it and
    returns the exit status. The new parser, to add its arguments to."""
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help, **kw)
    parser.set_defaults(fn=fn)
    return parser


def add_flag(parser: Any, option: str, help: str) -> None:
    """Add the on/off ``option`` (``--dry-run``, ``--json``, ``--yes``, ...; False
    unless given) to ``parser``, ``help`` its line in the command's help."""
    parser.add_argument(option, action="store_true", help=help)
