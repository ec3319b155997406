"""Sync conflicts as a person meets them (docs/git.md, "Conflict copies"): one line per
conflict naming whose version is where, on the replica that merged and on the one that
receives the copy; the copy marked with its own title and ranked after its page; doctor's
fix is ``wiki-memory sync-conflicts``, and ``sync-conflicts resolve`` keeps one side in one
commit that sync carries to the other replica."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from clikit import run_cli_here
from support import as_user, committed, make_memory

from wiki_memory.cli.doctor import run_checks
from wiki_memory.core.syncconflicts import list_conflicts, resolve_conflict
from wiki_memory.wiki import replicate as rp
from wiki_memory.wiki.page import parse_metadata

pytestmark = [
    pytest.mark.process,  # sync runs its network steps in a child process
    pytest.mark.skipif(shutil.which("git") is None, reason="needs stock git"),
]

PAGE = "projects/p/notes/deploy.md"
BASE = b"---\nid: d1\ntitle: Deploy\n---\n# Deploy\n\nstep 1: run the deploy script\n"


def put(m, rel: str, data: bytes) -> None:
    full = m.wiki_dir / rel
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_bytes(data)
    m._commit_hand_edits_now([rel])


@pytest.fixture
def overlap(tmp_path: Path, stop_after):
    """A and B changed the same line of Deploy; B synced first, then A (A made the copy)."""
    hub = tmp_path / "hub.git"
    subprocess.run(["git", "init", "-q", "--bare", str(hub)], check=True)
    a = make_memory(tmp_path / "a", files={"projects/p/index.md": "# p\n"})
    b = make_memory(tmp_path / "b", owner="ben")
    for m in (a, b):
        stop_after(m)
        rp.add_remote(m.wiki_dir, "origin", str(hub))
    put(a, PAGE, BASE)
    a.sync.sync(), b.sync.sync(), a.sync.sync()
    put(a, PAGE, BASE.replace(b"step 1: run", b"step 1: FROM-ANA run"))
    put(b, PAGE, BASE.replace(b"step 1: run", b"step 1: FROM-BEN run"))
    b.sync.sync()
    rep_a = a.sync.sync()
    rep_b = b.sync.sync()
    return a, b, rep_a[0], rep_b[0]


def test_each_replica_says_whose_version_is_where_and_the_copy_is_marked(overlap):
    a, b, rep_a, rep_b = overlap
    (copy,) = rep_a.notes
    # the replica that merged: its own version stays, the hub's is in the copy
    assert rep_a.conflicts == {PAGE: copy}
    assert rep_a.notes[copy] == (
        f"{PAGE} keeps this replica's version; origin's version is in {copy}"
    )
    data = (a.wiki_dir / copy).read_bytes()
    meta = parse_metadata(data)
    assert (meta["conflict_of"], meta["conflict_side"]) == (PAGE, "origin")
    assert meta["title"] == "Deploy (conflict copy from origin)" and b"FROM-BEN" in data
    # the other replica: the copy holds its own version, the page the other one's
    assert rep_b.conflicts == {PAGE: copy}  # never a copy said to conflict with itself
    assert rep_b.notes[copy] == (
        f"{PAGE} now holds the version another replica kept when it merged with origin; "
        f"this replica's own version is in {copy}"
    )
    assert b"FROM-ANA" in (b.wiki_dir / PAGE).read_bytes()
    # recall: two Deploy pages no more; the copy after the page, marked
    items = b.recall("deploy script", project="p", user=as_user(b, "ben")).items
    paths = [i["path"] for i in items]
    assert paths.index(PAGE) < paths.index(copy)
    assert items[paths.index(copy)]["conflict_of"] == PAGE
    assert items[paths.index(copy)]["title"] != items[paths.index(PAGE)]["title"]


def test_doctor_points_to_sync_conflicts_and_resolve_keeps_one_side_everywhere(overlap):
    a, b, _ra, _rb = overlap
    (row,) = list_conflicts(b, None)["conflicts"]
    copy = row["copy"]
    _rep, findings = run_checks(b.settings, wait_seconds=0)
    mine = [f for f in findings if copy in f.message]
    assert mine and all(f.fix == "wiki-memory sync-conflicts" for f in mine), mine
    assert any("this replica's own version is in" in f.message for f in mine)
    # B keeps its own version: the copy's, marks off, at the page's path; the copy removed
    res = resolve_conflict(b, copy, "copy", as_user(b, "ben"))
    assert res == {"page": PAGE, "copy": copy, "kept": "copy"}
    assert (b.wiki_dir / PAGE).read_bytes() == BASE.replace(b"step 1: run", b"step 1: FROM-BEN run")
    assert not (b.wiki_dir / copy).exists()
    assert copy not in committed(b.wiki_dir) and PAGE in committed(b.wiki_dir)
    assert list_conflicts(b, None)["conflicts"] == []
    # the resolution travels: A ends with B's version and no copy
    b.sync.sync()
    a.sync.sync()
    assert not (a.wiki_dir / copy).exists()
    assert b"FROM-BEN" in (a.wiki_dir / PAGE).read_bytes()
    assert a.sync.status()["conflicts"] == []


def test_the_cli_lists_and_resolves_and_refuses_what_is_no_copy(overlap):
    a, _b, _ra, _rb = overlap
    a.stop()  # the CLI opens the data directory itself
    data = a.settings.data_dir
    out = run_cli_here(data, "sync-conflicts")
    assert out.returncode == 0, out.stderr
    (line,) = [ln for ln in out.stdout.splitlines() if ln.startswith("conflict: ")]
    assert "keeps this replica's version" in line
    bad = run_cli_here(data, "sync-conflicts", "resolve", PAGE, "--keep", "page")
    assert bad.returncode == 4 and "no conflict copy" in bad.stderr
    copy = line.rsplit(" is in ", 1)[1]
    ok = run_cli_here(data, "sync-conflicts", "resolve", copy, "--keep", "page")
    assert ok.returncode == 0, ok.stderr
    assert b"FROM-ANA" in (a.wiki_dir / PAGE).read_bytes()
    assert copy not in committed(a.wiki_dir)
    assert run_cli_here(data, "sync-conflicts").stdout.strip() == "no conflict copies"


def test_a_page_a_cloud_client_evicted_is_not_synced_as_a_deletion(tmp_path: Path, stop_after):
    hub = tmp_path / "hub.git"
    subprocess.run(["git", "init", "-q", "--bare", str(hub)], check=True)
    a = make_memory(tmp_path / "a", files={"projects/p/index.md": "# p\n"})
    b = make_memory(tmp_path / "b", owner="ben")
    for m in (a, b):
        stop_after(m)
        rp.add_remote(m.wiki_dir, "origin", str(hub))
    put(a, PAGE, BASE)
    a.sync.sync(), b.sync.sync()
    # iCloud frees the space on A: the page becomes a stub beside it
    (a.wiki_dir / PAGE).unlink()
    stub = "projects/p/notes/.deploy.md.icloud"
    (a.wiki_dir / stub).write_bytes(b"bplist00")
    a._commit_hand_edits_now([PAGE, stub])
    a.sync.sync()
    b.sync.sync()
    assert PAGE in committed(a.wiki_dir) and stub not in committed(a.wiki_dir)
    assert (b.wiki_dir / PAGE).read_bytes() == BASE
    assert not (b.wiki_dir / stub).exists()


def test_a_change_from_the_hub_to_an_evicted_page_lands_without_a_conflict_copy(
    tmp_path: Path, stop_after
):
    hub = tmp_path / "hub.git"
    subprocess.run(["git", "init", "-q", "--bare", str(hub)], check=True)
    a = make_memory(tmp_path / "a", files={"projects/p/index.md": "# p\n"})
    b = make_memory(tmp_path / "b", owner="ben")
    for m in (a, b):
        stop_after(m)
        rp.add_remote(m.wiki_dir, "origin", str(hub))
    put(a, PAGE, BASE)
    a.sync.sync(), b.sync.sync()
    (a.wiki_dir / PAGE).unlink()
    (a.wiki_dir / "projects/p/notes/.deploy.md.icloud").write_bytes(b"bplist00")
    put(b, PAGE, BASE + b"step 2 from ben\n")
    b.sync.sync()
    rep = a.sync.sync()
    assert rep[0].conflicts == {} and rep[0].notes == {}
    assert (a.wiki_dir / PAGE).read_bytes() == BASE + b"step 2 from ben\n"
