"""CLI subcommands that take things out of the memory: ``forget PATH`` and
``purge PATH [--text TEXT] [--yes]`` (docs/operations.md).

Both go through the running server when there is one (``--url``, ``WIKI_MEMORY_URL`` or
the server holding the data directory), so the scope rule, the one writer and the audit
log see them; otherwise the command opens the data directory itself (taking its lock,
as the wiki's owner) and runs the same core operation.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from wiki_memory.cli.common import CliError, add_url, cli_settings, given, post_json
from wiki_memory.cli.declare import add_command, add_flag

__all__ = ["register"]


def wants_remote(args: argparse.Namespace) -> bool:
    from wiki_memory.datadir import ServerLock

    if getattr(args, "url", None) or os.environ.get("WIKI_MEMORY_URL"):
        return True
    return ServerLock(cli_settings(args).data_dir).is_held_elsewhere()


@contextmanager
def local_memory(args: argparse.Namespace) -> Iterator[Any]:
    """A started :class:`~wiki_memory.core.memory.Memory` over the data directory (no
    watcher), holding its lock; stopped (pages committed) on exit. CliError (3) when a
    server took the lock meanwhile."""
    from wiki_memory.auth import TokenStore
    from wiki_memory.core.memory import Memory
    from wiki_memory.datadir import DataDirLocked, ServerLock, ensure_layout

    settings = cli_settings(args, watch=False)
    ensure_layout(settings)
    lock = ServerLock(settings.data_dir)
    try:
        lock.acquire("cli")
    except DataDirLocked as exc:
        raise CliError(str(exc), 3) from None
    try:
        tokens = TokenStore(settings.auth_dir)
        memory = Memory(settings, tokens.owner_name(), tokens)
        memory.start()
        try:
            yield memory
        finally:
            memory.stop()
    finally:
        lock.release()


def through_core(
    args: argparse.Namespace, remote: Callable[[], Any], local: Callable[[Any], dict[str, Any]]
) -> Any:
    """A subcommand's operation through the server running on the data directory (or
    the one ``--url`` names): ``remote()``; else on a :class:`~wiki_memory.core.memory.
    Memory` of its own over the data directory (:func:`local_memory`): ``local(memory)``,
    its core errors turned into exit statuses (:func:`run_core`). Returns the answer."""
    if wants_remote(args):
        return remote()
    with local_memory(args) as memory:
        return run_core(lambda: local(memory))


def run_core(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run a core operation, turning its error into the table's exit status."""
    from wiki_memory.errors import WikiMemoryError, exit_status
    from wiki_memory.wiki.paths import PathRefused

    try:
        return fn()
    except PathRefused as exc:
        raise CliError(f"path refused: {exc}", 2) from None
    except WikiMemoryError as exc:
        raise CliError(str(exc), exit_status(exc.rule_code)) from None


def cmd_forget(args: argparse.Namespace) -> int:
    """``forget PATH``: the page becomes ``state: forgotten``; ``forget --query Q
    [--project P] --dry-run`` lists what the query would forget, ``--yes`` forgets it."""
    from wiki_memory.core.forget import forget_page

    if args.query is not None:
        return _forget_query(args)
    if not args.path:
        raise CliError("forget needs a PATH or --query", 2)
    res = through_core(
        args,
        lambda: post_json(args, "/v1/forget", {"path": args.path}),
        lambda memory: forget_page(memory, args.path, memory.scope.local_owner),
    )
    word = "forgot" if res.get("changed") else "already forgotten:"
    what = f"{res['path']}#^{res['entry']}" if res.get("entry") else res["path"]
    print(f"{word} {what} (left recall, briefs and listings; git keeps its history)")
    return 0


