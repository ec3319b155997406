"""CLI subcommands of the handoffs face: ``handoff …``, ``brief`` and ``pin``/``unpin``.

``handoff`` and ``brief`` talk to the running server over HTTP (like ``recall``), as the
token's user, naming harness ``cli`` and session ``$WIKI_MEMORY_SESSION_ID`` (default
``cli``) unless ``--harness``/``--session`` say otherwise. Exit status: 0 done, 1 error,
2 bad usage, 3 conflict (409: claimed by another, done, cancelled, expired), 4 not found.

``pin``/``unpin`` are for the wiki's owner: they edit the page file itself (only its
``pinned`` frontmatter line; everything else stays byte for byte), so the change is a
hand edit that a running server's watcher commits as the owner's. The page is read
through the one scope rule as the owner: no path through a symbolic link, no
hard-linked file, no other user's personal page.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from typing import Any

from wiki_memory.cli.agentfiles import add_write_options
from wiki_memory.cli.common import CliError, add_url, call_json, cli_settings, given, post_json
from wiki_memory.cli.declare import add_command, add_flag
from wiki_memory.core.quoting import inline, show


def _request(args: argparse.Namespace, method: str, path: str, body: Any = None) -> Any:
    return call_json(args, method, path, 60, json=body)


def _ident(args: argparse.Namespace) -> dict[str, str]:
    return {
        "harness": args.harness or "cli",
        "session_id": args.session or os.environ.get("WIKI_MEMORY_SESSION_ID") or "cli",
    }


def _line(h: dict[str, Any]) -> str:
    holder = ""
    if h.get("claimed_by"):
        holder = f"  by {h['claimed_by']} ({h.get('claimed_harness')} {h.get('claimed_session')})"
    elif h.get("offered_to"):
        o = h["offered_to"]
        holder = f"  offered to {o['user']} ({o['harness']} {o['session']}) until {o['until']}"
    line = f"{h['id']:<8} {h['status']:<9} {h.get('project') or '':<16} {inline(h['title'])[:60]}"
    return line + inline(holder)


def _print(args: argparse.Namespace, data: Any, text: str) -> None:
    if getattr(args, "json", False):
        print(json.dumps(data, indent=1, ensure_ascii=False))
    else:  # stored text: what would hide or move on a terminal shows escaped
        print(show(text, keep="\t\n"))


def cmd_handoff(args: argparse.Namespace) -> int:
    action = args.action
    if action == "create":
        if not args.title:
            raise CliError("handoff create needs --title", 2)
        from wiki_memory.cli.where import where

        body: dict[str, Any] = {
            **where(args.project, args.new_project),
            "title": args.title,
            **_ident(args),
        }
        body.update(given(args, "where_we_left_off", "what_failed", "to", "expires"))
        if args.personal:
            body["visibility"] = "personal"
        body.update(given(args, next_steps="next", open_questions="question", files="file"))
        res = _request(args, "POST", "/v1/handoffs", body)["handoff"]
        _print(args, res, f"created {res['id']} ({res['path']})")
        return 0
    if action == "list":
        params = []
        if args.project:
            params.append(("project", args.project))
        if args.status:
            params.append(("status", args.status))
        import urllib.parse

        qs = "?" + urllib.parse.urlencode(params) if params else ""
        res = _request(args, "GET", "/v1/handoffs" + qs)["handoffs"]
        _print(args, res, "\n".join(_line(h) for h in res) if res else "no handoffs")
        return 0
    if not args.id:
        raise CliError(f"handoff {action} needs a handoff id", 2)
    hid = args.id
    if action == "show":
        res = _request(args, "GET", f"/v1/handoffs/{hid}")["handoff"]
        _print(args, res, _line(res) + "\n\n" + res.get("content", ""))
        return 0
    body = _ident(args)
    if action == "complete" and args.note:
        body["note"] = args.note
    if action == "cancel" and args.reason:
        body["reason"] = args.reason
    res = _request(args, "POST", f"/v1/handoffs/{hid}/{action}", body)
    h = res["handoff"]
    again = " (already so)" if res.get("repeat") else ""
    text = f"{h['id']} {h['status']}{again}: {h['title']}"
    if action == "claim" and h.get("status") == "claimed":
        wm = "wiki-memory"
        if getattr(args, "data_dir", None):
            wm += f" --data-dir {shlex.quote(str(args.data_dir))}"
        text += (
            f"\nwhen finished: {wm} handoff complete {h['id']} --note '<outcome>'"
            f"\nto give it back: {wm} handoff release {h['id']}"
        )
    _print(args, res, text)
    return 0


def cmd_brief(args: argparse.Namespace) -> int:
    if args.write or args.check or args.tracked_ok:
        if not args.write:
            raise CliError("--check and --tracked-ok go with --write FILE", 2)
        from wiki_memory.cli.agentfiles import write_brief

        return write_brief(args)
    from wiki_memory.capture.project import resolve_project
    from wiki_memory.cli.where import where

    # the working directory's project, named as a write from here names it (its
    # repository's id, else a .wiki-memory.toml's name): the server cannot read this disk
    body: dict[str, Any] = where(args.project)
    if "project" not in body:
        found = resolve_project(body["cwd"])
        if found.name:
            body["project"] = found.name
    body["budget_tokens"] = 1500 if args.budget is None else args.budget
    if args.session:
        body.update(_ident(args))
    if args.max_offers is not None:
        body["max_offers"] = args.max_offers
    res = _request(args, "POST", "/v1/brief", body)
    if args.json:
        print(json.dumps(res, indent=1, ensure_ascii=False))
        return 0
    print(res["text"] or "(empty brief)", end="" if res["text"] else "\n")
    left = res["omitted"]
    note = f"{res['used_tokens']}/{res['budget_tokens']} tokens"
    if left:
        note += f"; left out: {', '.join(p.get('id') or p.get('path') or p['kind'] for p in left)}"
    print(f"({note})", file=sys.stderr)
    return 0


def cmd_pin(args: argparse.Namespace) -> int:
    """``pin PATH`` / ``unpin PATH``: through the running server when there is one (so the
    scope rule and the audit log see it: ``POST /v1/admin/pin``), else a hand edit of the
    file as the wiki's owner, under the same scope rule, written to the audit log."""
    from wiki_memory.audit import AuditLog
    from wiki_memory.auth import TokenStore
    from wiki_memory.core.pins import pin_bytes
    from wiki_memory.core.scope import ScopeRule
    from wiki_memory.datadir import ServerLock
    from wiki_memory.errors import BadRequest, NotFound
    from wiki_memory.identity import Identity
    from wiki_memory.plainfile import atomic_write
    from wiki_memory.wiki.paths import PathRefused

    pinned = args.command == "pin"
    settings = cli_settings(args)
    remote = getattr(args, "url", None) or os.environ.get("WIKI_MEMORY_URL")
    if remote or ServerLock(settings.data_dir).is_held_elsewhere():
        post_json(args, "/v1/admin/pin", {"path": args.path, "pinned": pinned})
        print(f"{'pinned' if pinned else 'unpinned'} {args.path}")
        return 0
    owner = TokenStore(settings.auth_dir).owner_name()
    rule = ScopeRule(settings.wiki_dir, owner)
    try:
        # the one scope rule, as the wiki's owner: no link on the way, no hard-linked
        # file, no other user's personal page (a hidden page answers like a missing one)
        page = rule.read(Identity(owner, role="owner"), args.path)
    except PathRefused as exc:
        raise CliError(f"path refused: {exc}", 2) from None
    except NotFound:
        raise CliError(f"no such page: {args.path}", 4) from None
    full, raw = page.full, page.data
    try:
        new = pin_bytes(raw, pinned)
    except BadRequest as exc:
        raise CliError(f"cannot edit {args.path}: {exc}") from None
    if new != raw:
        atomic_write(full, new)
        AuditLog(settings.logs_dir / "audit.jsonl").record(
            None, "pin" if pinned else "unpin", page.rel, face="cli", user=owner
        )
    print(f"{'pinned' if pinned else 'unpinned'} {args.path}")
    return 0


