"""The watcher on a live Memory: editors' atomic saves (C18), moves and unreliable event
kinds (C19), a 1,000-file git checkout, folder renames, no self-triggered loops, and links
out of the wiki. After each step the index must equal a fresh scan of the files."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
import support
import watchfiles.main
from support import quiet, wait_for

from wiki_memory.core.memory import Memory
from wiki_memory.errors import NotFound
from wiki_memory.index.store import Index

SETTLE = 0.3


def make_memory(tmp_path: Path, files: dict[str, str] | None = None) -> Memory:
    return support.make_memory(
        tmp_path / "data",
        owner="owner",
        files=files,
        watch=True,
        commit_delay_seconds=0.05,
        hand_edit_settle_seconds=SETTLE,
        idle_check_seconds=60,
    )


def fresh_rows(m: Memory, tmp_path: Path) -> set[tuple[str, str, str]]:
    n = len(list(tmp_path.glob("fresh-*.db")))
    fresh = Index(tmp_path / f"fresh-{n}.db")
    fresh.rebuild(m.wiki_dir)
    rows = fresh.rows()
    fresh.close()
    return rows


def assert_matches_scan(m: Memory, tmp_path: Path, timeout: float = 10.0) -> None:
    want = fresh_rows(m, tmp_path)
    wait_for(lambda: m.index.rows() == want, timeout, "the index to match a fresh scan")


def log_paths(m: Memory) -> list[tuple[str, list[str]]]:
    return [(c.message.splitlines()[0], sorted(c.paths)) for c in m.git.log(limit=100)]


TEMP_NAMES = [
    "4913",
    "daily.md~",
    ".daily.md.swp",
    "daily.md___jb_tmp___",
    "daily.md___jb_old___",
    ".#daily.md",
    "#daily.md#",
]


def test_a_file_written_the_moment_start_returns_is_indexed(tmp_path, stop_after, monkeypatch):
    # start() returns once the watcher's watches are in place, not after a fixed wait
    # (watchfiles' 1 s idle timeout, before): a hand edit made at once is seen, even where
    # putting the watches in place is slow, as on a big tree (here: 0.5 s)
    real = watchfiles.main.RustNotify

    def slow_to_watch(*args, **kwargs):
        time.sleep(0.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(watchfiles.main, "RustNotify", slow_to_watch)
    m = make_memory(tmp_path)
    stop_after(m)
    (m.wiki_dir / "notes").mkdir(parents=True, exist_ok=True)
    (m.wiki_dir / "notes" / "edit.md").write_text("# Edit\n\nhand text\n")
    wait_for(lambda: "notes/edit.md" in m.index.paths(), 10, "the hand edit indexed")


def test_a_page_written_while_the_watch_restarts_is_indexed(tmp_path, stop_after, monkeypatch):
    """The watch breaks (watchfiles raises: a name that is not UTF-8 does so, dropping its
    batch) and putting new watches in place takes 0.5 s; a page written meanwhile, before
    the new watches exist, is indexed all the same, as is one written after."""
    real = watchfiles.main.RustNotify
    broken = threading.Event()
    restarting = threading.Event()

    class BreaksOnce:
        made = 0

        def __init__(self, *args, **kwargs):
            BreaksOnce.made += 1
            self.first = BreaksOnce.made == 1
            if BreaksOnce.made == 2:
                restarting.set()
                time.sleep(0.5)  # the test writes a page now
            self.real = real(*args, **kwargs)

        def __enter__(self):
            self.real.__enter__()
            return self

        def __exit__(self, *exc):
            return self.real.__exit__(*exc)

        def watch(self, *args):
            if self.first and broken.is_set():
                raise RuntimeError("the watch broke")
            return self.real.watch(*args)

    monkeypatch.setattr(watchfiles.main, "RustNotify", BreaksOnce)
    m = make_memory(tmp_path)
    stop_after(m)
    notes = m.wiki_dir / "notes"
    notes.mkdir(parents=True, exist_ok=True)
    broken.set()
    assert restarting.wait(10), "the watch did not break"
    (notes / "gap.md").write_text("# Gap\n\nwritten while no watch was in place\n")
    wait_for(lambda: "notes/gap.md" in m.index.paths(), 10, "the page of the gap indexed")
    (notes / "after.md").write_text("# After\n\nwritten once the new watch was in place\n")
    wait_for(lambda: "notes/after.md" in m.index.paths(), 10, "the page after indexed")
    assert_matches_scan(m, tmp_path)


@pytest.mark.slow  # watches the tries for 3 s
def test_watches_that_cannot_be_made_leave_the_index_current_without_spinning(
    tmp_path, stop_after, monkeypatch
):
    """watchfiles cannot set up its watches at all: a page written is still indexed (by
    the scans each try makes), the tries back off instead of scanning the whole wiki
    twenty times a second, and stop() returns at once."""

    class NeverWatches:
        def __init__(self, *args, **kwargs):
            raise OSError("inotify watch limit reached")

    monkeypatch.setattr(watchfiles.main, "RustNotify", NeverWatches)
    m = make_memory(tmp_path)
    watcher = m.watcher
    assert watcher is not None
    (m.wiki_dir / "notes").mkdir(parents=True, exist_ok=True)
    (m.wiki_dir / "notes" / "blind.md").write_text("# Blind\n\nno watch saw this\n")
    wait_for(lambda: "notes/blind.md" in m.index.paths(), 15, "the page indexed by a scan")
    before = watcher.rescans
    time.sleep(3)
    # 0.05 s apart, as before, is about 60 scans in 3 s; backing off, at most 4 or 5
    assert watcher.rescans - before <= 6, watcher.rescans - before
    t = time.monotonic()
    watcher.stop()  # a wait between tries ends at once
    assert not watcher.alive() and time.monotonic() - t < 2


@pytest.mark.process
def test_c18_editor_saves_leave_one_page_with_its_id_and_backlinks(tmp_path, stop_after):
    m = make_memory(
        tmp_path,
        {
            "notes/daily.md": "---\nid: daily-1\npermalink: daily\n---\n# Daily\n\noldword\n",
            "notes/index.md": "# Index\n\nSee [[daily]].\n",
        },
    )
    stop_after(m)
    notes = m.wiki_dir / "notes"
    daily = notes / "daily.md"
    commits0 = len(m.git.log(limit=100))

    def check(word: str, old: str) -> None:
        assert set(m.index.paths()) == {"notes/daily.md", "notes/index.md"}
        meta = m.index.page_meta("notes/daily.md")
        assert meta is not None and meta["id"] == "daily-1"
        assert meta["meta"]["permalink"] == "daily"
        assert {h.path for h in m.index.query(word)} == {"notes/daily.md"}
        assert m.index.query(old, mode="and") == []
        assert [b["src_path"] for b in m.index.backlinks("notes/daily.md")] == ["notes/index.md"]
        for name in TEMP_NAMES:
            assert m.index.page_meta(f"notes/{name}") is None

    def body(word: str) -> str:
        return f"---\nid: daily-1\npermalink: daily\n---\n# Daily\n\n{word}\n"

    # A. vim (writebackup): swap, 4913 probe, rename to ~, new file, delete ~ and swap
    (notes / ".daily.md.swp").write_bytes(b"b0VIM 9.0")
    (notes / "4913").write_bytes(b"")
    (notes / "4913").unlink()
    os.rename(daily, notes / "daily.md~")
    daily.write_text(body("newword"))
    (notes / "daily.md~").unlink()
    (notes / ".daily.md.swp").unlink()
    wait_for(lambda: bool(m.index.query("newword")), what="vim save indexed")
    quiet(m)
    check("newword", "oldword")

    # B. JetBrains safe write
    (notes / "daily.md___jb_tmp___").write_text(body("jetword"))
    os.rename(daily, notes / "daily.md___jb_old___")
    os.rename(notes / "daily.md___jb_tmp___", daily)
    (notes / "daily.md___jb_old___").unlink()
    wait_for(lambda: bool(m.index.query("jetword")), what="JetBrains save indexed")
    quiet(m)
    check("jetword", "newword")

    # C. Emacs: a dangling lock symlink and an auto-save file, then a save
    os.symlink("user@host.4242", notes / ".#daily.md")
    (notes / "#daily.md#").write_text(body("autosave"))
    time.sleep(0.2)
    (notes / "#daily.md#").unlink()
    daily.write_text(body("emacsword"))
    os.unlink(notes / ".#daily.md")
    wait_for(lambda: bool(m.index.query("emacsword")), what="Emacs save indexed")
    quiet(m)
    check("emacsword", "jetword")
    assert m.index.query("autosave") == []

    # one commit per save, each a modification of notes/daily.md, nothing for temp files
    log = log_paths(m)
    new = log[: len(log) - commits0]
    assert [paths for _, paths in new] == [["notes/daily.md"]] * 3, new
    assert all(msg.startswith("Edit by hand") for msg, _ in new)
    tree = subprocess.run(
        ["git", "ls-files"], cwd=m.wiki_dir, capture_output=True, text=True, check=True
    ).stdout.split()
    assert not any(any(t in f for t in ("4913", "~", ".swp", "___jb_", "#")) for f in tree)
    if shutil.which("git"):
        st = subprocess.run(
            ["git", "show", "--name-status", "--format=", "HEAD"],
            cwd=m.wiki_dir,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert st == ["M", "notes/daily.md"]  # a modification, not a delete plus an add


@pytest.mark.slow
def test_c19_moves_batch_deletes_and_folder_restore_match_a_fresh_scan(tmp_path, stop_after):
    files = {
        "notes/alpha.md": "---\nid: alpha-1\n---\n# alpha\n\nalpha body\n",
        "notes/index.md": "# Index\n\n[[alpha]]\n",
        **{f"batch/b{i}.md": f"# b{i}\n\nbatchword{i}\n" for i in range(1, 6)},
        "projects/p1.md": "# p1\n\nrestoreword one\n",
        "projects/p2.md": "# p2\n\nrestoreword two\n",
    }
    m = make_memory(tmp_path, files)
    stop_after(m)
    w = m.wiki_dir
    assert_matches_scan(m, tmp_path)

    # A. move across folders (the two halves may arrive in different batches)
    (w / "archive").mkdir()
    os.rename(w / "notes/alpha.md", w / "archive/alpha.md")
    assert_matches_scan(m, tmp_path)
    meta = m.index.page_meta("archive/alpha.md")
    assert meta is not None and meta["id"] == "alpha-1"
    assert m.index.page_meta("notes/alpha.md") is None
    assert [h.path for h in m.index.query("alpha body", mode="and")] == ["archive/alpha.md"]
    (lk,) = m.index.outlinks("notes/index.md")
    assert (lk["status"], lk["path"]) == ("resolved", "archive/alpha.md")
    with pytest.raises(NotFound):
        m.read_page("notes/alpha.md")

    # B. batch delete of five files
    for i in range(1, 6):
        (w / f"batch/b{i}.md").unlink()
    assert_matches_scan(m, tmp_path)
    assert all(m.index.query(f"batchword{i}") == [] for i in range(1, 6))

    # C. delete a folder, then restore it (as an undo or a checkout would)
    saved = tmp_path / "saved-projects"
    shutil.copytree(w / "projects", saved)
    shutil.rmtree(w / "projects")
    assert_matches_scan(m, tmp_path)
    assert m.index.query("restoreword") == []
    shutil.copytree(saved, w / "projects")
    assert_matches_scan(m, tmp_path)
    assert {h.path for h in m.index.query("restoreword")} == {"projects/p1.md", "projects/p2.md"}
    quiet(m)
    assert m.git.is_clean(include_untracked=True)


@pytest.mark.slow
def test_folder_rename_keeps_pages_and_links(tmp_path, stop_after):
    m = make_memory(
        tmp_path,
        {
            "team/a.md": "# A\n\n[[b]]\n",
            "team/b.md": "# B\n\nbee text\n",
            "index.md": "[[a]] [[team/b]]\n",
        },
    )
    stop_after(m)
    os.rename(m.wiki_dir / "team", m.wiki_dir / "crew")
    assert_matches_scan(m, tmp_path)
    assert set(m.index.paths()) == {"crew/a.md", "crew/b.md", "index.md"}
    st = [(lk["target"], lk["status"], lk["path"]) for lk in m.index.outlinks("index.md")]
    assert st == [("a", "resolved", "crew/a.md"), ("team/b", "unresolved", None)]
    assert m.index.outlinks("crew/a.md")[0]["path"] == "crew/b.md"
    quiet(m)
    assert m.git.is_clean(include_untracked=True)


@pytest.mark.process
@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary")
def test_git_checkout_of_1000_files_settles_consistently(tmp_path, stop_after):
    files = {
        f"bulk/{i // 100:02d}/page-{i:04d}.md": f"# Page {i}\n\nfirstword {i}\n"
        for i in range(1000)
    }
    m = make_memory(tmp_path, files)
    stop_after(m)
    w = m.wiki_dir

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=w, check=True, capture_output=True, text=True
        ).stdout.strip()

    git("config", "user.email", "p@x")
    git("config", "user.name", "Person")
    quiet(m)
    # the other branch is made in a second work tree, so that its 1,000 edits are never
    # hand edits of the wiki (the server would rightly commit those itself, racing the
    # person's own `git commit`)
    other = tmp_path / "other-worktree"
    git("worktree", "add", "-q", "-b", "other", str(other))
    for rel in files:
        (other / rel).write_text((other / rel).read_text().replace("firstword", "secondword"))
    subprocess.run(["git", "commit", "-q", "-am", "second"], cwd=other, check=True)
    git("worktree", "remove", "--force", str(other))
    quiet(m)
    head_before = git("rev-parse", "HEAD")
    git("checkout", "-q", "other")
    # waits until the index equals the files (60 s: a hang guard); how long it takes is
    # measured by bench/watcher.py ("git checkout of 1,000 files")
    assert_matches_scan(m, tmp_path, timeout=60)
    assert len(m.index.query("secondword", limit=2000)) == 1000
    assert m.index.query("firstword") == []
    quiet(m)
    # the checkout is not a hand edit: HEAD is where git put it, no commit on top
    assert git("rev-parse", "HEAD") != head_before
    assert git("log", "-1", "--format=%s") == "second"
    assert git("status", "--porcelain") == ""


@pytest.mark.serial  # asserts a time bound
@pytest.mark.process
def test_no_self_triggered_loops_and_idle_when_nothing_changes(tmp_path, stop_after):
    m = make_memory(tmp_path, {"notes/a.md": "# A\n\nbody\n"})
    stop_after(m)
    quiet(m)
    m.write_page("notes/b.md", b"# B\n\nserver text\n", user="alice", message="Write b")
    m.writer.flush()
    if shutil.which("git"):
        for _ in range(3):
            subprocess.run(["git", "status"], cwd=m.wiki_dir, capture_output=True, check=True)
    quiet(m)
    w = m.watcher
    batches, synced, commits = w.batches, w.synced, len(m.git.log(limit=100))
    cpu0 = time.process_time()
    time.sleep(2.0)
    assert (w.batches, w.synced) == (batches, synced)  # nothing reported, nothing indexed
    assert len(m.git.log(limit=100)) == commits
    assert time.process_time() - cpu0 < 0.3  # the whole process idles
    # the server's own write was indexed once and committed once, as alice's
    assert [c.author_name for c in m.git.log("notes/b.md")] == ["alice"]


@pytest.mark.process
def test_links_out_of_the_wiki_are_not_followed_served_indexed_or_committed(tmp_path, stop_after):
    m = make_memory(tmp_path, {"ok.md": "# OK\n"})
    stop_after(m)
    outside = tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "secret.md").write_text("# Secret\n\nOUTSIDE-MARKER\n")
    (outside / "dir" / "s.md").write_text("OUTSIDE-MARKER\n")
    w = m.wiki_dir
    os.symlink(outside / "secret.md", w / "sym.md")
    os.symlink(outside / "dir", w / "symdir")
    os.link(outside / "secret.md", w / "hard.md")
    (w / "visible.md").write_text("# Visible\n\nvisible text\n")
    wait_for(lambda: bool(m.index.query("visible")), what="the plain page")
    quiet(m)
    (outside / "dir" / "s.md").write_text("OUTSIDE-MARKER changed\n")  # watched through symdir?
    quiet(m)
    assert set(m.index.paths()) == {"ok.md", "visible.md"}
    assert m.index.query("OUTSIDE-MARKER") == []
    for rel in ("sym.md", "hard.md", "symdir/s.md"):
        with pytest.raises((NotFound, ValueError)):
            m.read_page(rel)
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=w, capture_output=True, text=True, check=True
    ).stdout.split()
    assert "hard.md" not in tracked and "symdir/s.md" not in tracked
    assert "visible.md" in tracked
