"""One Host rule on every route (docs/team-server.md, "Allowed hosts"): a LAN bind is
reached through the machine's own address out of the box, and a foreign Host header gets
421 on ``/v1`` (JSON), ``/mcp`` and the web view."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest
from support import MCP_HEADERS, own_address

from tests.serverproc import ServerProcess

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


@pytest.mark.process
def test_lan_bind_own_address_works_and_a_foreign_host_gets_421(tmp_path: Path) -> None:
    own = own_address()
    if own is None:
        pytest.skip("this machine has no non-loopback address to reach itself by")
    with ServerProcess(tmp_path / "d", args=["--host", "0.0.0.0", "--insecure-http"]) as srv:
        base = f"http://{own}:{srv.port}"
        h = srv.headers
        r = httpx.post(base + "/v1/recall", json={"query": "x"}, headers=h, timeout=60)
        assert r.status_code == 200, r.text
        assert httpx.get(base + "/pages", headers=h, timeout=60).status_code == 200
        assert (
            httpx.post(
                base + "/mcp", json=INIT, headers={**h, **MCP_HEADERS}, timeout=60
            ).status_code
            == 200
        )
        evil = {**h, "Host": f"evil.example:{srv.port}"}
        r = httpx.get(base + "/v1/pages", headers=evil, timeout=60)
        assert r.status_code == 421
        assert r.json()["error"] == "wrong_host" and "allowed_hosts" in r.json()["message"]
        # before the token is looked at: no token gives 421 too, not 401
        r = httpx.get(base + "/v1/pages", headers={"Host": "evil.example"}, timeout=60)
        assert r.status_code == 421
        r = httpx.post(base + "/mcp", json=INIT, headers={**evil, **MCP_HEADERS}, timeout=60)
        assert r.status_code == 421
        r = httpx.get(base + "/pages", headers=evil, timeout=60)
        assert r.status_code == 421 and "Misdirected" in r.text


@pytest.mark.process
def test_allowed_hosts_setting_and_its_old_name(tmp_path: Path) -> None:
    env = {"WIKI_MEMORY_ALLOWED_HOSTS": "wiki.lan", "WIKI_MEMORY_MCP_ALLOWED_HOSTS": "old.lan"}
    with ServerProcess(tmp_path / "d", env=env) as srv:
        for host, status in [
            ("wiki.lan", 200),
            (f"WIKI.LAN:{srv.port}", 200),
            ("old.lan", 200),
            (f"localhost:{srv.port}", 200),
            ("other.lan", 421),
            # a loopback bind does not answer to the machine's own names
            (socket.gethostname(), 421),
        ]:
            r = httpx.get(srv.url + "/v1/pages", headers={**srv.headers, "Host": host})
            assert r.status_code == status, (host, r.text)
