"""A hub never wipes the local wiki (docs/git.md, "A hub never wipes the local wiki"):
an unrelated history merges as a union; a rewound or rewritten hub, and a hub commit
deleting most pages, stop the sync (``409 sync_refused``, recorded, skipped by the
periodic sync) until an admin runs ``sync --accept-deletions``; a purge is followed only
through its signed announcement; a purged page never comes back.

The hubs are bare repositories made and moved by stock git."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from clikit import run_cli_here
from gitkit import all_objects
from support import make_memory

from wiki_memory.core.purge import purge_page
from wiki_memory.core.syncstate import sync_lines
from wiki_memory.errors import SyncRefused
from wiki_memory.wiki import replicate as rp

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(shutil.which("git") is None, reason="needs stock git"),
]

KEY = "team-purge-key"


def bare(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    return path


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


def pages(wiki: Path) -> dict[str, bytes]:
    return {
        f.relative_to(wiki).as_posix(): f.read_bytes()
        for f in sorted(wiki.rglob("*.md"))
        if ".git" not in f.relative_to(wiki).parts
    }


def write_pages(m, rels: list[str], tag: str = "") -> None:
    for rel in rels:
        full = m.wiki_dir / rel
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text(f"# {Path(rel).stem}\n{tag}\n")
    m._commit_hand_edits_now(rels)


def one_commit_each(m, rels: list[str]) -> None:
    for rel in rels:
        write_pages(m, [rel])


def other_history(tmp_path: Path, hub: Path, files: dict[str, str]) -> None:
    """Force-push an unrelated history holding ``files`` to ``hub``'s main."""
    work = tmp_path / "other-work"
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    git(work, "add", "-A")
    git(work, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qm", "elsewhere")
    git(work, "push", "-q", "--force", str(hub), "main:main")


def test_a_hub_force_pushed_to_an_unrelated_history_keeps_every_page_and_adds_its(
    tmp_path, stop_after
):
    hub = bare(tmp_path / "hub.git")
    a = make_memory(tmp_path / "a", files={"projects/p/index.md": "# p\n"})
    stop_after(a)
    rp.add_remote(a.wiki_dir, "origin", str(hub))
    write_pages(a, [f"projects/p/notes/n{i}.md" for i in range(30)])
    a.sync.sync()
    before = pages(a.wiki_dir)
    other_history(tmp_path, hub, {"projects/q/notes/theirs.md": "# theirs\n"})
    rep = a.sync.sync()
    assert rep[0].action == "merged unrelated history"
    after = pages(a.wiki_dir)
    assert all(after.get(k) == v for k, v in before.items())
    assert "projects/q/notes/theirs.md" in after
    # the hub now holds both
    assert "projects/p/notes/n29.md" in git(hub, "ls-tree", "-r", "--name-only", "main")


def test_a_re_initialised_hub_with_a_few_pages_never_empties_the_wiki(tmp_path, stop_after):
    hub = bare(tmp_path / "hub.git")
    a = make_memory(tmp_path / "a", files={"projects/p/index.md": "# p\n"})
    stop_after(a)
    rp.add_remote(a.wiki_dir, "origin", str(hub))
    write_pages(a, [f"projects/p/notes/n{i}.md" for i in range(60)])
    a.sync.sync()
    before = pages(a.wiki_dir)
    shutil.rmtree(hub)
    bare(hub)
    other_history(tmp_path, hub, {f"projects/p/notes/new{i}.md": f"# {i}\n" for i in range(8)})
    a.sync.sync(periodic=True)
    a.sync.sync()
    after = pages(a.wiki_dir)
    assert set(before) <= set(after) and len(after) == len(before) + 8


def test_a_hub_rewound_by_20_commits_stops_until_accept_deletions(tmp_path, stop_after):
    hub = bare(tmp_path / "hub.git")
    a = make_memory(tmp_path / "a", files={"projects/p/index.md": "# p\n"})
    stop_after(a)
    rp.add_remote(a.wiki_dir, "origin", str(hub))
    one_commit_each(a, [f"projects/p/notes/n{i}.md" for i in range(25)])
    a.sync.sync()
    head = git(a.wiki_dir, "rev-parse", "HEAD")
    before = pages(a.wiki_dir)
    git(hub, "update-ref", "refs/heads/main", "main~20")
    with pytest.raises(SyncRefused) as err:
        a.sync.sync()
    body = err.value.body()
    assert body["error"] == "sync_refused" and body["cause"] == "rewrite"
    assert body["deletions"] == 20 and body["shared"] == 27  # with .gitignore
    assert pages(a.wiki_dir) == before and git(a.wiki_dir, "rev-parse", "HEAD") == head
    st = a.sync.status()["remotes"]["origin"]
    assert st["stopped"]["deletions"] == 20 and st["failing_since"]
    assert any("--accept-deletions" in line for line in sync_lines(a.wiki_dir))
    # the periodic sync does not try again, let alone apply it
    assert a.sync.sync(periodic=True) == []
    assert pages(a.wiki_dir) == before
    rep = a.sync.sync(accept_deletions=True)
    assert rep[0].action == "followed rewrite"
    hub_has = set(git(hub, "ls-tree", "-r", "--name-only", "main").split())
    assert hub_has - {".gitignore"} <= set(pages(a.wiki_dir))
    assert len(pages(a.wiki_dir)) == len(before) - 20
    assert a.sync.status()["remotes"]["origin"]["stopped"] is None


def test_a_hub_commit_deleting_most_pages_stops_and_the_periodic_sync_never_applies_it(
    tmp_path, stop_after
):
    hub = bare(tmp_path / "hub.git")
    a = make_memory(tmp_path / "a", files={"projects/p/index.md": "# p\n"})
    stop_after(a)
    rp.add_remote(a.wiki_dir, "origin", str(hub))
    write_pages(a, [f"projects/p/notes/n{i}.md" for i in range(40)])
    a.sync.sync()
    before = pages(a.wiki_dir)
    work = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "-b", "main", str(hub), str(work)], check=True)
    git(work, "rm", "-q", *[f"projects/p/notes/n{i}.md" for i in range(35)])
    git(work, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qm", "wipe")
    git(work, "push", "-q", "origin", "HEAD:main")
    with pytest.raises(SyncRefused) as err:
        a.sync.sync(periodic=True)  # the first periodic run stops
    assert err.value.body()["cause"] == "deletions" and err.value.body()["deletions"] == 35
    assert pages(a.wiki_dir) == before
    with pytest.raises(SyncRefused):
        a.sync.sync()  # so does a plain one by hand
    assert pages(a.wiki_dir) == before
    assert a.sync.sync(periodic=True) == []
    assert pages(a.wiki_dir) == before
    a.sync.sync(accept_deletions=True)
    assert len(pages(a.wiki_dir)) == len(before) - 35


def test_a_purged_page_stays_purged_when_the_hub_shows_its_old_history_again(tmp_path, stop_after):
    hub = bare(tmp_path / "hub.git")
    a = make_memory(tmp_path / "a", files={"projects/p/index.md": "# p\n"}, sync_purge_secret=KEY)
    stop_after(a)
    b = make_memory(tmp_path / "b", owner="ben", sync_purge_secret="another key")
    stop_after(b)
    for m in (a, b):
        rp.add_remote(m.wiki_dir, "origin", str(hub))
    page = "projects/p/notes/vendor.md"
    full = a.wiki_dir / page
    full.parent.mkdir(parents=True)
    full.write_text("---\nid: vendor-page\ntitle: vendor\n---\nSECRET-QX7\n")
    a._commit_hand_edits_now([page])
    write_pages(a, ["projects/p/notes/keep.md"])
    a.sync.sync()
    b.sync.sync()
    old_hub = tmp_path / "old-hub.git"
    shutil.copytree(hub, old_hub)
    purge_page(a, page, None)
    a.sync.sync(after_purge=True)
    # an announcement signed with another key is no announcement: B stops
    with pytest.raises(SyncRefused) as err:
        b.sync.sync()
    assert err.value.body()["cause"] == "rewrite"
    assert (b.wiki_dir / page).is_file()
    # the hub restored to its old history: A stops, and even accepting brings nothing back
    shutil.rmtree(hub)
    shutil.copytree(old_hub, hub)
    with pytest.raises(SyncRefused):
        a.sync.sync()
    assert not full.exists()
    a.sync.sync(accept_deletions=True)
    assert not full.exists() and (a.wiki_dir / "projects/p/notes/keep.md").is_file()
    # the same page under another path (same id) does not come back either
    assert "SECRET-QX7" not in "".join(p.decode() for p in pages(a.wiki_dir).values())


def test_doctor_lists_hub_commits_that_leaked_and_rewrite_hub_replaces_them(tmp_path, stop_after):
    """A hub holding what an older server pushed (another user's personal page, a
    personal handoff's title in a message): doctor names the commits and the cleanup,
    ``sync --rewrite-hub`` replaces them, the other server follows, and neither the hub
    nor either server's objects hold the markers any more."""
    diary, title = "-".join(["wren", "diary", "6630"]), "-".join(["kite", "title", "1807"])
    hub = bare(tmp_path / "hub.git")
    a = make_memory(tmp_path / "a", files={"projects/p/index.md": "# p\n"}, sync_purge_secret=KEY)
    stop_after(a)
    b = make_memory(tmp_path / "b", owner="ben", sync_purge_secret=KEY)
    stop_after(b)
    for m in (a, b):
        rp.add_remote(m.wiki_dir, "origin", str(hub))
    write_pages(a, ["projects/p/notes/shared.md"])
    a.sync.sync()
    b.sync.sync()
    # what a server from before the personal rule pushed: stock git, on top of the hub
    old = tmp_path / "old-server"
    subprocess.run(["git", "clone", "-q", "-b", "main", str(hub), str(old)], check=True)
    (old / "people/wren").mkdir(parents=True)
    (old / "people/wren/diary.md").write_text(f"# diary\n{diary}\n")
    (old / "projects/p/notes/later.md").write_text("# later\n")
    git(old, "add", "-A")
    git(old, "-c", "user.name=old", "-c", "user.email=old@example.org", "commit", "-q",
        "-m", f"Handoff P-1a2b3c4d opened: {title}")  # fmt: skip
    git(old, "push", "-q", "origin", "HEAD:main")
    a.sync.sync()
    b.sync.sync()
    assert diary.encode() in all_objects(hub) and diary.encode() in all_objects(a.wiki_dir)

    out = run_cli_here(tmp_path / "a", "doctor", "--json")
    rep = json.loads(out.stdout)
    leaks = rep["hub_leaks"]["origin"]
    assert leaks["commits"] >= 1
    reasons = {r for c in leaks["first"] for r in c["reasons"]}
    assert reasons == {"a personal page in its tree", "personal content in its message"}
    found = [f for f in rep["findings"] if f["check"] == "hub_leaks"]
    assert found and found[0]["fix"] == "wiki-memory sync --rewrite-hub origin --yes"
    assert diary not in out.stdout and title not in out.stdout

    rep_a = a.sync.sync(rewrite_hub=True)
    assert rep_a[0].remote_gc == "pruned"
    assert b.sync.sync()[0].action == "followed rewrite"
    write_pages(b, ["projects/p/notes/after.md"])
    for m in (b, a, b):  # later syncs never bring the old commits back to the hub
        m.sync.sync()
    assert (a.wiki_dir / "projects/p/notes/after.md").is_file()
    # (A's own branch keeps the hub's old commits it merged: docs/operations.md)
    for repo in (hub, b.wiki_dir):
        objects = all_objects(repo)
        assert diary.encode() not in objects and title.encode() not in objects, repo
    assert (b.wiki_dir / "projects/p/notes/later.md").is_file()
    again = json.loads(run_cli_here(tmp_path / "a", "doctor", "--json").stdout)
    assert again.get("hub_leaks") == {}
    assert not [f for f in again["findings"] if f["check"] == "hub_leaks"]


def test_a_second_purge_is_followed_by_a_server_whose_last_push_was_a_sync_merge(
    tmp_path, stop_after
):
    """After following one purge, a server's next sync pushes a merge commit; the purging
    server's next purge projects that merge away (it took one side whole), so no commit
    of the new history is its twin. The follower still follows the announced purge."""
    a = make_memory(tmp_path / "a", files={"projects/p/index.md": "# p\n"}, sync_purge_secret=KEY)
    stop_after(a)
    b = make_memory(tmp_path / "b", owner="ben", sync_purge_secret=KEY)
    stop_after(b)
    c = make_memory(tmp_path / "c", owner="cyd", sync_purge_secret=KEY)
    stop_after(c)
    hub = bare(tmp_path / "hub.git")
    for m in (a, b, c):
        rp.add_remote(m.wiki_dir, "origin", str(hub))
    write_pages(a, ["projects/p/notes/one.md", "projects/p/notes/keep.md"], "first secret")
    for m in (a, b, c, a):
        m.sync.sync()
    purge_page(a, "projects/p/notes/one.md", None)
    a.sync.sync(after_purge=True)
    for m in (b, c):
        assert m.sync.sync()[0].action == "followed rewrite"
    write_pages(a, ["projects/p/notes/two.md"], "second secret")
    for m in (a, b, c):
        m.sync.sync()
    purge_page(a, "projects/p/notes/two.md", None)
    a.sync.sync(after_purge=True)
    for m in (b, c):
        assert m.sync.sync()[0].action == "followed rewrite"
        assert not (m.wiki_dir / "projects/p/notes/two.md").exists()
        assert (m.wiki_dir / "projects/p/notes/keep.md").is_file()


def test_with_no_purge_secret_both_servers_say_which_setting_spares_the_admin_step(
    tmp_path, stop_after
):
    """With no ``sync_purge_secret`` a purge cannot be announced: the purging server says
    so when it pushes, and the follower's stop names the setting beside the admin step."""
    hub = bare(tmp_path / "hub.git")
    a = make_memory(tmp_path / "a", files={"projects/p/index.md": "# p\n"})
    stop_after(a)
    b = make_memory(tmp_path / "b", owner="ben")
    stop_after(b)
    for m in (a, b):
        rp.add_remote(m.wiki_dir, "origin", str(hub))
    page = "projects/p/notes/vendor.md"
    write_pages(a, [page, "projects/p/notes/keep.md"])
    a.sync.sync()
    b.sync.sync()
    purge_page(a, page, None)
    rep = a.sync.sync(after_purge=True)
    assert "not announced" in rep[0].action and "sync_purge_secret" in rep[0].action
    with pytest.raises(SyncRefused) as err:
        b.sync.sync()
    body = err.value.body()
    assert body["cause"] == "rewrite" and "sync_purge_secret" in str(err.value)
    assert "sync_purge_secret" in b.sync.status()["remotes"]["origin"]["stopped"]["message"]
    assert (b.wiki_dir / page).is_file()
    b.sync.sync(accept_deletions=True)  # the admin step it names
    assert not (b.wiki_dir / page).exists()
    assert (b.wiki_dir / "projects/p/notes/keep.md").is_file()
