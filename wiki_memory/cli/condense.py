"""CLI ``condense [--older-than DAYS] [--dry-run] [--project P] [--json]`` and
``uncondense PATH``: cold session pages condensed to their durable facts, and one page's
timeline put back from git history (docs/knowledge.md, "Cold sessions condensed").
Through the running server, with the caller's token; for the wiki's owner and admins
(exit 3 otherwise, as every refusal)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from wiki_memory.cli.common import add_url, post_json
from wiki_memory.cli.declare import add_command, add_flag

__all__ = ["register"]


def cmd_condense(args: argparse.Namespace) -> int:
    """Print one line per page condensed (or that would be, with ``--dry-run``) and the
    tokens before and after."""
    body: dict[str, Any] = {"dry_run": bool(args.dry_run)}
    if args.older_than is not None:
        body["older_than_days"] = args.older_than
    if args.project:
        body["project"] = args.project
    res = post_json(args, "/v1/admin/condense", body, timeout=600)
    if args.json:
        print(json.dumps(res, indent=1, ensure_ascii=False))
        return 0
    for p in res["pages"]:
        print(
            f"{p['path']}: {p['entries']} entries, {p['kept']} kept with their block id; "
            f"{p['tokens_before']:,} → {p['tokens_after']:,} tokens"
        )
    verb = "would condense" if res["dry_run"] else "condensed"
    print(
        f"{verb} {res['condensed']} session page(s) older than {res['older_than_days']:g} "
        f"days: {res['tokens_before']:,} → {res['tokens_after']:,} tokens"
        + ("" if res["dry_run"] or not res["condensed"] else " (one commit)")
    )
    return 0


def cmd_uncondense(args: argparse.Namespace) -> int:
    """Print the page restored and its size."""
    res = post_json(args, "/v1/admin/uncondense", {"path": args.path}, timeout=120)
    print(
        f"{res['path']}: timeline restored from git history "
        f"({res['tokens_before']:,} → {res['tokens_after']:,} tokens)"
    )
    return 0


def register(sub: Any) -> None:
    """Add ``condense`` and ``uncondense`` to the ``wiki-memory`` parser's subparsers."""
    c = add_command(
        sub,
        "condense",
        cmd_condense,
        "condense cold session pages to their durable facts (owner and admins)",
        description="Rewrite the timeline of every session page whose ended and updated "
        "times are older than --older-than days to its durable facts: goal, decisions, "
        "files, commands that worked, errors and how they ended, open questions. Prompts "
        "and every linked entry keep their block id; the full text stays in git history "
        "(wiki-memory uncondense PATH). One commit.",
    )
    c.add_argument(
        "--older-than",
        type=float,
        metavar="DAYS",
        help="how old ended and updated must be (default: condense_after_days, 90)",
    )
    add_flag(c, "--dry-run", "list what would change; write nothing")
    c.add_argument("--project", help="one project (default: every project)")
    add_flag(c, "--json", "print the answer as JSON")
    add_url(c)
    u = add_command(
        sub,
        "uncondense",
        cmd_uncondense,
        "put a condensed session page's timeline back from git history",
        description="Restore the timeline section of a condensed session page byte for "
        "byte from the commit before it was condensed; edits made elsewhere in the page "
        "are kept.",
    )
    u.add_argument("path", help="the session page (projects/<p>/sessions/<name>.md)")
    add_url(u)
