"""The harnesses' own instruction and memory files on this machine (docs/agent-files.md):
where they are, what their hash is, and the section this project writes into them.

Standard library only and cheap to import: the hook program (``python -S``) loads this
same module at ``SessionStart`` to report the files present (:func:`report`), and
``wiki-memory import-agent-files`` uses it to find what to import (:func:`find`). It
only reads; no original is ever written here.

A file is named by its **source**, the same spelling on every machine:

- a project file: its path relative to the repository's top folder (``CLAUDE.md``,
  ``.claude/CLAUDE.md``, ``sub/AGENTS.md``, ``.cursor/rules/style.mdc``); outside a
  repository, relative to the folder searched;
- a per-user file: its path under the home folder, spelled ``~/...``
  (``~/.claude/CLAUDE.md``, ``~/.claude/projects/-home-u-api/memory/MEMORY.md``).

Its **hash** (:func:`content_hash`) is ``sha256:<hex>`` of its bytes with this project's
own section (between :data:`BEGIN` and :data:`END`, written by ``wiki-memory brief
--write``) taken out, so writing that section neither changes the hash nor is imported.
"""

from __future__ import annotations

import os
import re
import types

__all__ = [
    "BEGIN",
    "END",
    "MAX_FILE_BYTES",
    "content_hash",
    "encode_project_path",
    "find",
    "report",
    "split_section",
    "without_section",
]

#: the first line of the section ``brief --write`` owns in an instruction file
BEGIN = (
    "<!-- wiki-memory:begin (written by `wiki-memory brief --write`; edits here are replaced) -->"
)
#: its last line
END = "<!-- wiki-memory:end -->"
#: files larger than this are listed but not read (an instruction file is a few KiB)
MAX_FILE_BYTES = 512 * 1024

#: per folder, from the session's folder up to the repository's top: (name, harness,
#: scope); ``CLAUDE.local.md`` is one person's notes on the project (usually git-ignored),
#: so it is ``user``: its page goes to that person's own folder, never to the project
PROJECT_FILES = (
    ("CLAUDE.md", "claude-code", "project"),
    (".claude/CLAUDE.md", "claude-code", "project"),
    ("CLAUDE.local.md", "claude-code", "user"),
    ("AGENTS.md", "codex", "project"),
    ("GEMINI.md", "gemini", "project"),
)
#: under the home folder
USER_FILES = (
    (".claude/CLAUDE.md", "claude-code"),
    (".codex/AGENTS.md", "codex"),
    (".gemini/GEMINI.md", "gemini"),
)
# patterns, compiled on first use (the hook pays for no compile where no file has them)
_BEGIN_RE = rb"(?m)^<!-- wiki-memory:begin\b[^\n]*-->[ \t]*\r?$"
_END_RE = rb"(?m)^<!-- wiki-memory:end -->[ \t]*\r?$"
_LINK = r"\]\(([^)\s]+\.md)\)|\[\[([^\]|#]+)"


def split_section(data: bytes) -> tuple[bytes, bytes, bytes] | None:
    """``(before, section, after)`` of ``data`` around this project's section (the marker
    lines included in ``section``, its line end too); None when it has no whole one (a
    begin line followed by an end line)."""
    if b"<!-- wiki-memory:begin" not in data:
        return None
    b = re.search(_BEGIN_RE, data)
    if b is None:
        return None
    e = re.compile(_END_RE).search(data, b.end())
    if e is None:
        return None
    stop = e.end()
    if data[stop : stop + 1] == b"\n":
        stop += 1
    return data[: b.start()], data[b.start() : stop], data[stop:]


def without_section(data: bytes) -> bytes:
    """``data`` with this project's section (see :func:`split_section`) taken out."""
    parts = split_section(data)
    return data if parts is None else parts[0] + parts[2]


def content_hash(data: bytes) -> str:
    """``sha256:<hex>`` of ``data`` without this project's section."""
    return "sha256:" + str(_sha256_module().sha256(without_section(data)).hexdigest())


_SHA: list[types.ModuleType] = []


def _sha256_module() -> types.ModuleType:
    """The module whose ``sha256`` hashes: CPython's own built-in one when there is one
    (``_sha256`` up to 3.11, ``_sha2`` from 3.12; it loads in well under a millisecond),
    else ``hashlib`` (which loads OpenSSL first: 3-25 ms on a busy machine, paid by the
    hook at every SessionStart). Each gives the same digest."""
    if not _SHA:
        for name in ("_sha256", "_sha2", "hashlib"):
            try:
                _SHA.append(__import__(name))
                break
            except ImportError:
                continue
    return _SHA[0]


