"""Parts belong to session pages only (docs/sessions.md, "Parts": "`purge` of a session
page purges each part with it", "`forget PAGE` forgets the session page and every part",
"Renaming a session page ... moves its parts"). A person's own note that happens to be
named ``<stem>.part-002.md`` beside a note ``<stem>.md`` (no ``type: session``, no
``part``, no ``part_of``; ``PUT`` accepts such a name) is a page of its own: forgetting,
purging or renaming ``<stem>.md`` must leave it as it is, and it can be renamed itself.
Real apsw, real dulwich, the app in process."""

from __future__ import annotations

from pathlib import Path

import pytest
from appkit import AppServer

NOTE = "projects/atlas/notes/guide.md"
OTHER = "projects/atlas/notes/guide.part-002.md"
OWN = "chapter-two-of-my-own-guide-4471"


def put(srv: AppServer, path: str, title: str, body: str) -> None:
    text = f"---\ntitle: {title}\n---\n{body}\n"
    r = srv.client.put(
        srv.url + "/v1/pages/" + path,
        content=text.encode(),
        headers={**srv.headers, "Content-Type": "text/markdown"},
    )
    assert r.status_code in (200, 201), r.text


def two_notes(srv: AppServer) -> Path:
    put(srv, NOTE, "Guide", "the guide's first chapter")
    put(srv, OTHER, "Guide, chapter two", OWN)
    assert srv.memory is not None
    srv.memory.writer.flush()
    return srv.memory.wiki_dir


@pytest.mark.fast
def test_forget_of_a_note_leaves_a_note_named_like_its_part(tmp_path: Path) -> None:
    with AppServer(tmp_path / "data") as srv:
        wiki = two_notes(srv)
        r = srv.post("/v1/forget", {"path": NOTE})
        assert r.status_code == 200, r.text
        srv.memory.writer.flush()  # type: ignore[union-attr]
        assert "state: forgotten" not in (wiki / OTHER).read_text(encoding="utf-8")
        assert srv.get("/v1/pages/" + OTHER).status_code == 200


@pytest.mark.fast
def test_rename_of_a_note_leaves_a_note_named_like_its_part(tmp_path: Path) -> None:
    with AppServer(tmp_path / "data") as srv:
        wiki = two_notes(srv)
        before = (wiki / OTHER).read_bytes()
        r = srv.post(
            "/v1/edit",
            {"op": "rename", "path": NOTE, "new_path": "projects/atlas/notes/manual.md"},
        )
        assert r.status_code == 200, r.text
        assert not r.json().get("parts"), r.json()
        assert (wiki / OTHER).read_bytes() == before  # not moved, no part_of added
        r = srv.post(
            "/v1/edit",
            {"op": "rename", "path": OTHER, "new_path": "projects/atlas/notes/chapter-2.md"},
        )
        assert r.status_code == 200, r.text  # a note, not a session's part


@pytest.mark.process
def test_purge_of_a_note_leaves_a_note_named_like_its_part(tmp_path: Path) -> None:
    with AppServer(tmp_path / "data") as srv:
        wiki = two_notes(srv)
        r = srv.post("/v1/admin/purge", {"path": NOTE})
        assert r.status_code == 200, r.text
        assert not r.json().get("parts"), r.json()
        assert (wiki / OTHER).exists()
        assert OWN in (wiki / OTHER).read_text(encoding="utf-8")


@pytest.mark.fast
def test_a_note_saying_part_two_is_listed_when_no_session_owns_it(tmp_path: Path) -> None:
    leak = "projects/atlas/notes/leak.md"
    fake = "projects/atlas/notes/guide.part-002.md"
    with AppServer(tmp_path / "data") as srv:
        head = "type: session\npart: 2\npart_of: projects/atlas/notes/guide.md\n"
        for path in (leak, fake):
            r = srv.client.put(
                srv.url + "/v1/pages/" + path,
                content=f"---\ntitle: T\n{head}---\nbody words\n".encode(),
                headers={**srv.headers, "Content-Type": "text/markdown"},
            )
            assert r.status_code in (200, 201), r.text
        put(srv, NOTE, "Guide", "the guide, a note, no session")
        assert srv.memory is not None
        srv.memory.writer.flush()
        listed = {p["path"] for p in srv.get("/v1/pages", params={"limit": 500}).json()["pages"]}
        assert leak in listed  # says part 2, but its name is no part's
        assert fake in listed  # named and saying so, but its page is no session page
