"""The brief of a repository the server has not seen yet is of the folder its events
will go to: a second ``api`` with an origin is ``api-<owner>``, as capture files it
(docs/hooks.md, "A project is its repository")."""

from __future__ import annotations

from pathlib import Path

import pytest
from appkit import AppServer

pytestmark = pytest.mark.fast

B, C = "root:" + "2" * 40, "root:" + "3" * 40


def test_a_new_repositorys_brief_and_its_events_agree_on_its_folder(tmp_path: Path) -> None:
    with AppServer(tmp_path / "data") as srv:
        first = {"harness": "claude-code", "event": "UserPromptSubmit", "session_id": "s-job",
                 "project": "api", "project_from": "git", "repo_id": B,
                 "repo_origin": "git.example/acme/api",
                 "payload": {"prompt": "JOB-ONLY-MARKER"}}  # fmt: skip
        assert srv.post("/v1/observations", first).status_code == 202
        ask = {"harness": "claude-code", "session_id": "s-hobby", "project": "api",
               "repo_id": C, "repo_origin": "github.example/dev/api"}  # fmt: skip
        r = srv.post("/v1/brief", ask)
        # nothing there yet (the hook shows no brief on a 404), and never the first api's
        assert r.status_code == 404, r.text
        assert "'api-dev'" in r.json()["message"] and "JOB-ONLY-MARKER" not in r.text
        ev = {**first, "session_id": "s-hobby", "repo_id": C,
              "repo_origin": "github.example/dev/api", "payload": {"prompt": "hobby"}}  # fmt: skip
        assert srv.post("/v1/observations", ev).status_code == 202
        assert srv.memory is not None
        assert srv.memory.repos.project_of_id(C) == "api-dev"
