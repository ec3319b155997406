"""``wiki-memory uninstall``: removes what ``setup`` recorded in
``<data_dir>/setup.json`` (:class:`Record`, written by :mod:`wiki_memory.cli.setup`) and
nothing else; a file the user changed since is left (and named), and the data directory
stays.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wiki_memory.cli.common import cli_settings
from wiki_memory.cli.declare import add_command, add_flag
from wiki_memory.config import Settings
from wiki_memory.plainfile import atomic_write

__all__ = ["SETUP_RECORD", "Record", "cmd_uninstall", "register"]

#: what setup wrote, in the data directory (uninstall reads it)
SETUP_RECORD = "setup.json"


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
        text = json.dumps(body, indent=2, sort_keys=True) + "\n"
        atomic_write(self.path, text.encode("utf-8"), 0o600)

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
        from wiki_memory.harness.userservice import digest

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


def _remove_own_backup(path: Path, before: set[Path]) -> None:
    """Delete the backup an uninstall write just made of ``path`` (it holds what setup
    wrote, which uninstall is taking away); backups that were there before stay."""
    for b in path.parent.glob(path.name + ".wiki-memory-backup-*"):
        if b not in before:
            b.unlink()


def _backups(path: Path) -> set[Path]:
    return set(path.parent.glob(path.name + ".wiki-memory-backup-*"))


def cmd_uninstall(args: argparse.Namespace) -> int:
    """Undo what ``setup`` recorded: the service, our hooks and MCP entries, the harness
    files it created that are left empty, the folders it made; keep files the user changed
    since, and the data directory. ``--dry-run`` says what it would do and does nothing."""
    from wiki_memory.capture import rulescan
    from wiki_memory.harness import hooks_install as hi
    from wiki_memory.harness import mcp_install as mi
    from wiki_memory.harness import userservice
    from wiki_memory.harness.userservice import digest

    settings = cli_settings(args)
    data_dir = settings.data_dir.expanduser().resolve()
    record = Record.load(data_dir / SETUP_RECORD)
    if not record.path.exists():
        print(f"nothing to undo: no {SETUP_RECORD} in {data_dir} (setup was not run here)")
        return 0
    dry = bool(getattr(args, "dry_run", False))
    would = "would remove" if dry else "removed"
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
        elif dry:
            print(f"would stop and disable the service and remove {unit}")
        else:
            for n in userservice.stop_and_disable(kind):
                print(f"note: {n}")
            if unit.exists():
                unit.unlink()
                print(f"removed {unit}")
    if record.background_pid:
        if dry:
            print(f"would stop the server setup started (pid {record.background_pid})")
        else:
            _stop_background(settings, record.background_pid)
    # hooks and MCP: only our entries go; the rest of each file stays as it is now
    for agent in record.hooks:
        path = hi.AGENTS[agent].default_path()
        try:
            plan = hi.plan_uninstall(agent, None)
            if plan.changed:
                before = _backups(path)
                if record.files.get(str(path), {}).get("created") and not _meaningful(plan.after):
                    if not dry:
                        path.unlink()
                    print(f"{would} {path}")
                else:
                    if not dry:
                        hi.apply(plan)
                        _remove_own_backup(path, before)
                    print(f"{would} our hooks from {path}")
        except hi.InstallError as exc:
            kept.append(f"{path} ({exc})")
    for client in record.mcp:
        try:
            mplan = mi.plan_uninstall(client, data_dir=data_dir)
            if mplan.changed:
                before = _backups(mplan.path)
                if not dry:
                    mi.apply(mplan)
                    _remove_own_backup(mplan.path, before)
                print(
                    f"{would} {mplan.path}"
                    if mplan.delete
                    else f"{would} our MCP server from {mplan.path}"
                )
            elif mplan.notes and mplan.path.exists() and mi.read_entry(client, mplan.path):
                kept.append(f"{mplan.path}: " + "; ".join(mplan.notes))
        except mi.InstallError as exc:
            kept.append(f"{client} ({exc})")
    # the sanitizer's compiled rule databases: a cache outside the data directory
    for cached in rulescan.kept_files():
        if not dry:
            with contextlib.suppress(OSError):
                os.unlink(cached)
        print(f"{would} {cached}")
    if not dry:
        with contextlib.suppress(OSError):
            os.rmdir(rulescan.cache_folder())  # only when nothing else is in it
    if dry:
        for k in kept:
            print(f"would keep: {k}")
        print(f"(dry run: nothing was changed; the data directory {data_dir} stays either way)")
        return 0
    # a harness file setup created and our removals left empty (`{}`) goes too: the next
    # setup would take it for an installed harness
    for key, info in record.files.items():
        p = Path(key)
        if info.get("created") and p.is_file() and _left_empty(p):
            p.unlink()
            print(f"removed {p} (nothing left in it)")
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


def _left_empty(path: Path) -> bool:
    """True for a harness settings file holding nothing: blank, or JSON with only empty
    tables (``{}``, ``{"hooks": {}}``)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    if not text.strip():
        return True
    if path.suffix != ".json":
        return False
    try:
        obj = json.loads(text)
    except ValueError:
        return False
    return isinstance(obj, dict) and _holds_nothing(obj)


def _holds_nothing(v: Any) -> bool:
    if isinstance(v, dict):
        return all(_holds_nothing(x) for x in v.values())
    if isinstance(v, list):
        return all(_holds_nothing(x) for x in v)
    return v is None or v == ""


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


def register(sub: Any) -> None:
    """Add ``uninstall`` to the ``wiki-memory`` parser."""
    u = add_command(
        sub,
        "uninstall",
        cmd_uninstall,
        "remove what setup added (keeps the data directory)",
        description="Undo what `wiki-memory setup` recorded in <data dir>/setup.json: stop and "
        "remove the service, take our hooks and MCP entries out of each harness's "
        "files (removing files setup created that are left empty), and remove the "
        "folders setup made. Files you changed since are kept and named. Your pages, "
        "their history and the token stay in the data directory.",
    )
    add_flag(u, "--dry-run", "say what would go; change nothing")
