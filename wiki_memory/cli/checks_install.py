"""Doctor's checks of what is installed around the wiki: the server lock and the running
server, the per-user service, the hooks' outbox, the hooks and MCP entries in the
agents' configurations, and the token file. Each is a function of
:class:`wiki_memory.cli.doctor.Context`, registered by name in
:mod:`wiki_memory.cli.doctor`, which imports this module only when doctor runs.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

from wiki_memory.cli.doctor import Context


def server_health(address: str | None, ca_file: Path | None = None) -> dict[str, Any] | None:
    """The running server's ``GET /v1/health`` answer (None if unreachable; an https
    server is trusted through ``ca_file`` besides the system's CAs)."""
    if not address:
        return None
    import httpx

    from wiki_memory.config import tls_verify

    try:
        r = httpx.get(address.rstrip("/") + "/v1/health", timeout=3, verify=tls_verify(ca_file))
        body = r.json()
    except (httpx.HTTPError, ValueError):
        return None
    return body if isinstance(body, dict) else None


def _server_commits(address: str | None, ca_file: Path | None = None) -> dict[str, Any] | None:
    """The running server's commit status from ``GET /v1/health`` (None if unreachable)."""
    commits = (server_health(address, ca_file) or {}).get("commits")
    return commits if isinstance(commits, dict) else None


def _hooks_report(ctx: Context) -> dict[str, Any]:
    """The hook side of the data directory: its outbox (queued and dropped events, whether
    the hooks found the server unreachable) and, for each harness whose configuration file
    (as install-hooks finds it, profile variables included) holds our hook, what that hook
    is pinned to. Errors: events queued (capture is not reaching the server), a hook pinned
    to another store, a hook whose interpreter or program is gone. Warnings: a hook not
    pinned at all, dropped events, the hooks' back-off."""
    import shlex

    from wiki_memory.harness.hooks_install import AGENTS, installed_commands, pinned_target
    from wiki_memory.harness.outbox import status

    data_dir = ctx.settings.data_dir
    out: dict[str, Any] = {"installed": []}
    try:
        st = status(data_dir)
    except FileNotFoundError as exc:
        ctx.warn(f"hook outbox not checked: {exc}")
    else:
        out["outbox"] = {
            "path": str(st.outbox),
            "queued": st.queued,
            "oldest_seconds": st.oldest_seconds,
            "dropped": st.dropped,
            "unreachable": st.unreachable,
        }
        if st.queued:
            age = f", the oldest {st.oldest_seconds:.0f} s old" if st.oldest_seconds else ""
            ctx.error(
                f"{st.queued} hook event(s) queued in {st.outbox}{age}: capture is not "
                "reaching the server; a running server on this data directory sends them "
                "into itself (or `wiki-memory recover`)",
                "wiki-memory recover",
            )
        if st.dropped:
            counts = ", ".join(f"{n} {k}" for k, n in sorted(st.dropped.items()))
            ctx.warn(f"hook events dropped so far: {counts} ({st.outbox}/dropped.jsonl)")
        if st.unreachable and time.time() < float(st.unreachable.get("until") or 0):
            since = time.strftime("%H:%M", time.localtime(float(st.unreachable["since"])))
            ctx.warn(
                f"the hooks found the server {st.unreachable.get('url')} unreachable since "
                f"{since} ({st.unreachable.get('error')}); they skip the network for a while"
            )
    mine = str(Path(data_dir).expanduser().resolve())
    for spec in AGENTS.values():
        path = spec.default_path()
        fix = f"wiki-memory install-hooks --agent {spec.name} --apply"
        for cmd in installed_commands(path):
            target = pinned_target(cmd)
            out["installed"].append({"agent": spec.name, "file": str(path), "target": target})
            try:
                words = shlex.split(cmd.split(" || ", 1)[0])
            except ValueError:
                words = []
            if words and not _runnable(words[0]):
                ctx.error(
                    f"{spec.label} hook in {path} runs {words[0]}, which does not exist: no "
                    "event is captured",
                    fix,
                )
            elif len(words) > 2 and words[1] == "-S" and not Path(words[2]).is_file():
                ctx.error(
                    f"{spec.label} hook in {path} runs {words[2]}, which does not exist: no "
                    "event is captured",
                    fix,
                )
            if target is None:
                ctx.warn(
                    f"{spec.label} hook in {path} is not pinned to a data directory: it "
                    "follows whatever WIKI_MEMORY_HOME the harness passes (run install-hooks "
                    "again)",
                    fix,
                )
            elif not target.startswith(("http://", "https://")) and target != mine:
                ctx.error(
                    f"{spec.label} hook in {path} points to another store: {target} "
                    f"(this is {mine})",
                    f"wiki-memory --data-dir {shlex.quote(mine)} install-hooks "
                    f"--agent {spec.name} --apply",
                )
    return out


