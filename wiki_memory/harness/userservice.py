"""The per-user service that keeps the server running: generated from ``packaging/``.

The unit files live once, in ``packaging/`` (shipped as ``wiki_memory/_packaging``):
``wiki-memory.service`` (systemd user unit), ``wiki-memory-team.service`` (hardened
system unit for a team server) and ``com.wiki-memory.server.plist`` (launchd
LaunchAgent). :func:`render` fills in their ``@FIELD@`` markers; nothing of a unit is
written in code. :func:`install` writes the user unit (or the LaunchAgent) where the
service manager looks for it, :func:`enable_and_start` asks the manager to run it, and
:func:`state` reads back what is installed and enabled (from the files, so it works
where the manager cannot be reached) and whether it runs.

Quoting: systemd's ``ExecStart`` splits words itself (``systemd.syntax(7)``): a word
with anything but ``[A-Za-z0-9_@%+=:,./-]`` is written in double quotes with ``\\`` and
``"`` escaped, ``%`` is doubled (a specifier otherwise) and ``$`` doubled (a variable
otherwise). The plist's arguments are XML-escaped strings, one per ``<string>``.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape as xml_escape

__all__ = [
    "LAUNCHD_LABEL",
    "PACKAGING_DIR",
    "UNIT_NAME",
    "ServiceState",
    "enable_and_start",
    "exec_start_argv",
    "install",
    "kind_for_platform",
    "render",
    "serve_argv",
    "state",
    "stop_and_disable",
    "systemd_quote",
    "unit_path",
]

_PACKAGED = Path(__file__).resolve().parents[1] / "_packaging"
#: the folder holding the unit templates (the installed package's copy, else the checkout's)
PACKAGING_DIR = (
    _PACKAGED if _PACKAGED.is_dir() else Path(__file__).resolve().parents[2] / "packaging"
)
#: the systemd unit's name (user and system)
UNIT_NAME = "wiki-memory.service"
#: the launchd job's label (and the plist's file name without ``.plist``)
LAUNCHD_LABEL = "com.wiki-memory.server"

_TEMPLATES = {
    "user": "wiki-memory.service",
    "system": "wiki-memory-team.service",
    "launchd": "com.wiki-memory.server.plist",
}
_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")


def systemd_quote(word: str) -> str:
    """One ``ExecStart`` word as systemd reads it back (see the module doc)."""
    word = word.replace("%", "%%").replace("$", "$$")
    if _SAFE.fullmatch(word):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def serve_argv(
    python: str,
    data_dir: Path,
    host: str = "127.0.0.1",
    port: int = 8765,
    extra: list[str] | None = None,
) -> list[str]:
    """The command a service runs: ``<python> -m wiki_memory.cli --data-dir D serve
    --host H --port P [extra...]`` (``python``: an absolute interpreter path whose
    environment has wiki-memory installed)."""
    argv = [python, "-m", "wiki_memory.cli", "--data-dir", str(data_dir), "serve"]
    return argv + ["--host", host, "--port", str(port), *(extra or [])]


def render(kind: str, argv: list[str], data_dir: Path) -> str:
    """The text of unit ``kind`` (``user``, ``system`` or ``launchd``) running ``argv``
    for ``data_dir``, from its template in :data:`PACKAGING_DIR`. Raises KeyError for an
    unknown kind, FileNotFoundError when the template is missing."""
    text = (PACKAGING_DIR / _TEMPLATES[kind]).read_text(encoding="utf-8")
    if kind == "launchd":
        args = "\n".join(f"    <string>{xml_escape(a)}</string>" for a in argv)
        fields = {
            "PROGRAM_ARGUMENTS": args,
            "LOG_DIR": xml_escape(str(data_dir / "logs")),
            "DATA_DIR": xml_escape(str(data_dir)),
        }
    else:
        fields = {
            "EXEC_START": " ".join(systemd_quote(a) for a in argv),
            "DATA_DIR": str(data_dir).replace("%", "%%"),
        }
    for name, value in fields.items():
        text = text.replace(f"@{name}@", value)
    return text


def exec_start_argv(unit_text: str) -> list[str]:
    """The words of a rendered systemd unit's ``ExecStart=`` line, unquoted as systemd
    does (the inverse of :func:`systemd_quote` for what :func:`render` writes)."""
    for line in unit_text.splitlines():
        if line.startswith("ExecStart="):
            rest = line[len("ExecStart=") :]
            words = re.findall(r'"((?:[^"\\]|\\.)*)"|(\S+)', rest)
            out = []
            for quoted, bare in words:
                w = re.sub(r"\\(.)", r"\1", quoted) if quoted else bare
                out.append(w.replace("%%", "%").replace("$$", "$"))
            return out
    raise ValueError("no ExecStart= line")


def kind_for_platform(platform: str | None = None) -> str:
    """``launchd`` on macOS, ``user`` (a systemd user unit) elsewhere."""
    return "launchd" if (platform or sys.platform) == "darwin" else "user"


def _home(env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ) if env is None else env
    return Path(env.get("HOME") or Path.home())


def unit_path(kind: str, env: dict[str, str] | None = None) -> Path:
    """Where the user's service file goes: ``$XDG_CONFIG_HOME/systemd/user/`` (default
    ``~/.config``) for systemd, ``~/Library/LaunchAgents/`` for launchd."""
    env = dict(os.environ) if env is None else env
    if kind == "launchd":
        return _home(env) / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"
    config = env.get("XDG_CONFIG_HOME") or str(_home(env) / ".config")
    return Path(config) / "systemd" / "user" / UNIT_NAME


def digest(text: str) -> str:
    """The sha256 (hex) of ``text`` as UTF-8: how setup recognizes a file it wrote."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def install(kind: str, text: str, env: dict[str, str] | None = None) -> tuple[Path, bool]:
    """Write ``text`` as the user's service file (atomically, 0644: the manager reads
    it); returns ``(path, changed)``, unchanged when the file already holds ``text``."""
    path = unit_path(kind, env)
    try:
        if path.read_text(encoding="utf-8") == text:
            return path, False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.wiki-memory-tmp")
    tmp.write_text(text, encoding="utf-8")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return path, True


