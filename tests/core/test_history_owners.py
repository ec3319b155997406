"""History views judge each path of a listed commit by its version in that commit, and
the owner found is kept per commit: a vault imported in one commit of many pages is read
once, not at every page's history view, and one caller's view never decides another's.

Alice owns the memory; bob and carol are members. One commit (the import at start)
holds shared notes, bob's folder and a note bob marked personal."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import as_user, make_memory

from wiki_memory.auth import TokenStore
from wiki_memory.core.memory import Memory
from wiki_memory.core.purge import purge_page

pytestmark = pytest.mark.fast

SHARED = [f"notes/n{i:02}.md" for i in range(40)]
BOBS = ["people/bob/diary.md", "notes/bobs-plan.md"]


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    files = {p: f"---\ntitle: {Path(p).stem}\n---\nshared {p}\n" for p in SHARED}
    files["people/bob/diary.md"] = "---\ntitle: Diary\n---\nbob's own\n"
    files["notes/bobs-plan.md"] = "---\ntitle: Plan\nvisibility: personal\nuser: bob\n---\nx\n"
    m = make_memory(tmp_path / "data", files=files)
    tokens = TokenStore(tmp_path / "data" / "auth", owner_user="alice")
    tokens.ensure_owner()
    tokens.create("bob")
    tokens.create("carol")
    m.scope.directory = tokens
    try:
        yield m
    finally:
        m.stop()


def _paths(m: Memory, user: str, page: str) -> list[list[str]]:
    return [c.paths for c in m.reader.page_history(page, as_user(m, user))]


def test_each_view_names_only_what_its_caller_may_see_in_any_order(memory: Memory) -> None:
    m = memory
    bob = _paths(m, "bob", SHARED[0])
    carol = _paths(m, "carol", SHARED[0])
    assert bob and carol
    seen_by_bob = {p for ps in bob for p in ps}
    seen_by_carol = {p for ps in carol for p in ps}
    assert set(BOBS) <= seen_by_bob
    assert not set(BOBS) & seen_by_carol
    assert set(SHARED) <= seen_by_carol
    # asked again, in the other order and from another page: the same answers
    assert _paths(m, "carol", SHARED[0]) == carol
    assert _paths(m, "bob", SHARED[0]) == bob
    assert not set(BOBS) & {p for ps in _paths(m, "carol", SHARED[5]) for p in ps}


def test_a_commit_is_read_once_for_every_later_view(memory: Memory, monkeypatch: Any) -> None:
    m = memory
    reads: list[str] = []
    real = m.git.read_at

    def counting(rel: str, sha: str) -> bytes | None:
        reads.append(rel)
        return real(rel, sha)

    monkeypatch.setattr(m.git, "read_at", counting)
    _paths(m, "carol", SHARED[0])
    _paths(m, "bob", SHARED[0])
    assert len(set(reads)) >= len(SHARED)  # every path of the import commit, once
    for page in SHARED[1:11]:
        reads.clear()
        _paths(m, "carol", page)
        _paths(m, "bob", page)
        # each view reads the page's own versions (is it visible?), no other path again
        assert set(reads) <= {page}, sorted(set(reads) - {page})[:5]


def test_a_purge_drops_every_kept_owner(memory: Memory) -> None:
    m = memory
    _paths(m, "bob", SHARED[0])
    assert len(m.reader.commit_owners) >= len(SHARED)
    purge_page(m, "people/bob/diary.md", None)
    # the rewritten commits' paths (the purged one's among them) leave memory
    assert len(m.reader.commit_owners) == 0
    assert "people/bob/diary.md" not in {p for ps in _paths(m, "bob", SHARED[0]) for p in ps}