def check_server(ctx: Context) -> None:
    """The server lock: is a server running on this data directory, can it commit."""
    from wiki_memory.datadir import ServerLock, server_address

    settings = ctx.settings
    lock = ServerLock(settings.data_dir)
    running = settings.data_dir.exists() and lock.is_held_elsewhere()
    ctx.running = running
    ctx.rep["lock"] = {"server_running": running}
    if running:
        ctx.rep["lock"]["holder"] = lock.holder()
        ctx.rep["lock"]["address"] = ctx.address = server_address(settings.data_dir)
        commits = _server_commits(ctx.address, settings.ca_file)
        if commits is not None:
            ctx.rep["commits"] = commits
            if not commits.get("ok", True):
                remedy = str(commits.get("remedy") or "")
                ctx.error(
                    f"disk full since {commits.get('since')}: the server refuses writes "
                    f"(507) and hooks keep their events in the outbox. Remedy: {remedy}"
                    if commits.get("cause") == "disk full"
                    else f"the running server cannot commit since {commits.get('since')} "
                    f"({commits.get('cause')}); every change stays on disk. Remedy: {remedy}",
                    "wiki-memory doctor --fix" if "doctor --fix" in remedy else None,
                )
    elif (settings.data_dir / "server.json").exists():
        ctx.warn("server.json names a server that is not running (it stopped uncleanly)")


def hooks_installed() -> bool:
    """True when any harness's user-level file holds our hook."""
    from wiki_memory.harness.hooks_install import AGENTS, installed_commands

    for spec in AGENTS.values():
        try:
            if installed_commands(spec.default_path()):
                return True
        except (OSError, ValueError):
            continue
    return False


def check_service(ctx: Context) -> None:
    """The per-user service of ``wiki-memory setup``: installed for this data directory
    and running (a unit for this data directory with no server running is an error)."""
    from wiki_memory.harness import userservice

    kind = userservice.kind_for_platform()
    st = userservice.state(kind)
    rep: dict[str, Any] = st.as_dict()
    serves = unit_data_dir(st.path) if st.installed else None
    mine = str(ctx.settings.data_dir.expanduser().resolve())
    rep["data_dir"] = serves
    rep["for_this_data_dir"] = serves == mine
    ctx.rep["service"] = rep
    start = (
        f"systemctl --user start {userservice.UNIT_NAME}"
        if kind == "user"
        else f"launchctl kickstart gui/{os.getuid()}/{userservice.LAUNCHD_LABEL}"
    )
    if st.manager is None or st.active is None:
        # no manager answered: a start command for it would fail the same way
        start = (
            "start `wiki-memory serve` by other means (no service manager answers here: "
            "a login script, or your container's supervisor)"
        )
    if not st.installed:
        ctx.info("no service keeps the server running", "wiki-memory setup")
    elif serves != mine:
        ctx.info(f"the installed service serves another data directory: {serves}")
    elif not ctx.running:
        ctx.error(
            f"the service {st.path} is installed but no server runs on {mine}: hooks "
            "spool to the outbox and the session-start brief is empty"
            + ("" if st.enabled else " (and it is not enabled at login)"),
            start,
        )
    elif not st.enabled:
        ctx.warn(f"the service {st.path} is not enabled: it will not start at the next login")
    elif st.active is not True:
        ctx.warn(f"service: {userservice.describe(rep)}", start)


def unit_data_dir(path: Path) -> str | None:
    """The ``--data-dir`` a service file runs the server for (None when unreadable)."""
    from wiki_memory.harness.userservice import exec_start_argv

    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    if path.suffix == ".plist":
        import re
        from xml.sax.saxutils import unescape

        args = [unescape(a) for a in re.findall(r"<string>(.*?)</string>", text)]
    else:
        try:
            args = exec_start_argv(text)
        except ValueError:
            return None
    for i, a in enumerate(args[:-1]):
        if a == "--data-dir":
            return str(Path(args[i + 1]).expanduser().resolve())
    return None


def check_outbox(ctx: Context) -> None:
    """Events the server refused for good (``refused.json``) and the hooks' outbox."""
    refused = _refused_captures(ctx.settings.data_dir / "outbox")
    ctx.rep["refused"] = refused
    for project, entry in sorted(refused.items()):
        ctx.warn(
            f"capture refused by the server for project {project}: {entry.get('count')} "
            f"event(s) dropped (last {entry.get('last')}): {entry.get('message')}"
        )


