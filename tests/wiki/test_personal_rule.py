"""One personal rule (wiki_memory.wiki.personal.page_owner) for the scope check, the
index, the writer's grouping, the border and the replication projection: the whole
frontmatter, YAML's escaped keys, the identity fold for ``people/``. A marker written in
each kind of personal content never reaches the hub (its objects read one by one)."""

from __future__ import annotations

from pathlib import Path

import pytest
from dulwich.repo import Repo
from support import make_memory

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
        "alice", project="p", title="zqxhandoff title", visibility="personal", harness="codex"
    )
    writes = {
        "projects/p/notes/shared.md": "# shared\nSHAREDMARK\n",
        "projects/p/notes/long.md": LONG + "zqxlong body\n",
        "projects/p/notes/escaped.md": ESCAPED + "zqxescaped body\n",
        f"{WIDE_PEOPLE}/alice/wide.md": "# zqxwide title\nzqxwide body\n",
    }
    for rel, text in writes.items():
        m.write_page(rel, text.encode(), user="alice", message=f"Write {rel}", who="alice")
    m.writer.flush()
    m.sync.sync()
    objects = _objects(hub)
    assert b"SHAREDMARK" in objects  # the sync did push
    assert b"zqx" not in objects
    assert WIDE_PEOPLE.encode() not in objects
    for name in (b"long.md", b"escaped.md", b"wide.md"):
        assert name not in objects
