"""The server never guesses an event's project from its own disk: an event's ``cwd``
names a folder on the sender's machine, so a configuration file or a repository the
server happens to see at that path decides nothing (the project comes from the sender's
``project`` and ``repo_id``; docs/hooks.md "Which project")."""

from __future__ import annotations

from pathlib import Path

import pytest
from appkit import AppServer


def _folder_the_server_sees(tmp_path: Path) -> Path:
    """A repository on the server's own disk whose configuration names 'elsewhere'."""
    repo = tmp_path / "srv-side" / "checkout"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / ".wiki-memory.toml").write_text('project = "elsewhere"\n')
    (repo / "src").mkdir()
    return repo


@pytest.mark.fast
def test_an_event_with_only_a_cwd_is_not_resolved_on_the_servers_disk(tmp_path: Path) -> None:
    repo = _folder_the_server_sees(tmp_path)
    with AppServer(tmp_path / "data") as srv:
        r = srv.post(
            "/v1/observations",
            {
                "harness": "claude-code",
                "event": "UserPromptSubmit",
                "session_id": "s-http",
                "cwd": str(repo / "src"),
                "payload": {"prompt": "NO-GUESS-MARKER from an http client"},
            },
        )
        assert r.status_code == 202, r.text
        assert srv.memory is not None
        projects = {i.project for i in srv.memory.spool.sessions.values()}
        # the rule for such senders: the last folder of the cwd they sent
        assert projects == {"src"}, projects


@pytest.mark.fast
def test_a_brief_with_only_a_cwd_names_no_project_from_the_servers_disk(
    tmp_path: Path,
) -> None:
    repo = _folder_the_server_sees(tmp_path)
    with AppServer(tmp_path / "data") as srv:
        srv.post(
            "/v1/observations",
            {
                "harness": "claude-code",
                "event": "UserPromptSubmit",
                "session_id": "s-other",
                "project": "elsewhere",
                "payload": {"prompt": "ELSEWHERE-MARKER"},
            },
        )
        r = srv.post(
            "/v1/brief",
            {"harness": "claude-code", "session_id": "s-new", "cwd": str(repo)},
        )
        assert r.status_code == 200, r.text
        assert r.json()["project"] is None
        assert "ELSEWHERE-MARKER" not in r.json()["text"]
        # the session's own current project still counts
        r = srv.post(
            "/v1/brief",
            {"harness": "claude-code", "session_id": "s-other", "cwd": str(repo)},
        )
        assert r.json()["project"] == "elsewhere"
