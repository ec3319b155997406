"""CLI ``feedback PATH helped|not_helpful``: say whether a page helped (docs/knowledge.md,
"Strength"). Through the running server, with the caller's token: one verdict per user,
page and day, the last; a page the caller may not read answers as a missing one (exit
status of a 404, :data:`wiki_memory.errors.TABLE`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from wiki_memory.cli.common import add_url, post_json
from wiki_memory.cli.declare import add_command, add_flag

__all__ = ["register"]


def cmd_feedback(args: argparse.Namespace) -> int:
    """Post the verdict; print what was recorded."""
    res = post_json(args, "/v1/feedback", {"path": args.path, "verdict": args.verdict})
    if args.json:
        print(json.dumps(res, indent=1, ensure_ascii=False))
    elif res.get("counted"):
        print(f"{res['path']}: {res['verdict']} (counted for {res['day']}, once per day)")
    else:
        print(f"{res['path']}: {res['verdict']} not counted (only a signed-in user's counts)")
    return 0


def register(sub: Any) -> None:
    """Add ``feedback`` to the ``wiki-memory`` parser's subparsers."""
    c = add_command(
        sub,
        "feedback",
        cmd_feedback,
        "say whether a page helped (it then ranks higher, or lower, in recall)",
        description="Record your verdict on a page: helped or not_helpful. One verdict per "
        "user, page and day counts (the last); it adds to the page's strength, one signal "
        "of recall's ranking.",
    )
    c.add_argument("path", help="the page's wiki path (as recall or page listings show it)")
    c.add_argument("verdict", metavar="helped|not_helpful", help="your verdict")
    add_flag(c, "--json", "print the answer as JSON")
    add_url(c)
