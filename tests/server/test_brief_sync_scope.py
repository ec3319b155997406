"""The brief's sync warnings are scoped like everything else in it: a member is told of
the conflict copies and refused hub entries in places they may see, and of nothing
elsewhere, not even as a count (docs/git.md, "Conflict copies")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from appkit import AppServer

from wiki_memory.wiki import replicate

pytestmark = pytest.mark.fast

PAGE = "---\nid: {id}\ntitle: Deploy\n---\n# Deploy\n\nShip it from the release box.\n"
COPY_P = "projects/p/notes/deploy.conflict-origin-1a2b3c4.md"
COPY_Q = "projects/q/notes/deploy.conflict-origin-5d6e7f8.md"


def brief_warnings(srv: AppServer, headers: dict[str, str]) -> list[str]:
    r = srv.post("/v1/brief", {"harness": "claude-code", "project": "p"}, headers=headers)
    assert r.status_code == 200, r.text
    return [line for line in r.json()["text"].splitlines() if "Warning" in line]


def test_a_member_is_told_of_conflicts_and_refusals_only_where_they_may_read(
    tmp_path: Path,
) -> None:
    with AppServer(tmp_path / "data") as srv:
        for project, copy, pid in (("p", COPY_P, "dp"), ("q", COPY_Q, "dq")):
            for path in (f"projects/{project}/notes/deploy.md", copy):
                r = srv.client.put(
                    srv.url + "/v1/pages/" + path, content=PAGE.format(id=pid), headers=srv.headers
                )
                assert r.status_code in (200, 201), r.text
        wiki = srv.memory.wiki_dir
        replicate.add_remote(wiki, "hub", str(tmp_path / "hub.git"))
        state: dict[str, Any] = {"remotes": {"hub": {}}, "conflicts": [COPY_P, COPY_Q]}
        (wiki / ".git" / "wiki-memory-sync.json").write_text(json.dumps(state))
        refused = [
            {"remote": "hub", "path": "people/bob/secret-plan.md", "blob": "1" * 40,
             "reason": "personal", "first_seen": "2026-12-01T00:00:00Z"},
            {"remote": "hub", "path": "projects/p/notes/big.md", "blob": "2" * 40,
             "reason": "too large", "first_seen": "2026-12-01T00:00:00Z"},
            {"remote": "hub", "path": "projects/q/notes/huge.md", "blob": "3" * 40,
             "reason": "too large", "first_seen": "2026-12-01T00:00:00Z"},
        ]  # fmt: skip
        (wiki / ".git" / "wiki-memory-refused.json").write_text(json.dumps({"refused": refused}))

        owner = brief_warnings(srv, srv.headers)
        assert any("2 sync conflict copy(ies)" in line for line in owner), owner
        # a personal path is its person's alone, the owner's brief included
        assert any("2 incoming file(s) refused" in line for line in owner), owner
        assert not any("bob" in line for line in owner), owner

        sam = {"Authorization": f"Bearer {srv.token_for('sam', role='member', projects=('p',))}"}
        seen = brief_warnings(srv, sam)
        assert any("1 sync conflict copy(ies)" in line for line in seen), seen
        refusal = [line for line in seen if "refused" in line]
        assert len(refusal) == 1 and "1 incoming file(s)" in refusal[0], seen
        assert "big.md" in refusal[0] and "bob" not in refusal[0] and "huge" not in refusal[0]
        nobody = {"Authorization": f"Bearer {srv.token_for('nora', role='member')}"}
        r = srv.post("/v1/brief", {"harness": "claude-code", "cwd": "/tmp"}, headers=nobody)
        assert r.status_code == 200, r.text
        assert "conflict" not in r.json()["text"] and "refused" not in r.json()["text"]
