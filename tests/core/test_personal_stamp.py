"""A member who writes a page marked ``visibility: personal`` without ``user:`` gets a
page of their own: the server stamps ``user:`` with the writer, keeping every other
byte, instead of refusing a page that would otherwise be the wiki owner's."""

from __future__ import annotations

import pytest
from support import as_user

from wiki_memory.core.memory import Memory
from wiki_memory.errors import NotFound
from wiki_memory.identity import Identity

pytestmark = pytest.mark.fast

BOB = Identity(user="bob", role="member")


def test_member_personal_page_without_user_is_stamped_with_the_writer(mem: Memory) -> None:
    text = b"---\ntitle: Draft  # mine\nvisibility: personal\n---\n# Draft\n\nzqx body\n"
    res = mem.write_page("projects/p/notes/draft.md", text, user="bob", message="w", who=BOB)
    assert res.value is not None
    on_disk = (mem.wiki_dir / "projects/p/notes/draft.md").read_bytes()
    assert on_disk == (
        b"---\ntitle: Draft  # mine\nvisibility: personal\nuser: bob\n---\n# Draft\n\nzqx body\n"
    )
    # bob reads it back; the wiki's owner does not (the page is bob's alone)
    assert mem.read_page("projects/p/notes/draft.md", user=BOB)["hash"] == res.value
    with pytest.raises(NotFound):
        mem.read_page("projects/p/notes/draft.md", user=as_user(mem, "alice"))


def test_owner_personal_page_without_user_is_left_as_sent(mem: Memory) -> None:
    text = b"---\ntitle: Mine\nvisibility: personal\n---\nbody\n"
    mem.write_page(
        "projects/p/notes/mine.md", text, user="alice", message="w", who=as_user(mem, "alice")
    )
    assert (mem.wiki_dir / "projects/p/notes/mine.md").read_bytes() == text
