"""Install and uninstall the wiki-memory hook in a harness's own configuration file.

Per harness (the file each one documents; ``--settings`` picks another, e.g. a
project-level one):

=============  ==================================  =========  =================================
harness        file                                timeout    events
=============  ==================================  =========  =================================
claude-code    ``~/.claude/settings.json``         seconds    SessionStart, UserPromptSubmit,
                                                              PreToolUse, PostToolUse,
                                                              PostToolUseFailure, Stop,
                                                              SubagentStop, PreCompact,
                                                              SessionEnd
codex          ``$CODEX_HOME/hooks.json``          seconds    SessionStart, UserPromptSubmit,
               (``~/.codex/hooks.json``)                      PreToolUse, PostToolUse, Stop
gemini-cli     ``~/.gemini/settings.json``         ms         SessionStart, BeforeAgent,
                                                              BeforeTool, AfterTool, AfterAgent,
                                                              PreCompress, SessionEnd
=============  ==================================  =========  =================================

All three use the same shape: ``{"hooks": {"<Event>": [{"hooks": [<handler>]}]}}``
with a ``command`` handler. Our handler is the one whose ``command`` mentions
``wiki_memory_hook``; install replaces it in place (or appends a matcher group of
its own), uninstall removes only it, and whatever else is in the file, including
edits the user made since, is kept. Writing is idempotent (an unchanged result
is not written), atomic, and preceded by a timestamped backup of the old file.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wiki_memory.harness.outbox import HOOK_SCRIPT

#: The marker that makes a handler ours: the hook script's name in its command.
MARKER = "wiki_memory_hook"

#: The harness's own timeout for one run of the hook, in seconds. The hook itself
#: stops after 2 s; the rest is margin for the interpreter's start on a busy machine.
TIMEOUT_SECONDS = 5


class InstallError(Exception):
    """The configuration file cannot be read or changed safely; the message says why."""


@dataclass(frozen=True)
class AgentSpec:
    """What one harness needs: its events and the unit of its ``timeout`` field."""

    name: str
    label: str
    events: tuple[str, ...]
    timeout_unit: str  # "s" or "ms"

    def default_path(self, home: Path | None = None, env: dict[str, str] | None = None) -> Path:
        """The user-level configuration file (``home`` defaults to ``$HOME``)."""
        env = dict(os.environ) if env is None else env
        home = Path(home) if home is not None else Path(env.get("HOME") or Path.home())
        if self.name == "claude-code":
            claude_dir = env.get("CLAUDE_CONFIG_DIR")
            return (Path(claude_dir) if claude_dir else home / ".claude") / "settings.json"
        if self.name == "codex":
            codex_home = env.get("CODEX_HOME")
            return (Path(codex_home) if codex_home else home / ".codex") / "hooks.json"
        return home / ".gemini" / "settings.json"

    @property
    def timeout_value(self) -> int:
        """:data:`TIMEOUT_SECONDS` in this harness's unit."""
        return TIMEOUT_SECONDS * 1000 if self.timeout_unit == "ms" else TIMEOUT_SECONDS

    def handler(self, command: str) -> dict[str, Any]:
        """Our handler object in this harness's shape."""
        if self.name == "gemini-cli":
            return {
                "name": "wiki-memory",
                "type": "command",
                "command": command,
                "timeout": self.timeout_value,
                "description": "wiki-memory: capture this session (never blocks)",
            }
        return {"type": "command", "command": command, "timeout": self.timeout_value}


AGENTS: dict[str, AgentSpec] = {
    "claude-code": AgentSpec(
        "claude-code",
        "Claude Code",
        (
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse",
            "PostToolUse",
            "PostToolUseFailure",
            "Stop",
            "SubagentStop",
            "PreCompact",
            "SessionEnd",
        ),
        "s",
    ),
    "codex": AgentSpec(
        "codex",
        "Codex CLI",
        ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"),
        "s",
    ),
    "gemini-cli": AgentSpec(
        "gemini-cli",
        "Gemini CLI",
        (
            "SessionStart",
            "BeforeAgent",
            "BeforeTool",
            "AfterTool",
            "AfterAgent",
            "PreCompress",
            "SessionEnd",
        ),
        "ms",
    ),
}


def _is_script(path: str) -> bool:
    """True when ``path`` is a text script (``#!``), as version-manager shims are."""
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def interpreter_path() -> str:
    """The absolute path of a real Python binary for the hook command.

    In a virtual environment its ``python`` is kept (a symlink to the real binary, so
    it costs nothing at start and keeps the environment's packages reachable);
    otherwise ``sys.executable`` is resolved with ``realpath``. A path that is still
    a ``#!`` script (a pyenv/asdf shim, ~50 ms extra per start) is replaced by the
    base interpreter the shim would have run.
    """
    exe = sys.executable or "python3"
    in_venv = sys.prefix != getattr(sys, "base_prefix", sys.prefix)
    candidate = os.path.abspath(exe) if in_venv else os.path.realpath(exe)
    if _is_script(os.path.realpath(candidate)):
        base = getattr(sys, "_base_executable", None) or exe
        candidate = os.path.realpath(base)
    return candidate


