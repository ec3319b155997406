"""CLI ``contradictions [--project P] [--json]``: the notes that disagree, as flags
(docs/knowledge.md, "Contradictions"). Through the running server, with the caller's
token: a flag is listed only when the caller may read both pages. Exit 0 (also when
there is none), 4 for a project the caller may not read."""

from __future__ import annotations

import argparse
import json
from typing import Any

from wiki_memory.cli.common import add_url, get_json
from wiki_memory.cli.declare import add_command, add_flag

__all__ = ["register"]


def cmd_contradictions(args: argparse.Namespace) -> int:
    """Print one block per flag: the two pages and what each says."""
    params = {"project": args.project} if args.project else {}
    res = get_json(args, "/v1/contradictions", params)
    flags = res["contradictions"]
    if args.json:
        print(json.dumps(res, indent=1, ensure_ascii=False))
        return 0
    if not flags:
        print("no contradictions found")
        return 0
    for f in flags:
        print(f"{f['project']}: {f['kind']}")
        print(f"  {f['a']}: {f['a_says']}")
        print(f"  {f['b']}: {f['b_says']}")
    print(
        f"{len(flags)} contradiction(s). Resolve one by superseding a side "
        "(remember --supersedes), or mark the pair compatible_with in either page."
    )
    return 0


def register(sub: Any) -> None:
    """Add ``contradictions`` to the ``wiki-memory`` parser's subparsers."""
    c = add_command(
        sub,
        "contradictions",
        cmd_contradictions,
        "notes of a project that disagree (flags: both sides are kept)",
        description="Pairs of current notes about the same subject that give incompatible "
        "values (ports, versions, dates, paths, products, negation). Nothing is hidden or "
        "decided: supersede one side, or mark the pair compatible_with.",
    )
    c.add_argument("--project", help="one project (default: every project you may read)")
    add_flag(c, "--json", "print the answer as JSON")
    add_url(c)
