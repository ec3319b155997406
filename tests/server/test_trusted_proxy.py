"""Behind a reverse proxy (docs/team-server.md, "TLS"): ``X-Forwarded-For`` names the
client in the audit log only when the connection comes from a trusted proxy."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import httpx
import pytest

from tests.serverproc import ServerProcess


def _alias_works() -> bool:
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.2", 0))
        return True
    except OSError:
        return False


@pytest.mark.process
@pytest.mark.skipif(not _alias_works(), reason="127.0.0.2 is not usable here")
def test_forwarded_address_only_from_a_trusted_proxy(tmp_path: Path) -> None:
    env = {"WIKI_MEMORY_TRUSTED_PROXIES": "127.0.0.2"}
    with ServerProcess(tmp_path / "d", env=env) as srv:
        fwd = {**srv.headers, "X-Forwarded-For": "10.9.8.7"}
        proxy = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"))
        with proxy:
            r = proxy.put(srv.url + "/v1/pages/notes/p.md", content="# p\n", headers=fwd)
            assert r.status_code == 201, r.text
        # the same header from an address that is not a trusted proxy is ignored
        r = httpx.put(srv.url + "/v1/pages/notes/q.md", content="# q\n", headers=fwd)
        assert r.status_code == 201, r.text
        lines = [
            json.loads(x) for x in (srv.data_dir / "logs" / "audit.jsonl").read_text().splitlines()
        ]
        by_target = {x["target"]: x for x in lines if x["op"] == "page.write"}
        assert by_target["notes/p.md"]["address"] == "10.9.8.7"
        assert by_target["notes/q.md"]["address"] == "127.0.0.1"
