"""The data directory: layout on first run and the one-server-per-directory lock.

The lock is an OS file lock (``fcntl.flock`` through ``filelock``) on
``<data_dir>/server.lock``; the kernel drops it when the process dies, so a
``kill -9`` needs no clean-up. Beside it, ``server.json`` holds the owner's PID and
address: they name the other process in the error message, and they are the only
address a client of this data directory sends its token to, while that process lives
(:mod:`wiki_memory.liveserver`; a ``server.json`` left by a ``kill -9`` names a dead pid
and is ignored).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from filelock import FileLock, Timeout

from wiki_memory.config import Settings
from wiki_memory.liveserver import live_address, server_record


class DataDirLocked(RuntimeError):
    """Another server holds the data directory's lock. ``holder`` describes it."""

    def __init__(self, data_dir: Path, holder: str) -> None:
        super().__init__(f"another wiki-memory server is running on {data_dir}: {holder}")
        self.holder = holder


def ensure_layout(settings: Settings) -> None:
    """Create ``wiki/``, ``spool/``, ``auth/`` (0700) and ``logs/`` under the data directory.

    The data directory itself is made 0700 (also when it existed with wider modes), so
    nothing inside it (the index and its WAL, logs, spool, git objects) is reachable by
    another account whatever mode a file in it has (docs/team-server.md, "File modes")."""
    settings.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    if settings.data_dir.stat().st_uid == os.getuid():
        os.chmod(settings.data_dir, 0o700)
    for d in (settings.wiki_dir, settings.spool_dir, settings.logs_dir):
        d.mkdir(parents=True, exist_ok=True)
    settings.auth_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(settings.auth_dir, 0o700)


class ServerLock:
    """Holds ``<data_dir>/server.lock`` for the life of a server.

    ``acquire()`` raises :class:`DataDirLocked` at once when another live process holds it.
    """

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.path = data_dir / "server.lock"
        self.info_path = data_dir / "server.json"
        self._lock = FileLock(str(self.path), timeout=0)
        self.address = ""
        #: settings of the server written into ``server.json`` (doctor reports them)
        self.facts: dict[str, object] = {}

    def acquire(self, address: str = "") -> None:
        """Take the lock and write ``server.json`` naming ``address`` as not yet
        listening (clients send nothing there until :meth:`mark_listening`)."""
        try:
            self._lock.acquire()
        except Timeout:
            raise DataDirLocked(self.data_dir, self.holder()) from None
        self.address = address
        self._write(server_record(os.getpid(), address, False, self.facts))

    def mark_listening(self) -> None:
        """The server's port is bound: clients of this data directory may send to it."""
        if self._lock.is_locked:
            self._write(server_record(os.getpid(), self.address, True, self.facts))

    def _write(self, info: dict[str, object]) -> None:
        tmp = self.info_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(info), encoding="utf-8")
        os.replace(tmp, self.info_path)

    def holder(self) -> str:
        """Describe the process named in ``server.json`` (best effort)."""
        try:
            info = json.loads(self.info_path.read_text(encoding="utf-8"))
            return f"pid {info.get('pid')} serving {info.get('address') or '?'}"
        except (OSError, ValueError):
            return "an unknown process"

    def is_held_elsewhere(self) -> bool:
        """True when a live process other than this one holds the lock."""
        if self._lock.is_locked:
            return False
        probe = FileLock(str(self.path), timeout=0)
        try:
            probe.acquire()
        except Timeout:
            return True
        probe.release()
        return False

    def release(self) -> None:
        if self._lock.is_locked:
            try:
                self.info_path.unlink()
            except OSError:
                pass
            self._lock.release()


def server_address(data_dir: Path) -> str | None:
    """The ``http(s)://host:port`` of the server running and listening on ``data_dir``
    (:func:`wiki_memory.liveserver.live_address`), else None: never a default address,
    never one a stopped or killed server left behind."""
    return live_address(data_dir)


class VaultLocked(RuntimeError):
    """Another server (with another data directory) serves this wiki folder."""


class VaultLock:
    """Holds ``<wiki>/.git/wiki-memory-server.lock`` (an OS file lock, like
    :class:`ServerLock`) for the life of a server, so two servers with different data
    directories never serve one vault. The file names the holder's data directory."""

    def __init__(self, wiki_dir: Path) -> None:
        self.path = wiki_dir / ".git" / "wiki-memory-server.lock"
        self.info_path = wiki_dir / ".git" / "wiki-memory-server.json"
        self._lock = FileLock(str(self.path), timeout=0)

    def acquire(self, data_dir: Path) -> None:
        """Take the lock; raises :class:`VaultLocked` naming the other server's data
        directory when another live process holds it."""
        try:
            self._lock.acquire()
        except Timeout:
            try:
                other = json.loads(self.info_path.read_text(encoding="utf-8"))
                holder = f"data directory {other.get('data_dir')} (pid {other.get('pid')})"
            except (OSError, ValueError):
                holder = "an unknown data directory"
            raise VaultLocked(
                f"another wiki-memory server is serving {self.path.parent.parent}: {holder}"
            ) from None
        tmp = self.info_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), "data_dir": str(data_dir)}), "utf-8")
        os.replace(tmp, self.info_path)

    def release(self) -> None:
        if self._lock.is_locked:
            try:
                self.info_path.unlink()
            except OSError:
                pass
            self._lock.release()


def port_holder(host: str, port: int) -> str | None:
    """None when ``host:port`` can be listened on now, else a description of what holds
    it (``pid 123 (python -m http.server)`` when ``/proc`` tells, Linux only)."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            return None
        except OSError as exc:
            reason = exc.strerror or str(exc)
    return f"{reason}; " + (_listener(port) or "held by a process this user cannot see")


def _listener(port: int) -> str | None:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for ln in lines:
            f = ln.split()
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{f[9]}]")
    if not inodes:
        return None
    for pid in (d for d in os.listdir("/proc") if d.isdigit()):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                    return f"held by pid {pid} ({cmd.decode(errors='replace').strip()[:120]})"
            except OSError:
                continue
    return None
