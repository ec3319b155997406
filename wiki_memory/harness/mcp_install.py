"""Install and uninstall the wiki-memory MCP server in a client's own configuration file.

Per client, the file and shape that client documents (``--scope project`` picks the
project-level file in the current directory; ``--config`` any other):

============  =======================================  ====================================
client        user file (project file)                 entry
============  =======================================  ====================================
claude-code   ``~/.claude.json`` (``.mcp.json``)        ``mcpServers.<name>``:
                                                       ``{type: "stdio", command, args,
                                                       env: {}}``
codex         ``$CODEX_HOME/config.toml``,              ``[mcp_servers.<name>]`` with
              ``~/.codex/config.toml``                  ``command`` and ``args``
              (``.codex/config.toml``)
gemini-cli    ``~/.gemini/settings.json``               ``mcpServers.<name>``:
              (``.gemini/settings.json``)               ``{command, args}``
cursor        ``~/.cursor/mcp.json``                    ``mcpServers.<name>``:
              (``.cursor/mcp.json``)                    ``{command, args}``
============  =======================================  ====================================

The command runs the stdio bridge as a script with ``-S`` (see ``wiki_memory.mcp.bridge``):
``<python> -S <.../wiki_memory/cli_mcp.py> [--data-dir D] mcp [--url U --token-file F]``.
``--data-dir`` is written when one was chosen (flag or ``WIKI_MEMORY_HOME``), because a
client does not always pass the shell's environment on. The token is never written:
for the local server the bridge reads it from the data directory; a team server's is
named by a ``--token-file``.

Install replaces our entry in place or adds it; everything else in the file stays (for
TOML, byte for byte: only our table's lines change). An unchanged result is not written;
a changed one is written atomically after a timestamped backup of the old file. What was
written is recorded in ``<data_dir>/mcp-installs.json``; uninstall removes our entry only
when it is still what we wrote (or, with no record, when it runs our bridge), so an entry
the user edited since is left in place (``--force`` removes it anyway). Other entries
are never touched.
"""

from __future__ import annotations

import copy
import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wiki_memory.harness.hooks_install import (
    InstallError,
    backup_path,
    interpreter_path,
    read_config,
    replace_with_backup,
)
from wiki_memory.plainfile import atomic_write

CLIENTS = {
    "claude-code": "Claude Code",
    "codex": "Codex CLI",
    "gemini-cli": "Gemini CLI",
    "cursor": "Cursor",
}
#: the bridge script (run with ``python -S``)
BRIDGE_SCRIPT = Path(__file__).resolve().parents[1] / "cli_mcp.py"
RECORD_FILE = "mcp-installs.json"