def encode_project_path(path: str) -> str:
    """The folder name Claude Code gives a project's auto memory under
    ``~/.claude/projects/``: the project's absolute path with every character other than
    a letter or digit replaced by ``-`` (``/home/u/my.api`` -> ``-home-u-my-api``)."""
    return "".join(c if c.isascii() and c.isalnum() else "-" for c in path)


def _top(start: str) -> str | None:
    d = start
    while True:
        if os.path.exists(os.path.join(d, ".git")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def _is_file(path: str) -> bool:
    try:
        return os.path.isfile(path) and not os.path.islink(path)
    except OSError:
        return False


def _entry(path: str, source: str, scope: str, harness: str) -> dict[str, str]:
    return {"path": path, "source": source, "scope": scope, "harness": harness}


def _memory_files(folder: str, home: str) -> list[dict[str, str]]:
    """Claude Code's auto memory of one project: ``MEMORY.md`` and the ``.md`` files in
    its folder that it links (markdown links or wikilinks), each once."""
    index = os.path.join(folder, "MEMORY.md")
    if not _is_file(index):
        return []
    out = [index]
    try:
        with open(index, encoding="utf-8", errors="replace") as f:
            text = f.read(MAX_FILE_BYTES)
    except OSError:
        text = ""
    for m in re.finditer(_LINK, text):
        name = (m.group(1) or m.group(2) or "").strip()
        if not name.endswith(".md"):
            name += ".md"
        full = os.path.normpath(os.path.join(folder, name))
        if os.path.dirname(full) == os.path.normpath(folder) and _is_file(full):
            if full not in out:
                out.append(full)
    return [
        _entry(p, "~/" + os.path.relpath(p, home).replace(os.sep, "/"), "user", "claude-code")
        for p in out
    ]


def find(cwd: str, home: str | None = None) -> list[dict[str, str]]:
    """The instruction and memory files a session in ``cwd`` sees: ``[{"path"
    (absolute), "source", "scope" ("project", or "user" for one person's own: every
    ``~/`` file and ``CLAUDE.local.md``), "harness"}]``, the files
    from ``cwd`` up to the repository's top (nearest first; only ``cwd`` outside a
    repository, none in ``home`` itself), then the per-user ones under ``home`` (default ``$HOME``), including
    Claude Code's auto memory of the repository (or of ``cwd``). Symbolic links are left
    out. Never raises for a folder that cannot be read."""
    start = os.path.normpath(os.path.abspath(cwd))
    home = os.path.normpath(home or os.path.expanduser("~"))
    top = _top(start)
    base = top or start
    # the home folder outside any repository: its files are the per-user ones alone
    folders = [] if top is None and start == home else [start]
    d = start
    while top is not None and d != top:
        d = os.path.dirname(d)
        folders.append(d)
    out: list[dict[str, str]] = []
    for folder in folders:
        for name, harness, scope in PROJECT_FILES:
            p = os.path.join(folder, *name.split("/"))
            if _is_file(p):
                rel = os.path.relpath(p, base).replace(os.sep, "/")
                out.append(_entry(p, rel, scope, harness))
        rules = os.path.join(folder, ".cursor", "rules")
        try:
            names = sorted(n for n in os.listdir(rules) if n.endswith(".mdc"))
        except OSError:
            names = []
        for n in names:
            p = os.path.join(rules, n)
            if _is_file(p):
                rel = os.path.relpath(p, base).replace(os.sep, "/")
                out.append(_entry(p, rel, "project", "cursor"))
    for name, harness in USER_FILES:
        p = os.path.join(home, *name.split("/"))
        if _is_file(p) and p not in {e["path"] for e in out}:
            out.append(_entry(p, "~/" + name, "user", harness))
    memory = os.path.join(home, ".claude", "projects", encode_project_path(base), "memory")
    out += _memory_files(memory, home)
    return out


def report(cwd: str, home: str | None = None) -> list[dict[str, str]]:
    """What the hook sends at ``SessionStart``: ``[{"source", "hash"}]`` of every file
    :func:`find` lists that can be read (at most :data:`MAX_FILE_BYTES` each)."""
    out = []
    for e in find(cwd, home):
        try:
            if os.path.getsize(e["path"]) > MAX_FILE_BYTES:
                continue
            with open(e["path"], "rb") as f:
                data = f.read()
        except OSError:
            continue
        out.append({"source": e["source"], "hash": content_hash(data)})
    return out
