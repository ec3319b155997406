"""``wiki-memory remember TEXT``: the CLI face of remember (docs/knowledge.md).

Like ``forget`` it goes through the running server when there is one, else it opens the
data directory itself as the wiki's owner and runs the same core operation.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from wiki_memory.cli.common import CliError, add_url, given, post_json
from wiki_memory.cli.declare import add_command, add_flag
from wiki_memory.cli.remove import through_core

__all__ = ["register"]

NO_PROJECT = "name the project: --project NAME (the working directory is in no repository)"


def cmd_remember(args: argparse.Namespace) -> int:
    """``remember TEXT [--project P] [--new-project] [--title] [--tag]… [--supersedes]…
    [--if-new]``: without ``--project``, the working directory's project
    (:func:`wiki_memory.cli.where.where`)."""
    from wiki_memory.cli.where import where
    from wiki_memory.core.remember import remember

    text = sys.stdin.read() if args.text == "-" else args.text
    body: dict[str, Any] = {"text": text, "harness": "cli", **where(args.project, args.new_project)}
    body.update(given(args, "title", tags="tag", supersedes="supersedes", if_new="if_new"))

    def run(memory: Any) -> dict[str, Any]:
        with memory.project_start.writing(
            memory.scope.local_owner,
            explicit=body.get("project"),
            op="page.write",
            cwd=body["cwd"],
            repo_id=body.get("repo_id"),
            create=args.new_project,
        ) as (project, who):
            if project is None:
                raise CliError(NO_PROJECT, 2)
            return dict(
                remember(
                    memory,
                    text,
                    project=project,
                    title=args.title,
                    tags=args.tag,
                    user=who,
                    harness="cli",
                    supersedes=args.supersedes,
                    if_new=args.if_new,
                )
            )

    res = through_core(args, lambda: post_json(args, "/v1/remember", body), run)
    if args.json:
        print(json.dumps(res, ensure_ascii=False))
        return 0
    if res.get("duplicate"):
        print(f"already remembered: {res['path']} ({res.get('count')} times)")
    elif res.get("written") is False:
        print("not written (--if-new): similar notes exist")
    else:
        print(f"remembered: {res['path']}")
    for key in ("supersedes", "similar", "may_supersede"):
        for p in res.get(key) or []:
            print(f"{key.replace('_', ' ')}: {p}")
    return 0


def register(sub: Any) -> None:
    """Add ``remember`` to the ``wiki-memory`` parser's subparsers."""
    r = add_command(
        sub, "remember", cmd_remember, "save a note in a project (duplicates are not re-written)"
    )
    r.add_argument("text", help="the note's text ('-': standard input)")
    r.add_argument("--project", help="the project (default: the working directory's repository's)")
    add_flag(r, "--new-project", "create the project --project names when it does not exist yet")
    r.add_argument("--title", help="the note's title (default: its first line)")
    r.add_argument("--tag", action="append", help="a tag (repeatable)")
    r.add_argument(
        "--supersedes", action="append", help="a page path or title this note corrects (repeatable)"
    )
    add_flag(r, "--if-new", "write nothing when a similar note exists")
    add_flag(r, "--json", "print the answer as JSON")
    add_url(r)
