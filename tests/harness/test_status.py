"""``wiki-memory status --json`` with the server up, down, and with commits stalled
(docs/operations.md, "Status and doctor")."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from clikit import run_in_process
from dulwich.repo import Repo
from gitkit import take_lock
from serverproc import ServerProcess
from support import cli_as, committed, home_env, make_memory, wait_for

ENV = {"WIKI_MEMORY_COMMIT_DELAY_SECONDS": "0.05", "WIKI_MEMORY_IDLE_CHECK_SECONDS": "1"}
#: a commit waits 0.5 s for a lock and a failed one is tried again 0.5 s later (5 s and
#: 5 s by default; the recovery while stalled every 3 s, 30 s by default)
STALL_ENV = {
    **ENV,
    "WIKI_MEMORY_GIT_LOCK_WAIT_SECONDS": "0.5",
    "WIKI_MEMORY_COMMIT_RETRY_SECONDS": "0.5",
    "WIKI_MEMORY_STALL_RECOVER_SECONDS": "3",
}


def status(data: Path, home: Path) -> tuple[int, dict[str, Any]]:
    """``wiki-memory status --json`` as ``home``'s user runs it, in this process (polled:
    a process each look would cost a second of start-up; the text form below, once the
    server is down, runs as a process)."""
    r = run_in_process(["--data-dir", str(data), "status", "--json"], home_env(home))
    assert r.stdout, r.stderr
    return r.returncode, json.loads(r.stdout)


def put(srv: ServerProcess, path: str, text: str) -> None:
    r = httpx.put(
        srv.url + "/v1/pages/" + quote(path), content=text.encode(), headers=srv.headers, timeout=60
    )
    assert r.status_code == 201, r.text


@pytest.mark.process
def test_status_with_the_server_up_then_down(tmp_path: Path) -> None:
    data = tmp_path / "data"
    home = tmp_path / "home"
    with ServerProcess(data, env=ENV) as srv:
        put(srv, "notes/a.md", "# a\n")
        wait_for(lambda: "notes/a.md" in committed(data / "wiki"), 30, "the commit")
        r = httpx.post(
            srv.url + "/v1/observations",
            json={"harness": "codex", "event": "UserPromptSubmit", "session_id": "s-open"}
            | {"cwd": "/x/proj", "payload": {"prompt": "hello"}},
            headers=srv.headers,
        )
        assert r.status_code == 202
        rc, st = status(data, home)
        assert rc == 0 and st["ok"], st
        server = st["server"]
        assert server["running"] and server["reachable"]
        assert server["pid"] == srv.proc.pid
        assert server["address"] == srv.url
        assert server["version"] and 0 <= server["uptime_seconds"] < 600
        assert st["data_dir"] == str(data)
        assert st["pages"] == 1 and st["open_sessions"] == 1
        assert st["outbox"] == {"queued": 0, "dropped": 0}
        assert st["commits"]["ok"] is True and st["commits"]["stalled"] is False
        assert 0 <= st["last_commit"]["age_seconds"] < 600
        assert st["index"] == {"pages": 1, "lag": 0}
        assert st["watcher"] is True
        assert st["service"]["installed"] is False
    rc, st = status(data, home)
    assert rc == 1 and not st["ok"]
    assert st["server"] == {"running": False, "reachable": False}
    assert st["commits"] == {"ok": None, "stalled": None} and st["watcher"] is None
    assert st["last_commit"]["sha"] and st["pages"] == 1
    # the text form says the same
    text = cli_as(home_env(home), "--data-dir", str(data), "status")
    assert text.returncode == 1 and "NOT running" in text.stdout


@pytest.mark.process
def test_status_with_commits_stalled(tmp_path: Path) -> None:
    """A stall is declared at the second failed commit in a row. The server retries what
    failed (here every 0.5 s, each try waiting 0.5 s for the lock; STALL_ENV), and the
    test writes another page every 2 s to fail again sooner, and waits generously."""
    data = tmp_path / "data"
    home = tmp_path / "home"
    with ServerProcess(data, env=STALL_ENV) as srv:
        put(srv, "notes/first.md", "# first\n")
        wait_for(lambda: "notes/first.md" in committed(data / "wiki"), 30, "first commit")
        lock = take_lock(data / "wiki" / ".git" / "index.lock")
        put(srv, "notes/second.md", "# second\n")
        writes = {"n": 2, "at": time.monotonic()}

        def stalled() -> bool:
            if status(data, home)[1]["commits"]["stalled"]:
                return True
            if time.monotonic() - writes["at"] > 2:  # after the last try's 0.5 s lock wait
                writes["n"] += 1
                put(srv, f"notes/page-{writes['n']}.md", f"# page {writes['n']}\n")
                writes["at"] = time.monotonic()
            return False

        wait_for(stalled, 240, "status sees the stall", interval=0.5)
        rc, st = status(data, home)
        assert rc == 1 and not st["ok"]
        assert st["server"]["running"] and st["server"]["reachable"]
        assert st["commits"]["ok"] is False and "lock" in st["commits"]["cause"]
        assert st["commits"]["since"]
        text = run_in_process(["--data-dir", str(data), "status"], home_env(home)).stdout
        assert "STALLED" in text
        lock.unlink()
        wait_for(lambda: not status(data, home)[1]["commits"]["stalled"], 240, "commits resume")


def remote_line(settings: Any) -> dict[str, Any]:
    """A status line as a feature would register it (used by the test below)."""
    return {"remotes": 2, "data_dir": str(settings.data_dir)}


def failing_line(settings: Any) -> None:
    raise OSError("remote unreachable")


@pytest.mark.process
def test_a_status_line_registers_with_one_line(tmp_path: Path, capsys) -> None:
    """A feature adds its status line with one ``register_status`` call (as sync does);
    a line that fails says so, and the rest of the status still prints."""
    import argparse

    from wiki_memory.cli import status
    from wiki_memory.config import load_settings

    before = dict(status.STATUS_LINES)
    try:
        status.register_status("remote-example", f"{__name__}:remote_line")
        status.register_status("broken", f"{__name__}:failing_line")
        rep = status.status_report(load_settings(tmp_path / "data"))
        status.cmd_status(argparse.Namespace(data_dir=str(tmp_path / "data"), json=False))
    finally:
        status.STATUS_LINES.clear()
        status.STATUS_LINES.update(before)
    assert rep["remote-example"] == {"remotes": 2, "data_dir": str(tmp_path / "data")}
    assert rep["broken"] == {"error": "OSError: remote unreachable"}
    out = capsys.readouterr().out
    assert '"remotes": 2' in out
    assert "remote-example" not in status.status_report(load_settings(tmp_path / "data"))


@pytest.mark.process
def test_status_has_a_sync_line_once_a_remote_is_configured(tmp_path: Path) -> None:
    from wiki_memory.cli import status
    from wiki_memory.wiki import replicate

    m = make_memory(tmp_path / "data", watch=False)
    m.stop()
    settings = m.settings
    assert "sync" not in status.status_report(settings)  # no remote: nothing to say
    hub = tmp_path / "hub.git"
    Repo.init_bare(str(hub), mkdir=True)
    replicate.add_remote(settings.wiki_dir, "hub", str(hub))
    assert status.status_report(settings)["sync"] == {
        "last_success": None,
        "last_error": None,
        "failing_since": None,
        "stopped": [],
        "conflicts": 0,
        "refused": 0,
    }
