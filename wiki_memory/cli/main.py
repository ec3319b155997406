"""The ``wiki-memory`` command: serve, recall, reindex; the other commands are in the
modules of :mod:`wiki_memory.cli` (``tokens``: token and audit; ``setup``, ...), each
adding its own with ``register``.

Each subcommand is a thin face over the core service or the running server's HTTP API.
Errors print one line on stderr and exit non-zero.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from wiki_memory.cli.common import CliError, cli_settings, post_json
from wiki_memory.config import DEFAULT_HOST, DEFAULT_PORT, Settings
from wiki_memory.zones import local_zone_name


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class RedactingFormatter(logging.Formatter):
    """A formatter whose output (message, arguments and traceback) has every secret the
    sanitizer detects replaced by ``[REDACTED:<kind>]``: a library's error message may
    quote a request path or a value that holds a token."""

    def format(self, record: logging.LogRecord) -> str:
        from wiki_memory.capture.sanitize import redact_text

        return redact_text(super().format(record))[0]


def setup_logging(settings: Settings) -> None:
    settings.logs_dir.mkdir(parents=True, exist_ok=True)
    fmt = RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    fh = logging.FileHandler(settings.logs_dir / "server.log", encoding="utf-8")
    fh.setFormatter(fmt)
    root.addHandler(fh)
    sh = logging.StreamHandler(sys.stderr)
    sh.setFormatter(fmt)
    sh.setLevel(logging.WARNING)
    root.addHandler(sh)
    acc = logging.getLogger("wiki_memory.access")
    ah = logging.FileHandler(settings.logs_dir / "access.log", encoding="utf-8")
    ah.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    acc.addHandler(ah)
    acc.propagate = False


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the server in the foreground until SIGINT/SIGTERM."""
    import uvicorn

    from wiki_memory.auth import TokenStore
    from wiki_memory.core.memory import Memory
    from wiki_memory.datadir import (
        DataDirLocked,
        ServerLock,
        VaultLock,
        VaultLocked,
        ensure_layout,
        port_holder,
    )
    from wiki_memory.server.app import create_app
    from wiki_memory.server.guard import Guard, GuardedServer, protocol_class, return_big_blocks

    overrides: dict[str, Any] = {"host": args.host, "port": args.port}
    if getattr(args, "wiki", None):
        wiki = Path(args.wiki).expanduser().resolve()
        if not wiki.is_dir():
            raise CliError(f"--wiki {args.wiki}: not a folder", 2)
        overrides["wiki_path"] = wiki
    if args.no_auth:
        overrides["auth"] = False
    for name in ("tls_cert", "tls_key"):
        if getattr(args, name, None):
            overrides[name] = Path(getattr(args, name)).expanduser().resolve()
    if getattr(args, "insecure_http", False):
        overrides["insecure_http"] = True
    settings = cli_settings(args, **overrides)
    # what the server creates (index, WAL, logs, spool, git objects, new pages) is the
    # owner's alone; a vault's existing files keep their modes (docs/team-server.md)
    os.umask(0o077)
    if not settings.auth and not _is_loopback(settings.host):
        raise CliError(
            f"refusing to serve {settings.host} without authentication: "
            "a non-loopback address needs tokens (drop --no-auth)",
            2,
        )
    tls = settings.tls_cert is not None or settings.tls_key is not None
    if tls and (settings.tls_cert is None or settings.tls_key is None):
        raise CliError("--tls-cert and --tls-key go together", 2)
    for f in (settings.tls_cert, settings.tls_key):
        if f is not None and not f.is_file():
            raise CliError(f"cannot read {f}: no such file", 2)
    if not tls and not _is_loopback(settings.host) and not settings.insecure_http:
        raise CliError(
            f"refusing to serve {settings.host} over plain HTTP: tokens and pages would cross "
            "the network unencrypted. Give --tls-cert and --tls-key, or put a TLS proxy in "
            "front and pass --insecure-http (docs/team-server.md)",
            2,
        )
    ensure_layout(settings)
    lock = ServerLock(settings.data_dir)
    address = f"{'https' if tls else 'http'}://{settings.host}:{settings.port}"
    lock.facts = {"vectors": bool(settings.vectors)}
    try:
        lock.acquire(address)
    except DataDirLocked as exc:
        raise CliError(str(exc), 3) from None
    vault = VaultLock(settings.wiki_dir)
    try:
        held = port_holder(settings.host, settings.port)
        if held is not None:
            raise CliError(f"cannot listen on {settings.host}:{settings.port}: {held}", 3)
        if settings.wiki_path is not None and not (settings.wiki_dir / ".git").exists():
            print(
                f"wiki-memory: {settings.wiki_dir} is not a git repository: creating one "
                "and committing the files of the vault in a first commit",
                file=sys.stderr,
            )
        setup_logging(settings)
        tokens = TokenStore(settings.auth_dir)
        token, created = tokens.ensure_owner()
        if created:
            # printed once, to a terminal only: a redirected stderr may end up in a log
            shown = f":\n  {token}\n" if sys.stderr.isatty() else ". "
            print(
                f"wiki-memory: created the local owner's token (saved in {tokens.owner_path})"
                f"{shown}(show it with `wiki-memory token`)",
                file=sys.stderr,
            )
            print(
                f"wiki-memory: next: the web view is {address}/ (sign in with that token); "
                "`wiki-memory status` says whether memory is on; `wiki-memory setup` keeps "
                "the server running as a service and wires the hooks and MCP",
                file=sys.stderr,
            )
        if (settings.wiki_dir / ".git").exists():
            try:
                vault.acquire(settings.data_dir)
            except VaultLocked as exc:
                raise CliError(str(exc), 3) from None
        memory = Memory(settings, owner_user=tokens.owner_name(), directory=tokens)
        _upgrade_tokens(memory, tokens)
        if not vault._lock.is_locked:  # a new repository: lock it now
            try:
                vault.acquire(settings.data_dir)
            except VaultLocked as exc:
                raise CliError(str(exc), 3) from None
        app = create_app(memory, tokens, manage_memory=True)
        print(
            f"wiki-memory {address} serving "
            + (
                str(settings.data_dir)
                if settings.wiki_path is None
                else f"the wiki {settings.wiki_dir} (index and spool in {settings.data_dir})"
            )
            + " (Ctrl-C to stop)",
            file=sys.stderr,
        )
        if not tls and not _is_loopback(settings.host):
            print(
                f"wiki-memory: WARNING: plain HTTP on {settings.host} (--insecure-http): "
                "tokens and pages cross the network unencrypted unless a TLS proxy is in front",
                file=sys.stderr,
            )
        try:
            guard = Guard(
                settings.header_timeout_seconds,
                settings.max_connections_per_address,
                settings.max_connections,
                settings.trusted_proxies,
                body_grace=settings.body_grace_seconds,
                min_body_rate=settings.min_body_bytes_per_second,
                body_timeout=settings.body_timeout_seconds,
                write_timeout=settings.write_timeout_seconds,
            )
        except ValueError as exc:
            raise CliError(f"trusted_proxies: {exc}", 2) from None
        config = uvicorn.Config(
            app,
            http=protocol_class(guard),
            ssl_certfile=str(settings.tls_cert) if tls else None,
            ssl_keyfile=str(settings.tls_key) if tls else None,
            backlog=guard.backlog,
            # X-Forwarded-For is believed only from trusted_proxies (uvicorn's own
            # middleware rewrites the client address; off when none is trusted)
            proxy_headers=bool(settings.trusted_proxies.strip()),
            forwarded_allow_ips=settings.trusted_proxies.strip() or None,
            host=settings.host,
            port=settings.port,
            access_log=False,
            log_level="warning",
            # no logging setup of uvicorn's own: its records (errors in the app,
            # invalid requests) reach our handlers, server.log and stderr
            log_config=None,
            lifespan="on",
        )
        return_big_blocks()
        server = GuardedServer(config)
        server.tls_handshake_timeout = settings.header_timeout_seconds
        server.on_listening = lock.mark_listening
        server.on_shutdown = memory.sync.stop
        if getattr(args, "open", False):
            _open_when_up(settings.host, settings.port, "https" if tls else "http")
        # uvicorn stops gracefully on SIGINT/SIGTERM (the lifespan writes and commits
        # pending pages), then re-raises the signal to the previous handler: make that a
        # no-op so a clean stop exits 0
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: None)
        server.run()
        return 0 if server.started else 1
    finally:
        vault.release()
        lock.release()


