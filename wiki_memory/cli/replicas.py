"""CLI subcommands for more than one machine: ``remote add|list|remove`` and ``sync``
(docs/operations.md, "More than one machine").

``remote`` edits the wiki repository's git configuration as the data directory's owner
(it works on files directly, like ``doctor``). ``sync`` goes through the running server
when there is one, so the one writer merges; otherwise it opens the data directory
itself (taking its lock) and runs the same core operation.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from wiki_memory.cli.common import CliError, add_url, cli_settings, post_json
from wiki_memory.cli.declare import add_command, add_flag
from wiki_memory.cli.remove import through_core

__all__ = ["check_sync", "register", "status_line"]


def check_sync(ctx: Any) -> None:
    """doctor's ``sync`` check (registered in ``cli/doctor.py``): the sync state as key
    ``sync`` of the report, and one warning per thing a person should know
    (:func:`wiki_memory.core.sync.sync_lines`: sync failing since, a purge waiting for
    ``sync --after-purge``, conflict copies to resolve: their fix is
    ``wiki-memory sync-conflicts``)."""
    from wiki_memory.core.sync import sync_lines, sync_status
    from wiki_memory.core.syncstate import CONFLICT_LINE

    wiki = ctx.settings.wiki_dir
    ctx.rep["sync"] = sync_status(wiki)
    for line in sync_lines(wiki):
        conflict = line.startswith(CONFLICT_LINE)
        ctx.warn(line, "wiki-memory sync-conflicts" if conflict else "wiki-memory sync")


def status_line(settings: Any) -> dict[str, Any] | None:
    """status's ``sync`` line (registered in ``cli/setup.py``): ``{last_success,
    last_error, failing_since, stopped, conflicts, refused}`` (ISO-8601 UTC or None; the
    remotes whose sync stopped for an admin; the conflict copies' count;
    the count of incoming entries the border refused that the hub still carries), None
    with no remote configured."""
    from wiki_memory.core.sync import sync_status

    st = sync_status(settings.wiki_dir)
    if not st["remotes"]:
        return None
    failing = [r["failing_since"] for r in st["remotes"].values() if r.get("failing_since")]
    return {
        "last_success": st["last_success"],
        "last_error": st["last_error"],
        "failing_since": min(failing, default=None),
        "stopped": sorted(n for n, r in st["remotes"].items() if r.get("stopped")),
        "conflicts": len(st["conflicts"]),
        "refused": len(st["refused"]),
    }


def cmd_remote(args: argparse.Namespace) -> int:
    """``remote add NAME URL`` / ``remote list`` / ``remote remove NAME``."""
    from wiki_memory.wiki import replicate as rp

    wiki = cli_settings(args, watch=False).wiki_dir
    if not (wiki / ".git").is_dir():
        raise CliError(
            f"no wiki at {wiki}: start the server once (wiki-memory serve) or run setup", 4
        )
    try:
        if args.action == "add":
            if not args.name or not args.url:
                raise CliError("usage: wiki-memory remote add NAME URL", 2)
            rp.add_remote(wiki, args.name, args.url)
            print(f"added remote {args.name} ({args.url})")
            print(
                "personal pages (people/<user>/ and visibility: personal) stay on this "
                "machine: sync sends the shared projection only (docs/git.md)"
            )
        elif args.action == "remove":
            if not args.name:
                raise CliError("usage: wiki-memory remote remove NAME", 2)
            rp.remove_remote(wiki, args.name)
            print(f"removed remote {args.name}")
        else:
            remotes = sorted(rp.list_remotes(wiki).items())
            for name, url in remotes:
                print(f"{name}\t{url}")
            if not remotes:
                print("no remotes: wiki-memory remote add NAME URL adds one", file=sys.stderr)
    except rp.RemoteError as exc:
        raise CliError(str(exc), 2) from None
    return 0


def _show(res: dict[str, Any]) -> None:
    for rep in res["reports"]:
        line = f"{rep['remote']}: {rep['action']}"
        if rep.get("remote_gc"):
            line += f"; old objects on the remote: {rep['remote_gc']}"
        print(line)
        for _copy, line in sorted(rep.get("notes", {}).items()):
            print(f"  conflict: {line}")
        for r in rep.get("refused", []):
            print(f"  refused: {r['path']}: {r['reason']} (left out, the local version kept)")
        if rep.get("error"):
            print(f"  not synced: {rep['error']}")


def cmd_sync(args: argparse.Namespace) -> int:
    """``sync [NAME] [--after-purge]``: fetch, merge, push."""
    if (args.after_purge or args.rewrite_hub) and not args.yes:
        import sys

        flag = "--after-purge" if args.after_purge else "--rewrite-hub"
        if not sys.stdin.isatty():
            raise CliError(f"{flag} replaces the remote's history: confirm with --yes", 2)
        answer = input("Replace the remote's branch with this wiki's rewritten history? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            raise CliError("not confirmed: nothing was pushed", 1)
    body: dict[str, Any] = {"after_purge": bool(args.after_purge)}
    if args.accept_deletions:
        body["accept_deletions"] = True
    if args.rewrite_hub:
        body["rewrite_hub"] = True
    if args.name:
        body["remote"] = args.name

    def run(memory: Any) -> dict[str, Any]:
        reports = memory.sync.sync(
            args.name,
            after_purge=bool(args.after_purge),
            accept_deletions=bool(args.accept_deletions),
            rewrite_hub=bool(args.rewrite_hub),
        )
        return {"reports": [r.to_json() for r in reports], "status": memory.sync.status()}

    res = through_core(args, lambda: post_json(args, "/v1/admin/sync", body, timeout=3600), run)
    _show(res)
    left = len(res["status"].get("conflicts", []))
    if left:
        print(
            f"{left} conflict copy(ies) to resolve: `wiki-memory sync-conflicts` lists them, "
            "`wiki-memory sync-conflicts resolve COPY --keep page|copy` keeps one side"
        )
    return 0


def register(sub: Any) -> None:
    """Add ``remote`` and ``sync`` to the ``wiki-memory`` parser's subparsers."""
    r = add_command(
        sub, "remote", cmd_remote, "git remotes the wiki syncs with (add, list, remove)"
    )
    r.add_argument("action", choices=["add", "list", "remove"])
    r.add_argument("name", nargs="?", help="the remote's name (add, remove)")
    r.add_argument("url", nargs="?", help="the remote's URL (add): a path, ssh or https")
    s = add_command(
        sub,
        "sync",
        cmd_sync,
        "fetch, merge and push with a git remote (all of them when no name is given)",
    )
    s.add_argument("name", nargs="?", help="the remote (default: every remote)")
    add_flag(
        s,
        "--after-purge",
        "after a purge: replace the remote's branch with the rewritten history "
        "(force with lease; owner and admins)",
    )
    add_flag(
        s,
        "--accept-deletions",
        "apply a merge that stopped because it would delete many pages or follow a "
        "rewritten hub (owner and admins)",
    )
    add_flag(
        s,
        "--rewrite-hub",
        "replace the remote's branch with this wiki's history projected afresh, "
        "announced like a purge: drops what leaked to it (doctor's hub_leaks; force with "
        "lease; owner and admins)",
    )
    add_flag(s, "--yes", "do not ask for confirmation")
    add_url(s)
