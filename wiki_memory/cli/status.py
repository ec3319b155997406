"""``wiki-memory status [--json]``: whether memory is on: the server, the data
directory, the backlog, commits, the index, the watcher, the service; and the lines
other features add with :func:`register_status` (docs/operations.md, "Adding a check").

Exit status: 0 memory is on; 1 it is not; 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from wiki_memory.cli.common import cli_settings
from wiki_memory.cli.declare import add_command, add_flag
from wiki_memory.config import Settings

__all__ = ["STATUS_LINES", "cmd_status", "register", "register_status", "status_report"]


def server_running(settings: Settings) -> bool:
    from wiki_memory.datadir import ServerLock

    return settings.data_dir.exists() and ServerLock(settings.data_dir).is_held_elsewhere()


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
register_status("unrendered_events", "wiki_memory.cli.checks_store:unrendered_line")


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
    from wiki_memory.cli.checks_install import hooks_installed, unit_data_dir
    from wiki_memory.cli.checks_store import check_index, scan_files
    from wiki_memory.cli.doctor import Context
    from wiki_memory.harness import userservice
    from wiki_memory.harness.outbox import status as outbox_status

    data_dir = settings.data_dir
    rep: dict[str, Any] = {"data_dir": str(data_dir)}
    running = server_running(settings)
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
        from wiki_memory.cli.checks_install import server_health

        health = server_health(srv.get("address"), settings.ca_file)
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
        ctx.on_disk, _ = scan_files(settings.wiki_dir)
        ctx.rep["pages"] = {}
        check_index(ctx)
        rep["pages"] = len(ctx.on_disk)
        idx = ctx.rep.get("index")
        rep["index"] = {"pages": idx["pages"], "lag": idx["lag"]} if idx else None
    else:
        rep["pages"] = 0
        rep["index"] = None
    kind = userservice.kind_for_platform()
    st = userservice.state(kind)
    rep["service"] = st.as_dict()
    serves = unit_data_dir(st.path) if st.installed else None
    rep["service"]["data_dir"] = serves
    rep["service"]["for_this_data_dir"] = serves == str(data_dir.expanduser().resolve())
    rep["hooks_installed"] = hooks_installed()
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
    rep = status_report(cli_settings(args))
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
        spool = "hooks spool to the outbox; " if rep.get("hooks_installed") else ""
        print(f"server:    NOT running ({spool}`wiki-memory setup` or `serve`)")
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
    from wiki_memory.harness.userservice import describe

    print(f"service:   {describe(rep['service'])}")
    for name in STATUS_LINES:
        if rep.get(name) is not None:
            value = rep[name]
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            print(f"{name + ':':<10} {shown}")
    print("memory is on" if rep["ok"] else "memory is NOT fully on (`wiki-memory doctor` says why)")
    return 0 if rep["ok"] else 1


def register(sub: Any) -> None:
    """Add ``status`` to the ``wiki-memory`` parser."""
    st = add_command(
        sub, "status", cmd_status, "is memory on: server, backlog, commits, index, service"
    )
    add_flag(st, "--json", "print the status as JSON")