def _upgrade_tokens(memory: Any, tokens: Any) -> None:
    """At the first start after roles came: tokens from before become members with a
    write grant on every project that exists now; said once on the console and in the
    audit log (:meth:`wiki_memory.auth.TokenStore.upgrade`)."""
    done = tokens.upgrade(memory.projects())
    if done is None or not done.users:
        return
    projects = ", ".join(done.projects) or "none yet"
    print(
        f"wiki-memory: upgraded tokens to roles: {', '.join(done.users)} became members "
        f"with read and write on every project that exists now ({projects}); "
        "see `wiki-memory token list` and docs/team-server.md",
        file=sys.stderr,
    )
    for user in done.users:
        memory.audited(
            None,
            "token.upgrade",
            user,
            "ok",
            user=tokens.owner_name(),
            face="server",
            subject=user,
            grants=dict.fromkeys(done.projects, "write"),
        )


def _open_when_up(host: str, port: int, scheme: str = "http", timeout: float = 30.0) -> None:
    """Open the web view in the user's browser once ``/v1/health`` answers (a daemon
    thread polls every 0.1 s for up to ``timeout`` seconds; a wildcard bind opens
    loopback). Over TLS the probe does not check the certificate (it only asks whether
    this machine's own server is up; the browser checks it)."""
    import threading
    import webbrowser

    import httpx

    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    base = f"{scheme}://[{shown}]:{port}" if ":" in shown else f"{scheme}://{shown}:{port}"

    def wait_and_open() -> None:
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if httpx.get(base + "/v1/health", timeout=1, verify=False).status_code == 200:
                    webbrowser.open(base + "/")
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)

    threading.Thread(target=wait_and_open, name="open-browser", daemon=True).start()


