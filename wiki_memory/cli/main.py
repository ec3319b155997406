"""The ``wiki-memory`` command: serve, recall, reindex; the other commands are in the
modules of :mod:`wiki_memory.cli` (``tokens``: token and audit; ``setup``, ...), each
adding its own with ``register``.

Each subcommand is a thin face over the core service or the running server's HTTP API.
Errors print one line on stderr and exit non-zero.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from wiki_memory.cli.argerrors import flag_value_hint
from wiki_memory.cli.common import (
    CliError,
    add_url,
    add_wiki,
    cli_settings,
    given,
    post_json,
    wiki_option,
)
from wiki_memory.cli.declare import add_command, add_flag
from wiki_memory.config import DEFAULT_HOST, DEFAULT_PORT
from wiki_memory.zones import local_zone_name


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the server in the foreground until SIGINT/SIGTERM: parse the options into
    settings and call :func:`wiki_memory.server.serving.serve`."""
    from wiki_memory.server.serving import ServeRefused, serve

    overrides: dict[str, Any] = {"host": args.host, "port": args.port}
    wiki = wiki_option(args)
    if wiki is not None:
        overrides["wiki_path"] = wiki
    if args.no_auth:
        overrides["auth"] = False
    for name in ("tls_cert", "tls_key"):
        if getattr(args, name, None):
            overrides[name] = Path(getattr(args, name)).expanduser().resolve()
    if getattr(args, "insecure_http", False):
        overrides["insecure_http"] = True
    settings = cli_settings(args, **overrides)
    try:
        return serve(settings, open_browser=bool(getattr(args, "open", False)))
    except ServeRefused as exc:
        raise CliError(str(exc), exc.code) from None


