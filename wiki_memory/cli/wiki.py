"""CLI subcommands of the wiki face: ``import PATH`` and ``doctor``.

``import`` copies an existing vault (an Obsidian folder, a git checkout) into the data
directory's wiki and commits it; ``doctor`` checks a wiki, its index, git and the lock and
says what is wrong. Both take ``--wiki PATH`` for a vault served with ``serve --wiki``.
Exit status: 0 fine, 1 problems found (doctor: errors; import: files not copied because a
different file already had the name), 2 bad usage.

This module owns the two subcommands (their arguments, ``cmd_import`` with
:func:`import_vault`, ``cmd_doctor``); the doctor's checks and report are
:mod:`wiki_memory.cli.doctor`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import sys
import unicodedata
from pathlib import Path
from typing import Any

from wiki_memory.cli.common import CliError, add_wiki, cli_settings, wiki_option
from wiki_memory.cli.declare import add_command, add_flag
from wiki_memory.cli.doctor import doctor_report, fix, print_report
from wiki_memory.config import Settings


def wiki_settings(args: argparse.Namespace) -> Settings:
    wiki = wiki_option(args)
    return cli_settings(args) if wiki is None else cli_settings(args, wiki_path=wiki)


# --------------------------------------------------------------------------- import

#: never copied from a vault: its history, Obsidian's trash and per-device layout
_SKIP_DIRS = {".git", ".trash"}


def _skip_file(rel_parts: tuple[str, ...]) -> bool:
    name = rel_parts[-1]
    if rel_parts[0] == ".obsidian":
        return name.startswith("workspace")
    from wiki_memory.index.watcher import ignored_name

    return ignored_name(name)


def import_vault(src: Path, wiki: Path, into: str = "") -> dict[str, list[str]]:
    """Copy the vault at ``src`` into ``wiki`` (below the folder ``into``, wiki-relative).

    Offered: every file, names NFC-normalised, times kept; ``.obsidian/`` settings only
    for an import into the wiki's root (never ``workspace*``). Not offered: ``.git/`` and
    ``.trash/``, editors' temp files. What is offered passes the border first
    (:func:`wiki_memory.wiki.border.check`, ``Source.OWN``: each path component, the mode
    as ``lstat`` gives it, the size, at most 50 MiB a file and the disk's free space in
    all); each refused file is skipped with the border's reason (a symbolic link, a
    ``.GIT`` folder, a file over the limit...). Each accepted file is read without
    following a link and written through :func:`wiki_memory.wiki.inside.write_inside`. A
    file that exists in the wiki with the same bytes is left alone; with other bytes it is
    never overwritten (a conflict). Returns ``{"copied", "same", "conflicts", "skipped"}``
    lists of wiki-relative paths (``skipped`` entries end with the reason in brackets).
    Raises ValueError when one folder holds the other.
    """
    from wiki_memory.wiki.border import Entry, Limits, Source, check
    from wiki_memory.wiki.inside import Outside, open_inside, write_inside
    from wiki_memory.wiki.paths import is_plain

    src = src.resolve()
    wiki = wiki.resolve()
    into = into.strip("/")
    if src == wiki or wiki in src.parents or src in wiki.parents:
        raise ValueError("the vault and the wiki must not contain each other")
    out: dict[str, list[str]] = {"copied": [], "same": [], "conflicts": [], "skipped": []}
    offered: list[Entry] = []
    origin: dict[str, Path] = {}
    for dirpath, dirnames, filenames in os.walk(src):
        rel_dir = Path(dirpath).relative_to(src)
        keep = []
        for d in sorted(dirnames):
            if d in _SKIP_DIRS or (into and d == ".obsidian" and rel_dir == Path(".")):
                continue
            if (Path(dirpath) / d).is_symlink():
                filenames.append(d)  # offered as what it is: the border refuses a link
                continue
            keep.append(d)
        dirnames[:] = keep
        for name in sorted(filenames):
            s = Path(dirpath) / name
            rel = rel_dir / name
            try:
                st = os.lstat(s)
            except OSError:
                continue
            if _skip_file(rel.parts):
                continue
            nfc = unicodedata.normalize("NFC", rel.as_posix())
            wrel = f"{into}/{nfc}" if into else nfc
            origin[wrel] = s
            offered.append(Entry(wrel, st.st_mode, st.st_size))
    free = shutil.disk_usage(wiki if wiki.is_dir() else wiki.parent).free
    verdict = check(offered, Source.OWN, limits=Limits(max_total_bytes=free))
    for r in verdict.refused:
        out["skipped"].append(f"{r.path} ({r.reason})")
    for entry in verdict.accepted:
        wrel, s = entry.path, origin[entry.path]
        try:
            # no link followed on the way either (a folder swapped for one since the
            # listing), and no FIFO blocks
            fd = open_inside(src, s.relative_to(src).as_posix(), git_ok=True)
        except OSError as exc:
            out["skipped"].append(f"{wrel} (unreadable: {exc.strerror or exc})")
            continue
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size != entry.size:
                out["skipped"].append(f"{wrel} (changed while it was imported)")
                continue
            data = fh.read(entry.size + 1)
        target = wiki / wrel
        if not is_plain(wiki, wrel):
            out["conflicts"].append(wrel)
            continue
        if target.exists():
            try:
                same = target.is_file() and target.read_bytes() == data
            except OSError:
                same = False
            (out["same"] if same else out["conflicts"]).append(wrel)
            continue
        try:
            write_inside(wiki, wrel, data, executable=bool(st.st_mode & 0o100))
        except (Outside, IsADirectoryError, NotADirectoryError):
            out["conflicts"].append(wrel)
            continue
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
        out["copied"].append(wrel)
    return out


def cmd_import(args: argparse.Namespace) -> int:
    """Copy a vault folder into the wiki and commit it."""
    from wiki_memory.auth import TokenStore
    from wiki_memory.datadir import ServerLock, ensure_layout
    from wiki_memory.wiki.git import GitStore, author_email_for

    if getattr(args, "json", False):
        return _import_json(args)
    src = Path(args.path).expanduser()
    if not src.is_dir():
        raise CliError(f"{args.path}: not a folder", 2)
    settings = wiki_settings(args)
    ensure_layout(settings)
    owner = TokenStore(settings.auth_dir).owner_name()
    store = GitStore(settings.wiki_dir)  # a new wiki gets its repository before the copy
    try:
        try:
            res = import_vault(src, settings.wiki_dir, args.into or "")
        except ValueError as exc:
            raise CliError(str(exc), 2) from None
        pages = [p for p in res["copied"] if p.endswith(".md")]
        if res["copied"]:
            store.commit(
                res["copied"],
                owner,
                author_email_for(owner),
                f"Import vault {src.resolve().name} ({len(res['copied'])} files, "
                f"{len(pages)} pages)",
            )
    finally:
        store.close()
    running = ServerLock(settings.data_dir).is_held_elsewhere()
    print(
        f"imported {len(res['copied'])} files ({len(pages)} pages) into {settings.wiki_dir}"
        + (f"/{args.into.strip('/')}" if args.into else "")
    )
    if res["same"]:
        print(f"{len(res['same'])} files were already there with the same content")
    for p in res["skipped"]:
        print(f"skipped {p}")
    for p in res["conflicts"]:
        print(f"not copied: {p} (a different file already has this name)", file=sys.stderr)
    print(
        "the running server indexes them now"
        if running
        else "`wiki-memory serve` indexes them at start"
    )
    return 1 if res["conflicts"] else 0


def _import_json(args: argparse.Namespace) -> int:
    """``import --json FILE``: the pages of an export (``wiki-memory export --json``)
    written into the wiki, one at a time, and committed; a page that exists with other
    bytes is not overwritten, and a record the border refuses (its path, its size) or that
    names no ``.md`` page is not written (exit 1, each named with its line)."""
    from tqdm import tqdm

    from wiki_memory.auth import TokenStore
    from wiki_memory.datadir import ensure_layout
    from wiki_memory.wiki.border import Entry, Limits, Source, check
    from wiki_memory.wiki.exchange import read_export
    from wiki_memory.wiki.git import GitStore, author_email_for
    from wiki_memory.wiki.inside import Outside, write_inside
    from wiki_memory.wiki.paths import is_plain

    settings = wiki_settings(args)
    ensure_layout(settings)
    owner = TokenStore(settings.auth_dir).owner_name()
    wiki = settings.wiki_dir
    store = GitStore(wiki)
    written: list[str] = []
    same: list[str] = []
    conflicts: list[str] = []
    refused: list[str] = []
    use_rows: list[dict[str, Any]] = []  # the use record's rows (core.userecord)
    room = shutil.disk_usage(wiki).free
    try:
        try:
            f = sys.stdin if args.path == "-" else open(args.path, encoding="utf-8")  # noqa: SIM115
        except OSError as exc:
            raise CliError(f"cannot read {args.path}: {exc}", 2) from None
        bar = tqdm(unit="page", disable=not sys.stderr.isatty())
        try:
            for rec in read_export(f, use_rows.append):
                n, rel, raw = rec.line, rec.path, rec.raw
                bar.update(1)
                verdict = check(
                    [Entry(rel, 0o100644, len(raw))],
                    Source.OWN,
                    limits=Limits(max_total_bytes=room),
                )
                if verdict.refused:
                    refused.append(f"line {n}: {rel!r} ({verdict.refused[0].reason})")
                    continue
                if rel.endswith(".md") == (rec.kind == "attachment"):
                    want = "a file other than .md" if rec.kind == "attachment" else "a .md page"
                    refused.append(f"line {n}: {rel!r} (not {want})")
                    continue
                room -= len(raw)
                target = wiki / rel
                if not is_plain(wiki, rel):
                    conflicts.append(rel)
                    continue
                if target.exists():
                    (same if target.read_bytes() == raw else conflicts).append(rel)
                    continue
                try:
                    write_inside(wiki, rel, raw)
                except (Outside, IsADirectoryError, NotADirectoryError):
                    conflicts.append(rel)
                    continue
                if rec.mtime is not None:
                    # the time recall filters on for a page without frontmatter times
                    os.utime(target, (rec.mtime, rec.mtime), follow_symlinks=False)
                written.append(rel)
        except ValueError as exc:
            raise CliError(f"{args.path}: {exc}", 2) from None
        finally:
            bar.close()
            if f is not sys.stdin:
                f.close()
        pages = sum(1 for p in written if p.endswith(".md"))
        if written:
            store.commit(
                written,
                owner,
                author_email_for(owner),
                f"Import {pages} pages and {len(written) - pages} attachments (JSON)",
            )
    finally:
        store.close()
    print(
        f"imported into {wiki}: {len(written)} written ({pages} pages, "
        f"{len(written) - pages} attachments), {len(same)} identical, "
        f"{len(conflicts)} conflicting, {len(refused)} refused"
    )
    if use_rows:
        from wiki_memory.core.userecord import UseRecord

        n_use = UseRecord(settings.data_dir).merge(use_rows)
        print(f"use record: {n_use} of {len(use_rows)} rows taken")
    for p in conflicts:
        print(f"not written: {p} (a different file already has this name)", file=sys.stderr)
    for p in refused:
        print(f"not imported: {p}", file=sys.stderr)
    return 1 if conflicts or refused else 0


def cmd_doctor(args: argparse.Namespace) -> int:
    """Check the wiki and print what is wrong; exit 1 on errors (``--strict``: warnings too)."""
    settings = wiki_settings(args)
    if getattr(args, "fix", False):
        fix(settings, follow_index=not getattr(args, "wiki", None))
    rep = doctor_report(settings, follow_index=not getattr(args, "wiki", None))
    if args.json:
        print(json.dumps(rep, indent=1, ensure_ascii=False, default=str))
    else:
        print_report(rep, args.limit)
    if not rep["ok"] or (args.strict and rep["warnings"]):
        return 1
    return 0


def register(sub: Any) -> None:
    """Add ``import`` and ``doctor`` to the ``wiki-memory`` parser's subparsers."""
    im = add_command(
        sub, "import", cmd_import, "copy an existing vault folder into the wiki and commit it"
    )
    im.add_argument(
        "path",
        help="the vault folder (an Obsidian vault, a git checkout, ...), or with --json the "
        "export file (- for standard input)",
    )
    add_flag(im, "--json", "read a `wiki-memory export --json` file")
    im.add_argument("--into", default="", help="a folder of the wiki to copy it into")
    add_wiki(im)

    dr = add_command(
        sub,
        "doctor",
        cmd_doctor,
        "check the service, hooks, MCP, outbox, token, git, index and files; exit 1 on errors",
    )
    add_wiki(dr, "the wiki folder (for `serve --wiki PATH`)")
    add_flag(dr, "--json", "print the whole report as JSON")
    add_flag(dr, "--strict", "warnings count as problems too")
    dr.add_argument("--limit", type=int, default=20, help="items shown per list (default 20)")
    add_flag(
        dr,
        "--fix",
        "apply the safe fixes: git lock files no process holds (over 10 minutes old), "
        "owner-only modes on the data directory and the token file",
    )
