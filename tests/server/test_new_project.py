"""A fresh install can start a project by writing (docs/api.md "New projects").

An unknown name never becomes a project by itself (a typo cannot make one); the 404 says
how to create it and never tells the owner "your projects: none yet" as if they could
not read. A write creates the project when the caller asks (``create_project: true``)
and may create projects, or when it sends its working directory's repository id, which
files the write under that repository's project: a name alone never reaches another
repository's project.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from appkit import AppServer

pytestmark = pytest.mark.fast

ROOT_A = "root:" + "a" * 40
ROOT_B = "root:" + "b" * 40


def _as(srv: AppServer, token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_the_owner_is_told_how_to_start_a_project_and_starts_it(tmp_path: Path) -> None:
    with AppServer(tmp_path / "data") as srv:
        r = srv.post("/v1/remember", {"text": "deploys run on Fridays", "project": "atlas"})
        assert r.status_code == 404, r.text
        body = r.json()
        assert body["error"] == "unknown_project" and body["field"] == "project"
        assert "pass create_project: true (CLI: --new-project) to create it" in body["message"]
        assert "none yet" not in body["message"] and "may read" not in body["message"]
        assert "there are no projects yet" in body["message"]
        assert not (srv.data_dir / "wiki" / "projects" / "atlas").exists()
        nameless = srv.post("/v1/remember", {"text": "deploys run on Fridays"})
        assert nameless.status_code == 400 and nameless.json()["field"] == "project"
        assert nameless.json()["message"].endswith("; there are no projects yet")

        made = srv.post(
            "/v1/remember",
            {"text": "deploys run on Fridays", "project": "atlas", "create_project": True},
        )
        assert made.status_code == 201, made.text
        assert made.json()["path"].startswith("projects/atlas/notes/")
        h = srv.post("/v1/handoffs", {"title": "wire the deploy job", "project": "borealis"}).json()
        assert h["error"] == "unknown_project" and "create_project" in h["message"]
        h2 = srv.post(
            "/v1/handoffs",
            {"title": "wire the deploy job", "project": "borealis", "create_project": True},
        )
        assert h2.status_code == 201, h2.text
        assert h2.json()["handoff"]["project"] == "borealis"

        # a typo still creates nothing: it is told the close name
        typo = srv.post("/v1/remember", {"text": "x", "project": "atlsa"}).json()
        assert typo["error"] == "unknown_project" and "did you mean atlas?" in typo["message"]
        assert typo["projects"] == ["atlas", "borealis"]
        assert sorted(p.name for p in (srv.data_dir / "wiki" / "projects").iterdir()) == [
            "atlas",
            "borealis",
        ]
        bad = srv.post("/v1/remember", {"text": "x", "project": "q", "create_project": "yes"})
        assert bad.status_code == 400 and bad.json()["field"] == "create_project"


def test_who_may_create_a_project_by_writing(tmp_path: Path) -> None:
    with AppServer(tmp_path / "data") as srv:
        assert srv.post(
            "/v1/remember", {"text": "owner's", "project": "atlas", "create_project": True}
        ).is_success
        bob = _as(srv, srv.token_for("bob", role="member"))
        rae = _as(srv, srv.token_for("rae", role="reader"))
        # a member may create: it gets a write grant on the new project, and reads it
        r = srv.post(
            "/v1/remember",
            {"text": "bob's fact", "project": "bobs", "create_project": True},
            headers=bob,
        )
        assert r.status_code == 201, r.text
        listed = srv.get("/v1/pages", params={"project": "bobs"}, headers=bob).json()
        assert [p["path"] for p in listed["pages"]] == [r.json()["path"]]
        # a name taken by a project the member may not read is not created over it
        taken = srv.post(
            "/v1/remember",
            {"text": "into atlas", "project": "atlas", "create_project": True},
            headers=bob,
        )
        assert taken.status_code == 404 and taken.json()["error"] == "unknown_project"
        assert "its name is taken" in taken.json()["message"]
        assert "atlas" not in taken.json()["projects"]
        # a reader creates none
        no = srv.post(
            "/v1/remember", {"text": "r", "project": "rp", "create_project": True}, headers=rae
        )
        assert no.status_code == 403 and no.json()["grant"].startswith("project creation")
        assert not (srv.data_dir / "wiki" / "projects" / "rp").exists()
        # without create_project a member is told it may create it
        hint = srv.post("/v1/remember", {"text": "b", "project": "bobs2"}, headers=bob).json()
        assert hint["error"] == "unknown_project" and "create_project" in hint["message"]
        assert "your projects: bobs" in hint["message"]


def test_members_create_none_when_creation_is_reserved_to_admins(tmp_path: Path) -> None:
    with AppServer(tmp_path / "data", project_creation="admins") as srv:
        bob = _as(srv, srv.token_for("bob", role="member"))
        r = srv.post(
            "/v1/handoffs",
            {"title": "t", "project": "bobs", "create_project": True},
            headers=bob,
        )
        assert r.status_code == 403, r.text
        assert r.json()["grant"] == "project creation (reserved to admins)"
        hint = srv.post("/v1/remember", {"text": "b", "project": "bobs"}, headers=bob).json()
        assert "create_project" not in hint["message"]  # not a way open to bob
        admin = _as(srv, srv.token_for("ada", role="admin"))
        ok = srv.post(
            "/v1/handoffs",
            {"title": "t", "project": "adas", "create_project": True},
            headers=admin,
        )
        assert ok.status_code == 201, ok.text


def _index_meta(srv: AppServer, project: str) -> str:
    return (srv.data_dir / "wiki" / "projects" / project / "index.md").read_text()


def test_a_repository_id_files_the_write_under_its_repositorys_project(tmp_path: Path) -> None:
    with AppServer(tmp_path / "data") as srv:
        first: Any = srv.post(
            "/v1/remember", {"text": "api uses port 8080", "project": "api", "repo_id": ROOT_A}
        )
        assert first.status_code == 201, first.text
        assert first.json()["path"].startswith("projects/api/notes/")
        assert srv.memory is not None
        srv.memory.writer.flush()
        assert ROOT_A in _index_meta(srv, "api")
        # another repository with the same folder name: its own project, never "api"
        other = srv.post(
            "/v1/handoffs", {"title": "fix the build", "project": "api", "repo_id": ROOT_B}
        )
        assert other.status_code == 201, other.text
        assert other.json()["handoff"]["project"] == "api-2"
        # the first repository, renamed on disk: still its project
        moved = srv.post(
            "/v1/remember",
            {"text": "api moved folder", "project": "api-renamed", "repo_id": ROOT_A},
        )
        assert moved.json()["path"].startswith("projects/api/notes/"), moved.text
        bad = srv.post("/v1/remember", {"text": "x", "project": "api", "repo_id": "root: x"})
        assert bad.status_code == 400 and bad.json()["field"] == "repo_id"