def _forget_query(args: argparse.Namespace) -> int:
    from wiki_memory.core.forget import forget_query
    from wiki_memory.core.quoting import qt

    if args.path:
        raise CliError("give a PATH or --query, not both", 2)
    if not args.dry_run and not args.yes:
        raise CliError(
            "forget --query forgets every page it finds: look first with --dry-run, "
            "then confirm with --yes",
            2,
        )
    dry = bool(args.dry_run)
    body = {"query": args.query, "dry_run": dry, **given(args, "project")}
    res = through_core(
        args,
        lambda: post_json(args, "/v1/forget", body),
        lambda memory: forget_query(
            memory, args.query, memory.scope.local_owner, project=args.project, dry_run=dry
        ),
    )
    word = "would forget" if dry else "forgot"
    for p in res["pages"]:
        if dry or p["path"] in res["forgotten"]:
            print(f"{word}: {p['path']} {qt(p.get('title') or '')}")
    for path in res["not_writable"]:
        print(f"not yours to forget (read only): {path}")
    n = len(res["pages"]) if dry else len(res["forgotten"])
    more = " (more matched: narrow the query)" if res["more"] else ""
    tail = "; run again with --yes instead of --dry-run to forget them" if dry and n else ""
    print(f"{n} page(s) {word}{more}{tail}")
    return 0


def cmd_purge(args: argparse.Namespace) -> int:
    """``purge PATH [--text TEXT] [--yes]``: remove the page (or the text) for good."""
    import sys

    from wiki_memory.core.purge import MEANING, purge_page

    what = f"every occurrence of the given text in {args.path}" if args.text else args.path
    if not args.yes:
        if not sys.stdin.isatty():
            raise CliError("purge rewrites git history: confirm with --yes", 2)
        print(f"Purge {what} from the working tree and all of history: {MEANING}.")
        answer = input(f"Type the path ({args.path}) to go on: ")
        if answer.strip() != args.path:
            raise CliError("not confirmed: nothing was purged", 1)
    body = {"path": args.path, **given(args, "text")}
    res = through_core(
        args,
        lambda: post_json(args, "/v1/admin/purge", body, timeout=3600),
        lambda memory: purge_page(memory, args.path, memory.scope.local_owner, args.text),
    )
    print(
        f"purged {what}: {res['commits_rewritten']} commit(s) rewritten, "
        f"{res['versions']} stored version(s), refs moved: {', '.join(res['refs']) or 'none'}"
    )
    removed = res.get("removed") or {}
    if removed:
        logs = removed.get("logs") or {}
        print(
            "copies removed: "
            f"{removed.get('page_versions', 0)} page version(s), "
            f"{removed.get('file_names', 0)} file name(s), "
            f"{removed.get('links', 0)} linking version(s), "
            f"{removed.get('commit_messages', 0)} commit message(s), "
            f"{removed.get('spool_files', 0)} spool file(s), "
            f"{sum(logs.values())} in logs ({', '.join(sorted(logs)) or 'none'}), "
            f"{removed.get('use_record', 0)} in the use record, "
            f"{removed.get('audit_lines', 0)} audit line(s)"
        )
    if res.get("renamed"):
        print(f"the page is now {res['path']} (links to it follow)")
    print(f"deleted means: {res['deleted_means']}")
    remotes = res.get("remotes") or {}
    if remotes:
        for name, url in sorted(remotes.items()):
            print(
                f"still there: remote {name} ({url}): run `wiki-memory sync --after-purge {name}`"
            )
    else:
        print("no git remote is configured")
    print("still there: every clone of this wiki made before now, and every backup or export")
    return 0


def register(sub: Any) -> None:
    """Add ``forget`` and ``purge`` to the ``wiki-memory`` parser's subparsers."""
    leaves = "it leaves recall, briefs and listings; git keeps its history"
    f = add_command(
        sub, "forget", cmd_forget, f"forget a page (or PATH#^tN: one session entry): {leaves}"
    )
    f.add_argument("path", nargs="?", help="page path inside the wiki")
    f.add_argument(
        "--query", help="forget the pages recall finds for these words that hold every one"
    )
    f.add_argument("--project", help="with --query: only this project's pages")
    add_flag(f, "--dry-run", "with --query: list, forget nothing")
    add_flag(f, "--yes", "with --query: forget what it lists")
    add_url(f)
    where = "the files, all of git history, the index, the spool and the logs"
    p = add_command(
        sub, "purge", cmd_purge, f"remove a page, or a text in it, from {where} (owner and admins)"
    )
    p.add_argument("path", help="page path inside the wiki")
    p.add_argument("--text", help="purge only this text from every version of the page")
    add_flag(p, "--yes", "do not ask for confirmation")
    add_url(p)
