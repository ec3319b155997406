"""Contradictions flagged, never decided (docs/knowledge.md, "Contradictions"): the
detector's precision and recall on the labelled set written before it, and the flags as
a user meets them: on both recall items (neither hidden), in the brief, in
``GET /v1/contradictions``; gone once a side is superseded or the pair is marked
``compatible_with``; and never shown, or counted, to a member who may not read both."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import pytest
from appkit import AppServer

from wiki_memory.wiki.contradict import Note, contradiction

pytestmark = pytest.mark.fast

SET = Path(__file__).parent / "data" / "contradictions.jsonl"


def _note(side: dict[str, Any]) -> Note:
    names = tuple(side.get("aliases", [])) + ((side["subject"],) if side.get("subject") else ())
    return Note(side["title"], side["text"], names)


def confusion() -> dict[str, collections.Counter[str]]:
    """Per split (and ``all``, and per category for recall): tp, fp, fn, tn."""
    out: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for line in SET.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        # a recorded supersession is the caller's to leave out (core/contradictions.py)
        flagged = not r.get("b_supersedes_a") and contradiction(_note(r["a"]), _note(r["b"]))
        gold = r["label"] == "contradiction"
        cell = ("tp" if flagged else "fn") if gold else ("fp" if flagged else "tn")
        for key in (r["split"], "all", f"category:{r['category']}"):
            out[key][cell] += 1
    return out


def test_precision_and_recall_on_the_labelled_set() -> None:
    cm = confusion()
    for split, floor in (("all", 0.9), ("heldout", 0.85)):
        c = cm[split]
        assert c["tp"] / (c["tp"] + c["fp"]) >= floor, (split, dict(c))
    assert cm["all"]["tp"] / (cm["all"]["tp"] + cm["all"]["fn"]) >= 0.5, dict(cm["all"])
    assert cm["heldout"]["tp"] >= 5, dict(cm["heldout"])


PG = "---\ntitle: Primary database\n---\nThe primary database is PostgreSQL 15.\n"
MY = "---\ntitle: Primary database\n---\nWe migrated the primary database to MySQL 8.\n"
A, B = "projects/p/notes/primary-db.md", "projects/p/notes/primary-db-now.md"


def put(srv: AppServer, path: str, text: str, headers: dict[str, str] | None = None) -> None:
    """Write a page as a person's editor does: a new page as is, an existing one with
    the hash it was read at."""
    headers = headers or srv.headers
    r = srv.client.put(srv.url + "/v1/pages/" + path, content=text, headers=headers)
    if r.status_code == 428:
        headers = {**headers, "If-Match": r.json()["hash"]}
        r = srv.client.put(srv.url + "/v1/pages/" + path, content=text, headers=headers)
    assert r.status_code in (200, 201), r.text


def test_both_sides_are_returned_flagged_listed_and_briefed_until_resolved(tmp_path: Path) -> None:
    with AppServer(tmp_path / "data") as srv:
        put(srv, A, PG)
        put(srv, B, MY)
        items = srv.post("/v1/recall", {"query": "primary database", "project": "p"}).json()[
            "items"
        ]
        by_path = {i["path"]: i for i in items}
        assert by_path[A]["contradicts"] == [B] and by_path[B]["contradicts"] == [A]
        listed = srv.get("/v1/contradictions", params={"project": "p"}).json()["contradictions"]
        assert [(f["a"], f["b"], f["kind"]) for f in listed] == [(B, A, "products")], listed
        assert listed[0]["values"] == ["mysql", "postgresql"]
        brief = srv.post("/v1/brief", {"harness": "claude-code", "project": "p"}).json()["text"]
        assert "### Notes that disagree" in brief and "MySQL 8" in brief, brief
        # a person marks the pair compatible: no flag anywhere
        put(srv, B, MY.replace("title:", f"compatible_with: [{A}]\ntitle:"))
        assert srv.get("/v1/contradictions").json()["contradictions"] == []
        items = srv.post("/v1/recall", {"query": "primary database", "project": "p"}).json()[
            "items"
        ]
        assert not any("contradicts" in i for i in items)


def test_a_superseded_side_is_no_contradiction(tmp_path: Path) -> None:
    with AppServer(tmp_path / "data") as srv:
        put(srv, A, PG)
        r = srv.post(
            "/v1/remember",
            {"text": "We migrated the primary database to MySQL 8.", "project": "p",
             "title": "Primary database", "supersedes": [A]},
        )  # fmt: skip
        assert r.status_code in (200, 201), r.text
        assert srv.get("/v1/contradictions").json()["contradictions"] == []


def test_a_member_who_may_not_read_one_side_sees_no_flag_and_no_count(tmp_path: Path) -> None:
    with AppServer(tmp_path / "data") as srv:
        put(srv, A, PG)
        bob = {"Authorization": f"Bearer {srv.token_for('bob', role='member', projects=('p',))}"}
        sam = {"Authorization": f"Bearer {srv.token_for('sam', role='member', projects=('p',))}"}
        # bob's own note, in project p, that nobody else may read
        put(
            srv,
            "people/bob/notes/primary-db.md",
            MY.replace("---\ntitle", "---\nproject: p\ntitle"),
            bob,
        )
        mine = srv.get("/v1/contradictions", headers=bob).json()["contradictions"]
        assert len(mine) == 1, mine
        assert srv.get("/v1/contradictions", headers=sam).json()["contradictions"] == []
        items = srv.post(
            "/v1/recall", {"query": "primary database", "project": "p"}, headers=sam
        ).json()["items"]
        assert [i["path"] for i in items if i["path"] == A] and not any(
            "contradicts" in i for i in items
        )
        brief = srv.post(
            "/v1/brief", {"harness": "claude-code", "project": "p"}, headers=sam
        ).json()["text"]
        assert "disagree" not in brief and "MySQL" not in brief
        # a project the caller may not read is a 404, as a missing one
        nora = {"Authorization": f"Bearer {srv.token_for('nora', role='member')}"}
        r = srv.get("/v1/contradictions", params={"project": "p"}, headers=nora)
        assert r.status_code == 404, r.text


def test_notes_named_by_their_title_are_flagged_on_both_sides(tmp_path: Path) -> None:
    """``remember`` names a note's file by its title, so the first note's name is its
    file name's stem: both sides are still flagged (the first was missed once)."""
    with AppServer(tmp_path / "data") as srv:
        for text in (
            "The staging database listens on port 5432.",
            "The staging database listens on port 6543.",
        ):
            r = srv.post("/v1/remember", {"text": text, "project": "ops", "title": "Staging database",
                                         "create_project": True})  # fmt: skip
            assert r.status_code == 201, r.text
        items = srv.post("/v1/recall", {"query": "staging database port", "project": "ops"}).json()[
            "items"
        ]
        flagged = {i["path"]: i.get("contradicts") for i in items}
        assert flagged == {
            "projects/ops/notes/Staging database.md": ["projects/ops/notes/Staging database 2.md"],
            "projects/ops/notes/Staging database 2.md": ["projects/ops/notes/Staging database.md"],
        }, flagged