def hook_command(
    agent: str,
    python: str | None = None,
    script: str | Path | None = None,
    data_dir: str | Path | None = None,
    url: str | None = None,
    token_file: str | Path | None = None,
    ca_file: str | Path | None = None,
) -> str:
    """The shell command a harness runs per event (``ca_file``: ``--ca-file F``, the PEM
    CA an ``https://`` server's certificate is checked against).

    ``'<python>' -S '<script>' --harness <agent> [--data-dir D] [--url U --token-file F]
    || { cat >/dev/null 2>&1; true; }``. ``--data-dir`` (and for a team server ``--url``
    and ``--token-file``) pin the hook to its store: the environment the harness passes
    (``WIKI_MEMORY_HOME``, ``WIKI_MEMORY_URL``, ``WIKI_MEMORY_TOKEN*``) is then ignored.
    ``-S`` skips site-packages processing (~25 ms; the hook is
    standard-library only). The ``||`` branch makes the command exit 0 even when the
    interpreter or the script is gone (Python exits 2 for a missing file, which
    Claude Code reads as "block"), after reading what is left of stdin so that the
    harness never gets a broken pipe.
    """
    py = python or interpreter_path()
    sc = str(script or HOOK_SCRIPT)
    parts = [shlex.quote(py), "-S", shlex.quote(sc), "--harness", shlex.quote(agent)]
    if data_dir:
        parts += ["--data-dir", shlex.quote(str(data_dir))]
    if url:
        parts += ["--url", shlex.quote(url)]
    if token_file:
        parts += ["--token-file", shlex.quote(str(token_file))]
    if ca_file:
        parts += ["--ca-file", shlex.quote(str(Path(ca_file).expanduser().resolve()))]
    return " ".join(parts) + " || { cat >/dev/null 2>&1; true; }"


def pinned_target(command: str) -> str | None:
    """The store an installed hook command is pinned to: its ``--url`` if any, else its
    ``--data-dir``; None when it is not pinned (it follows the environment)."""
    try:
        words = shlex.split(command.split(" || ", 1)[0])
    except ValueError:
        return None
    found: dict[str, str] = {}
    for i, w in enumerate(words[:-1]):
        if w in ("--data-dir", "--url"):
            found[w] = words[i + 1]
    return found.get("--url") or found.get("--data-dir")


def installed_commands(path: Path) -> list[str]:
    """The commands of our handlers in the harness file at ``path`` (none when the file is
    absent or unreadable), one per distinct command."""
    try:
        obj = read_config(path)
    except InstallError:
        return []
    out: list[str] = []
    hooks = (obj or {}).get("hooks")
    if not isinstance(hooks, dict):
        return out
    for groups in hooks.values():
        for g in groups if isinstance(groups, list) else []:
            for h in g.get("hooks", []) if isinstance(g, dict) else []:
                if is_ours(h) and h["command"] not in out:
                    out.append(str(h["command"]))
    return out


def is_ours(handler: Any) -> bool:
    """True for a handler this module wrote (its command runs ``wiki_memory_hook``)."""
    return isinstance(handler, dict) and MARKER in str(handler.get("command", ""))


@dataclass
class Plan:
    """What install or uninstall would do to one configuration file.

    ``before`` is the parsed file (``None`` when it does not exist), ``after`` the
    result; ``changed`` is False when writing would change nothing.
    """

    action: str  # "install" or "uninstall"
    agent: AgentSpec
    path: Path
    command: str
    before: dict[str, Any] | None
    after: dict[str, Any]
    events: list[str] = field(default_factory=list)
    #: the store the replaced hook was pinned to, when it differs from the new one
    was_pinned: str | None = None

    @property
    def changed(self) -> bool:
        return (self.before or {}) != self.after

    def text(self) -> str:
        """The file's new content: JSON, two-space indent, trailing newline."""
        return json.dumps(self.after, indent=2, ensure_ascii=False) + "\n"


