"""``wiki-memory token`` and ``audit``: who may do what on this data directory. ``token``
shows the owner's token and creates, grants, ungrants, revokes or lists the others (the
data directory's owner, on its files; every change is written to the audit log);
``audit`` shows that log, through the running server when there is one
(docs/team-server.md).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from wiki_memory.cli.common import CliError, add_url, cli_settings
from wiki_memory.cli.declare import add_command, add_flag
from wiki_memory.config import Settings


def _audit_cli(settings: Settings, op: str, target: str, result: str = "ok", **extra: Any) -> None:
    """One audit line for a change the command line made as the data directory's owner."""
    from wiki_memory.audit import AuditLog
    from wiki_memory.auth import TokenStore

    owner = TokenStore(settings.auth_dir).owner_name()
    AuditLog(settings.logs_dir / "audit.jsonl").record(
        None, op, target, result, face="cli", user=owner, **extra
    )


def _grants_text(rec: Any) -> str:
    if rec.grants is None:
        return "every project"
    if not rec.grants:
        return "no project"
    return ", ".join(f"{p} ({g})" for p, g in sorted(rec.grants.items()))


def cmd_token(args: argparse.Namespace) -> int:
    """``token``: the owner's token; ``create``, ``grant``, ``revoke``, ``list`` (the data
    directory's owner, on its files; every change is in the audit log)."""
    from wiki_memory.auth import TokenStore
    from wiki_memory.datadir import ensure_layout

    settings = cli_settings(args)
    ensure_layout(settings)
    store = TokenStore(settings.auth_dir)
    action = args.action
    if action is None:
        tok, created = store.ensure_owner()
        print(tok)
        return 0
    projects = list(args.project or [])
    if action == "create":
        if not args.user:
            raise CliError("token create needs --user NAME", 2)
        try:
            tok = store.create(args.user, args.role, projects, read_only=args.read_only, tz=args.tz)
        except ValueError as exc:
            raise CliError(str(exc), 2) from None
        rec = next(r for r in store.list() if r.user == args.user and r.token_id == _id_of(tok))
        _audit_cli(
            settings,
            "token.create",
            rec.token_id,
            subject=args.user,
            role=rec.role,
            grants=rec.grants,
        )
        print(tok)
        print(
            f"(token {rec.token_id} for {args.user}, {rec.role}, {_grants_text(rec)}; "
            "shown once, only its hash is stored)",
            file=sys.stderr,
        )
        if rec.grants == {}:
            print(
                f"wiki-memory: {args.user} holds no project yet: grant one with "
                f"`wiki-memory token grant --user {args.user} --project NAME`"
                + ("" if rec.role == "reader" else " (or their first capture creates one)"),
                file=sys.stderr,
            )
        return 0
    if action == "grant":
        if not args.user or len(projects) != 1:
            raise CliError("token grant needs --user NAME and one --project P", 2)
        try:
            level = store.grant(args.user, projects[0], read_only=args.read_only)
        except ValueError as exc:
            raise CliError(str(exc), 2) from None
        _audit_cli(settings, "grant", f"projects/{projects[0]}", subject=args.user, grant=level)
        print(
            f"granted {args.user} {'read' if level == 'read' else 'read and write'} on {projects[0]}"
        )
        return 0
    if action == "ungrant":
        if not args.user or len(projects) != 1:
            raise CliError("token ungrant needs --user NAME and one --project P", 2)
        if not store.ungrant(args.user, projects[0]):
            raise CliError(f"{args.user} holds no grant on {projects[0]}", 4)
        _audit_cli(settings, "ungrant", f"projects/{projects[0]}", subject=args.user)
        print(f"removed {args.user}'s grant on {projects[0]}")
        return 0
    if action == "revoke":
        if bool(args.user) == bool(args.id):
            raise CliError("token revoke needs --user NAME or --id ID (one of them)", 2)
        gone = store.revoke(user=args.user) if args.user else store.revoke(token_id=args.id)
        if not gone:
            raise CliError(
                f"no token matched {'user ' + args.user if args.user else 'id ' + args.id} "
                "(exact match; see `wiki-memory token list`)",
                4,
            )
        for rec in gone:
            _audit_cli(settings, "token.revoke", rec.token_id, subject=rec.user)
            print(f"revoked {rec.token_id}  {rec.user}")
        return 0
    if action == "list":
        import time as _time

        for rec in store.list():
            when = _time.strftime("%Y-%m-%d %H:%M", _time.gmtime(rec.created))
            used = (
                _time.strftime("%Y-%m-%d %H:%M", _time.gmtime(rec.last_used)) + "Z"
                if rec.last_used
                else "never"
            )
            print(
                f"{rec.token_id}  {rec.user:<16} {rec.role:<7} created {when}Z  "
                f"used {used:<17} {_grants_text(rec)}"
            )
        return 0
    raise CliError(f"unknown token action {action!r}", 2)


def _id_of(token: str) -> str:
    import hashlib

    return hashlib.sha256(token.encode("utf-8")).hexdigest()[:8]


def cmd_audit(args: argparse.Namespace) -> int:
    """``audit [--user U] [--since T] [--json]``: the audit log, through the running
    server when there is one (an admin's token), else from ``logs/audit.jsonl``."""
    from wiki_memory.audit import AuditLog, dumps, escape, parse_since
    from wiki_memory.datadir import ServerLock

    settings = cli_settings(args)
    remote = args.url or os.environ.get("WIKI_MEMORY_URL")
    if remote or ServerLock(settings.data_dir).is_held_elsewhere():
        from wiki_memory.cli.common import get_json

        params = {k: v for k, v in (("user", args.user), ("since", args.since)) if v}
        lines = get_json(args, "/v1/audit", params)["lines"]
    else:
        try:
            since = parse_since(args.since) if args.since else None
        except ValueError:
            raise CliError("--since: ISO 8601 (2026-12-01T10:00Z) or epoch seconds", 2) from None
        lines = AuditLog(settings.logs_dir / "audit.jsonl").read(user=args.user, since=since)
    for line in lines:
        if args.json:
            print(dumps(line))
        else:
            cells = [line.get(k) or "-" for k in ("time", "user", "token_id", "face", "op")]
            cells += [dumps(line.get("target")), line.get("result") or "-"]
            print("  ".join(escape(str(c)) if i != 5 else c for i, c in enumerate(cells)))
    return 0


def register(sub: Any) -> None:
    """Add ``token`` and ``audit`` to the ``wiki-memory`` parser."""
    t = add_command(
        sub,
        "token",
        cmd_token,
        "show the owner's token; create, grant, ungrant, revoke or list others",
        description="Users, roles and grants of a team server (docs/team-server.md).",
    )
    t.add_argument("action", nargs="?", choices=["create", "grant", "ungrant", "revoke", "list"])
    t.add_argument("--user", help="the user (exact name)")
    t.add_argument("--id", help="token id, as `token list` shows it (exact)")
    t.add_argument(
        "--role", choices=["admin", "member", "reader"], help="role (create; default member)"
    )
    t.add_argument(
        "--project", action="append", help="project to grant (create: repeatable; grant: one)"
    )
    add_flag(t, "--read-only", "grant read only")
    t.add_argument(
        "--tz",
        help="create: the user's time zone (IANA name or +HH:MM), whose days their "
        "recalls mean when a call names none (default UTC)",
    )

    a = add_command(sub, "audit", cmd_audit, "show the audit log (owner and admins)")
    a.add_argument("--user", help="only this user's lines")
    a.add_argument("--since", help="only lines at or after this time (ISO 8601 or epoch s)")
    add_flag(a, "--json", "one JSON object per line")
    add_url(a)
