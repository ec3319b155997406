"""One personal rule (wiki_memory.wiki.personal.page_owner) for the scope check, the
index, the writer's grouping, the border and the replication projection: the whole
frontmatter, YAML's escaped keys, the identity fold for ``people/``. A marker written in
each kind of personal content never reaches the hub (its objects read one by one)."""

from __future__ import annotations

from pathlib import Path

import pytest
from dulwich.repo import Repo
from support import as_user, make_memory

from wiki_memory.wiki import replicate as rp
from wiki_memory.wiki.personal import page_owner

WIDE_PEOPLE = "\uff50\uff45\uff4f\uff50\uff4c\uff45"  # ｐｅｏｐｌｅ
LONG = "---\npad: " + "x" * 9000 + "\nvisibility: personal\nuser: alice\n---\n"
ESCAPED = '---\n"vis\\x69bility": personal\nuser: alice\n---\n'


@pytest.mark.fast
def test_page_owner_reads_the_whole_frontmatter_escapes_and_folded_folders():
    assert page_owner("notes/a.md", (LONG + "body\n").encode()) == "alice"
    assert page_owner("notes/a.md", (ESCAPED + "body\n").encode()) == "alice"
    assert page_owner(f"{WIDE_PEOPLE}/Alice/x.md", b"") == "alice"
    assert page_owner("People/ALICE/x.md", None) == "alice"
    # the body is not frontmatter; a page with no fence has none
    assert page_owner("notes/a.md", b"---\ntitle: t\n---\nvisibility: personal\n") is None
    assert page_owner("notes/a.md", b"visibility: personal\n") is None
    assert page_owner("notes/a.md", b"\xef\xbb\xbf---\nvisibility: personal\n---\n") == "\x00owner"


def _objects(hub: Path) -> bytes:
    """Every object of the hub, decompressed (packs included)."""
    repo = Repo(str(hub))
    try:
        store = repo.object_store
        return b"\n".join(store[sha].as_raw_string() for sha in store)
    finally:
        repo.close()


@pytest.mark.process  # sync runs its network steps in a child process
def test_no_kind_of_personal_content_reaches_the_hub(tmp_path, stop_after):
    hub = tmp_path / "hub.git"
    Repo.init_bare(str(hub), mkdir=True).close()
    m = make_memory(tmp_path / "d", files={"projects/p/index.md": "# p\n"})
    stop_after(m)
    rp.add_remote(m.wiki_dir, "origin", str(hub))
    # a personal handoff written in the same burst as a shared page
    m.handoffs.create(
        as_user(m, "alice"),
        project="p",
        title="zqxhandoff title",
        visibility="personal",
        harness="codex",
    )
    writes = {
        "projects/p/notes/shared.md": "# shared\nSHAREDMARK\n",
        "projects/p/notes/long.md": LONG + "zqxlong body\n",
        "projects/p/notes/escaped.md": ESCAPED + "zqxescaped body\n",
        f"{WIDE_PEOPLE}/alice/wide.md": "# zqxwide title\nzqxwide body\n",
    }
    for rel, text in writes.items():
        m.write_page(
            rel, text.encode(), user="alice", message=f"Write {rel}", who=as_user(m, "alice")
        )
    m.writer.flush()
    m.sync.sync()
    objects = _objects(hub)
    assert b"SHAREDMARK" in objects  # the sync did push
    assert b"zqx" not in objects
    assert WIDE_PEOPLE.encode() not in objects
    for name in (b"long.md", b"escaped.md", b"wide.md"):
        assert name not in objects


@pytest.mark.fast
def test_a_personal_line_yaml_cannot_read_still_makes_the_page_personal():
    """Broken YAML or a key given twice never turns a page marked personal into a shared
    one: the marker line is read as text, with its user line, else it is the owner's."""
    from wiki_memory.identity import OWNER_KEY

    broken = b"---\nvisibility: personal\nuser: carl\ntitle: [unclosed\n---\nwalrus plan\n"
    assert page_owner("projects/a/notes/x.md", broken) == "carl"
    tabbed = b"---\nvisibility: personal\n\ttitle: x\n---\nwalrus plan\n"
    assert page_owner("projects/a/notes/x.md", tabbed) == OWNER_KEY
    twice = b"---\nvisibility: personal\nuser: carl\nvisibility: shared\n---\nwalrus plan\n"
    assert page_owner("projects/a/notes/x.md", twice) == "carl"
    # the word in the body, or in another key's value, is not the marker
    assert (
        page_owner("projects/a/notes/x.md", b"---\ntitle: t\n---\nvisibility: personal\n") is None
    )
    assert page_owner("projects/a/notes/x.md", b"---\nnote: visibility: personal\n---\n") is None


@pytest.mark.fast
def test_a_member_never_sees_anothers_page_whose_personal_frontmatter_is_broken(tmp_path: Path):
    """Written through the API such a page is refused (400); written by hand (Obsidian)
    it is its user's alone in recall and reads, as a readable one would be."""
    from appkit import AppServer

    with AppServer(tmp_path / "data", watch=False, commit_delay_seconds=0.02) as srv:
        m = srv.memory
        assert m is not None
        carl = {"Authorization": f"Bearer {srv.token_for('carl', role='member', projects=('a',))}"}
        bob = {"Authorization": f"Bearer {srv.token_for('bob', role='member', projects=('a',))}"}
        texts = (
            "---\nvisibility: personal\ntitle: [unclosed\n---\n# P\n\nnarwhal plan zero\n",
            "---\nvisibility: personal\nvisibility: shared\n---\n# P\n\nnarwhal plan one\n",
        )
        for n, text in enumerate(texts):
            r = srv.client.put(f"/v1/pages/projects/a/notes/p{n}.md", content=text.encode(),
                               headers={**carl, "Content-Type": "text/markdown"})  # fmt: skip
            assert r.status_code == 400 and r.json()["field"] == "visibility", r.text
        shared = "---\ntitle: Plans\n---\n# Plans\n\nnarwhal plan shared\n"
        r = srv.client.put("/v1/pages/projects/a/notes/shared.md", content=shared.encode(),
                           headers={**carl, "Content-Type": "text/markdown"})  # fmt: skip
        assert r.status_code in (200, 201), r.text
        for n, text in enumerate(texts):  # by hand, naming carl
            hand = text.replace("---\nvisibility", "---\nuser: carl\nvisibility", 1)
            (m.wiki_dir / f"projects/a/notes/p{n}.md").write_text(hand)
        m.reindex()
        for who, sees in ((bob, False), (carl, True)):
            r = srv.post("/v1/recall", {"query": "narwhal plan", "project": "a"}, headers=who)
            assert r.status_code == 200 and "narwhal plan shared" in r.text, r.text
            assert ("narwhal plan zero" in r.text) is sees, r.text
            for n in (0, 1):
                r = srv.client.get(f"/v1/pages/projects/a/notes/p{n}.md", headers=who)
                assert r.status_code == (200 if sees else 404), r.text