def read_config(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None when the file does not exist.

    Raises InstallError when it is not a JSON object (JSON with comments included:
    rewriting it would lose them, so the user is asked to edit it by hand).
    """
    try:
        raw = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InstallError(f"cannot read {path}: {exc}") from None
    if not raw.strip():
        return {}
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        raise InstallError(
            f"{path} is not plain JSON ({exc}); fix it, or add the hook by hand "
            "(`wiki-memory install-hooks` without --apply prints the command)"
        ) from None
    if not isinstance(obj, dict):
        raise InstallError(f"{path} does not hold a JSON object")
    return obj


def _hooks_table(obj: dict[str, Any], path: Path) -> dict[str, Any]:
    hooks = obj.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InstallError(f'{path}: "hooks" is not an object; not touching it')
    return hooks


def _strip_ours(groups: list[Any]) -> list[Any]:
    """``groups`` without our handlers; groups emptied by that are removed."""
    out = []
    for g in groups:
        if isinstance(g, dict) and isinstance(g.get("hooks"), list):
            if not any(is_ours(h) for h in g["hooks"]):
                out.append(g)
                continue
            kept = [h for h in g["hooks"] if not is_ours(h)]
            if kept:
                g2 = dict(g)
                g2["hooks"] = kept
                out.append(g2)
        else:
            out.append(g)
    return out


def plan_install(
    agent: str,
    path: Path | None = None,
    *,
    python: str | None = None,
    script: str | Path | None = None,
    data_dir: str | Path | None = None,
    url: str | None = None,
    token_file: str | Path | None = None,
    home: Path | None = None,
    env: dict[str, str] | None = None,
    ca_file: str | Path | None = None,
) -> Plan:
    """Compute the installed configuration for ``agent``; nothing is written.

    Our handler replaces an existing one of ours in place (so re-running changes
    nothing and keeps the order), else a new matcher group ``{"hooks": [handler]}``
    is appended to the event's list. Handlers of ours under events we no longer
    install are removed. Raises InstallError for an unknown agent or unusable file.
    """
    spec = _spec(agent)
    path = Path(path) if path else spec.default_path(home, env)
    before = read_config(path)
    old_targets = [pinned_target(c) for c in installed_commands(path)]
    after = copy.deepcopy(before) if before is not None else {}
    hooks = _hooks_table(after, path)
    command = hook_command(spec.name, python, script, data_dir, url, token_file, ca_file)
    new_target = pinned_target(command)
    was = next((t for t in old_targets if t and t != new_target), None)
    handler = spec.handler(command)
    for event in list(hooks):
        if event not in spec.events and isinstance(hooks[event], list):
            stripped = _strip_ours(hooks[event])
            if stripped != hooks[event]:
                if stripped:
                    hooks[event] = stripped
                else:
                    del hooks[event]
    for event in spec.events:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise InstallError(f'{path}: hooks["{event}"] is not a list; not touching it')
        placed = False
        new_groups: list[Any] = []
        for g in groups:
            if not (isinstance(g, dict) and isinstance(g.get("hooks"), list)):
                new_groups.append(g)
                continue
            handlers = []
            for h in g["hooks"]:
                if is_ours(h):
                    if not placed:
                        handlers.append(copy.deepcopy(handler))
                        placed = True
                else:
                    handlers.append(h)
            if handlers:
                g2 = dict(g)
                g2["hooks"] = handlers
                new_groups.append(g2)
        if not placed:
            new_groups.append({"hooks": [copy.deepcopy(handler)]})
        hooks[event] = new_groups
    return Plan("install", spec, path, command, before, after, list(spec.events), was)


def plan_uninstall(
    agent: str,
    path: Path | None = None,
    *,
    home: Path | None = None,
    env: dict[str, str] | None = None,
) -> Plan:
    """Compute the configuration without our handlers; nothing is written.

    Only handlers of ours go; a matcher group, event list or ``hooks`` table that held
    nothing else goes with them. Everything else stays as it is.
    """
    spec = _spec(agent)
    path = Path(path) if path else spec.default_path(home, env)
    before = read_config(path)
    if before is None:
        return Plan("uninstall", spec, path, "", None, {}, [])
    after = copy.deepcopy(before)
    events: list[str] = []
    hooks = after.get("hooks")
    if isinstance(hooks, dict):
        for event in list(hooks):
            groups = hooks[event]
            if not isinstance(groups, list):
                continue
            stripped = _strip_ours(groups)
            if stripped != groups:
                events.append(event)
                if stripped:
                    hooks[event] = stripped
                else:
                    del hooks[event]
        if not hooks and events:
            del after["hooks"]
    return Plan("uninstall", spec, path, "", before, after, events)


#: Other names people type for a harness: ``--agent gemini`` is Gemini CLI.
ALIASES: dict[str, str] = {"gemini": "gemini-cli", "claude": "claude-code", "codex-cli": "codex"}


def _spec(agent: str) -> AgentSpec:
    try:
        return AGENTS[ALIASES.get(agent, agent)]
    except KeyError:
        raise InstallError(f"unknown agent {agent!r}; choose one of {', '.join(AGENTS)}") from None


def backup_path(path: Path, now: float | None = None) -> Path:
    """``<file>.wiki-memory-backup-YYYYmmdd-HHMMSS`` (``-N`` added if taken)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    cand = path.with_name(f"{path.name}.wiki-memory-backup-{stamp}")
    n = 1
    while cand.exists():
        cand = path.with_name(f"{path.name}.wiki-memory-backup-{stamp}-{n}")
        n += 1
    return cand


def apply(plan: Plan) -> Path | None:
    """Write ``plan`` if it changes anything: backup first, then an atomic replace
    that keeps the old file's permissions. Returns the backup's path (None when
    there was no old file or nothing changed). Raises InstallError on I/O errors."""
    if not plan.changed:
        return None
    path = plan.path
    backup: Path | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = 0o644
        if path.exists():
            mode = path.stat().st_mode & 0o777
            backup = backup_path(path)
            backup.write_bytes(path.read_bytes())
            os.chmod(backup, mode)
        tmp = path.with_name(f".{path.name}.wiki-memory-tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(plan.text())
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        raise InstallError(f"cannot write {path}: {exc}") from None
    record_install(plan)
    return backup


#: in the data directory a hook is pinned to: what install-hooks wrote, per harness
INSTALLS_FILE = "hook-installs.json"


def record_install(plan: Plan) -> None:
    """Remember, in the data directory the hook is pinned to, the command written for
    the harness and when (``doctor`` tells a command changed since, which Codex runs only
    once trusted again, and a hook that never ran since its install). Best effort."""
    target = pinned_target(plan.command) if plan.action == "install" else None
    if not target or target.startswith(("http://", "https://")):
        return
    record = Path(target) / INSTALLS_FILE
    try:
        data = json.loads(record.read_text(encoding="utf-8")) if record.exists() else {}
        if not isinstance(data, dict):
            data = {}
        data[plan.agent.name] = {
            "command": plan.command,
            "path": str(plan.path),
            "time": time.time(),
        }
        tmp = record.with_name(f".{record.name}.tmp")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.replace(tmp, record)
    except (OSError, ValueError):
        pass


def read_installs(data_dir: Path) -> dict[str, dict[str, Any]]:
    """:data:`INSTALLS_FILE` of ``data_dir`` (``{}`` when absent or unreadable)."""
    try:
        data = json.loads((data_dir / INSTALLS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def describe(plan: Plan) -> str:
    """The plan as a few lines for people: file, events, command, timeout."""
    spec = plan.agent
    lines = []
    state = "exists" if plan.before is not None else "does not exist yet"
    lines.append(f"{spec.label}: {plan.path} ({state})")
    if plan.action == "install":
        lines.append(f"  events:  {', '.join(plan.events)}")
        lines.append(f"  command: {plan.command}")
        target = pinned_target(plan.command)
        if plan.was_pinned:
            lines.append(f"  pinned:  was pinned to {plan.was_pinned}, now {target}")
        elif target:
            lines.append(f"  pinned:  {target} (whatever WIKI_MEMORY_HOME the harness passes)")
        unit = "ms" if spec.timeout_unit == "ms" else "s"
        lines.append(
            f"  timeout: {spec.timeout_value} {unit} per run "
            "(the hook itself stops after 2 s and always exits 0)"
        )
        if spec.name == "codex":
            lines.append(
                "  note:    Codex releases before hooks were on by default need "
                "`[features] codex_hooks = true` in ~/.codex/config.toml"
            )
            if plan.changed:
                lines.append(
                    "  trust:   Codex runs a new or changed hook only after you trust it: "
                    "start Codex once and accept the hook (until then nothing is captured)"
                )
            lines.append(
                "  note:    Codex also reads a project's .codex/hooks.json; hooks there "
                "run beside these (`wiki-memory doctor` names such files)"
            )
        if spec.name == "gemini-cli":
            lines.append(
                "  note:    some Gemini CLI releases also need hooks enabled in settings "
                "(see their docs); this file's `hooks` table is what they read"
            )
            lines.append(
                "  check:   `/hooks` in Gemini CLI lists the hooks it loaded: ours should be there"
            )
    else:
        if plan.events:
            lines.append(f"  removes our handler from: {', '.join(plan.events)}")
        else:
            lines.append("  no wiki-memory handler found")
    if not plan.changed:
        lines.append("  nothing to change")
    return "\n".join(lines)


__all__ = [
    "AGENTS",
    "ALIASES",
    "AgentSpec",
    "InstallError",
    "Plan",
    "apply",
    "backup_path",
    "describe",
    "hook_command",
    "installed_commands",
    "interpreter_path",
    "is_ours",
    "plan_install",
    "pinned_target",
    "plan_uninstall",
    "read_config",
]
