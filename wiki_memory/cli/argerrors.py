"""A clearer word for the one argparse error new users meet most: a value given to an
option that takes none (``remember --new-project demo "text"``). argparse reports such
a value as an "unrecognized argument" without naming the flag before it; this module
finds that flag and says how the command is written instead.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

__all__ = ["flag_value_hint"]


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:  # argparse keeps its actions in this attribute only
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def _valueless_flags(parser: argparse.ArgumentParser) -> set[str]:
    flags: set[str] = set()
    for p in _parsers(parser):
        for action in p._actions:
            if action.option_strings and action.nargs == 0:
                flags.update(action.option_strings)
    return flags


def flag_value_hint(
    parser: argparse.ArgumentParser, argv: list[str], extras: list[str]
) -> str | None:
    """The error line for ``extras`` (what ``parse_known_args`` left over) when a word in
    ``argv`` directly follows an option that takes no value (that word, or one after it
    that it displaced from a positional, is what was left over), else ``None``.

    Example: ``remember --new-project demo "text"`` gives "unrecognized arguments: text;
    note that --new-project takes no value: to create project 'demo', write --project
    demo --new-project".
    """
    if not extras:
        return None
    flags = _valueless_flags(parser)
    for i, word in enumerate(argv[:-1]):
        value = argv[i + 1]
        if word in flags and not value.startswith("-"):
            hint = f"unrecognized arguments: {' '.join(extras)}; note that {word} takes no value"
            if word == "--new-project":
                hint += f": to create project {value!r}, write --project {value} --new-project"
            return hint
    return None