def config_path(
    client: str,
    scope: str = "user",
    home: Path | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> Path:
    """The client's MCP configuration file for ``scope`` (``user`` or ``project``)."""
    env = dict(os.environ) if env is None else env
    home = Path(home) if home is not None else Path(env.get("HOME") or Path.home())
    cwd = Path(cwd) if cwd is not None else Path.cwd()
    _check_client(client)
    if scope == "project":
        return (
            cwd
            / {
                "claude-code": ".mcp.json",
                "codex": ".codex/config.toml",
                "gemini-cli": ".gemini/settings.json",
                "cursor": ".cursor/mcp.json",
            }[client]
        )
    if client == "claude-code":
        return home / ".claude.json"
    if client == "codex":
        codex_home = env.get("CODEX_HOME")
        return (Path(codex_home) if codex_home else home / ".codex") / "config.toml"
    if client == "gemini-cli":
        return home / ".gemini" / "settings.json"
    return home / ".cursor" / "mcp.json"


def _check_client(client: str) -> None:
    if client not in CLIENTS:
        raise InstallError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")


def bridge_args(
    script: str | Path | None = None,
    data_dir: str | Path | None = None,
    url: str | None = None,
    token_file: str | Path | None = None,
    harness: str | None = None,
    ca_file: str | Path | None = None,
) -> list[str]:
    """The bridge's arguments (after the interpreter); ``harness`` is the hook name of
    the client the bridge serves (the tools record it on what they write). ``ca_file``:
    the PEM CA an ``https://`` server's certificate is checked against (``--ca-file``)."""
    args = ["-S", str(script or BRIDGE_SCRIPT)]
    if data_dir:
        args += ["--data-dir", str(data_dir)]
    if ca_file:
        args += ["--ca-file", str(Path(ca_file).expanduser().resolve())]
    args.append("mcp")
    if harness:
        args += ["--harness", harness]
    if url:
        args += ["--url", url]
    if token_file:
        args += ["--token-file", str(Path(token_file).expanduser().resolve())]
    return args


def entry_for(client: str, command: str, args: list[str]) -> dict[str, Any]:
    """Our server entry in ``client``'s documented shape."""
    if client == "claude-code":
        return {"type": "stdio", "command": command, "args": list(args), "env": {}}
    return {"command": command, "args": list(args)}


def _runs_our_bridge(entry: Any) -> bool:
    """True for an entry that runs the wiki-memory stdio bridge."""
    if not isinstance(entry, dict):
        return False
    args = [str(a) for a in entry.get("args") or []] if isinstance(entry.get("args"), list) else []
    cmd = str(entry.get("command") or "")
    return any(a.endswith("cli_mcp.py") for a in args) or (
        cmd.endswith("wiki-memory") and "mcp" in args
    )


@dataclass
class Plan:
    """What install or uninstall would do to one configuration file.

    ``before``/``after`` are the file's text (``before`` None when it does not exist);
    ``changed`` is False when writing would change nothing.
    """

    action: str  # "install" or "uninstall"
    client: str
    path: Path
    name: str
    entry: dict[str, Any] | None
    before: str | None
    after: str
    record_path: Path | None = None
    notes: list[str] = field(default_factory=list)
    removed: bool = False
    #: install: the file, or its ``mcpServers`` table, did not exist before
    created_file: bool = False
    created_table: bool = False
    #: uninstall: the file held nothing but what install created: remove it
    delete: bool = False

    @property
    def changed(self) -> bool:
        if self.delete:
            return True
        return (self.before or "") != self.after and not (
            self.before is None and self.action == "uninstall"
        )


# -- records of what we wrote -----------------------------------------------------------


def _record_path(data_dir: Path | None) -> Path:
    from wiki_memory.config import default_data_dir

    return (data_dir or default_data_dir()) / RECORD_FILE


def _read_records(path: Path) -> dict[str, Any]:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return obj if isinstance(obj, dict) else {}


def _record_key(path: Path, name: str) -> str:
    return f"{path.resolve()}#{name}"


# -- JSON clients -------------------------------------------------------------------------


def _json_text(obj: dict[str, Any]) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def _servers(obj: dict[str, Any], path: Path) -> dict[str, Any]:
    servers = obj.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise InstallError(f'{path}: "mcpServers" is not an object; not touching it')
    return servers


# -- TOML (Codex) -------------------------------------------------------------------------

_HEADER_RE = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")


def _toml_key_parts(dotted: str) -> list[str]:
    """``mcp_servers."wiki-memory".env`` → ``["mcp_servers", "wiki-memory", "env"]``."""
    parts = []
    for m in re.finditer(r'\s*("(?:[^"\\]|\\.)*"|\'[^\']*\'|[A-Za-z0-9_-]+)\s*(?:\.|$)', dotted):
        tok = m.group(1)
        if tok.startswith('"'):
            tok = json.loads(tok)
        elif tok.startswith("'"):
            tok = tok[1:-1]
        parts.append(tok)
    return parts


def _toml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml_key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else _toml_str(name)


def _toml_block(name: str, entry: dict[str, Any]) -> str:
    lines = [f"[mcp_servers.{_toml_key(name)}]"]
    lines.append(f"command = {_toml_str(entry['command'])}")
    lines.append("args = [" + ", ".join(_toml_str(a) for a in entry["args"]) + "]")
    return "\n".join(lines) + "\n"


def _split_ours(text: str, name: str) -> tuple[list[str], int | None]:
    """The file's lines without the tables of ``mcp_servers.<name>`` (and its subtables),
    and the line index where the first of them stood (None when there was none).

    Blank lines before our table go with it; comment lines right before the next table
    header stay (they belong to that table)."""
    out: list[str] = []
    at: int | None = None
    inside = False
    held: list[str] = []
    for ln in text.splitlines(keepends=True):
        m = _HEADER_RE.match(ln)
        if m:
            parts = _toml_key_parts(m.group(1))
            now_inside = parts[:2] == ["mcp_servers", name]
            if inside and not now_inside:
                keep: list[str] = []
                while held and (held[-1].lstrip().startswith("#") or not held[-1].strip()):
                    keep.insert(0, held.pop())
                while keep and not keep[0].strip():
                    keep.pop(0)
                out.extend(keep)
            held = []
            inside = now_inside
            if inside and at is None:
                at = len(out)
        if inside:
            held.append(ln)
        else:
            out.append(ln)
    if at is not None:
        while at > 0 and not out[at - 1].strip():
            out.pop(at - 1)
            at -= 1
    return out, at


def _toml_load(text: str, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InstallError(f"{path} is not valid TOML ({exc}); fix it first") from None


def _toml_entry(doc: dict[str, Any], name: str) -> Any:
    servers = doc.get("mcp_servers")
    return servers.get(name) if isinstance(servers, dict) else None


def _toml_install(before: str, name: str, entry: dict[str, Any], path: Path) -> str:
    doc = _toml_load(before, path)
    if _toml_entry(doc, name) == entry:
        return before
    rest, at = _split_ours(before, name)
    stripped = "".join(rest)
    if _toml_entry(_toml_load(stripped, path), name) is not None:
        raise InstallError(
            f"{path} defines mcp_servers.{name} in a form this installer does not edit "
            "(an inline table or dotted keys); change or remove it by hand"
        )
    block = _toml_block(name, entry)
    if at is None:
        body = stripped
        if body and not body.endswith("\n"):
            body += "\n"
        after = body + ("\n" if body.strip() else "") + block
    else:
        head, tail = "".join(rest[:at]), "".join(rest[at:])
        if head and not head.endswith("\n"):
            head += "\n"
        sep = "\n" if head.strip() else ""
        after = head + sep + block + ("\n" if tail.strip() else "") + tail
    if _toml_entry(_toml_load(after, path), name) != entry:  # never write a broken file
        raise InstallError(f"could not place our entry in {path}; add it by hand")
    return after


def _toml_uninstall(before: str, name: str, path: Path) -> str:
    rest, at = _split_ours(before, name)
    if at is None:
        return before
    after = "".join(rest)
    if _toml_entry(_toml_load(after, path), name) is not None:
        raise InstallError(f"could not remove mcp_servers.{name} from {path}; do it by hand")
    return after


# -- plans --------------------------------------------------------------------------------


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InstallError(f"cannot read {path}: {exc}") from None


def plan_install(
    client: str,
    path: Path | None = None,
    *,
    scope: str = "user",
    python: str | None = None,
    script: str | Path | None = None,
    data_dir: str | Path | None = None,
    url: str | None = None,
    token_file: str | Path | None = None,
    name: str = "wiki-memory",
    home: Path | None = None,
    ca_file: str | Path | None = None,
    **_: Any,
) -> Plan:
    """Compute the configuration with our server; nothing is written. Raises
    InstallError for an unknown client or a file that cannot be changed safely."""
    _check_client(client)
    path = Path(path) if path else config_path(client, scope, home)
    if data_dir is None and os.environ.get("WIKI_MEMORY_HOME"):
        data_dir = Path(os.environ["WIKI_MEMORY_HOME"]).expanduser().resolve()
    if url and token_file is None:
        raise InstallError(
            "a team server (--url) needs --token-file: the token itself is never written "
            "into a client's configuration"
        )
    command = python or interpreter_path()
    entry = entry_for(
        client, command, bridge_args(script, data_dir, url, token_file, client, ca_file)
    )
    before = _read_text(path)
    notes: list[str] = []
    created_table = False
    if client == "codex":
        after = _toml_install(before or "", name, entry, path)
    else:
        obj = read_config(path)
        created_table = obj is None or "mcpServers" not in obj
        new = copy.deepcopy(obj) if obj is not None else {}
        servers = _servers(new, path)
        if servers.get(name) != entry:
            servers[name] = entry
        after = before if (before is not None and new == obj) else _json_text(new)
    if client == "claude-code" and scope == "user" and path.name == ".claude.json":
        notes.append("user scope: every project; `--scope project` writes ./.mcp.json")
    plan = Plan("install", client, path, name, entry, before, after, notes=notes)
    plan.record_path = _record_path(Path(data_dir) if data_dir else None)
    plan.created_file = before is None
    plan.created_table = created_table
    return plan


def plan_uninstall(
    client: str,
    path: Path | None = None,
    *,
    scope: str = "user",
    data_dir: str | Path | None = None,
    name: str = "wiki-memory",
    force: bool = False,
    home: Path | None = None,
    **_: Any,
) -> Plan:
    """Compute the configuration without our server; nothing is written.

    Our entry goes when it is what install wrote (the record in the data directory), or,
    without a record, when it runs our bridge; an entry edited by hand since stays unless
    ``force``. Everything else stays as it is."""
    _check_client(client)
    path = Path(path) if path else config_path(client, scope, home)
    if data_dir is None and os.environ.get("WIKI_MEMORY_HOME"):
        data_dir = Path(os.environ["WIKI_MEMORY_HOME"]).expanduser().resolve()
    record_path = _record_path(Path(data_dir) if data_dir else None)
    record = _read_records(record_path).get(_record_key(path, name))
    record = record if isinstance(record, dict) else {}
    recorded = record.get("entry")
    before = _read_text(path)
    plan = Plan("uninstall", client, path, name, None, before, before or "")
    plan.record_path = record_path
    if before is None:
        plan.notes.append("the file does not exist: nothing to remove")
        return plan
    if client == "codex":
        current = _toml_entry(_toml_load(before, path), name)
    else:
        obj = read_config(path) or {}
        servers = obj.get("mcpServers")
        current = servers.get(name) if isinstance(servers, dict) else None
    if current is None:
        plan.notes.append(f"no {name!r} server in this file")
        return plan
    ours = current == recorded if recorded is not None else _runs_our_bridge(current)
    if not ours and not force:
        plan.notes.append(
            f"the {name!r} entry was changed by hand since it was installed (or is not "
            "ours): left in place; --force removes it"
        )
        return plan
    if client == "codex":
        plan.after = _toml_uninstall(before, name, path)
        plan.delete = bool(record.get("created_file")) and not plan.after.strip()
    else:
        new = copy.deepcopy(obj)
        servers = new["mcpServers"]
        del servers[name]
        if not servers and record.get("created_table"):
            del new["mcpServers"]
        plan.after = _json_text(new)
        plan.delete = bool(record.get("created_file")) and not new
    plan.entry = current
    plan.removed = True
    return plan


def read_entry(client: str, path: Path, name: str = "wiki-memory") -> dict[str, Any] | None:
    """Our server's entry in ``client``'s configuration file at ``path`` (None when the
    file or the entry is absent). Raises InstallError for a file that cannot be parsed."""
    text = _read_text(path)
    if text is None:
        return None
    if client == "codex":
        entry = _toml_entry(_toml_load(text, path), name)
    else:
        servers = (read_config(path) or {}).get("mcpServers")
        entry = servers.get(name) if isinstance(servers, dict) else None
    return entry if isinstance(entry, dict) else None


def describe(plan: Plan) -> str:
    """The plan as a few lines for people: the file and the entry."""
    label = CLIENTS[plan.client]
    state = "exists" if plan.before is not None else "does not exist yet"
    lines = [f"{label}: {plan.path} ({state})"]
    if plan.action == "install" and plan.entry is not None:
        if plan.client == "codex":
            block = _toml_block(plan.name, plan.entry).rstrip("\n")
        else:
            block = json.dumps({plan.name: plan.entry}, indent=2, ensure_ascii=False)
        lines.append("  entry:")
        lines += [f"    {ln}" for ln in block.splitlines()]
        if "--url" in plan.entry.get("args", []):
            lines.append("  the bridge reads the token from the --token-file (never from here)")
        else:
            lines.append(
                "  the bridge reads the server's address and token from the data directory"
            )
    elif plan.removed:
        lines.append(f"  removes the {plan.name!r} server")
        if plan.delete:
            lines.append("  and the file, which install created and nothing else uses")
    lines += [f"  note: {n}" for n in plan.notes]
    if not plan.changed:
        lines.append("  nothing to change")
    return "\n".join(lines)


def apply(plan: Plan) -> Path | None:
    """Write ``plan`` if it changes anything: a timestamped backup of the old file first,
    then an atomic replace that keeps the file's permissions; then the record of what we
    wrote. Returns the backup's path (None when there was none). Raises InstallError."""
    backup: Path | None = None
    path = plan.path
    if plan.changed and plan.delete:
        try:
            backup = backup_path(path)
            backup.write_bytes(path.read_bytes())
            os.chmod(backup, path.stat().st_mode & 0o777)
            path.unlink()
        except OSError as exc:
            raise InstallError(f"cannot write {path}: {exc}") from None
    elif plan.changed:
        # ~/.claude.json and friends hold other secrets: new files are owner-only
        backup = replace_with_backup(path, plan.after, 0o600)
    _update_record(plan)
    return backup


def _update_record(plan: Plan) -> None:
    if plan.record_path is None:
        return
    key = _record_key(plan.path, plan.name)
    records = _read_records(plan.record_path)
    if plan.action == "install" and plan.entry is not None:
        old = records.get(key) if isinstance(records.get(key), dict) else None
        if old is not None and old.get("entry") == plan.entry:
            return
        records[key] = {
            "entry": dict(plan.entry),
            # a re-install keeps what the first one found
            "created_file": old.get("created_file") if old else plan.created_file,
            "created_table": old.get("created_table") if old else plan.created_table,
        }
    elif plan.removed and key in records:
        del records[key]
    else:
        return
    try:
        plan.record_path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(records, indent=2) + "\n"
        atomic_write(plan.record_path, text.encode("utf-8"), 0o600)
    except OSError:
        pass  # the record only makes uninstall more careful; the install itself stands


__all__ = [
    "read_entry",
    "BRIDGE_SCRIPT",
    "CLIENTS",
    "InstallError",
    "Plan",
    "apply",
    "bridge_args",
    "config_path",
    "describe",
    "entry_for",
    "plan_install",
    "plan_uninstall",
]
