"""A case-only rename (``Notes.md`` → ``notes.md``, as a vault from a case-insensitive
system does it) keeps the page's id and its history, and every older version in that
history is judged by the one scope rule at the path it had then."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import support

from wiki_memory.core.memory import Memory
from wiki_memory.core.writer import WriteResult
from wiki_memory.errors import NotFound
from wiki_memory.identity import Identity

ALICE = Identity("alice", role="member")  # every project
BOB = Identity("bob", role="member", grants={"p": "read"})
CID = Identity("cid", role="member", grants={"q": "write"})  # nothing on p
OLD, NEW = "projects/p/Notes.md", "projects/p/notes.md"
DRAFT = "---\nvisibility: personal\nuser: alice\n---\n# Notes\n\nzqxdraftsecret\n"
PUBLIC = "# Notes\n\npublished text\n"


def hand(m: Memory, paths: list[str]) -> None:
    """Index and commit what changed on disk at ``paths``, as a hand edit."""
    m.index.sync_paths(m.wiki_dir, paths)

    def job() -> WriteResult:
        m._commit_hand_edits_now(paths)
        return WriteResult()

    m.writer.call(job)


@pytest.fixture
def renamed(tmp_path: Path, stop_after: Any) -> tuple[Memory, list[str]]:
    """A page drafted as alice's personal page, published, then renamed by case only:
    the shas of the draft, the published version and the rename."""
    m = support.make_memory(tmp_path / "data", owner="owner")
    stop_after(m)
    page = m.wiki_dir / OLD
    page.parent.mkdir(parents=True, exist_ok=True)
    shas = []
    for text in (DRAFT, PUBLIC):
        page.write_text(text)
        hand(m, [OLD])
        shas.append(m.git.head())
    os.rename(page, m.wiki_dir / NEW)
    hand(m, [OLD, NEW])
    shas.append(m.git.head())
    assert len(set(shas)) == 3
    assert NEW in m.index.paths() and OLD not in m.index.paths()
    return m, [str(s) for s in shas]


def test_a_case_only_rename_keeps_the_id(tmp_path: Path, stop_after: Any) -> None:
    m = support.make_memory(tmp_path / "data", owner="owner", files={OLD: PUBLIC})
    stop_after(m)
    before = m.page_meta(OLD, None)
    assert before is not None
    os.rename(m.wiki_dir / OLD, m.wiki_dir / NEW)
    hand(m, [OLD, NEW])
    after = m.page_meta(NEW, None)
    assert after is not None and after["path"] == NEW
    assert after["id"] == before["id"]
    # a page with its own id keeps it as it was
    (m.wiki_dir / "projects/p/Own.md").write_text("---\nid: Own-1\n---\n# own\n")
    hand(m, ["projects/p/Own.md"])
    assert m.page_meta("projects/p/Own.md", None)["id"] == "Own-1"  # type: ignore[index]


def test_history_follows_a_case_only_rename(renamed: tuple[Memory, list[str]]) -> None:
    m, (draft, public, rename) = renamed
    assert [c.sha for c in m.page_history(NEW, ALICE)] == [rename, public, draft]
    assert b"zqxdraftsecret" in (m.page_version(NEW, draft, ALICE) or b"")
    assert m.page_version(NEW, public, ALICE) == PUBLIC.encode()
    assert "published text" in m.page_diff(NEW, public, ALICE)


def test_older_versions_keep_the_scope_rule_through_the_rename(
    renamed: tuple[Memory, list[str]],
) -> None:
    m, (draft, public, rename) = renamed
    # bob reads project p: the published versions, never alice's personal draft
    seen = m.page_history(NEW, BOB)
    assert [c.sha for c in seen] == [rename, public]
    assert all("zqx" not in c.message for c in seen)
    assert m.page_version(NEW, public, BOB) == PUBLIC.encode()
    for sha in (draft, draft[:12]):
        with pytest.raises(NotFound):
            m.page_version(NEW, sha, BOB)
        with pytest.raises(NotFound):
            m.page_diff(NEW, sha, BOB)
    with pytest.raises(NotFound):  # its diff would show the draft it replaced
        m.page_diff(NEW, public, BOB)
    # cid holds no grant on p: nothing, by either spelling, as if missing
    for path in (NEW, OLD):
        with pytest.raises(NotFound):
            m.page_history(path, CID)
        for sha in (draft, public, rename):
            with pytest.raises(NotFound):
                m.page_version(path, sha, CID)
            with pytest.raises(NotFound):
                m.page_diff(path, sha, CID)


def test_a_personal_page_renamed_by_case_stays_its_owners(tmp_path: Path, stop_after: Any) -> None:
    m = support.make_memory(tmp_path / "data", owner="owner")
    stop_after(m)
    old, new = "people/alice/Diary.md", "people/alice/diary.md"
    (m.wiki_dir / "people/alice").mkdir(parents=True)
    (m.wiki_dir / old).write_text("# Diary\n\nzqxdiary\n")
    hand(m, [old])
    os.rename(m.wiki_dir / old, m.wiki_dir / new)
    hand(m, [old, new])
    assert len(m.page_history(new, ALICE)) == 2
    for who in (BOB, CID, Identity("owner", role="owner")):
        with pytest.raises(NotFound):
            m.page_history(new, who)


def test_a_new_page_beside_a_removed_twin_is_not_followed_into_it(
    tmp_path: Path, stop_after: Any
) -> None:
    """Only a commit that removes the one older spelling while adding the new one is a
    rename: two case twins, one removed later, keep their own histories."""
    m = support.make_memory(tmp_path / "data", owner="owner")
    stop_after(m)
    (m.wiki_dir / "projects/p").mkdir(parents=True)
    (m.wiki_dir / OLD).write_text("# one\n")
    hand(m, [OLD])
    (m.wiki_dir / NEW).write_text("# two\n")
    hand(m, [NEW])
    added = m.git.head()
    (m.wiki_dir / OLD).unlink()
    hand(m, [OLD])
    assert [c.sha for c in m.page_history(NEW, ALICE)] == [added]


def test_history_follows_a_folder_renamed_by_case(tmp_path: Path, stop_after: Any) -> None:
    m = support.make_memory(
        tmp_path / "data", owner="owner", files={"projects/p/Docs/a.md": "# a\n"}
    )
    stop_after(m)
    first = m.git.head()
    os.rename(m.wiki_dir / "projects/p/Docs", m.wiki_dir / "projects/p/docs")
    hand(m, ["projects/p/Docs", "projects/p/docs"])
    shas = [c.sha for c in m.page_history("projects/p/docs/a.md", ALICE)]
    assert shas == [m.git.head(), first]
    assert m.page_version("projects/p/docs/a.md", str(first), ALICE) == b"# a\n"
