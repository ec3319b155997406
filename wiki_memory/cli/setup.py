"""``wiki-memory setup``, ``uninstall`` and ``status``: memory that is always on.

- ``setup [--dry-run]`` prints its plan, then: the data directory and the owner's token;
  the per-user service generated from ``packaging/`` (:mod:`wiki_memory.harness.service`)
  installed, enabled and started (or, where no service manager answers, the server
  started in the background with a note on ``loginctl enable-linger``); hooks and MCP
  for every supported harness found on this machine; a self-check. Run again, it
  changes nothing that is already right.
- ``uninstall`` removes what setup recorded in ``<data_dir>/setup.json`` and nothing
  else; a file the user changed since is left (and named).
- ``status [--json]`` says whether memory is on: the server, the data directory, the
  backlog, commits, the index, the watcher, the service.

The self-check sends one observation in a reserved session
(:data:`wiki_memory.core.capture.SELF_CHECK_PREFIX`), through an installed hook when
there is one (as the harness runs it), finds it with ``POST /v1/recall``, then ends the
session, which deletes it: no page, no commit (docs/operations.md).

Exit status: 0 done; 1 a step failed (the rest of the plan still ran where it could);
2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wiki_memory.cli.common import CliError, _settings
from wiki_memory.config import DEFAULT_PORT, Settings

__all__ = [
    "HARNESSES",
    "SETUP_RECORD",
    "cmd_setup",
    "cmd_status",
    "cmd_uninstall",
    "detect_harnesses",
    "register",
    "register_status",
    "self_check",
    "status_report",
]

#: what setup wrote, in the data directory (uninstall reads it)
SETUP_RECORD = "setup.json"


@dataclass(frozen=True)
class Harness:
    """A harness setup looks for: found when one of ``dirs`` (under ``$HOME``, or the
    folder its environment variable names) exists or ``binary`` is on PATH; ``hooks``:
    it takes our capture hook; every harness here takes our MCP server."""

    name: str
    dirs: tuple[str, ...]
    binary: str
    hooks: bool
    env: str | None = None


HARNESSES: tuple[Harness, ...] = (
    Harness("claude-code", (".claude",), "claude", True, "CLAUDE_CONFIG_DIR"),
    Harness("codex", (".codex",), "codex", True, "CODEX_HOME"),
    Harness("gemini-cli", (".gemini",), "gemini", True),
    Harness("cursor", (".cursor",), "cursor", False),
)


def detect_harnesses(env: dict[str, str] | None = None) -> list[str]:
    """The names of the harnesses installed for this user (see :class:`Harness`)."""
    env = dict(os.environ) if env is None else env
    home = Path(env.get("HOME") or Path.home())
    found = []
    for h in HARNESSES:
        dirs = [home / d for d in h.dirs]
        if h.env and env.get(h.env):
            dirs.append(Path(env[h.env]))
        if any(d.is_dir() for d in dirs) or shutil.which(h.binary, path=env.get("PATH")):
            found.append(h.name)
    return found


# --------------------------------------------------------------------------------------
# The record of what setup did
# --------------------------------------------------------------------------------------


@dataclass
class Record:
    """``<data_dir>/setup.json``: ``files`` (path -> ``{"sha256", "created"}``: what setup
    last wrote there and whether the file was new), ``backups`` (path -> the backups
    setup's writes made of the file before), ``dirs`` (folders setup created, removed by
    uninstall when empty), ``hooks`` and ``mcp`` (harnesses wired), ``service`` (kind and
    path), ``background_pid`` (a server setup started itself, with no service manager)."""

    path: Path
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    backups: dict[str, list[str]] = field(default_factory=dict)
    dirs: list[str] = field(default_factory=list)
    hooks: list[str] = field(default_factory=list)
    mcp: list[str] = field(default_factory=list)
    service: dict[str, Any] = field(default_factory=dict)
    background_pid: int | None = None

    @classmethod
    def load(cls, path: Path) -> Record:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls(path)
        if not isinstance(data, dict):
            return cls(path)
        return cls(
            path,
            dict(data.get("files") or {}),
            dict(data.get("backups") or {}),
            list(data.get("dirs") or []),
            list(data.get("hooks") or []),
            list(data.get("mcp") or []),
            dict(data.get("service") or {}),
            data.get("background_pid"),
        )

    def save(self) -> None:
        body = {
            "files": self.files,
            "backups": self.backups,
            "dirs": self.dirs,
            "hooks": self.hooks,
            "mcp": self.mcp,
            "service": self.service,
            "background_pid": self.background_pid,
        }
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(body, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self.path)

    def note_dirs(self, path: Path) -> None:
        """Remember the folders above ``path`` that do not exist yet (setup makes them)."""
        missing = []
        d = path.parent
        while not d.exists():
            missing.append(str(d))
            d = d.parent
        for m in missing:
            if m not in self.dirs:
                self.dirs.append(m)

    def wrote(self, path: Path, created: bool, backup: Path | None) -> None:
        from wiki_memory.harness.service import digest

        key = str(path)
        old = self.files.get(key)
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        self.files[key] = {
            "sha256": digest(text),
            # a re-run keeps what the first run found
            "created": old["created"] if old else created,
        }
        if backup is None:
            return
        try:
            own = old is not None and digest(backup.read_text(encoding="utf-8")) == old["sha256"]
        except (OSError, UnicodeDecodeError):
            own = False
        if own:
            # a copy of what setup itself wrote (a second write to one file, Gemini CLI's
            # hooks then MCP): nothing of the user's is in it
            backup.unlink()
        else:
            self.backups.setdefault(key, []).append(str(backup))


# --------------------------------------------------------------------------------------
# setup
# --------------------------------------------------------------------------------------


def _port(args: argparse.Namespace, settings: Settings) -> int:
    return int(getattr(args, "port", None) or settings.port or DEFAULT_PORT)


def _wait_health(address: str, seconds: float) -> dict[str, Any] | None:
    """``GET /v1/health`` until it answers (None after ``seconds``)."""
    import httpx

    deadline = time.monotonic() + seconds
    while True:
        try:
            r = httpx.get(address.rstrip("/") + "/v1/health", timeout=2)
            if r.status_code == 200:
                body: dict[str, Any] = r.json()
                return body
        except (httpx.HTTPError, ValueError):
            pass
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.2)


def _server_running(settings: Settings) -> bool:
    from wiki_memory.datadir import ServerLock

    return settings.data_dir.exists() and ServerLock(settings.data_dir).is_held_elsewhere()


def _serves_here(settings: Settings, address: str) -> bool:
    """True when the server holding this data directory's lock serves ``address``."""
    from wiki_memory.datadir import server_address

    return _server_running(settings) and server_address(settings.data_dir) == address