@dataclass
class ServiceState:
    """What the service manager has of ours: ``installed`` (the file exists), ``ours``
    (its bytes are what setup last wrote, when a digest is given), ``enabled`` (starts at
    login/boot: systemd's ``default.target.wants`` link, or a LaunchAgent file),
    ``active`` (the manager says it runs; None when the manager cannot be asked),
    ``manager`` (``systemd``, ``launchd``, or None when its command is absent)."""

    kind: str
    path: Path
    installed: bool
    enabled: bool
    active: bool | None
    manager: str | None
    ours: bool | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "path": str(self.path),
            "installed": self.installed,
            "enabled": self.enabled,
            "active": self.active,
            "manager": self.manager,
            "ours": self.ours,
        }


def describe(svc: dict[str, Any]) -> str:
    """One line on the service for ``status`` and ``doctor``, about the data directory
    they were asked about (``svc``: :meth:`ServiceState.as_dict` plus ``data_dir``, what
    the unit serves, and ``for_this_data_dir``). A unit installed here that no reachable
    manager runs is said to be so, with why, every time: a reboot stops memory."""
    path = svc["path"]
    if not svc["installed"]:
        return f"{path}: not installed (`wiki-memory setup`)"
    if not svc.get("for_this_data_dir", True):
        return (
            f"{path} serves another data directory ({svc.get('data_dir') or 'unreadable'}), "
            "none serves this one (`wiki-memory setup` here installs one)"
        )
    why = None
    if svc.get("manager") is None or svc.get("active") is None:
        why = "the service manager is not reachable (no login session, a container?)"
    elif not svc.get("active"):
        why = "the unit is inactive"
    if why is not None:
        return f"not run by a service manager ({why}): a reboot stops memory ({path})"
    return f"{path}: installed, " + ("enabled" if svc["enabled"] else "not enabled") + ", running"


