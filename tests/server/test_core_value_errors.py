"""A bad value a core operation refuses is a 400 that names its field, not a bare
``bad_request`` carrying the operation's internal text."""

from __future__ import annotations

from pathlib import Path

import pytest
from appkit import AppServer

pytestmark = pytest.mark.fast


def test_core_refusals_name_their_field(tmp_path: Path) -> None:
    with AppServer(tmp_path / "data") as srv:
        assert srv.memory is not None
        srv.memory.write_page("projects/p/notes/a.md", b"# a\n", user="alice", message="w")
        r = srv.post(
            "/v1/handoffs",
            {"project": "p", "title": "t", "expires": "2001-01-01T00:00:00Z"},
        )
        assert r.status_code == 400 and r.json().get("field") == "expires", r.text
        r = srv.post("/v1/handoffs", {"project": "p", "title": "t", "visibility": "secret"})
        assert r.status_code == 400 and r.json().get("field") == "visibility", r.text
        r = srv.post("/v1/handoffs", {"project": "p", "title": "t", "to": "a b/c"})
        assert r.status_code == 400 and r.json().get("field") == "to", r.text
        r = srv.get("/v1/handoffs", params={"status": "sleeping"})
        assert r.status_code == 400 and r.json().get("field") == "status", r.text
