"""The one rule for where a data directory's clients send its token: the address its
live server wrote in ``server.json``, never a default port and never an address a
stopped or killed server left behind."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from wiki_memory import liveserver
from wiki_memory.cli.common import CliError, server_client
from wiki_memory.datadir import ServerLock, server_address
from wiki_memory.harness.outbox import load_hooklib
from wiki_memory.liveserver import process_start, server_record
from wiki_memory.mcp.bridge import resolve_target

pytestmark = pytest.mark.fast


def write(data: Path, info: dict[str, object]) -> None:
    data.mkdir(parents=True, exist_ok=True)
    (data / "server.json").write_text(json.dumps(info))


#: a pid no process has (above any kernel's pid_max): a server that is gone
DEAD_PID = 2**30


#: the hook's own copy of the rule, used when it cannot import wiki_memory.liveserver
builtin = load_hooklib()._live_address_builtin


def live_address(data_dir: Path) -> str | None:
    """The rule's answer, checked to be the hook's built-in copy's answer too."""
    addr = liveserver.live_address(data_dir)
    assert builtin(str(data_dir)) == addr
    return addr


def test_only_a_live_listening_server_has_an_address(tmp_path: Path) -> None:
    data = tmp_path / "data"
    me = os.getpid()
    url = "http://127.0.0.1:18765"
    assert live_address(data) is None  # no server.json: away, not a default port
    write(data, server_record(me, url, listening=True))
    assert live_address(data) == url == server_address(data)
    # still binding its port
    write(data, server_record(me, url, listening=False))
    assert live_address(data) is None
    # left by a kill -9: the pid is gone
    write(data, server_record(DEAD_PID, url, listening=True) | {"process_start": None})
    assert live_address(data) is None
    # the pid was reused by another process: it started at another time
    if process_start(me) is not None:
        write(data, server_record(me, url, listening=True) | {"process_start": "1"})
        assert live_address(data) is None
    # no pid, no address, an address that is not http(s), a file that is not JSON
    for info in ({"address": url}, {"pid": me}, {"pid": me, "address": "/tmp/sock"}):
        write(data, info)
        assert live_address(data) is None
    (data / "server.json").write_text("{")
    assert live_address(data) is None
    # a server.json from before ``listening`` and ``process_start`` were written
    write(data, {"pid": me, "address": url, "started": 0})
    assert live_address(data) == url


def test_the_lock_marks_its_address_listening_and_removes_it_at_stop(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    lock = ServerLock(data)
    lock.acquire("http://127.0.0.1:18766")
    try:
        assert server_address(data) is None  # written, but the port is not bound yet
        lock.mark_listening()
        assert server_address(data) == "http://127.0.0.1:18766"
    finally:
        lock.release()
    assert server_address(data) is None and not (data / "server.json").exists()


def test_cli_and_bridge_send_the_token_nowhere_without_a_live_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k in list(os.environ):
        if k.startswith("WIKI_MEMORY_"):
            monkeypatch.delenv(k)
    data = tmp_path / "data"
    (data / "auth").mkdir(parents=True)
    (data / "auth" / "owner.token").write_text("owner-token\n")
    write(data, server_record(DEAD_PID, "http://127.0.0.1:18767", listening=True))
    args = argparse.Namespace(data_dir=str(data), url=None, token_file=None)
    with pytest.raises(CliError, match="none is running on"):
        server_client(args)
    assert resolve_target(args) == (None, "owner-token")
    write(data, server_record(os.getpid(), "http://127.0.0.1:18767", listening=True))
    assert server_client(args)[0] == "http://127.0.0.1:18767"
    assert resolve_target(args) == ("http://127.0.0.1:18767", "owner-token")
