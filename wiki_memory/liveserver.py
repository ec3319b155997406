"""Which server a data directory's clients may talk to: the one its ``server.json`` names
while that server is alive and listening. Never a default address.

The owner's token in ``<data_dir>/auth/owner.token`` belongs to the server of that data
directory, and that server's address is known only from the data directory itself: the
server that holds the data directory's lock writes ``server.json``
(:func:`server_record`), with ``listening`` false until its port is bound and true from
then on, and removes it when it stops. A missing file, a process that is gone or is not
this user's, a pid reused by another process (the kernel's start time of the pid differs
from the recorded one, where ``/proc`` tells), an address that is not ``http(s)://``, or a
server still binding its port, all mean "no server": the hook keeps its events in the
outbox (the server drains them when it starts) and the CLI and the MCP bridge say that
no server runs. A port that a stopped or killed server used may be held by anything by
now (another store, another user's process); nothing is sent there.

Standard library only, and cheap: the hook imports it under ``python -S`` on every event
(one small file read, one ``kill(pid, 0)``, one read of ``/proc/<pid>/stat``; no
``typing``, which the hook does not load otherwise).
"""

from __future__ import annotations

import json
import os
import time

INFO_FILE = "server.json"


def process_start(pid: int) -> str | None:
    """When process ``pid`` started, as the kernel counts it (Linux: field 22 of
    ``/proc/<pid>/stat``, clock ticks since boot), or None where that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()  # the name may hold spaces and ")"
    return fields[19].decode("ascii", "replace") if len(fields) > 19 else None


def server_record(
    pid: int, address: str, listening: bool, facts: dict[str, object] | None = None
) -> dict[str, object]:
    """What a server writes into ``server.json``; ``facts``: settings its clients report
    as the running server's (``vectors``), not their own shell's."""
    return {
        **(facts or {}),
        "pid": pid,
        "address": address,
        "started": time.time(),
        "process_start": process_start(pid),
        "listening": listening,
    }


def read_record(data_dir: str | os.PathLike[str]) -> dict[str, object] | None:
    """``server.json`` of ``data_dir`` as written, or None (missing, unreadable, not an
    object)."""
    try:
        with open(os.path.join(data_dir, INFO_FILE), "rb") as f:
            info = json.loads(f.read())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def _alive_and_ours(pid: int) -> bool:
    if os.name == "nt":  # pragma: no cover - os.kill would end the process there
        return True
    try:
        os.kill(pid, 0)
    except OSError:  # gone, or another user's process: never this data directory's server
        return False
    return True


def live_server(data_dir: str | os.PathLike[str]) -> dict[str, object] | None:
    """``server.json`` of ``data_dir`` when the server it names is running and listening
    (see the module's doc), else None."""
    info = read_record(data_dir)
    if info is None:
        return None
    pid, address = info.get("pid"), info.get("address")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    if not isinstance(address, str) or not address.startswith(("http://", "https://")):
        return None
    if info.get("listening") is False or not _alive_and_ours(pid):
        return None
    recorded = info.get("process_start")
    if recorded is not None and process_start(pid) != recorded:
        return None  # the pid now belongs to another process
    return info


def live_address(data_dir: str | os.PathLike[str]) -> str | None:
    """The ``http(s)://host:port`` of the server running on ``data_dir``, or None."""
    info = live_server(data_dir)
    return str(info["address"]) if info is not None else None
