"""Cloud placeholders (docs/git.md, "Conflict copies and cloud placeholders"): a page a
file-sync client evicted (an iCloud ``.name.icloud`` stub, a Nextcloud or ownCloud virtual
file, a zero-length file where git holds content) is never committed as a deletion or an
emptying, and the stub itself is never committed; a page a person deletes still is."""

from __future__ import annotations

import os
import stat

import pytest
from support import committed, make_memory

from wiki_memory.wiki import placeholder

PAGE = "projects/p/notes/deploy.md"
TEXT = "---\nid: d1\ntitle: Deploy\n---\n# Deploy\n\nRun the deploy script.\n"


def head_text(m, rel: str) -> bytes | None:
    from dulwich.repo import Repo

    with Repo(str(m.wiki_dir)) as repo:
        tree = repo[repo[repo.head()].tree]
        try:
            _mode, sha = tree.lookup_path(repo.__getitem__, rel.encode())
        except KeyError:
            return None
        return bytes(repo[sha].data)


@pytest.fixture
def mem(tmp_path, stop_after):
    m = make_memory(tmp_path, files={PAGE: TEXT, "projects/p/notes/other.md": "# Other\n"})
    stop_after(m)
    m._commit_hand_edits_now([PAGE, "projects/p/notes/other.md"])
    assert head_text(m, PAGE) == TEXT.encode()
    return m


@pytest.mark.fast
@pytest.mark.parametrize(
    "stub", ["projects/p/notes/.deploy.md.icloud", "projects/p/notes/deploy.md.nextcloud"]
)
def test_an_evicted_page_with_its_stub_is_no_deletion_and_the_stub_is_not_committed(mem, stub):
    (mem.wiki_dir / PAGE).unlink()
    (mem.wiki_dir / stub).write_bytes(b"bplist00 placeholder")
    mem._commit_hand_edits_now([PAGE, stub])
    mem._commit_hand_edits_now(["projects/p"])  # a folder's commit walks it too
    assert head_text(mem, PAGE) == TEXT.encode()
    assert stub not in committed(mem.wiki_dir)


@pytest.mark.fast
def test_a_zero_length_placeholder_is_not_committed_as_an_emptied_page(mem):
    (mem.wiki_dir / PAGE).write_bytes(b"")
    mem._commit_hand_edits_now([PAGE])
    assert head_text(mem, PAGE) == TEXT.encode()


@pytest.mark.fast
def test_a_page_a_person_deletes_is_still_a_deletion(mem):
    (mem.wiki_dir / "projects/p/notes/other.md").unlink()
    mem._commit_hand_edits_now(["projects/p/notes/other.md"])
    assert "projects/p/notes/other.md" not in committed(mem.wiki_dir)


@pytest.mark.fast
def test_dataless_flags_and_attributes_count_as_placeholders(tmp_path):
    f = tmp_path / "x.md"
    f.write_bytes(b"text")
    st = os.stat(f)
    assert not placeholder.dataless(st, 4)

    class Flagged:
        st_mode = stat.S_IFREG | 0o644
        st_size = 4
        st_flags = placeholder.SF_DATALESS

    assert placeholder.dataless(Flagged(), 4)  # type: ignore[arg-type]
    assert placeholder.is_stub(b".x.md.icloud") and not placeholder.is_stub(b"x.md")