def cmd_recall(args: argparse.Namespace) -> int:
    body = {"query": args.query, "budget_tokens": args.budget, "cursor": args.cursor}
    if args.project:
        body["project"] = args.project
    if args.now:
        body["now"] = args.now
    if args.since:
        body["since"] = args.since
    if args.until:
        body["until"] = args.until
    body["tz"] = args.tz or local_zone_name()
    res = post_json(args, "/v1/recall", body)
    if args.json:
        print(json.dumps(res, indent=1, ensure_ascii=False))
        return 0
    items = res["items"]
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

    s = sub.add_parser("serve", help="run the server")
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
    s.add_argument(
        "--insecure-http",
        action="store_true",
        help="allow plain HTTP on a non-loopback address (a TLS proxy in front)",
    )
    s.add_argument("--no-auth", action="store_true", help="no tokens (loopback only)")
    s.add_argument(
        "--wiki",
        metavar="PATH",
        help="serve this existing vault folder (a git repository is used as it is) "
        "instead of <data-dir>/wiki; env WIKI_MEMORY_WIKI_PATH",
    )
    s.add_argument("--open", action="store_true", help="open the web view in a browser")
    s.set_defaults(fn=cmd_serve)

    r = sub.add_parser("recall", help="recall pages for a query (from the running server)")
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
    r.add_argument("--json", action="store_true", help="print the raw JSON")
    r.add_argument("--url", help="server URL (default: the one running on the data directory)")
    r.set_defaults(fn=cmd_recall)

    x = sub.add_parser("reindex", help="rebuild index.db from the files")
    x.add_argument(
        "--wiki",
        metavar="PATH",
        help="the wiki folder (default: the one the index was built from, else <data-dir>/wiki)",
    )
    x.add_argument("--quiet", action="store_true", help="no progress bar")
    x.add_argument("--url", help="server URL")
    x.set_defaults(fn=cmd_reindex)
    from wiki_memory.cli import (
        carry,
        conflicts,
        edit,
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
    for module in (*modules, unrendered, replicas, conflicts):
        module.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``wiki-memory`` console script. Returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
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