def _start_background(argv: list[str], settings: Settings) -> int:
    """Start ``argv`` (the service's command) detached from this terminal, its output in
    ``logs/service.log``; returns its pid."""
    settings.logs_dir.mkdir(parents=True, exist_ok=True)
    log = open(settings.logs_dir / "service.log", "ab")  # noqa: SIM115 - handed to the child
    try:
        p = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        log.close()
    return p.pid


def cmd_setup(args: argparse.Namespace) -> int:
    """Print the plan; unless ``--dry-run``, carry it out and run the self-check."""
    from wiki_memory.harness import hooks_install as hi
    from wiki_memory.harness import mcp_install as mi
    from wiki_memory.harness import service

    settings = _settings(args)
    data_dir = settings.data_dir.expanduser().resolve()
    port = _port(args, settings)
    python = args.python or hi.interpreter_path()
    argv = service.serve_argv(python, data_dir, "127.0.0.1", port)
    kind = service.kind_for_platform()
    unit_text = service.render(kind, argv, data_dir)
    unit = service.unit_path(kind)
    if args.print_unit:
        print(service.render(args.print_unit, argv, data_dir), end="")
        return 0
    found = detect_harnesses()
    hook_agents = [h.name for h in HARNESSES if h.hooks and h.name in found]
    mcp_clients = [h for h in found if h in mi.CLIENTS]
    address = f"http://127.0.0.1:{port}"

    hook_plans = []
    mcp_plans = []
    try:
        for agent in hook_agents:
            hook_plans.append(hi.plan_install(agent, None, python=python, data_dir=data_dir))
        for client in mcp_clients:
            mcp_plans.append(mi.plan_install(client, python=python, data_dir=data_dir))
    except (hi.InstallError, mi.InstallError) as exc:
        raise CliError(str(exc)) from None

    unit_same = unit.is_file() and unit.read_text(encoding="utf-8") == unit_text
    print("wiki-memory setup: the plan")
    print(
        f"  1. data directory {data_dir}: "
        + (
            "exists"
            if (data_dir / "auth" / "owner.token").is_file()
            else "create it and the owner's token"
        )
    )
    print(
        f"  2. service ({'launchd LaunchAgent' if kind == 'launchd' else 'systemd user unit'}) "
        f"{unit}: " + ("up to date" if unit_same else "write it")
    )
    print(f"     runs: {shlex.join(argv)}")
    print("     then enable it at login and start it (serving " + address + ")")
    if not found:
        print("  3. harnesses: none found (Claude Code, Codex, Gemini CLI, Cursor)")
    for p in hook_plans:
        print(
            f"  3. hooks for {p.agent.label}: {p.path}: " + ("write" if p.changed else "up to date")
        )
    for mp in mcp_plans:
        print(
            f"  4. MCP for {mi.CLIENTS[mp.client]}: {mp.path}: "
            + ("write" if mp.changed else "up to date")
        )
    print("  5. self-check: one observation in a reserved session, read back, then deleted")
    if args.dry_run:
        print("(dry run: nothing was written; run `wiki-memory setup` to do it)")
        return 0

    record = Record.load(data_dir / SETUP_RECORD)
    failed = False
    # 1. the data directory and the token
    from wiki_memory.auth import TokenStore
    from wiki_memory.datadir import ensure_layout

    ensure_layout(settings)
    record.path = data_dir / SETUP_RECORD
    _, created = TokenStore(settings.auth_dir).ensure_owner()
    if created:
        print(f"created the owner's token in {settings.auth_dir / 'owner.token'}")

    # 2. the service
    if not unit_same:
        record.note_dirs(unit)
        created_unit = not unit.exists()
        path, _ = service.install(kind, unit_text)
        record.wrote(path, created_unit, None)
        print(f"wrote {path}")
    record.service = {"kind": kind, "path": str(unit)}
    running = _server_running(settings)
    # a server the manager did not start (`serve` in a terminal) keeps the data directory:
    # the service is only enabled then, and takes over at the next login or boot
    managed = service.state(kind).active is True
    started, notes = service.enable_and_start(
        kind, restart=running and not unit_same, start=managed or not running
    )
    for n in notes:
        print(f"note: {n}")
    if started:
        print("the service manager started the server")
    elif running:
        print(
            f"a server already runs on {data_dir}"
            + ("" if managed else "; the service takes over from it at the next login or boot")
        )
    else:
        pid = _start_background(argv, settings)
        record.background_pid = pid
        print(
            f"started the server in the background for now (pid {pid}, log "
            f"{settings.logs_dir / 'service.log'}); it will not come back after a reboot "
            "until the service manager runs it"
        )
        if kind == "user":
            user = os.environ.get("USER") or "$USER"
            print(
                "  on a machine without a login session (a server, ssh only), let your user "
                f"manager run at boot: `loginctl enable-linger {user}`, then "
                f"`systemctl --user start {service.UNIT_NAME}`"
            )
    record.save()

    # 3, 4. hooks and MCP: each planned again just before it is written, since a
    # harness may keep both in one file (Gemini CLI's settings.json)
    for p in hook_plans:
        try:
            p = hi.plan_install(p.agent.name, None, python=python, data_dir=data_dir)
        except hi.InstallError as exc:
            print(f"wiki-memory: {exc}", file=sys.stderr)
            failed = True
            continue
        record.note_dirs(p.path)
        created_file = not p.path.exists()
        if p.changed:
            try:
                backup = hi.apply(p)
            except hi.InstallError as exc:
                print(f"wiki-memory: {exc}", file=sys.stderr)
                failed = True
                continue
            print(f"wrote {p.path}" + (f" (backup: {backup})" if backup else ""))
            record.wrote(p.path, created_file, backup)
        if p.agent.name not in record.hooks:
            record.hooks.append(p.agent.name)
    for mp in mcp_plans:
        try:
            mp = mi.plan_install(mp.client, python=python, data_dir=data_dir)
        except mi.InstallError as exc:
            print(f"wiki-memory: {exc}", file=sys.stderr)
            failed = True
            continue
        record.note_dirs(mp.path)
        created_file = not mp.path.exists()
        try:
            backup = mi.apply(mp)
        except mi.InstallError as exc:
            print(f"wiki-memory: {exc}", file=sys.stderr)
            failed = True
            continue
        if mp.changed:
            print(f"wrote {mp.path}" + (f" (backup: {backup})" if backup else ""))
            record.wrote(mp.path, created_file, backup)
        if mp.client not in record.mcp:
            record.mcp.append(mp.client)
    record.save()

    # 5. the self-check, on the server of this data directory (not whatever else answers)
    health = _wait_health(address, args.wait)
    deadline = time.monotonic() + args.wait
    while health is not None and not _serves_here(settings, address):
        if time.monotonic() >= deadline:
            health = None
            break
        time.sleep(0.2)
    if health is None:
        print(
            f"self-check: FAILED: no server of {data_dir} answers at {address} within "
            f"{args.wait:.0f} s (see {settings.logs_dir / 'service.log'} and "
            f"{settings.logs_dir / 'server.log'})"
        )
        failed = True
    else:
        ok, msg = self_check(settings, address, record.hooks)
        print(("self-check: ok: " if ok else "self-check: FAILED: ") + msg)
        failed = failed or not ok
    print()
    print("next:")
    print(f"  web view:  {address}/  (sign in with the token `wiki-memory token` prints)")
    print("  is it on:  wiki-memory status")
    print("  anything wrong: wiki-memory doctor")
    if record.hooks or record.mcp:
        print("  restart your agent sessions so they load the hooks and the MCP server")
    return 1 if failed else 0


