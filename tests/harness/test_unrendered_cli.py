"""``wiki-memory unrendered``: accepted events that never reached a page are listed and a
person discards them, through the running server, audited."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clikit import run_cli_here as run_cli
from hookkit import free_port, wait_until
from serverproc import ServerProcess

pytestmark = pytest.mark.process


def event(name: str, **payload: Any) -> dict[str, Any]:
    payload.update(session_id="sess-stuck", cwd="/home/dev/atlas", hook_event_name=name)
    return {"harness": "claude-code", "project": "atlas", "payload": payload}


def test_events_whose_page_cannot_be_written_are_listed_and_discarded(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with ServerProcess(data, port=free_port()).start() as srv:
        # the project's sessions folder is a file: no page of it can be written
        (data / "wiki" / "projects" / "atlas").mkdir(parents=True)
        (data / "wiki" / "projects" / "atlas" / "sessions").write_text("not a folder\n")
        for ev in (
            event("UserPromptSubmit", prompt="rename the lexer"),
            event("Stop", last_assistant_message="renamed"),
        ):
            r = srv.post("/v1/observations", ev)
            assert r.status_code == 202, r.text

        def listed() -> dict[str, Any]:
            r = run_cli(data, "unrendered", "--json")
            assert r.returncode == 0, r.stderr
            out: dict[str, Any] = json.loads(r.stdout)
            return out

        assert wait_until(lambda: listed()["events"] == 2, 30), listed()
        (row,) = listed()["sessions"]
        assert row["session_id"] == "sess-stuck" and row["page"] is None
        assert row["compile_failed"]["events"] == 2 and row["compile_failed"]["cause"]
        text = run_cli(data, "unrendered")
        assert text.returncode == 0 and "2 unrendered event(s) in 1 session(s)" in text.stdout
        assert "no page (project atlas)" in text.stdout and "compile failing" in text.stdout
        doctor = run_cli(data, "doctor", "--json")
        assert json.loads(doctor.stdout)["unrendered_events"] == 2, doctor.stdout

        short = row["session"][:12]
        bad = run_cli(data, "unrendered", "--discard", "nosuchsession")
        assert bad.returncode == 4 and "no session" in bad.stderr, bad
        done = run_cli(data, "unrendered", "--discard", short)
        assert done.returncode == 0, done.stderr
        assert "discarded 2 event(s)" in done.stdout and "spool dropped" in done.stdout
        assert listed() == {"sessions": [], "events": 0}
        after = run_cli(data, "unrendered")
        assert "no unrendered events" in after.stdout
        assert not list((data / "spool").glob(f"{row['session']}.*"))
        audit = srv.get("/v1/audit").json()["lines"]
        (line,) = [
            a for a in audit if a.get("op") == "unrendered.discard" and a.get("result") == "ok"
        ]
        assert line["target"] == row["session"] and line["events"] == 2
