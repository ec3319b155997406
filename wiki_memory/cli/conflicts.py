"""CLI ``sync-conflicts [resolve COPY --keep page|copy]`` and doctor's ``conflicts`` check
(docs/git.md, "Conflict copies").

The command goes through the running server when there is one (so the scope rule, the
one writer and the audit log see it), otherwise it opens the data directory itself and
runs the same core operation (:mod:`wiki_memory.core.syncconflicts`). Exit 0 (also when
there is nothing to resolve), 4 when COPY is no conflict copy, 2 on bad usage.
"""

from __future__ import annotations

import argparse
from typing import Any

from wiki_memory.cli.common import CliError, add_url, get_json, post_json
from wiki_memory.cli.declare import add_command
from wiki_memory.cli.remove import through_core

__all__ = ["check_conflicts", "register"]


def check_conflicts(ctx: Any) -> None:
    """doctor's ``conflicts`` check (registered in ``cli/doctor.py``): every conflict copy
    in the index that sync's own lines do not name already (those file-sync tools left:
    Syncthing, Dropbox or Drive, iCloud), one warning each, whose fix is
    ``wiki-memory sync-conflicts``; key ``conflicts`` of the report lists them all."""
    from wiki_memory.core.syncstate import sync_status

    settings = ctx.settings
    if not settings.index_path.exists() or not ctx.rep.get("index"):
        return  # the index check already said why
    found = ctx.chains().copies
    ctx.rep["conflicts"] = [
        {"copy": c, "page": p, "side": s} for c, (p, s) in sorted(found.items())
    ]
    named = (
        set(sync_status(ctx.settings.wiki_dir)["conflicts"])
        if ctx.settings.wiki_dir.exists()
        else set()
    )
    for c, (p, s) in sorted(found.items()):
        if c not in named:
            ctx.warn(
                f"conflict copy: {c} holds a version of {p} from {s}; recall ranks it after "
                "the page: keep one side",
                "wiki-memory sync-conflicts",
            )


def cmd_sync_conflicts(args: argparse.Namespace) -> int:
    """``sync-conflicts``: list; ``sync-conflicts resolve COPY --keep page|copy``."""
    from wiki_memory.core.syncconflicts import list_conflicts, resolve_conflict

    if args.action == "resolve":
        if not args.copy or args.keep not in ("page", "copy"):
            raise CliError("usage: wiki-memory sync-conflicts resolve COPY --keep page|copy", 2)
        body = {"copy": args.copy, "keep": args.keep}
        res = through_core(
            args,
            lambda: post_json(args, "/v1/sync-conflicts/resolve", body),
            lambda memory: resolve_conflict(memory, args.copy, args.keep, memory.scope.local_owner),
        )
        kept = "the page as it was" if res["kept"] == "page" else "the copy's version"
        print(f"{res['page']}: kept {kept}; removed {res['copy']} (committed)")
        return 0
    if args.copy:
        raise CliError("usage: wiki-memory sync-conflicts [resolve COPY --keep page|copy]", 2)
    res = through_core(
        args,
        lambda: get_json(args, "/v1/sync-conflicts", {}),
        lambda memory: list_conflicts(memory, memory.scope.local_owner),
    )
    rows = res["conflicts"]
    if not rows:
        print("no conflict copies")
        return 0
    for r in rows:
        print(f"conflict: {r['line']}")
    print(
        "keep one side: wiki-memory sync-conflicts resolve COPY --keep page "
        "(the page as it is) or --keep copy (the copy's version at the page's path)"
    )
    return 0


def register(sub: Any) -> None:
    """Add ``sync-conflicts`` to the ``wiki-memory`` parser's subparsers."""
    s = add_command(
        sub,
        "sync-conflicts",
        cmd_sync_conflicts,
        "list conflict copies (sync's, and file-sync tools'), or resolve one: keep the "
        "page or the copy's version, the copy removed, committed",
        description="Without an action: one line per conflict copy, naming whose version is "
        "where. `resolve COPY --keep page|copy`: keep one side; the copy is removed in one "
        "commit (docs/git.md, 'Conflict copies').",
    )
    s.add_argument("action", nargs="?", choices=["resolve"], help="resolve one conflict")
    s.add_argument("copy", nargs="?", help="the conflict copy's path (resolve)")
    s.add_argument(
        "--keep",
        choices=["page", "copy"],
        help="page: keep the page as it is; copy: put the copy's version at the page's path",
    )
    add_url(s)