def _run(argv: list[str], timeout: float = 20) -> subprocess.CompletedProcess[str] | None:
    """Run a service manager command; None when it is absent or hangs."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None


def state(kind: str, env: dict[str, str] | None = None, want: str | None = None) -> ServiceState:
    """The service's :class:`ServiceState` (``want``: the digest setup recorded)."""
    path = unit_path(kind, env)
    installed = path.is_file()
    ours = None
    if want is not None and installed:
        try:
            ours = digest(path.read_text(encoding="utf-8")) == want
        except OSError:
            ours = False
    if kind == "launchd":
        r = _run(["launchctl", "print", f"gui/{os.getuid()}/{LAUNCHD_LABEL}"])
        return ServiceState(
            kind,
            path,
            installed,
            installed,
            None if r is None else r.returncode == 0 and "state = running" in r.stdout,
            None if r is None else "launchd",
            ours,
        )
    wants = path.parent / "default.target.wants" / UNIT_NAME
    enabled = wants.is_symlink() or wants.exists()
    r = _run(["systemctl", "--user", "is-active", UNIT_NAME])
    active: bool | None = None
    if r is not None and r.stdout.strip() in ("active", "inactive", "failed", "activating"):
        active = r.stdout.strip() in ("active", "activating")
    return ServiceState(
        kind, path, installed, enabled, active, None if r is None else "systemd", ours
    )


def enable_and_start(
    kind: str, restart: bool = False, start: bool = True
) -> tuple[bool, list[str]]:
    """Ask the service manager to start the service at every login and (``start``) now
    (systemd: ``enable``, ``daemon-reload``, then ``start`` or ``restart``; launchd:
    ``bootstrap``, which also starts it). Returns ``(running, notes)``: False when the
    manager is absent or unreachable (no login session, a container), with what it said,
    or when ``start`` is False."""
    notes: list[str] = []
    if kind == "launchd":
        domain = f"gui/{os.getuid()}"
        path = unit_path(kind)
        if not start:
            return False, ["the LaunchAgent starts at the next login"]
        _run(["launchctl", "bootout", f"{domain}/{LAUNCHD_LABEL}"])
        r = _run(["launchctl", "bootstrap", domain, str(path)])
        if r is None:
            return False, ["launchctl is not on PATH"]
        if r.returncode != 0:
            return False, [f"launchctl bootstrap: {(r.stderr or r.stdout).strip()}"]
        return True, notes
    if _run(["systemctl", "--version"]) is None:
        return False, ["systemctl is not on PATH: no systemd here"]
    # enable works on the files even without a running user manager
    r = _run(["systemctl", "--user", "enable", UNIT_NAME])
    if r is not None and r.returncode != 0:
        notes.append(f"systemctl --user enable: {(r.stderr or r.stdout).strip()}")
    r = _run(["systemctl", "--user", "daemon-reload"])
    if r is None or r.returncode != 0:
        said = (r.stderr or r.stdout).strip() if r is not None else "timed out"
        notes.append(f"the systemd user manager is not reachable ({said})")
        return False, notes
    if not start:
        return False, notes
    r = _run(["systemctl", "--user", "restart" if restart else "start", UNIT_NAME])
    if r is None or r.returncode != 0:
        said = (r.stderr or r.stdout).strip() if r is not None else "timed out"
        notes.append(f"systemctl --user start: {said}")
        return False, notes
    return True, notes


def stop_and_disable(kind: str) -> list[str]:
    """Stop the service and stop it starting at login (what the manager said, if it
    refused). The file itself stays: the caller removes it."""
    notes: list[str] = []
    if kind == "launchd":
        r = _run(["launchctl", "bootout", f"gui/{os.getuid()}/{LAUNCHD_LABEL}"])
        if r is not None and r.returncode != 0:
            notes.append(f"launchctl bootout: {(r.stderr or r.stdout).strip()}")
        return notes
    r = _run(["systemctl", "--user", "stop", UNIT_NAME])
    if r is not None and r.returncode != 0:
        notes.append(f"systemctl --user stop: {(r.stderr or r.stdout).strip()}")
    r = _run(["systemctl", "--user", "disable", UNIT_NAME])
    if r is not None and r.returncode != 0:
        notes.append(f"systemctl --user disable: {(r.stderr or r.stdout).strip()}")
    # without systemctl (or if it failed), the link that enables it goes by hand
    wants = unit_path(kind).parent / "default.target.wants" / UNIT_NAME
    if wants.is_symlink():
        wants.unlink()
    return notes
