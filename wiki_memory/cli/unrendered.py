"""``wiki-memory unrendered``: accepted events that are on no page as themselves (each a
placeholder entry, or held back by a session whose compile keeps failing), listed, and
with ``--discard SESSION`` discarded by a person (docs/sessions.md, "Placeholders").
Talks to the running server (``GET /v1/admin/unrendered``, ``POST
/v1/admin/unrendered/discard``) as the token's user, who must be the wiki's owner or an
admin; the server writes the audit line. Exit status: 0 done (also when there are none),
1 error, 2 bad usage, 4 no such session, 6 not allowed."""

from __future__ import annotations

import argparse
import json
from typing import Any

from wiki_memory.cli.common import add_url, get_json, post_json
from wiki_memory.cli.declare import add_command, add_flag


def cmd_unrendered(args: argparse.Namespace) -> int:
    """List the sessions with unrendered events, or discard one session's."""
    if args.discard:
        res = post_json(args, "/v1/admin/unrendered/discard", {"session": args.discard})
        if args.json:
            print(json.dumps(res, indent=2))
            return 0
        what = (
            "its spool dropped (it had no page)"
            if res["dropped_spool"]
            else f"placeholders on {res['page']} no longer counted"
        )
        print(f"discarded {res['discarded']} event(s) of session {res['session'][:12]}: {what}")
        return 0
    res = get_json(args, "/v1/admin/unrendered", {})
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    rows: list[dict[str, Any]] = res["sessions"]
    if not rows:
        print("no unrendered events: every accepted event is on its session's page")
        return 0
    print(f"{res['events']} unrendered event(s) in {len(rows)} session(s):")
    for r in rows:
        where = r["page"] or f"no page (project {r['project'] or 'none'})"
        print(f"- session {r['session'][:12]} · {r['harness']} {r['session_id']} · {r['user']}")
        print(f"  {where}")
        if r["placeholders"]:
            print(f"  {len(r['placeholders'])} placeholder(s): " + ", ".join(r["placeholders"]))
        failed = r["compile_failed"]
        if failed:
            print(
                f"  compile failing since {failed['at']} ({failed['tries']} tries), "
                f"{failed['events']} event(s) held: {failed['cause']}"
            )
    print("discard one session's: wiki-memory unrendered --discard <session>")
    return 0


def register(sub: Any) -> None:
    """Add ``unrendered`` to the CLI's subcommands."""
    what = "accepted events that are on no page (placeholders, a failing compile)"
    u = add_command(sub, "unrendered", cmd_unrendered, f"list {what}; --discard one session's")
    u.add_argument(
        "--discard", metavar="SESSION", help="discard this session's (its key, 8+ characters)"
    )
    add_flag(u, "--json", "print the server's JSON")
    add_url(u)
