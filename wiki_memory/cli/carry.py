"""CLI subcommands that carry the memory elsewhere: ``backup FILE [--encrypt]``,
``restore FILE`` and ``export [FILE]`` (docs/operations.md; ``import --json`` is
beside the vault import in :mod:`wiki_memory.cli.wiki`). They act as the data directory's owner on its
files, like ``import`` and ``token``."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from wiki_memory.cli.common import CliError, add_wiki, cli_settings
from wiki_memory.cli.declare import add_command, add_flag

__all__ = ["register"]

#: where a script gives the passphrase (a terminal is asked instead when it is unset)
PASSPHRASE_ENV = "WIKI_MEMORY_BACKUP_PASSPHRASE"


def ask_passphrase(confirm: bool) -> str:
    """The passphrase from the environment or the terminal; a new backup's (``confirm``)
    has at least ``MIN_PASSPHRASE`` characters (a restore takes what the backup had)."""
    from wiki_memory.core.backup_format import MIN_PASSPHRASE

    value = os.environ.get(PASSPHRASE_ENV)
    if value:
        if confirm and len(value) < MIN_PASSPHRASE:
            raise CliError(f"a passphrase needs at least {MIN_PASSPHRASE} characters", 2)
        return value
    if not sys.stdin.isatty():
        raise CliError(f"a passphrase is needed: set {PASSPHRASE_ENV} or run on a terminal", 2)
    first = getpass.getpass("Passphrase: ")
    if confirm and getpass.getpass("Again: ") != first:
        raise CliError("the two passphrases differ", 2)
    if not first:
        raise CliError("an empty passphrase protects nothing", 2)
    if confirm and len(first) < MIN_PASSPHRASE:
        raise CliError(f"a passphrase needs at least {MIN_PASSPHRASE} characters", 2)
    return first


def cmd_backup(args: argparse.Namespace) -> int:
    """``backup FILE [--encrypt]``: one owner-only file, verified after writing."""
    from wiki_memory.core.backup import backup
    from wiki_memory.core.backup_format import BackupError

    settings = cli_settings(args)
    passphrase = ask_passphrase(True) if args.encrypt else None
    target = Path(args.file).expanduser().resolve()
    cleared: list[Path] = []
    try:
        manifest = backup(settings, target, passphrase, cleared)
    except (BackupError, OSError) as exc:
        raise CliError(f"backup failed: {exc}") from None
    finally:
        if cleared:
            print(
                f"removed {len(cleared)} temporary file(s) a stopped backup left in "
                f"{target.parent}",
                file=sys.stderr,
            )
    files = manifest["files"]
    size = target.stat().st_size
    print(
        f"wrote {target} ({size} bytes, {len(files)} files, HEAD "
        f"{manifest['refs'].get(manifest['refs'].get('HEAD', ''), '?')[:12]}"
        f"{', encrypted' if passphrase else ''}); verified"
    )
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    """``restore FILE``: into an absent or empty data directory only. Prints what was left
    out (listed members the border refused, members the manifest does not list) and every
    connection setting the restored ``config.toml`` sets."""
    from wiki_memory.core.backup import restore
    from wiki_memory.core.backup_format import MAGIC, BackupError

    settings = cli_settings(args)
    source = Path(args.file).expanduser()
    try:
        with open(source, "rb") as f:
            encrypted = f.read(len(MAGIC)) == MAGIC
    except OSError as exc:
        raise CliError(f"cannot read {source}: {exc}") from None
    passphrase = ask_passphrase(False) if encrypted else None
    try:
        done = restore(settings, source, passphrase)
    except (BackupError, OSError) as exc:
        hint = ""
        if "is not empty" in str(exc):
            hint = (
                "; restore into another one with `wiki-memory --data-dir NEW_DIR restore "
                f"{shlex.quote(str(source))}` (then serve with the same --data-dir)"
            )
        raise CliError(f"restore failed: {exc}{hint}") from None
    for r in done.refused:
        print(f"not restored: {r.path!r} ({r.reason})", file=sys.stderr)
    if done.unlisted_count:
        names = ", ".join(repr(n) for n in done.unlisted)
        more = done.unlisted_count - len(done.unlisted)
        print(
            f"not restored: {done.unlisted_count} "
            f"member{'s' if done.unlisted_count != 1 else ''} the manifest does not list: {names}"
            + (f" and {more} more" if more else ""),
            file=sys.stderr,
        )
    for w in done.warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(
        f"restored {source} into {settings.data_dir} (backup of "
        f"{done.manifest.get('created', '?')}); "
        "start the server to rebuild the index and compile pending observations"
    )
    if done.connection:
        print("connection settings restored (config.toml): check them before serving")
        for name, value in done.connection.items():
            print(f"  {name} = {json.dumps(value, default=str)}")
    else:
        print("connection settings restored: none (the defaults: loopback only)")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """``export [FILE]``: every page and attachment as JSON Lines (the one format;
    ``--json`` is accepted and changes nothing), to FILE or stdout; standard error says
    how many of each were written and what the export leaves out, with counts."""
    from tqdm import tqdm

    from wiki_memory.cli.wiki import wiki_settings
    from wiki_memory.core.userecord import UseRecord
    from wiki_memory.wiki.exchange import attachment_files, export_pages, page_files

    settings = wiki_settings(args)
    wiki = settings.wiki_dir
    if not wiki.is_dir():
        raise CliError(f"{wiki}: no wiki here", 2)
    data_dir = None if getattr(args, "wiki", None) else settings.data_dir
    total = len(page_files(wiki)) + len(attachment_files(wiki))
    bar = tqdm(total=total, unit="file", disable=not sys.stderr.isatty())
    use = UseRecord(settings.data_dir).every_row() if data_dir is not None else []
    try:
        if args.file and args.file != "-":
            try:
                fd = os.open(args.file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            except OSError as exc:
                raise CliError(f"export failed: {args.file}: {exc.strerror}", 1) from None
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                done = export_pages(wiki, out, bar.update, data_dir, use)
            where = f" to {args.file}"
        else:
            done = export_pages(wiki, sys.stdout, bar.update, data_dir, use)
            where = ""
    finally:
        bar.close()
    o = done.omitted
    print(
        f"exported {done.pages} pages and {done.attachments} attachments{where}; "
        f"left out: {o['history']} commits of history, {o['spool']} spool files "
        f"(observations not compiled yet), {o['tokens']} tokens, {o['audit']} audit log "
        f"lines, {o['dot_files']} files in dot folders (a backup keeps them all)",
        file=sys.stderr,
    )
    return 0


def register(sub: Any) -> None:
    """Add ``backup`` and ``restore`` to the ``wiki-memory`` parser's subparsers."""
    b = add_command(
        sub,
        "backup",
        cmd_backup,
        "write the wiki (git bundle), spool, tokens, settings and audit log to one file",
    )
    b.add_argument("file", help="the backup file to write (mode 0600)")
    add_flag(b, "--encrypt", f"protect it with a passphrase (asked, or ${PASSPHRASE_ENV})")
    r = add_command(
        sub,
        "restore",
        cmd_restore,
        "restore a backup into an empty data directory",
        description="Restore a backup into the data directory, which must be empty: name "
        "another with the option before the command, `wiki-memory --data-dir NEW_DIR "
        "restore FILE` (or WIKI_MEMORY_HOME).",
    )
    r.add_argument("file", help="the backup file")
    e = add_command(sub, "export", cmd_export, "write every page (and handoff) as JSON Lines")
    e.add_argument("file", nargs="?", help="the file to write (default: standard output)")
    add_flag(e, "--json", "JSON Lines: the one format, the default")
    add_wiki(e)