def self_check(settings: Settings, address: str, hook_agents: list[str]) -> tuple[bool, str]:
    """Send one observation in a reserved session, find it with ``POST /v1/recall``, end
    the session. Through the installed hook of the first of ``hook_agents`` (as the
    harness runs it), else by ``POST /v1/observations``. Returns ``(ok, what happened)``.
    The server keeps nothing of it: no page, no commit (the reserved session's end
    deletes its spool)."""
    import httpx

    from wiki_memory.auth import TokenStore
    from wiki_memory.core.capture import SELF_CHECK_PREFIX
    from wiki_memory.harness.hooks_install import AGENTS, installed_commands

    token = TokenStore(settings.auth_dir).owner_token()
    if not token:
        return False, f"no owner token in {settings.auth_dir}"
    headers = {"Authorization": f"Bearer {token}"}
    nonce = "selfcheck" + secrets.token_hex(6)
    session = SELF_CHECK_PREFIX + nonce
    text = f"wiki-memory self-check {nonce}"
    via = "POST /v1/observations"
    sent = False
    # the session's folder: the data directory (no project of the user's is touched)
    cwd = str(settings.data_dir)
    harness = "wiki-memory-setup"  # the session is the hook's harness's when a hook sends
    for agent in hook_agents:
        cmds = installed_commands(AGENTS[agent].default_path())
        if not cmds:
            continue
        event = "BeforeAgent" if agent == "gemini-cli" else "UserPromptSubmit"
        payload = {"session_id": session, "hook_event_name": event, "prompt": text, "cwd": cwd}
        try:
            r = subprocess.run(
                ["sh", "-c", cmds[0]],
                input=json.dumps(payload).encode(),
                capture_output=True,
                timeout=30,
                cwd=str(settings.data_dir),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"the {agent} hook did not run: {exc}"
        if r.returncode != 0:
            return False, f"the {agent} hook exited {r.returncode}"
        via = f"the installed {AGENTS[agent].label} hook"
        harness = agent
        sent = True
        break
    try:
        if not sent:
            body: dict[str, Any] = {"harness": harness, "event": "UserPromptSubmit"}
            body |= {"session_id": session, "cwd": cwd, "payload": {"prompt": text}}
            r2 = httpx.post(address + "/v1/observations", json=body, headers=headers, timeout=10)
            if r2.status_code != 202:
                return False, f"the server answered {r2.status_code} to the observation"
        found = False
        deadline = time.monotonic() + 15
        while not found and time.monotonic() < deadline:
            r3 = httpx.post(
                address + "/v1/recall",
                json={"query": nonce, "budget_tokens": 2000},
                headers=headers,
                timeout=10,
            )
            found = r3.status_code == 200 and nonce in r3.text
            if not found:
                time.sleep(0.3)
        end = {"harness": harness, "event": "SessionEnd", "session_id": session}
        end["cwd"] = cwd
        httpx.post(address + "/v1/observations", json=end | {"payload": {}}, headers=headers)
    except httpx.HTTPError as exc:
        return False, f"cannot reach the server at {address}: {exc}"
    if not found:
        return False, (
            f"sent through {via} but recall did not find it within 15 s: capture does not "
            "reach this server (`wiki-memory doctor` says why)"
        )
    return True, f"an observation sent through {via} was captured and recalled"


# --------------------------------------------------------------------------------------
# uninstall
# --------------------------------------------------------------------------------------


def _remove_own_backup(path: Path, before: set[Path]) -> None:
    """Delete the backup an uninstall write just made of ``path`` (it holds what setup
    wrote, which uninstall is taking away); backups that were there before stay."""
    for b in path.parent.glob(path.name + ".wiki-memory-backup-*"):
        if b not in before:
            b.unlink()


def _backups(path: Path) -> set[Path]:
    return set(path.parent.glob(path.name + ".wiki-memory-backup-*"))


def cmd_uninstall(args: argparse.Namespace) -> int:
    """Undo what ``setup`` recorded: the service, our hooks and MCP entries, the folders
    it made; keep files the user changed since, and the data directory."""
    from wiki_memory.harness import hooks_install as hi
    from wiki_memory.harness import mcp_install as mi
    from wiki_memory.harness import service
    from wiki_memory.harness.service import digest

    settings = _settings(args)
    data_dir = settings.data_dir.expanduser().resolve()
    record = Record.load(data_dir / SETUP_RECORD)
    if not record.path.exists():
        print(f"nothing to undo: no {SETUP_RECORD} in {data_dir} (setup was not run here)")
        return 0
    kept: list[str] = []

    def unchanged(path: Path) -> bool:
        want = record.files.get(str(path), {}).get("sha256")
        try:
            return want is not None and digest(path.read_text(encoding="utf-8")) == want
        except OSError:
            return False

    # the service: stopped and removed only while it is what setup wrote
    kind = record.service.get("kind")
    if kind:
        unit = Path(record.service["path"])
        if unit.exists() and not unchanged(unit):
            kept.append(f"{unit} (changed since setup: left installed and enabled)")
        else:
            for n in service.stop_and_disable(kind):
                print(f"note: {n}")
            if unit.exists():
                unit.unlink()
                print(f"removed {unit}")
    if record.background_pid:
        _stop_background(settings, record.background_pid)
    # hooks and MCP: only our entries go; the rest of each file stays as it is now
    for agent in record.hooks:
        path = hi.AGENTS[agent].default_path()
        try:
            plan = hi.plan_uninstall(agent, None)
            if plan.changed:
                before = _backups(path)
                if record.files.get(str(path), {}).get("created") and not _meaningful(plan.after):
                    path.unlink()
                    print(f"removed {path}")
                else:
                    hi.apply(plan)
                    _remove_own_backup(path, before)
                    print(f"removed our hooks from {path}")
        except hi.InstallError as exc:
            kept.append(f"{path} ({exc})")
    for client in record.mcp:
        try:
            mplan = mi.plan_uninstall(client, data_dir=data_dir)
            if mplan.changed:
                before = _backups(mplan.path)
                mi.apply(mplan)
                _remove_own_backup(mplan.path, before)
                print(
                    f"removed {mplan.path}"
                    if mplan.delete
                    else f"removed our MCP server from {mplan.path}"
                )
            elif mplan.notes and mplan.path.exists() and mi.read_entry(client, mplan.path):
                kept.append(f"{mplan.path}: " + "; ".join(mplan.notes))
        except mi.InstallError as exc:
            kept.append(f"{client} ({exc})")
    # setup's backups: gone once the file is back to the same bytes (nothing is lost)
    for key, backups in record.backups.items():
        for b in map(Path, backups):
            try:
                same = b.read_bytes() == Path(key).read_bytes()
            except OSError:
                same = False
            if same:
                b.unlink()
            elif b.exists():
                kept.append(f"{b} (the file before setup changed it)")
    for d in sorted(record.dirs, key=len, reverse=True):
        try:
            Path(d).rmdir()
        except OSError:
            pass
    record.path.unlink()
    for k in kept:
        print(f"kept: {k}")
    print(
        f"kept the data directory {data_dir} (your pages, history and token); remove it "
        "yourself if you mean to"
    )
    return 0


def _meaningful(obj: dict[str, Any]) -> bool:
    """False for a harness file left with nothing but empty tables."""
    return any(v not in ({}, [], None) for v in obj.values())


def _stop_background(settings: Settings, pid: int) -> None:
    """SIGTERM the server setup started itself, if it still holds this data directory."""
    from wiki_memory.datadir import ServerLock

    try:
        info = json.loads((settings.data_dir / "server.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if info.get("pid") != pid or not ServerLock(settings.data_dir).is_held_elsewhere():
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and ServerLock(settings.data_dir).is_held_elsewhere():
        time.sleep(0.2)
    print(f"stopped the server setup started (pid {pid})")


# --------------------------------------------------------------------------------------
# status
# --------------------------------------------------------------------------------------


#: lines other features add to ``status``: name -> ``"module:function"``, a function of
#: the Settings returning a JSON value (None: nothing to say) shown as ``name: value``
#: and as key ``name`` of ``--json``. A feature adds its line with one call of
#: :func:`register_status` (docs/operations.md, "Adding a check").
STATUS_LINES: dict[str, str] = {}


def register_status(name: str, function: str) -> None:
    """Add (or replace) the ``status`` line ``name``, computed by ``function`` (its
    ``"module:function"`` path, imported when status runs)."""
    STATUS_LINES[name] = function


register_status("sync", "wiki_memory.cli.replicas:status_line")


def _extra_status(settings: Settings) -> dict[str, Any]:
    """The registered :data:`STATUS_LINES`; one that raises says so instead."""
    import importlib

    out: dict[str, Any] = {}
    for name, path in STATUS_LINES.items():
        module, _, attr = path.partition(":")
        try:
            value = getattr(importlib.import_module(module), attr)(settings)
        except Exception as exc:  # noqa: BLE001 - one broken line must not hide the rest
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        if value is not None:  # None: nothing to say
            out[name] = value
    return out


def status_report(settings: Settings) -> dict[str, Any]:
    """Whether memory is on, for ``wiki-memory status``; reads files and ``/v1/health``
    only. Returns ``{"server": {"running", "reachable", "pid", "address", "version",
    "uptime_seconds"}, "data_dir", "pages", "open_sessions", "outbox": {"queued",
    "dropped"}, "last_commit": {"sha", "time", "age_seconds"} | None, "commits":
    {"ok", "stalled", ...} , "index": {"pages", "lag"} | None, "watcher": bool | None,
    "service": {"kind", "path", "installed", "enabled", "active", ...}, "ok"}``. ``ok``
    is False when no server runs, commits stall, events are queued or the index lags.
    ``uptime_seconds`` is measured from the server's start as ``server.json`` records it."""
    from wiki_memory.cli.doctor import Context, _scan_files, check_index
    from wiki_memory.harness import service
    from wiki_memory.harness.outbox import status as outbox_status

    data_dir = settings.data_dir
    rep: dict[str, Any] = {"data_dir": str(data_dir)}
    running = _server_running(settings)
    srv: dict[str, Any] = {"running": running, "reachable": False}
    health = None
    if running:
        try:
            info = json.loads((data_dir / "server.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            info = {}
        srv["pid"] = info.get("pid")
        srv["address"] = info.get("address")
        if info.get("started"):
            srv["uptime_seconds"] = round(time.time() - float(info["started"]), 1)
        from wiki_memory.cli.doctor import _server_health

        health = _server_health(srv.get("address"), settings.ca_file)
        if health is not None:
            srv["reachable"] = True
            srv["version"] = health.get("version")
    rep["server"] = srv

    # sessions with events and no end yet
    open_sessions = 0
    for log in sorted(settings.spool_dir.glob("*.jsonl")) if settings.spool_dir.is_dir() else []:
        try:
            st = json.loads(log.with_suffix(".state").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            st = {}
        if not isinstance(st, dict) or st.get("status") != "ended":
            open_sessions += 1
    rep["open_sessions"] = open_sessions

    try:
        ob = outbox_status(data_dir)
        rep["outbox"] = {"queued": ob.queued, "dropped": sum(ob.dropped.values())}
    except FileNotFoundError:
        rep["outbox"] = {"queued": 0, "dropped": 0}

    rep["last_commit"] = _last_commit(settings.wiki_dir)
    if health is not None:
        commits = dict(health.get("commits") or {})
        commits["stalled"] = not commits.get("ok", True)
        rep["commits"] = commits
        rep["watcher"] = health.get("watcher")
    else:
        rep["commits"] = {"ok": None, "stalled": None}
        rep["watcher"] = None

    if settings.wiki_dir.is_dir():
        ctx = Context(settings, wait_seconds=0)
        ctx.running = running
        ctx.on_disk, _ = _scan_files(settings.wiki_dir)
        ctx.rep["pages"] = {}
        check_index(ctx)
        rep["pages"] = len(ctx.on_disk)
        idx = ctx.rep.get("index")
        rep["index"] = {"pages": idx["pages"], "lag": idx["lag"]} if idx else None
    else:
        rep["pages"] = 0
        rep["index"] = None
    kind = service.kind_for_platform()
    rep["service"] = service.state(kind).as_dict()
    rep.update(_extra_status(settings))
    rep["ok"] = bool(
        running
        and srv["reachable"]
        and not rep["commits"].get("stalled")
        and not rep["outbox"]["queued"]
        and (rep["index"] is None or not rep["index"]["lag"])
    )
    return rep


def _last_commit(wiki: Path) -> dict[str, Any] | None:
    """HEAD's sha, commit time (epoch seconds) and age; None without a commit."""
    if not (wiki / ".git").exists():
        return None
    from dulwich.repo import Repo

    try:
        with Repo(str(wiki)) as repo:
            head = repo.head()
            c = repo[head]
            t = float(c.commit_time)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - no HEAD yet, or an unreadable repository
        return None
    return {"sha": head.decode("ascii"), "time": t, "age_seconds": round(time.time() - t, 1)}


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"


def cmd_status(args: argparse.Namespace) -> int:
    """Print :func:`status_report`; exit 0 when memory is on, 1 when something is off."""
    rep = status_report(_settings(args))
    if args.json:
        print(json.dumps(rep, indent=1, ensure_ascii=False))
        return 0 if rep["ok"] else 1
    srv = rep["server"]
    if srv["running"]:
        up = f", up {_age(srv['uptime_seconds'])}" if srv.get("uptime_seconds") is not None else ""
        ver = f", version {srv['version']}" if srv.get("version") else ""
        reach = "" if srv["reachable"] else " (NOT answering)"
        print(f"server:    running, pid {srv.get('pid')}, {srv.get('address')}{ver}{up}{reach}")
    else:
        print("server:    NOT running (hooks spool to the outbox; `wiki-memory setup` or `serve`)")
    print(f"data dir:  {rep['data_dir']}")
    print(f"pages:     {rep['pages']}   open sessions: {rep['open_sessions']}")
    ob = rep["outbox"]
    print(f"outbox:    {ob['queued']} queued, {ob['dropped']} dropped")
    lc = rep["last_commit"]
    print(
        "commits:   "
        + (f"last {lc['sha'][:12]}, {_age(lc['age_seconds'])} ago" if lc else "none yet")
        + (
            "; STALLED: " + str(rep["commits"].get("cause"))
            if rep["commits"].get("stalled")
            else ""
        )
    )
    idx = rep["index"]
    if idx:
        print(f"index:     {idx['pages']} pages, lag {idx['lag']}")
    w = rep["watcher"]
    print("watcher:   " + ("alive" if w else "unknown" if w is None else "NOT running"))
    svc = rep["service"]
    print(
        f"service:   {svc['path']}: "
        + (
            ("installed, " + ("enabled" if svc["enabled"] else "not enabled"))
            if svc["installed"]
            else "not installed (`wiki-memory setup`)"
        )
    )
    for name in STATUS_LINES:
        if rep.get(name) is not None:
            value = rep[name]
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            print(f"{name + ':':<10} {shown}")
    print("memory is on" if rep["ok"] else "memory is NOT fully on (`wiki-memory doctor` says why)")
    return 0 if rep["ok"] else 1


def register(sub: Any) -> None:
    """Add ``setup``, ``uninstall`` and ``status`` to the ``wiki-memory`` parser."""
    s = sub.add_parser(
        "setup",
        help="one command: data directory, token, service, hooks and MCP for the harnesses "
        "found, and a self-check",
    )
    s.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    s.add_argument("--port", type=int, help=f"the service's port (default {DEFAULT_PORT})")
    s.add_argument(
        "--python", help="interpreter for the service, hooks and MCP (default: this one)"
    )
    s.add_argument(
        "--wait", type=float, default=30.0, help="seconds to wait for the server (default 30)"
    )
    s.add_argument(
        "--print-unit",
        choices=["user", "system", "launchd"],
        help="print the generated unit (user, system: the team server's, launchd) and exit",
    )
    s.set_defaults(fn=cmd_setup)

    u = sub.add_parser("uninstall", help="remove what setup added (keeps the data directory)")
    u.set_defaults(fn=cmd_uninstall)

    st = sub.add_parser("status", help="is memory on: server, backlog, commits, index, service")
    st.add_argument("--json", action="store_true", help="print the status as JSON")
    st.set_defaults(fn=cmd_status)
