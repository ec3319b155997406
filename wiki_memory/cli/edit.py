"""``wiki-memory edit OP PATH``: a precise edit of one page (docs/api.md "Precise edits"),
the same core operation as ``POST /v1/edit`` and the MCP tool ``page_edit``.

Through the running server when there is one (``--url``, ``WIKI_MEMORY_URL`` or the
server holding the data directory), with the CLI's token; otherwise on the data
directory itself, as the wiki's owner. ``--text -`` reads the text from standard input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from wiki_memory.cli.common import CliError, add_url, post_json
from wiki_memory.cli.declare import add_command, add_flag
from wiki_memory.cli.remove import through_core

__all__ = ["register"]


def cmd_edit(args: argparse.Namespace) -> int:
    """Run the edit and print its result (JSON with ``--json``)."""
    from wiki_memory.core.edits import edit_page

    text = args.text
    if text == "-":
        text = sys.stdin.read()
    body: dict[str, Any] = {"op": args.op, "path": args.path}
    for key, value in (
        ("text", text),
        ("section", args.section),
        ("hash", args.hash),
        ("new_path", args.to),
        ("edit_id", args.edit_id),
    ):
        if value is not None:
            body[key] = value
    if args.op == "rename" and not args.to:
        raise CliError("rename needs --to NEW_PATH", 2)
    res = through_core(
        args,
        lambda: post_json(args, "/v1/edit", body),
        lambda memory: edit_page(
            memory,
            args.op,
            args.path,
            who=memory.scope.local_owner,
            text=text,
            section=args.section,
            expected_hash=args.hash,
            new_path=args.to,
            edit_id=args.edit_id,
            face="cli",
        ),
    )
    if args.json:
        print(json.dumps(res, ensure_ascii=False, indent=2))
    elif res.get("repeated"):
        print(f"already done (same edit id): {res['path']} (hash {res['hash']})")
    elif args.op == "rename":
        print(
            f"renamed {res['from']} to {res['path']}; links rewritten in "
            f"{len(res['rewritten'])} page(s), left in {res['kept']} page(s) you may not write"
        )
    else:
        extra = f", section hash {res['section_hash']}" if "section_hash" in res else ""
        print(f"edited {res['path']} (hash {res['hash']}{extra})")
    return 0


def register(sub: Any) -> None:
    """Add ``edit`` to the ``wiki-memory`` parser's subparsers."""
    e = add_command(
        sub,
        "edit",
        cmd_edit,
        "append to a page or section, add a checklist item, replace a section, or rename a page",
        description="Edit one page precisely, through the server (one commit, your name).",
        epilog=(
            "operations:\n"
            "  append           add --text at the end of the page, or of --section\n"
            "  item             add --text as a checklist item ('- [ ] ...'), to --section if given\n"
            "  replace_section  replace the body of --section with --text; --hash is the\n"
            "                   section's hash (a wrong or missing hash is refused with the current one)\n"
            "  rename           move the page to --to; the old name becomes an alias and links\n"
            "                   in pages you may write are rewritten\n"
            "append and item need no hash: they merge into the current text. A retry with the\n"
            "same --edit-id edits once."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    e.add_argument(
        "op",
        choices=["append", "item", "replace_section", "rename"],
        help="what to do (see operations below)",
    )
    e.add_argument("path", help="page path inside the wiki")
    e.add_argument("--text", help="the text to add or the section's new body ('-': stdin)")
    e.add_argument("--section", help="a heading of the page")
    e.add_argument("--hash", help="the section's hash (replace_section)")
    e.add_argument("--to", help="the new path (rename)")
    e.add_argument("--edit-id", dest="edit_id", help="a retry with the same id edits once")
    add_flag(e, "--json", "print the result as JSON")
    add_url(e)