def check_hooks(ctx: Context) -> None:
    """Each harness's hooks: present, pinned to this data directory, with an interpreter
    and a hook program that exist; the outbox's queued and dropped events."""
    ctx.rep["hooks"] = _hooks_report(ctx)


def check_mcp(ctx: Context) -> None:
    """The MCP face can be loaded (the server loads it at the first ``/mcp`` request, not
    at start, so a broken install shows only here and as a 500 there), and each MCP
    client's user-level entry of ours: its interpreter and bridge exist and it names this
    data directory (or a team server's URL)."""
    from wiki_memory.harness import mcp_install as mi

    try:
        import wiki_memory.mcp.tools  # noqa: F401  (imports the SDK: about 0.6 s)
    except Exception as exc:  # an ImportError, or whatever a broken package raises
        ctx.error(
            f"the MCP face cannot be loaded ({type(exc).__name__}: {exc}): the server "
            "answers 500 at /mcp",
            "pip install --force-reinstall 'mcp>=2.3,<3'",
        )

    mine = str(ctx.settings.data_dir.expanduser().resolve())
    out: list[dict[str, Any]] = []
    for client, label in mi.CLIENTS.items():
        try:
            path = mi.config_path(client, "user")
            entry = mi.read_entry(client, path)
        except (mi.InstallError, OSError):
            continue
        if entry is None:
            continue
        cmd = str(entry.get("command") or "")
        args = [str(a) for a in entry.get("args") or []]
        target = None
        for i, a in enumerate(args[:-1]):
            if a in ("--data-dir", "--url") and (target is None or a == "--url"):
                target = args[i + 1]
        out.append({"client": client, "file": str(path), "target": target})
        fix = f"wiki-memory install-mcp --client {client} --apply"
        if not _runnable(cmd):
            ctx.error(f"{label} MCP entry in {path} runs {cmd}, which does not exist", fix)
        elif args and args[0] == "-S" and len(args) > 1 and not Path(args[1]).is_file():
            ctx.error(f"{label} MCP entry in {path} runs {args[1]}, which does not exist", fix)
        elif target and not target.startswith(("http://", "https://")):
            if str(Path(target).expanduser().resolve()) != mine:
                ctx.warn(f"{label} MCP entry in {path} points to another store: {target}")
    ctx.rep["mcp"] = out


def _runnable(cmd: str) -> bool:
    """True when ``cmd`` (an absolute path, or a name on PATH) is an executable file."""
    import shutil

    if os.sep in cmd:
        return os.path.isfile(cmd) and os.access(cmd, os.X_OK)
    return shutil.which(cmd) is not None


def check_token(ctx: Context) -> None:
    """The owner's token file: present once the data directory is set up, owner-only."""
    path = ctx.settings.auth_dir / "owner.token"
    ctx.rep["token_file"] = {"path": str(path), "exists": path.is_file()}
    if not path.is_file():
        if ctx.settings.wiki_dir.is_dir():
            ctx.warn(
                f"no owner token in {path} (the server creates it at start)", "wiki-memory setup"
            )
        return
    mode = stat.S_IMODE(path.stat().st_mode)
    ctx.rep["token_file"]["mode"] = f"{mode:o}"
    if mode & 0o077:

        def tighten() -> str:
            os.chmod(path, 0o600)
            return f"chmod 600 {path}"

        ctx.error(
            f"the owner token {path} is readable by others (mode {mode:o})",
            f"chmod 600 {path}",
            safe=True,
            apply=tighten,
        )


def check_user_twins(ctx: Context) -> None:
    """Users whose names equal an older user's after the identity fold (case and width):
    every token of the newer one is refused (``user_name_twin``) until it is revoked."""
    from wiki_memory.auth import TokenStore

    found = TokenStore(ctx.settings.auth_dir).twins()
    ctx.rep["user_twins"] = [{"user": u, "existing": e} for u, e in sorted(found.items())]
    for user, existing in sorted(found.items()):
        ctx.error(
            f"user {user!r} equals the older user {existing!r} after folding case and width: "
            "its tokens are refused (user_name_twin)",
            f"wiki-memory token revoke --user {user}",
        )


def _refused_captures(outbox: Path) -> dict[str, dict[str, Any]]:
    """What the installed hook counted in ``outbox/refused.json``: project -> ``{count,
    status, message, last}`` for events the server refused for good (``capture_refused``,
    docs/team-server.md)."""
    try:
        data = json.loads((outbox / "refused.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): v for k, v in data.items() if isinstance(v, dict)}
