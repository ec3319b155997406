"""The harnesses' own files (docs/agent-files.md): ``wiki-memory import-agent-files`` and
``wiki-memory brief --write FILE``.

``import-agent-files [PATH] [--dry-run]`` lists the instruction and memory files a
session in ``PATH`` sees (:func:`wiki_memory.capture.agentfiles.find`), and sends their
text to the running server with the CLI's token (``POST /v1/agent-files``); a dry run
asks the server what it would do and writes nothing. The originals are only read.

``brief --write FILE`` keeps the project's shared memory in a section between markers of
an instruction file (``AGENTS.md`` and the like) for harnesses that read such files but
run no hooks: every byte outside the markers stays as it is, the section (markers
included) counts at most ``--budget`` tokens with the brief's tokenizer, and a file git
tracks is refused unless ``--tracked-ok``. ``--check`` exits 0 when the section is
current, 1 when writing would change it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from wiki_memory.capture import agentfiles
from wiki_memory.cli.common import CliError, add_url, post_json
from wiki_memory.cli.declare import add_command, add_flag

__all__ = ["cmd_import", "register", "setup_offer", "write_brief"]

#: the section's default budget in tokens, markers included
WRITE_BUDGET = 800


def _repo(path: Path) -> tuple[str | None, dict[str, str]]:
    """The project name and repository id (``{"repo_id", "repo_origin"?}``) of ``path``."""
    from wiki_memory.capture.project import repo_identity, resolve_project

    res = resolve_project(str(path))
    ids: dict[str, str] = {}
    if res.source == "git" and res.root:
        ident = repo_identity(res.root)
        if ident.get("id"):
            ids["repo_id"] = ident["id"]
            if ident.get("origin"):
                ids["repo_origin"] = ident["origin"]
    return res.name, ids


def _read(found: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    files, skipped = [], []
    for e in found:
        try:
            if os.path.getsize(e["path"]) > agentfiles.MAX_FILE_BYTES:
                skipped.append(f"{e['path']}: over {agentfiles.MAX_FILE_BYTES} bytes")
                continue
            text = Path(e["path"]).read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            skipped.append(f"{e['path']}: cannot read as UTF-8 text ({type(exc).__name__})")
            continue
        files.append({**e, "text": text})
    return files, skipped


def cmd_import(args: argparse.Namespace) -> int:
    """Preview or import (see the module). Exit 0; 1 when nothing was found."""
    where = Path(args.path or os.getcwd()).expanduser().resolve()
    if not where.is_dir():
        raise CliError(f"{where}: not a folder", 2)
    found = agentfiles.find(str(where))
    if not found:
        print(f"no instruction or memory files found for {where}")
        return 1
    files, skipped = _read(found)
    name, ids = _repo(where)
    body: dict[str, Any] = {
        "files": [{k: f[k] for k in ("source", "scope", "harness", "text")} for f in files],
        "dry_run": bool(args.dry_run),
        "create_project": not args.dry_run,
        **ids,
    }
    if name:
        body["project"] = name
    if all(f["source"].startswith("~/") for f in files):
        body.pop("project", None)
    res = post_json(args, "/v1/agent-files", body, timeout=120)
    if args.json:
        print(json.dumps(res, ensure_ascii=False, indent=2))
        return 0
    by_source = {f["source"]: f for f in files}
    verb = "would" if args.dry_run else "did"
    print(f"{'dry run: ' if args.dry_run else ''}{len(res['files'])} file(s) ({verb}):")
    for row in res["files"]:
        orig = by_source.get(row["source"], {}).get("path", row["source"])
        line = f"  {row['action']:<9} {orig} -> {row['path']}"
        if row.get("copy"):
            line += f" (a person edited the page: the new version is in {row['copy']})"
        if row.get("reason"):
            line += f" ({row['reason']})"
        print(line)
    for s in skipped:
        print(f"  skipped   {s}")
    if any(r["action"] == "conflict" for r in res["files"]) and not args.dry_run:
        print("conflicts: `wiki-memory sync-conflicts` lists them and keeps one side")
    return 0


def setup_offer(args: argparse.Namespace, address: str) -> None:
    """``setup``'s asked step, after its self-check passed: name the files found in the
    current folder and import them only when the person answers yes on a terminal;
    without a terminal, say how to do it. Never imports silently."""
    found = agentfiles.find(os.getcwd())
    if not found:
        return
    print(f"instruction/memory files here: {', '.join(e['source'] for e in found)}")
    if not sys.stdin.isatty():
        print("  import them with `wiki-memory import-agent-files` (--dry-run: a preview)")
        return
    answer = input("  import them into the wiki now? [y/N] ").strip().lower()
    if answer not in ("y", "yes"):
        print("  not imported (later: `wiki-memory import-agent-files`)")
        return
    ns = argparse.Namespace(**{**vars(args), "path": None, "dry_run": False, "json": False})
    ns.url = address
    try:
        cmd_import(ns)
    except CliError as exc:
        print(f"  not imported: {exc}")


def _tracked(file: Path) -> bool:
    from dulwich.errors import NotGitRepository
    from dulwich.repo import Repo

    d = file.parent
    while True:
        if (d / ".git").exists():
            try:
                repo = Repo(str(d))
            except NotGitRepository:
                return False
            try:
                rel = file.relative_to(d).as_posix().encode("utf-8", "surrogateescape")
                return rel in repo.open_index()
            finally:
                repo.close()
        if d.parent == d:
            return False
        d = d.parent


def _section(text: str) -> str:
    return f"{agentfiles.BEGIN}\n{text.rstrip()}\n{agentfiles.END}\n" if text.strip() else ""


def write_brief(args: argparse.Namespace) -> int:
    """``brief --write FILE`` (and ``--check``); see the module."""
    from wiki_memory.recall.tokens import count_tokens

    file = Path(args.write).expanduser().resolve()
    if file.is_symlink() or (file.exists() and not file.is_file()):
        raise CliError(f"{file}: not a plain file", 2)
    if not args.check and not args.tracked_ok and _tracked(file):
        raise CliError(
            f"{file} is tracked by git (such files are usually pushed): "
            "pass --tracked-ok to write into it anyway",
            2,
        )
    budget = WRITE_BUDGET if args.budget is None else args.budget
    if budget <= 0:
        raise CliError("--budget must be a positive number of tokens", 2)
    old = file.read_bytes() if file.exists() else b""
    name, ids = _repo(file.parent)
    if not (args.project or name):
        raise CliError(
            f"{file.parent} is not inside a git repository, so it names no project: "
            "pass --project NAME",
            2,
        )
    overhead = count_tokens(_section("x")) + 1
    body: dict[str, Any] = {"project": args.project or name, "shared": True, **ids}
    body["instruction_files"] = [
        {"source": e["source"], "hash": agentfiles.content_hash(old)}
        for e in agentfiles.find(str(file.parent))
        if Path(e["path"]).resolve() == file
    ]
    section = ""
    ask = budget - overhead
    while ask > 0:
        res = post_json(args, "/v1/brief", {**body, "budget_tokens": ask})
        section = _section(res["text"])
        if count_tokens(section) <= budget:
            break
        ask -= count_tokens(section) - budget
        section = ""
    parts = agentfiles.split_section(old)
    new_section = section.encode("utf-8")
    if parts is not None:
        new = parts[0] + new_section + parts[2]
    elif new_section:
        sep = (
            b"" if not old or old.endswith(b"\n\n") else (b"\n" if old.endswith(b"\n") else b"\n\n")
        )
        new = old + sep + new_section
    else:
        new = old
    used = count_tokens(section)
    if args.check:
        print(f"{file}: {'current' if new == old else 'out of date'} ({used}/{budget} tokens)")
        return 0 if new == old else 1
    if new == old:
        print(f"{file}: unchanged ({used}/{budget} tokens)")
        return 0
    tmp = file.with_name(f".{file.name}.{os.getpid()}.tmp")
    tmp.write_bytes(new)
    if file.exists():
        os.chmod(tmp, file.stat().st_mode & 0o7777)
    os.replace(tmp, file)
    print(f"{file}: memory section written ({used}/{budget} tokens)")
    return 0


def register(sub: Any) -> None:
    """Add ``import-agent-files`` to the ``wiki-memory`` parser's subparsers."""
    what = "CLAUDE.md, AGENTS.md, GEMINI.md, Cursor rules and Claude Code's memory"
    p = add_command(
        sub,
        "import-agent-files",
        cmd_import,
        f"import {what} into the wiki, through the server (--dry-run: preview)",
    )
    p.add_argument("path", nargs="?", help="the project folder (default: the current one)")
    add_flag(p, "--dry-run", "show what would be imported")
    add_flag(p, "--json", "print the server's answer as JSON")
    add_url(p)


def add_write_options(b: argparse.ArgumentParser) -> None:
    """``brief``'s ``--write``, ``--check`` and ``--tracked-ok``."""
    b.add_argument(
        "--write",
        metavar="FILE",
        help="keep the project's shared memory between markers in FILE (AGENTS.md, ...); "
        f"--budget counts the whole section (default {WRITE_BUDGET} with --write)",
    )
    add_flag(b, "--check", "with --write: exit 0 when FILE is current, else 1")
    add_flag(b, "--tracked-ok", "with --write: write a file git tracks too")