def cmd_recall(args: argparse.Namespace) -> int:
    body = {"query": args.query, "budget_tokens": args.budget, "cursor": args.cursor}
    body.update(given(args, "project", "now", "since", "until"))
    body["tz"] = args.tz or local_zone_name()
    res = post_json(args, "/v1/recall", body)
    if args.json:
        print(json.dumps(res, indent=1, ensure_ascii=False))
        return 0
    items = res["items"]
    if res.get("complete") is False:  # the index is being rebuilt: said first
        from wiki_memory.core.scanrecall import INCOMPLETE

        print(INCOMPLETE)
    if not items:
        need = res.get("needs_tokens")
        hint = f": the best match needs --budget {need}" if need else ""
        print(f"no results ({res['omitted']} left out by the budget{hint})")
        return 0
    from wiki_memory.cli.recall_table import render

    print(render(res))
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    """Rebuild index.db from the wiki folder: ``--wiki PATH``, else the folder the index
    was built from (a ``serve --wiki`` vault), else the data directory's ``wiki/``. With a
    server running, the server rebuilds (its own wiki)."""
    from wiki_memory.cli.wiki import wiki_settings
    from wiki_memory.datadir import ServerLock, ensure_layout
    from wiki_memory.index.store import Index, read_wiki_root

    explicit = bool(getattr(args, "wiki", None))
    settings = wiki_settings(args)
    root = read_wiki_root(settings.index_path)
    if not explicit and root is not None and root != settings.wiki_dir and root.is_dir():
        settings = cli_settings(args, wiki_path=root)
    ensure_layout(settings)
    lock = ServerLock(settings.data_dir)
    if getattr(args, "url", None) and not explicit:
        res = post_json(args, "/v1/admin/reindex", {}, timeout=3600)
        print(f"reindexed {res['pages']} pages (by the server at {args.url})")
        return 0
    if lock.is_held_elsewhere():
        if explicit and root is not None and root != settings.wiki_dir:
            raise CliError(
                f"the running server serves {root}, not {settings.wiki_dir}: stop it first", 2
            )
        res = post_json(args, "/v1/admin/reindex", {}, timeout=3600)
        print(f"reindexed {res['pages']} pages (by the running server)")
        return 0

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)  # unwind: helpers stopped, temporary files removed

    signal.signal(signal.SIGTERM, stop)
    lock.acquire("reindex")
    try:
        idx = Index(
            settings.index_path,
            stem_languages=settings.stem_language_names,
            vectors=settings.vectors,
            vectors_model=settings.vectors_model,
        )
        n = idx.rebuild(settings.wiki_dir, progress=not args.quiet)
        idx.close()
    finally:
        lock.release()
    print(f"reindexed {n} pages of {settings.wiki_dir}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="wiki-memory",
        description="Long-term memory for AI coding agents, kept as a git-versioned markdown wiki.",
    )
    p.add_argument(
        "--data-dir", help="data directory (default: $WIKI_MEMORY_HOME or the user data dir)"
    )
    p.add_argument(
        "--ca-file",
        help="PEM file of the CA that signed an https:// server's certificate, trusted "
        "besides the system's (env WIKI_MEMORY_CA_FILE)",
    )
    sub = p.add_subparsers(dest="command", required=True)

    s = add_command(sub, "serve", cmd_serve, "run the server")
    s.add_argument(
        "--host", default=None, help=f"bind address (default {DEFAULT_HOST}; env WIKI_MEMORY_HOST)"
    )
    s.add_argument(
        "--port",
        type=int,
        default=None,
        help=f"port (default {DEFAULT_PORT}; env WIKI_MEMORY_PORT)",
    )
    s.add_argument("--tls-cert", help="serve HTTPS with this certificate chain (PEM)")
    s.add_argument("--tls-key", help="the private key of --tls-cert (PEM)")
    add_flag(
        s, "--insecure-http", "allow plain HTTP on a non-loopback address (a TLS proxy in front)"
    )
    add_flag(s, "--no-auth", "no tokens (loopback only)")
    add_wiki(
        s,
        "serve this existing vault folder (a git repository is used as it is) "
        "instead of <data-dir>/wiki; env WIKI_MEMORY_WIKI_PATH",
    )
    add_flag(s, "--open", "open the web view in a browser")

    r = add_command(sub, "recall", cmd_recall, "recall pages for a query (from the running server)")
    r.add_argument("query")
    r.add_argument("--project")
    r.add_argument("--budget", type=int, default=1000, help="token budget (default 1000)")
    r.add_argument("--cursor", type=int, default=0, help="the next page: a cursor printed before")
    r.add_argument(
        "--now",
        help="reference time for relative dates in the query (ISO-8601; default: the present)",
    )
    r.add_argument("--since", help="from this time: ISO-8601, YYYY, YYYY-MM or YYYY-MM-DD")
    r.add_argument("--until", help="up to this time (the same forms as --since)")
    r.add_argument(
        "--tz",
        help="your time zone, whose days 'yesterday' and bare dates are (IANA name or "
        "+HH:MM; default: this machine's, from TZ or /etc/localtime)",
    )
    add_flag(r, "--json", "print the raw JSON")
    add_url(r)

    x = add_command(sub, "reindex", cmd_reindex, "rebuild index.db from the files")
    add_wiki(x, "the wiki folder (default: the one the index was built from, else <data-dir>/wiki)")
    add_flag(x, "--quiet", "no progress bar")
    x.add_argument("--url", help="server URL")
    from wiki_memory.cli import (
        agentfiles,
        carry,
        condense,
        conflicts,
        contradictions,
        edit,
        feedback,
        handoffs,
        hooks,
        mcp,
        remember,
        remove,
        replicas,
        setup,
        status,
        tokens,
        uninstall,
        unrendered,
        wiki,
    )

    tokens.register(sub)
    modules = (setup, uninstall, status, hooks, handoffs, mcp, wiki, remove, remember, carry, edit)
    extra = (unrendered, replicas, conflicts, contradictions, feedback, agentfiles, condense)
    for module in (*modules, *extra):
        module.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``wiki-memory`` console script. Returns the exit status."""
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    args, extras = parser.parse_known_args(words)
    if extras:
        parser.error(
            flag_value_hint(parser, words, extras) or f"unrecognized arguments: {' '.join(extras)}"
        )
    try:
        return int(args.fn(args))
    except CliError as exc:
        print(f"wiki-memory: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (`wiki-memory recall ... | head`): not an error of ours
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        return 0


if __name__ == "__main__":
    sys.exit(main())
