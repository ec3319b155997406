"""``wiki-memory setup``, ``uninstall`` and ``status``: memory that is always on.

- ``setup [--dry-run]`` prints its plan, then: the data directory and the owner's token;
  the per-user service generated from ``packaging/`` (:mod:`wiki_memory.harness.userservice`)
  installed, enabled and started (or, where no service manager answers, the server
  started in the background with a note on ``loginctl enable-linger``); hooks and MCP
  for every supported harness found on this machine; a self-check. Run again, it
  changes nothing that is already right.
- ``uninstall`` (:mod:`wiki_memory.cli.uninstall`) removes what setup recorded in
  ``<data_dir>/setup.json`` and nothing else; a file the user changed since is left
  (and named).
- ``status [--json]`` (:mod:`wiki_memory.cli.status`) says whether memory is on: the
  server, the data directory, the backlog, commits, the index, the watcher, the service.

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
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from wiki_memory.cli.common import CliError, cli_settings
from wiki_memory.cli.declare import add_command, add_flag
from wiki_memory.cli.status import server_running
from wiki_memory.cli.uninstall import SETUP_RECORD, Record
from wiki_memory.config import DEFAULT_PORT, Settings

__all__ = [
    "HARNESSES",
    "cmd_setup",
    "detect_harnesses",
    "register",
    "self_check",
]


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


def _serves_here(settings: Settings, address: str) -> bool:
    """True when the server holding this data directory's lock serves ``address``."""
    from wiki_memory.datadir import server_address

    return server_running(settings) and server_address(settings.data_dir) == address


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
    from wiki_memory.harness import userservice

    settings = cli_settings(args)
    data_dir = settings.data_dir.expanduser().resolve()
    port = _port(args, settings)
    python = args.python or hi.interpreter_path()
    argv = userservice.serve_argv(python, data_dir, "127.0.0.1", port)
    kind = userservice.kind_for_platform()
    unit_text = userservice.render(kind, argv, data_dir)
    unit = userservice.unit_path(kind)
    if args.print_unit:
        print(userservice.render(args.print_unit, argv, data_dir), end="")
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
    step = iter(range(1, 100))
    print(
        f"  {next(step)}. data directory {data_dir}: "
        + (
            "exists"
            if (data_dir / "auth" / "owner.token").is_file()
            else "create it and the owner's token"
        )
    )
    print(
        f"  {next(step)}. service "
        f"({'launchd LaunchAgent' if kind == 'launchd' else 'systemd user unit'}) "
        f"{unit}: " + ("up to date" if unit_same else "write it")
    )
    print(f"     runs: {shlex.join(argv)}")
    print("     then enable it at login and start it (serving " + address + ")")
    if not found:
        print(f"  {next(step)}. harnesses: none found (Claude Code, Codex, Gemini CLI, Cursor)")
    for p in hook_plans:
        print(
            f"  {next(step)}. hooks for {p.agent.label}: {p.path}: "
            + ("write" if p.changed else "up to date")
        )
    for mp in mcp_plans:
        print(
            f"  {next(step)}. MCP for {mi.CLIENTS[mp.client]}: {mp.path}: "
            + ("write" if mp.changed else "up to date")
        )
    if not mcp_plans:
        print(f"  {next(step)}. MCP: nothing to set up (no harness found)")
    print(
        f"  {next(step)}. self-check: one observation in a reserved session, read back, "
        "then deleted"
    )
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
        path, _ = userservice.install(kind, unit_text)
        record.wrote(path, created_unit, None)
        print(f"wrote {path}")
    record.service = {"kind": kind, "path": str(unit)}
    running = server_running(settings)
    # a server the manager did not start (`serve` in a terminal) keeps the data directory:
    # the service is only enabled then, and takes over at the next login or boot
    managed = userservice.state(kind).active is True
    started, notes = userservice.enable_and_start(
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
                f"`systemctl --user start {userservice.UNIT_NAME}`"
            )
    record.save()

    # 3, 4. hooks and MCP: each planned again just before it is written, since a
    # harness may keep both in one file (Gemini CLI's settings.json)
    for p in hook_plans:
        name = p.agent.name
        if not _install(
            record, partial(hi.plan_install, name, None, python=python, data_dir=data_dir), hi.apply
        ):
            failed = True
            continue
        if name not in record.hooks:
            record.hooks.append(name)
    for mp in mcp_plans:
        client = mp.client
        if not _install(
            record,
            partial(mi.plan_install, client, python=python, data_dir=data_dir),
            mi.apply,
            always=True,
        ):
            failed = True
            continue
        if client not in record.mcp:
            record.mcp.append(client)
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
        if ok:
            from wiki_memory.cli.agentfiles import setup_offer

            setup_offer(args, address)  # asked, never silent (docs/agent-files.md)
    print()
    print("next:")
    hint = path_hint(python)
    if hint:
        print(hint)
    print(f"  web view:  {address}/  (sign in with the token `wiki-memory token` prints)")
    print("  is it on:  wiki-memory status")
    print("  anything wrong: wiki-memory doctor")
    if record.hooks or record.mcp:
        print("  restart your agent sessions so they load the hooks and the MCP server")
    return 1 if failed else 0


def path_hint(python: str) -> str | None:
    """How to put ``wiki-memory`` on ``PATH``, said once by setup, when the name does not
    resolve there but the console script sits beside ``python`` (a venv install); None
    otherwise. The hooks spell the brief's commands with the script's full path then."""
    script = Path(python).parent / "wiki-memory"
    if shutil.which("wiki-memory") is not None or not script.is_file():
        return None
    folder = shlex.quote(str(script.parent))
    return (
        f"  on PATH:   `wiki-memory` is not on your PATH; add its folder in your shell's "
        f'profile (`export PATH={folder}:"$PATH"`) or link it: '
        f"`ln -s {shlex.quote(str(script))} ~/.local/bin/`"
    )


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


def _install(
    record: Record,
    make: Callable[[], Any],
    apply: Callable[[Any], Path | None],
    always: bool = False,
) -> bool:
    """Plan one harness file again (``make()``) and write it (``apply``, with a backup)
    when the plan changes it, or with ``always`` in any case (the MCP install keeps its
    own record of what it wrote); the setup ``record`` notes the folders and what was
    written. False, the error printed, when it cannot be planned or written."""
    from wiki_memory.harness.hooks_install import InstallError

    try:
        plan = make()
        record.note_dirs(plan.path)
        created_file = not plan.path.exists()
        backup = apply(plan) if plan.changed or always else None
    except InstallError as exc:
        print(f"wiki-memory: {exc}", file=sys.stderr)
        return False
    if plan.changed:
        print(f"wrote {plan.path}" + (f" (backup: {backup})" if backup else ""))
        record.wrote(plan.path, created_file, backup)
    return True


def register(sub: Any) -> None:
    """Add ``setup`` to the ``wiki-memory`` parser."""
    s = add_command(
        sub,
        "setup",
        cmd_setup,
        "one command: data directory, token, service, hooks and MCP for the harnesses "
        "found, and a self-check",
    )
    add_flag(s, "--dry-run", "print the plan, change nothing")
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
