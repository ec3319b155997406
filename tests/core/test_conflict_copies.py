"""Conflict copies (docs/git.md, "Conflict copies"): the copies sync keeps for a true
overlap and those file-sync tools leave (Syncthing, Dropbox or Drive, iCloud) are marked
with ``conflict_of`` and ``conflict_side``, carry their own title, are never a link target
and rank after the page they copy, as a superseded page does; ``sync-conflicts`` lists
them and ``resolve`` keeps one side in one commit."""

from __future__ import annotations

import pytest
from support import as_user, make_memory

from wiki_memory.wiki import copies

DEPLOY = "---\nid: d1\ntitle: Deploy\naliases: [Shipping]\n---\n# Deploy\n\nRun the deploy script from the release box.\n"
#: the other machine's version says more of what the query asks: it would win on text alone
OTHER = (
    "---\nid: d1\ntitle: Deploy\naliases: [Shipping]\n---\n# Deploy\n\nRun the deploy script from the release box; "
    "the deploy script needs the deploy key.\n"
)
SYNCTHING = "projects/p/notes/deploy.sync-conflict-20260102-030405-ABCDEF1.md"
DROPBOX = "projects/p/notes/deploy (Ann's conflicted copy 2026-01-02).md"
ICLOUD = "projects/p/notes/deploy 2.md"
OWN = "projects/p/notes/deploy.conflict-origin-1a2b3c4.md"


@pytest.mark.fast
def test_copy_names_of_sync_and_file_sync_tools_are_recognised_and_others_are_not():
    assert copies.named_copy(SYNCTHING) == (
        "projects/p/notes/deploy.md",
        "Syncthing device ABCDEF1",
    )
    assert copies.named_copy(DROPBOX) == ("projects/p/notes/deploy.md", "Ann via Dropbox or Drive")
    assert copies.named_copy(OWN) == ("projects/p/notes/deploy.md", "origin")
    assert copies.named_copy("projects/p/notes/deploy.md") is None
    assert copies.named_copy(ICLOUD) is None  # decided beside its original only
    assert copies.icloud_original(ICLOUD) == "projects/p/notes/deploy.md"
    # the server's own second page of one title is no copy: another id
    assert not copies.same_page({"id": "x2"}, "Deploy", {"id": "d1"}, "Deploy")
    assert copies.same_page({"id": "d1"}, "Deploy", {"id": "d1"}, "Deploy")


@pytest.mark.fast
@pytest.mark.parametrize("copy", [SYNCTHING, DROPBOX, ICLOUD, OWN])
def test_a_copy_is_marked_ranks_after_its_page_and_is_never_a_link_target(tmp_path, copy):
    m = make_memory(
        tmp_path,
        files={
            "projects/p/notes/deploy.md": DEPLOY,
            copy: OTHER,
            "projects/p/notes/howto.md": "# Howto\n\nSee [[Shipping]].\n",
        },
    )
    try:
        items = m.recall("deploy script deploy key", project="p", user=as_user(m, "alice")).items
        paths = [i["path"] for i in items]
        assert paths.index("projects/p/notes/deploy.md") < paths.index(copy), paths
        it = items[paths.index(copy)]
        assert it["conflict_of"] == "projects/p/notes/deploy.md"
        assert it["conflict_side"]
        if copy != ICLOUD:  # its own title (an iCloud copy keeps the tool's bytes and name)
            assert it["title"].startswith("Deploy (conflict copy from ")
        assert "conflict_of" not in items[paths.index("projects/p/notes/deploy.md")]
        links = m.index.outlinks("projects/p/notes/howto.md")
        assert [(ln["status"], ln["path"]) for ln in links] == [
            ("resolved", "projects/p/notes/deploy.md")
        ]
    finally:
        m.stop()


@pytest.mark.fast
def test_the_servers_own_second_page_of_a_title_is_no_copy(tmp_path):
    m = make_memory(
        tmp_path,
        files={
            "projects/p/notes/deploy.md": DEPLOY,
            ICLOUD: OTHER.replace("id: d1", "id: d2"),
        },
    )
    try:
        items = m.recall("deploy script deploy key", project="p", user=as_user(m, "alice")).items
        assert not any("conflict_of" in i for i in items)
    finally:
        m.stop()


@pytest.mark.fast
def test_http_lists_and_resolves_a_file_sync_copy_through_the_scope_rule(tmp_path):
    from appkit import AppServer

    with AppServer(tmp_path / "data") as srv:
        for path, text in (("projects/p/notes/deploy.md", DEPLOY), (SYNCTHING, OTHER)):
            r = srv.client.put(srv.url + "/v1/pages/" + path, content=text, headers=srv.headers)
            assert r.status_code in (200, 201), r.text
        rows = srv.get("/v1/sync-conflicts").json()["conflicts"]
        assert [(r["copy"], r["page"], r["side"]) for r in rows] == [
            (SYNCTHING, "projects/p/notes/deploy.md", "Syncthing device ABCDEF1")
        ]
        view = srv.get("/page/" + SYNCTHING)
        assert view.status_code == 200 and 'id="conflict-of"' in view.text, view.text[:500]
        bad = srv.post("/v1/sync-conflicts/resolve", {"copy": SYNCTHING, "keep": "both"})
        assert bad.status_code == 400 and bad.json()["field"] == "keep"
        none = srv.post("/v1/sync-conflicts/resolve", {"copy": "projects/p/notes/deploy.md"})
        assert none.status_code == 400  # keep is required
        # a member with no grant on the project is shown no copy of it
        sam = {"Authorization": f"Bearer {srv.token_for('sam', role='member')}"}
        assert srv.get("/v1/sync-conflicts", headers=sam).json()["conflicts"] == []
        reader = srv.token_for("rita", role="reader", projects=("p",))
        r = srv.post(
            "/v1/sync-conflicts/resolve",
            {"copy": SYNCTHING, "keep": "copy"},
            headers={"Authorization": f"Bearer {reader}"},
        )
        assert r.status_code == 403, r.text
        r = srv.post("/v1/sync-conflicts/resolve", {"copy": SYNCTHING, "keep": "copy"})
        assert r.status_code == 200, r.text
        assert r.json() == {"page": "projects/p/notes/deploy.md", "copy": SYNCTHING, "kept": "copy"}
        wiki = srv.memory.wiki_dir
        assert (wiki / "projects/p/notes/deploy.md").read_text() == OTHER
        assert not (wiki / SYNCTHING).exists()
        assert srv.get("/v1/sync-conflicts").json()["conflicts"] == []
        gone = srv.post("/v1/sync-conflicts/resolve", {"copy": SYNCTHING, "keep": "page"})
        assert gone.status_code == 404


@pytest.mark.fast
def test_listings_mark_a_copy_and_mcp_text_names_it(tmp_path):
    from wiki_memory.mcp.common import page_line

    m = make_memory(tmp_path, files={"projects/p/notes/deploy.md": DEPLOY, SYNCTHING: OTHER})
    try:
        rows = {r["path"]: r for r in m.list_pages(project="p", user=as_user(m, "alice"))}
        assert rows[SYNCTHING]["conflict_of"] == "projects/p/notes/deploy.md"
        assert "conflict_of" not in rows["projects/p/notes/deploy.md"]
        assert "CONFLICT COPY of projects/p/notes/deploy.md" in page_line(rows[SYNCTHING])
    finally:
        m.stop()
