"""One long session from two replicas, merged in process (docs/sessions.md, "Parts";
docs/git.md, "Merging"): the entries this side adds to the session page and to part 2
while the hub adds others to both, and a part 3 only the hub has, merge with numbers
unique across the whole session (after its highest number over all its parts), and
expand and forget of an entry whose new number names another part find it on its page.
Real dulwich objects, no git process."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from dulwich.objects import Blob, ObjectID
from dulwich.repo import Repo
from sessionpartkit import PATH, PER, pages, turns
from support import as_user, make_memory

from wiki_memory.core.forget import forget_page
from wiki_memory.wiki.pagemerge import merge_trees
from wiki_memory.wiki.sessionparts import part_path

pytestmark = pytest.mark.fast


def tree(repo: Repo, files: dict[str, bytes]) -> dict[bytes, tuple[int, ObjectID]]:
    out = {}
    for rel, data in files.items():
        blob = Blob.from_string(data)
        repo.object_store.add_object(blob)
        out[rel.encode()] = (0o100644, ObjectID(blob.id))
    return out


def merged_session(tmp_path: Path) -> dict[str, bytes]:
    """The merge of this side's session (a turn more on the page, two on part 2) into the
    hub's (other turns there, and a part 3)."""
    repo = Repo.init(str(tmp_path / "repo"), mkdir=True)
    base = pages(turns(["alphaword"], 10), 20.0)  # t1: the page alone
    hub = pages(
        turns(["alphaword", "hubone", "hubtwo", "hubthree", "hubfour", "hubfive"], 10), 90.0
    )
    here = pages(turns(["alphaword"], 10) + turns(["hereone", "heretwo", "herethree"], 40), 60.0)
    assert part_path(PATH, 3) in hub and part_path(PATH, 3) not in here
    res = merge_trees(repo, tree(repo, base), tree(repo, here), tree(repo, hub), "origin")
    assert not res.conflicts, res.conflicts
    return {p.decode(): bytes(repo[sha].data) for p, (_, sha) in res.files.items()}


def test_new_entries_are_numbered_after_the_sessions_highest_number(tmp_path: Path) -> None:
    got = merged_session(tmp_path)
    assert sorted(got) == [PATH, part_path(PATH, 2), part_path(PATH, 3)]
    seen: list[str] = []
    for raw in got.values():
        seen += re.findall(r"^\^(t\d+r?)$", raw.decode(), re.M)
    assert len(seen) == len(set(seen)), sorted(seen)  # no block id twice in the session
    text = "".join(raw.decode().split("## Timeline", 1)[1] for raw in got.values())
    for w in ("alphaword", "hubone", "hubfive", "hereone", "heretwo", "herethree"):
        assert text.count(f"look at {w} please") == 1, w


def test_expand_and_forget_find_an_entry_whose_number_names_another_part(
    tmp_path: Path,
) -> None:
    got = merged_session(tmp_path)
    part2 = got[part_path(PATH, 2)].decode()
    entry = part2.split("look at heretwo please", 1)[1]
    block = re.search(r"^\^(t\d+)$", entry, re.M)
    assert block is not None
    n = block[1]
    assert int(n[1:]) > 12  # after the hub's part 3 (t9, t11): names no part on disk
    files = {p: raw.decode() for p, raw in got.items()}
    mem = make_memory(tmp_path / "data", "ann", files, session_part_events=PER)
    try:
        alice = as_user(mem, "ann")
        hit = mem.expand([f"{PATH}#^{n}"], 2000, alice)
        assert not hit["missing"] and "heretwo" in str(hit), hit
        res = forget_page(mem, f"{PATH}#^{n}", alice)
        assert res["path"] == part_path(PATH, 2) and res["changed"]
        assert "look at heretwo please" not in (mem.wiki_dir / part_path(PATH, 2)).read_text()
        assert (
            "look at hubtwo please"
            in (mem.wiki_dir / PATH).read_text() + (mem.wiki_dir / part_path(PATH, 2)).read_text()
        )
    finally:
        mem.stop()
