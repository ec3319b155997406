"""What ``POST /v1/agent-files`` and the brief's ``instruction_files`` refuse, by field
(docs/agent-files.md): the routes' answers, from the app in this process (``appkit``).
The imports through the CLI, the hook and the server process are in test_agent_files.py."""

from __future__ import annotations

from pathlib import Path

from appkit import AppServer


def test_bad_bodies_are_named(tmp_path: Path) -> None:
    srv = AppServer(tmp_path / "data").start()
    try:
        for body, field in (
            ({"files": []}, "files"),
            ({"files": [{"source": "../x.md", "scope": "project", "text": ""}]}, "files"),
            ({"files": [{"source": "~/x.md", "scope": "project", "text": ""}]}, "files"),
            ({"files": [{"source": "CLAUDE.md", "scope": "project", "text": "x"}]}, "project"),
            ({"files": [], "dry_run": "yes"}, "dry_run"),
        ):
            r = srv.post("/v1/agent-files", body)
            assert r.status_code == 400 and r.json()["field"] == field, (body, r.text)
        r = srv.post("/v1/brief", {"project": "x", "instruction_files": "CLAUDE.md"})
        assert r.status_code == 400 and r.json()["field"] == "instruction_files"
    finally:
        srv.stop()
