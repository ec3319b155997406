"""Serving: what ``wiki-memory serve`` does once its options are parsed (the CLI parses
and calls :func:`serve`): the refusals of unsafe addresses, the data directory's and the
vault's locks, logging with secrets redacted, the owner's first token, the upgrade of
tokens from before roles, the app behind the connection guard, uvicorn's configuration
and the signals of a clean stop (docs/team-server.md, docs/operations.md).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from typing import Any

from wiki_memory.config import Settings
from wiki_memory.hosts import is_loopback

__all__ = ["SWITCH_SECONDS", "ServeRefused", "RedactingFormatter", "serve", "setup_logging"]

#: the interpreter's switch interval in the server (Python's default: 0.005 s). A thread
#: that wants the interpreter's lock waits this long before the one holding it must let
#: go; the event loop lets go at every system call (a socket's send, the spool's write)
#: and, while a recall ranks in a thread, waits once more after each. At 5 ms that was
#: most of a capture's time on the loop under a mix of captures and recalls
SWITCH_SECONDS = 0.001


class ServeRefused(Exception):
    """The server will not start: ``str(exc)`` says why, ``code`` is the CLI's exit
    status for it (2: a setting, 3: a lock or a port another process holds)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class RedactingFormatter(logging.Formatter):
    """A formatter whose output (message, arguments and traceback) has every secret the
    sanitizer detects replaced by ``[REDACTED:<kind>]``: a library's error message may
    quote a request path or a value that holds a token."""

    def format(self, record: logging.LogRecord) -> str:
        from wiki_memory.capture.sanitize import redact_text

        return redact_text(super().format(record))[0]


def setup_logging(settings: Settings) -> None:
    """The server's logging: ``logs/server.log`` (INFO and up, every secret redacted),
    warnings and up on stderr, and ``logs/access.log`` for the access lines only."""
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


def upgrade_tokens(memory: Any, tokens: Any) -> None:
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


def open_when_up(host: str, port: int, scheme: str = "http", timeout: float = 30.0) -> None:
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


def serve(settings: Settings, open_browser: bool = False) -> int:
    """Serve ``settings``' data directory in the foreground until SIGINT or SIGTERM:
    check the address, TLS and authentication rules, take the data directory's and the
    vault's locks, set up logging, create the owner's token on a first start, build the
    app and run uvicorn behind :mod:`wiki_memory.server.guard`. ``open_browser`` opens
    the web view once ``/v1/health`` answers. Returns the exit status (0 after a clean
    stop, 1 when the server never started). Raises :class:`ServeRefused` (with the CLI's
    exit status: 2 for a bad setting, 3 for a lock or port another process holds)."""
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

    # what the server creates (index, WAL, logs, spool, git objects, new pages) is the
    # owner's alone; a vault's existing files keep their modes (docs/team-server.md)
    os.umask(0o077)
    if not settings.auth and not is_loopback(settings.host):
        raise ServeRefused(
            f"refusing to serve {settings.host} without authentication: "
            "a non-loopback address needs tokens (drop --no-auth)",
            2,
        )
    tls = settings.tls_cert is not None or settings.tls_key is not None
    if tls and (settings.tls_cert is None or settings.tls_key is None):
        raise ServeRefused("--tls-cert and --tls-key go together", 2)
    for f in (settings.tls_cert, settings.tls_key):
        if f is not None and not f.is_file():
            raise ServeRefused(f"cannot read {f}: no such file", 2)
    if not tls and not is_loopback(settings.host) and not settings.insecure_http:
        raise ServeRefused(
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
        raise ServeRefused(str(exc), 3) from None
    vault = VaultLock(settings.wiki_dir)
    try:
        held = port_holder(settings.host, settings.port)
        if held is not None:
            raise ServeRefused(f"cannot listen on {settings.host}:{settings.port}: {held}", 3)
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
                raise ServeRefused(str(exc), 3) from None
        memory = Memory(settings, owner_user=tokens.owner_name(), directory=tokens)
        upgrade_tokens(memory, tokens)
        if not vault._lock.is_locked:  # a new repository: lock it now
            try:
                vault.acquire(settings.data_dir)
            except VaultLocked as exc:
                raise ServeRefused(str(exc), 3) from None
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
        if not tls and not is_loopback(settings.host):
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
            raise ServeRefused(f"trusted_proxies: {exc}", 2) from None
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
        sys.setswitchinterval(SWITCH_SECONDS)
        server = GuardedServer(config)
        server.tls_handshake_timeout = settings.header_timeout_seconds
        server.on_listening = lock.mark_listening
        server.on_shutdown = memory.sync.stop
        if open_browser:
            open_when_up(settings.host, settings.port, "https" if tls else "http")
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