def register(sub: Any) -> None:
    """Add ``handoff``, ``brief``, ``pin`` and ``unpin`` to the ``wiki-memory`` parser."""

    def common(p: argparse.ArgumentParser) -> None:
        add_url(p)
        add_flag(p, "--json", "print the raw JSON")
        p.add_argument("--harness", help="harness to act as (default: cli)")
        p.add_argument(
            "--session", help="session id to act as (default: $WIKI_MEMORY_SESSION_ID or cli)"
        )

    h = add_command(
        sub,
        "handoff",
        cmd_handoff,
        "leave, list, show, claim, complete, cancel or release handoffs",
        description="Claim-once handoffs (see docs/handoffs.md). Exit 3 on a conflict.",
    )
    h.add_argument(
        "action", choices=["create", "list", "show", "claim", "complete", "cancel", "release"]
    )
    h.add_argument(
        "id",
        nargs="?",
        help="handoff id for show/claim/complete/…; claim also takes the offer code a brief printed",
    )
    h.add_argument("--project", help="default: the one of the working directory")
    h.add_argument("--title")
    h.add_argument("--status", help="list: filter by status")
    h.add_argument("--where", dest="where_we_left_off", help="create: where we left off")
    h.add_argument("--failed", dest="what_failed", help="create: what failed")
    h.add_argument("--next", action="append", help="create: a next step (repeatable)")
    h.add_argument("--question", action="append", help="create: an open question (repeatable)")
    h.add_argument("--file", action="append", help="create: a file involved (repeatable)")
    h.add_argument("--to", help="create: any (default), a harness name or a user")
    add_flag(h, "--personal", "create: seen by you alone")
    add_flag(
        h, "--new-project", "create: create the project --project names when it does not exist yet"
    )
    h.add_argument("--expires", help="create: ISO-8601 expiry (default: 14 days)")
    h.add_argument("--note", help="complete: the outcome, written to the page")
    h.add_argument("--reason", help="cancel: why")
    common(h)

    b = add_command(sub, "brief", cmd_brief, "the session-start brief of a project")
    b.add_argument(
        "--project", help="a project you may read (default: the one of the working directory)"
    )
    b.add_argument(
        "--budget", type=int, default=None, help="token budget (default 1500; 800 with --write)"
    )
    b.add_argument("--max-offers", type=int, default=None)
    add_write_options(b)
    common(b)

    for name, what in (("pin", "pin a page (pinned: true)"), ("unpin", "unpin a page")):
        p = add_command(sub, name, cmd_pin, f"{what}: pinned pages open every brief")
        p.add_argument("path", help="page path inside wiki/, e.g. projects/p/notes/rules.md")
        add_url(p)
