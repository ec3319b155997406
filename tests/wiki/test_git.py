"""GitStore: commits built from objects, index kept in step with stock git, C21, C23.

Real dulwich repositories in tmp_path; the stock ``git`` binary checks the result where
it is installed (those checks are skipped otherwise).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
import unicodedata
from pathlib import Path

import pytest
from dulwich import porcelain
from dulwich.repo import Repo

from wiki_memory.wiki import git as gitmod
from wiki_memory.wiki.git import (
    GITIGNORE_TEXT,
    GitBusy,
    GitError,
    GitStore,
    author_email_for,
    author_identity,
)

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="stock git binary not installed")


def git(repo: Path, *args: str, check: bool = True) -> str:
    """Run the stock git binary in ``repo`` with a fixed identity; return stdout."""
    assert GIT is not None
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Person",
        "GIT_AUTHOR_EMAIL": "person@example.org",
        "GIT_COMMITTER_NAME": "Person",
        "GIT_COMMITTER_EMAIL": "person@example.org",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(repo.parent),  # no user config of the machine
        "LC_ALL": "C.UTF-8",
    }
    out = subprocess.run(
        [GIT, "-c", "core.quotePath=false", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        check=False,
    )
    if check and out.returncode != 0:
        raise AssertionError(f"git {args} failed: {out.stderr.decode('utf-8', 'replace')}")
    return out.stdout.decode("utf-8")


def assert_clean(store: GitStore, paths: list[str] | None = None) -> None:
    """Both dulwich and stock git say the working tree and index match HEAD."""
    assert store.is_clean()
    st = porcelain.status(str(store.wiki_dir), untracked_files="no", optional_locks=False)
    assert not any(st.staged.values()) and not st.unstaged, st
    if GIT is not None:
        out = git(store.wiki_dir, "status", "--porcelain", "--untracked-files=no")
        assert out == "", out
        if paths:
            assert git(store.wiki_dir, "status", "--porcelain", "--", *paths) == ""


def write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


@pytest.fixture
def store(tmp_path: Path) -> GitStore:
    s = GitStore(tmp_path / "wiki")
    yield s
    s.close()


# --------------------------------------------------------------------------- identity


def test_author_email_for_defaults_and_configured() -> None:
    assert author_email_for("alice") == "alice@wiki-memory.local"
    assert author_email_for("Anna Maria") == "Anna-Maria@wiki-memory.local"
    assert author_email_for("bob", emails={"bob": "bob@corp.example"}) == "bob@corp.example"
    assert author_email_for("x", domain="team.lan") == "x@team.lan"
    assert author_email_for("<>") == "unknown@wiki-memory.local"
    assert author_identity("Eve <evil>\n", "eve@x") == b"Eve evil <eve@x>"
    assert author_identity("", "carol@x") == b"carol <carol@x>"
    # NFC: a decomposed name is stored composed
    assert author_identity(unicodedata.normalize("NFD", "José"), "j@x") == "José <j@x>".encode()


# --------------------------------------------------------------------------- setup


@pytest.mark.process
def test_new_wiki_has_main_branch_gitignore_and_first_commit(tmp_path: Path) -> None:
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    write(wiki, "notes/existing.md", "# existing\n")
    write(wiki, ".obsidian/workspace.json", "{}")
    write(wiki, ".obsidian/app.json", "{}")
    write(wiki, ".trash/old.md", "gone\n")
    write(wiki, "notes/.page.md.wm-tmp123", "partial")
    with GitStore(wiki) as s:
        assert s.branch() == "main"
        r = Repo(str(wiki))
        assert r.refs.read_ref(b"HEAD") == b"ref: refs/heads/main"
        r.close()
        (first,) = s.log()
        assert first.paths == [".gitignore", ".obsidian/app.json", "notes/existing.md"]
        assert s.read_at(".gitignore", first.sha) == GITIGNORE_TEXT.encode()
        assert first.author_name == "wiki-memory"
        assert_clean(s)
        assert s.is_clean(include_untracked=True)  # the rest is ignored
        if GIT:
            assert git(wiki, "config", "core.quotePath").strip() == "false"
            assert git(wiki, "status", "--porcelain", "--ignored") != ""  # ignored ones exist


@pytest.mark.process
@needs_git
def test_existing_repository_with_own_branch(tmp_path: Path) -> None:
    wiki = tmp_path / "vault"
    wiki.mkdir()
    git(wiki, "init", "-q", "-b", "trunk")
    write(wiki, "a.md", "a\n")
    git(wiki, "add", "a.md")
    git(wiki, "commit", "-q", "-m", "person's first")
    base = git(wiki, "rev-parse", "HEAD").strip()
    with GitStore(wiki) as s:
        assert s.branch() == "trunk" and s.head() == base
        assert not (wiki / ".gitignore").exists()  # not a new wiki: nothing added
        write(wiki, "b.md", "b\n")
        sha = s.commit(["b.md"], "Alice", "alice@wiki-memory.local", "add b")
        assert git(wiki, "rev-parse", "trunk").strip() == sha
        assert s.commit_info(sha).parents == (base,)
        assert_clean(s)


# --------------------------------------------------------------------------- commits


@pytest.mark.process
def test_write_modify_delete_with_authors(store: GitStore) -> None:
    w = store.wiki_dir
    write(w, "notes/a.md", "one\n")
    s1 = store.commit(["notes/a.md"], "Alice", "alice@wiki-memory.local", "add a")
    assert s1 and store.head() == s1
    assert_clean(store, ["notes/a.md"])
    write(w, "notes/a.md", "two\n")
    s2 = store.commit(["notes/a.md"], "Bob", "bob@wiki-memory.local", "edit a")
    assert_clean(store, ["notes/a.md"])
    (w / "notes/a.md").unlink()
    s3 = store.commit(["notes/a.md"], "Alice", "alice@wiki-memory.local", "remove a")
    assert_clean(store, ["notes/a.md"])
    assert store.read_at("notes/a.md", s3) is None
    # nothing changed: no commit
    assert store.commit(["notes/a.md"], "Alice", "alice@wiki-memory.local", "again") is None
    assert store.head() == s3
    log = store.log(limit=3)
    assert [c.sha for c in log] == [s3, s2, s1]
    assert [(c.author_name, c.author_email) for c in log] == [
        ("Alice", "alice@wiki-memory.local"),
        ("Bob", "bob@wiki-memory.local"),
        ("Alice", "alice@wiki-memory.local"),
    ]
    assert log[1].message == "edit a" and log[1].paths == ["notes/a.md"]
    if GIT:
        fmt = git(store.wiki_dir, "log", "-3", "--format=%an <%ae>|%cn <%ce>|%s")
        assert fmt.splitlines() == [
            "Alice <alice@wiki-memory.local>|Alice <alice@wiki-memory.local>|remove a",
            "Bob <bob@wiki-memory.local>|Bob <bob@wiki-memory.local>|edit a",
            "Alice <alice@wiki-memory.local>|Alice <alice@wiki-memory.local>|add a",
        ]
        assert git(store.wiki_dir, "fsck", "--strict") == ""


@pytest.mark.process
def test_commit_only_named_paths_and_keeps_persons_staged_work(store: GitStore) -> None:
    w = store.wiki_dir
    write(w, "mine.md", "server\n")
    write(w, "theirs.md", "person v1\n")
    store.commit(["mine.md", "theirs.md"], "A", "a@x", "both")
    write(w, "theirs.md", "person v2, staged\n")
    write(w, "untouched.md", "not named\n")
    if GIT:
        git(w, "add", "theirs.md")
    write(w, "mine.md", "server v2\n")
    sha = store.commit(["mine.md"], "A", "a@x", "mine only")
    assert sha is not None
    assert store.commit_info(sha).paths == ["mine.md"]
    assert store.read_at("theirs.md", sha) == b"person v1\n"
    assert store.read_at("untouched.md", sha) is None
    if GIT:
        assert git(w, "status", "--porcelain").splitlines() == ["M  theirs.md", "?? untouched.md"]
        git(w, "commit", "-q", "-m", "person commits their staged change")
        assert git(w, "show", "HEAD:mine.md") == "server v2\n"  # our change kept
        assert git(w, "show", "HEAD:theirs.md") == "person v2, staged\n"


@pytest.mark.process
def test_only_if_leaves_out_a_file_that_changed_since_the_caller_looked(store: GitStore) -> None:
    w = store.wiki_dir
    write(w, "a.md", "server v1\n")
    write(w, "b.md", "server v1\n")
    store.commit(["a.md", "b.md"], "A", "a@x", "first")
    write(w, "a.md", "server v2\n")
    write(w, "b.md", "person's save\n")  # the caller looked when b held "server v2"
    sha = store.commit(
        ["a.md", "b.md"],
        "A",
        "a@x",
        "server's",
        only_if={"a.md": b"server v2\n", "b.md": b"server v2\n"},
    )
    assert sha is not None and store.commit_info(sha).paths == ["a.md"]
    assert store.read_at("b.md", sha) == b"server v1\n"  # the person's bytes not in it
    assert not store.is_clean()  # b.md shows as modified, for its own commit
    # nothing of the caller's left: no commit at all
    assert store.commit(["b.md"], "A", "a@x", "x", only_if={"b.md": b"server v2\n"}) is None
    sha2 = store.commit(["b.md"], "P", "p@x", "Edit by hand: b.md")
    assert store.read_at("b.md", sha2) == b"person's save\n"
    assert_clean(store)


@pytest.mark.process
def test_folders_ignored_files_and_path_validation(store: GitStore) -> None:
    w = store.wiki_dir
    for i in range(3):
        write(w, f"projects/p/notes/n{i}.md", f"{i}\n")
    write(w, "projects/p/.n0.md.wm-tmp42", "temp")
    sha = store.commit(["projects/p"], "A", "a@x", "a folder")
    assert store.commit_info(sha or "").paths == [f"projects/p/notes/n{i}.md" for i in range(3)]
    # ignored files named explicitly are skipped (temp files, Obsidian's trash/layout)
    write(w, ".trash/old.md", "x")
    write(w, ".obsidian/workspace-mobile.json", "{}")
    ignored = ["projects/p/.n0.md.wm-tmp42", ".trash/old.md", ".obsidian/workspace-mobile.json"]
    assert store.commit(ignored, "A", "a@x", "ignored") is None
    assert store.commit([".trash"], "A", "a@x", "ignored folder") is None
    # a folder moved away: every file below it goes
    (w / "archive").mkdir()
    (w / "projects/p/notes").rename(w / "archive/notes")
    sha = store.commit(["projects/p/notes", "archive/notes"], "A", "a@x", "move")
    info = store.commit_info(sha or "")
    assert len(info.paths) == 6
    assert store.read_at("archive/notes/n1.md") == b"1\n"
    assert store.read_at("projects/p/notes/n1.md") is None
    assert_clean(store)
    # a file becomes a folder and back
    (w / "archive/notes/n2.md").unlink()
    write(w, "archive/notes/n2.md/inner.md", "inner\n")
    store.commit(["archive/notes/n2.md"], "A", "a@x", "file to folder")
    assert store.read_at("archive/notes/n2.md/inner.md") == b"inner\n"
    assert_clean(store)
    shutil.rmtree(w / "archive/notes/n2.md")
    write(w, "archive/notes/n2.md", "file again\n")
    store.commit(["archive/notes/n2.md"], "A", "a@x", "folder to file")
    assert store.read_at("archive/notes/n2.md") == b"file again\n"
    assert_clean(store)
    for bad in [
        "",
        "/etc/passwd",
        "../x.md",
        "a/../b.md",
        "a//b.md",
        "./a.md",
        ".git/config",
        "x/.GIT/y",
    ]:
        with pytest.raises(ValueError):
            store.commit([bad], "A", "a@x", "bad")


@pytest.mark.process
def test_two_hundred_commits_stay_correct(store: GitStore) -> None:
    w = store.wiki_dir
    shas = []
    for i in range(200):
        rel = f"notes/n{i % 20}.md"
        write(w, rel, f"version {i}\n")
        sha = store.commit([rel], "A", "a@x", f"edit {i}")
        assert sha is not None
        shas.append(sha)
    assert len(set(shas)) == 200
    log = store.log(limit=1000)
    assert [c.sha for c in log[:200]] == shas[::-1]
    assert len(log) == 201  # plus the first commit
    for k in range(20):
        assert store.read_at(f"notes/n{k}.md") == f"version {180 + k}\n".encode()
    assert store.read_at("notes/n5.md", shas[5]) == b"version 5\n"
    assert_clean(store)
    if GIT:
        assert git(w, "fsck", "--strict") == ""
        assert git(w, "rev-list", "--count", "HEAD").strip() == "201"


@pytest.mark.process
@pytest.mark.parametrize(
    "files", [1_000, pytest.param(10_000, marks=pytest.mark.slow)], ids=["1k", "10k"]
)
def test_commits_on_a_large_repo_stay_clean(tmp_path: Path, files: int) -> None:
    """Single-file commits on a repository of ``files`` files: each one lands, the index
    stays in step (``git status`` clean), and packing works. How fast: bench/git.py."""
    wiki = tmp_path / f"repo{files}"
    commits = 20
    with GitStore(wiki) as s:
        names = [f"notes/{i % 50:02d}/page-{i}.md" for i in range(files)]
        for i, rel in enumerate(names):
            write(wiki, rel, f"# page {i}\n\nbody\n")
        s.commit(names, "seed", "seed@x", "seed")
        edited = {}
        for j in range(commits):
            rel = names[(j * 7919) % files]
            write(wiki, rel, f"# page\n\nedit {j}\n")
            assert s.commit([rel], "A", "a@x", f"edit {j}")
            edited[rel] = f"# page\n\nedit {j}\n".encode()
        assert len(s.log(limit=commits + 10)) == commits + 2  # plus the seed and the first
        assert_clean(s)
        assert s.pack() > 0  # fewer files for pytest to delete afterwards
        assert s.read_at(names[1]) == b"# page 1\n\nbody\n"
        for rel, data in edited.items():
            assert s.read_at(rel) == data


# --------------------------------------------------------------------------- HEAD moves


@pytest.mark.process
@needs_git
def test_head_moved_by_stock_git_is_built_on(store: GitStore) -> None:
    w = store.wiki_dir
    write(w, "ours.md", "1\n")
    ours1 = store.commit(["ours.md"], "A", "a@x", "ours 1")
    write(w, "person.md", "by hand\n")
    git(w, "add", "person.md")
    git(w, "commit", "-q", "-m", "person's commit")
    theirs = git(w, "rev-parse", "HEAD").strip()
    assert store.changed_paths(ours1, theirs) == ["person.md"]
    git(w, "gc", "-q")  # refs packed, objects packed, loose objects gone
    write(w, "ours.md", "2\n")
    ours2 = store.commit(["ours.md"], "A", "a@x", "ours 2")
    assert store.commit_info(ours2 or "").parents == (theirs,)
    assert store.read_at("person.md") == b"by hand\n"
    assert store.read_at("ours.md") == b"2\n"
    assert_clean(store)
    assert git(w, "fsck", "--strict") == ""


@pytest.mark.process
@needs_git
def test_head_moved_while_building_is_retried(
    store: GitStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that moves the branch without the index lock (update-ref) between our
    read of HEAD and our compare-and-swap: the commit is rebuilt on top, nothing lost."""
    w = store.wiki_dir
    write(w, "side.md", "from plumbing\n")
    blob = git(w, "hash-object", "-w", "side.md").strip()
    real_build = gitmod.build_tree
    calls = {"n": 0}

    def build_then_move_head(objects, tree_id, items):  # type: ignore[no-untyped-def]
        result = real_build(objects, tree_id, items)
        calls["n"] += 1
        if calls["n"] == 1:
            head = git(w, "rev-parse", "HEAD").strip()
            base_tree = git(w, "rev-parse", "HEAD^{tree}").strip()
            env_tree = subprocess.run(
                [GIT or "git", "mktree"],
                cwd=w,
                input=git(w, "ls-tree", base_tree) + f"100644 blob {blob}\tside.md\n",
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            side = git(w, "commit-tree", env_tree, "-p", head, "-m", "plumbing").strip()
            git(w, "update-ref", "refs/heads/main", side, head)
        return result

    monkeypatch.setattr(gitmod, "build_tree", build_then_move_head)
    write(w, "ours.md", "ours\n")
    sha = store.commit(["ours.md"], "A", "a@x", "ours")
    assert calls["n"] >= 2  # built twice: the first swap failed
    info = store.commit_info(sha or "")
    assert git(w, "log", "-1", "--format=%s", info.parents[0]).strip() == "plumbing"
    assert store.read_at("side.md") == b"from plumbing\n"
    assert store.read_at("ours.md") == b"ours\n"
    # the commit built on the old HEAD is left dangling, nothing else
    assert git(w, "fsck", "--strict", "--no-dangling") == ""


@pytest.mark.process
def test_two_threads_commit_through_one_store(store: GitStore) -> None:
    w = store.wiki_dir
    errors: list[BaseException] = []

    def worker(name: str) -> None:
        try:
            for i in range(40):
                rel = f"{name}/n{i}.md"
                write(w, rel, f"{name} {i}\n")
                assert store.commit([rel], name, author_email_for(name), f"{name} {i}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in ("alice", "bob")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for name in ("alice", "bob"):
        for i in range(40):
            assert store.read_at(f"{name}/n{i}.md") == f"{name} {i}\n".encode()
    log = store.log(limit=100)
    assert len(log) == 81
    for c in log[:-1]:
        assert c.paths[0].startswith(c.author_name + "/")
    assert_clean(store)


def test_commit_many_groups_by_author(store: GitStore) -> None:
    w = store.wiki_dir
    write(w, "a1.md", "x\n")
    write(w, "a2.md", "y\n")
    write(w, "b1.md", "z\n")
    shas = store.commit_many(
        [
            ("alice", "alice@wiki-memory.local", "alice's burst", ["a1.md", "a2.md"]),
            ("bob", "bob@wiki-memory.local", "bob's burst", ["b1.md"]),
            ("bob", "bob@wiki-memory.local", "nothing", ["b1.md"]),
        ]
    )
    assert shas[2] is None
    a, b = store.commit_info(shas[0] or ""), store.commit_info(shas[1] or "")
    assert (a.author_name, a.paths) == ("alice", ["a1.md", "a2.md"])
    assert (b.author_name, b.paths) == ("bob", ["b1.md"])


def test_operation_in_progress_is_busy(store: GitStore) -> None:
    w = store.wiki_dir
    (w / ".git" / "rebase-merge").mkdir()
    write(w, "x.md", "x\n")
    with pytest.raises(GitBusy) as err:
        store.commit(["x.md"], "A", "a@x", "during rebase")
    assert "rebase" in err.value.reason and err.value.retry_after_seconds >= 1
    (w / ".git" / "rebase-merge").rmdir()
    assert store.commit(["x.md"], "A", "a@x", "after rebase")


@pytest.mark.process
@needs_git
def test_index_version_4_and_split_index(store: GitStore) -> None:
    w = store.wiki_dir
    write(w, "a.md", "a\n")
    store.commit(["a.md"], "A", "a@x", "a")
    git(w, "update-index", "--index-version", "4")
    write(w, "b.md", "b\n")
    store.commit(["b.md"], "A", "a@x", "b")
    assert_clean(store)
    git(w, "update-index", "--split-index")
    write(w, "c.md", "c\n")
    head = store.head()
    with pytest.raises(GitError):
        store.commit(["c.md"], "A", "a@x", "c")
    assert store.head() == head  # refused before committing anything
    assert not (w / ".git" / "index.lock").exists()
    git(w, "update-index", "--no-split-index")
    assert store.commit(["c.md"], "A", "a@x", "c")
    assert_clean(store)


# --------------------------------------------------------------------------- C21


def _hold_lock(wiki: Path) -> Path:
    """Take .git/index.lock the way git does (create exclusively)."""
    lock = wiki / ".git" / "index.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    os.close(fd)
    return lock


@pytest.mark.process
def test_c21_external_lock_released_within_wait(store: GitStore) -> None:
    w = store.wiki_dir
    lock = _hold_lock(w)
    threading.Timer(1.0, lock.unlink).start()
    write(w, "notes/alpha.md", "---\ntitle: Alpha\n---\nAlpha body v2\n")
    t0 = time.monotonic()
    sha = store.commit(["notes/alpha.md"], "user-a", "user-a@wiki-memory.local", "Alpha v2")
    assert sha is not None
    assert time.monotonic() - t0 >= 0.9
    assert not lock.exists()
    assert_clean(store, ["notes/alpha.md"])
    if GIT:
        assert git(w, "fsck", "--strict") == ""


@pytest.mark.process
def test_c21_external_lock_outlives_wait(tmp_path: Path) -> None:
    with GitStore(tmp_path / "wiki", lock_wait_seconds=0.5) as s:
        w = s.wiki_dir
        head = s.head()
        lock = _hold_lock(w)
        write(w, "notes/beta.md", "Beta body v2\n")
        t0 = time.monotonic()
        with pytest.raises(GitBusy) as err:
            s.commit(["notes/beta.md"], "user-b", "user-b@wiki-memory.local", "Beta v2")
        # waited out lock_wait_seconds (0.5), then answered busy: the upper bound is a
        # hang guard with room for a loaded machine, not a speed target
        assert 0.45 <= time.monotonic() - t0 < 10
        assert err.value.retry_after_seconds >= 1
        assert "index.lock" not in str(err.value) and "manually" not in str(err.value)
        assert err.value.__cause__ is None and err.value.__suppress_context__
        assert lock.exists()  # never deleted by us
        assert s.head() == head  # nothing half-done
        lock.unlink()  # the external git finishes
        assert s.commit(["notes/beta.md"], "user-b", "user-b@wiki-memory.local", "Beta v2")
        assert_clean(s)
        if GIT:
            assert git(w, "fsck", "--strict") == ""


@pytest.mark.process
def test_branch_ref_lock_is_waited_for_and_never_deleted(tmp_path: Path) -> None:
    with GitStore(tmp_path / "wiki", lock_wait_seconds=0.5) as s:
        w = s.wiki_dir
        ref_lock = w / ".git" / "refs" / "heads" / "main.lock"
        ref_lock.touch()
        threading.Timer(0.2, ref_lock.unlink).start()
        write(w, "a.md", "a\n")
        assert s.commit(["a.md"], "A", "a@x", "after a short ref lock")
        ref_lock.touch()
        write(w, "a.md", "b\n")
        head = s.head()
        with pytest.raises(GitBusy):
            s.commit(["a.md"], "A", "a@x", "ref lock held")
        assert ref_lock.exists() and s.head() == head
        assert not (w / ".git" / "index.lock").exists()  # ours released
        ref_lock.unlink()
        assert s.commit(["a.md"], "A", "a@x", "after")
        assert_clean(s)


@pytest.mark.process
def test_c21_burst_with_external_lock(tmp_path: Path, shared: Path) -> None:
    """inputs/C21.json: two users' writes plus a hook observation fired together while an
    external git holds the index lock for ~300 ms: all three land, right authors."""
    import json

    case = json.loads((shared / "cases" / "inputs" / "C21.json").read_text(encoding="utf-8"))
    with GitStore(tmp_path / "wiki") as s:
        w = s.wiki_dir
        lock = _hold_lock(w)
        threading.Timer(0.3, lock.unlink).start()
        users = ["user-a", "user-b", "user-a"]
        jobs = []
        for i, (req, user) in enumerate(zip(case["fire_together"], users, strict=True)):
            if "content" in req["body"]:
                rel = req["path"].removeprefix("/api/pages/") + ".md"
                text = req["body"]["content"]
            else:
                rel = f"projects/demo/sessions/{req['body']['session_id']}.md"
                text = f"observation {req['body']['tool_name']} {i}\n"
            write(w, rel, text)
            jobs.append((rel, user, text))
        results: dict[str, object] = {}

        def fire(rel: str, user: str) -> None:
            try:
                results[rel] = s.commit([rel], user, author_email_for(user), f"update {rel}")
            except BaseException as exc:  # pragma: no cover - reported below
                results[rel] = exc

        threads = [threading.Thread(target=fire, args=(rel, user)) for rel, user, _ in jobs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(isinstance(v, str) for v in results.values()), results
        for rel, user, text in jobs:
            assert s.read_at(rel) == text.encode()
            (info,) = s.log(rel, limit=1)
            assert info.author_name == user and info.author_email == f"{user}@wiki-memory.local"
        assert_clean(s)
        if GIT:
            assert git(w, "fsck", "--strict") == ""


@pytest.mark.process
@needs_git
def test_stock_git_and_store_commit_concurrently(store: GitStore) -> None:
    """A person's git committing in a loop while the server commits: both honour the
    index lock (the person's git may fail and retry, as with any two gits), and no
    commit from either side is lost."""
    w = store.wiki_dir
    stop = threading.Event()
    person_done: list[int] = []
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "P",
        "GIT_AUTHOR_EMAIL": "p@x",
        "GIT_COMMITTER_NAME": "P",
        "GIT_COMMITTER_EMAIL": "p@x",
        "HOME": str(w.parent),
    }

    lock_failures = [0]

    def person() -> None:
        i = 0
        while not stop.is_set() and i < 15:
            rel = f"hand/h{i}.md"
            write(w, rel, f"hand {i}\n")
            add = subprocess.run([GIT or "git", "add", rel], cwd=w, env=env, capture_output=True)
            done = add.returncode == 0 and (
                subprocess.run(
                    [GIT or "git", "commit", "-q", "-m", f"hand {i}", "--", rel],
                    cwd=w,
                    env=env,
                    capture_output=True,
                ).returncode
                == 0
            )
            if done:
                person_done.append(i)
                i += 1
            else:  # "Unable to create '.../index.lock': File exists": retry, as a person would
                lock_failures[0] += 1
                time.sleep(0.01)

    t = threading.Thread(target=person)
    t.start()
    ours = 0
    # Bounded by work, not by the clock: until the person's 15 commits are in (2,000 of
    # ours at most). A pause between our commits, as the writer's grouping gives in real
    # use: git never waits for index.lock, so back-to-back commits could starve it.
    while t.is_alive() and ours < 2000:
        rel = f"server/s{ours}.md"
        write(w, rel, f"server {ours}\n")
        assert store.commit([rel], "S", "s@x", f"server {ours}")
        ours += 1
        time.sleep(0.005)
    stop.set()
    t.join()
    print(
        f"\nperson's git: {len(person_done)} commits, {lock_failures[0]} lock retries; ours: {ours}"
    )
    assert len(person_done) == 15
    for i in person_done:
        assert store.read_at(f"hand/h{i}.md") == f"hand {i}\n".encode()
    for i in range(ours):
        assert store.read_at(f"server/s{i}.md") == f"server {i}\n".encode()
    assert_clean(store)
    # A person's `git commit` reads HEAD before it takes index.lock. When our commit lands
    # in between, git still writes its commit object, then its own ref compare-and-swap
    # refuses ("cannot lock ref 'HEAD': is at X but expected Y"), it rolls back, and the
    # person retries: that one object is left dangling, as between any two gits (gc prunes
    # it, with the trees it wrote for its index). Dangling objects are all fsck may report,
    # and never a commit of ours.
    fsck = git(w, "fsck", "--strict")
    for line in fsck.splitlines():
        assert line.startswith(("dangling commit ", "dangling tree ", "dangling blob ")), fsck
        if line.startswith("dangling commit "):
            sha = line.split()[-1]
            assert git(w, "log", "-1", "--format=%an %s", sha).startswith("P hand "), line


# --------------------------------------------------------------------------- C23

C23_TITLES = ["Café résumé", "会议记录 第三周", "Ünïcödé – notes", "ملاحظات"]


@pytest.mark.process
def test_c23_unicode_paths(tmp_path: Path, shared: Path) -> None:
    text = (shared / "cases" / "inputs" / "C23.txt").read_text(encoding="utf-8")
    for title in C23_TITLES:
        assert title in text
    with GitStore(tmp_path / "wiki") as s:
        w = s.wiki_dir
        rels = [f"notes/{t}.md" for t in C23_TITLES]
        for rel in rels:
            write(w, rel, f"# {rel}\n")
        s.commit(rels, "Zoë", "zoe@wiki-memory.local", "add pages")
        for rel in rels:
            write(w, rel, f"# {rel}\n\nedited\n")
            s.commit([rel], "Zoë", "zoe@wiki-memory.local", f"edit {rel}")
        # a decomposed (NFD) name from a caller finds the NFC file and stays NFC
        nfd = unicodedata.normalize("NFD", rels[0])
        assert nfd != rels[0]
        write(w, rels[0], "third\n")
        sha = s.commit([nfd], "Zoë", "zoe@wiki-memory.local", "nfd caller")
        assert s.commit_info(sha or "").paths == [rels[0]]
        assert_clean(s, rels)
        for rel in rels:
            assert unicodedata.is_normalized("NFC", rel)
            hist = s.log(rel)
            assert all(rel in c.paths for c in hist) and len(hist) >= 2
            d = s.diff(rel, hist[0].sha)
            assert f"a/{rel}" in d and f"b/{rel}" in d and "\\x" not in d and "\\3" not in d
            assert "+edited" in d or "+third" in d
            blame = s.blame(rel)
            if rel == rels[0]:
                assert [(b.line, b.sha) for b in blame] == [("third", sha)]
            else:
                assert [b.line for b in blame] == [f"# {rel}", "", "edited"]
                assert blame[2].sha == hist[0].sha and blame[2].author_name == "Zoë"
        assert s.log(limit=1)[0].author_name == "Zoë"
        if GIT:
            names = git(w, "log", "--name-only", "-z", "--format=").split("\0")
            assert {n.strip("\n") for n in names if n.strip("\n")} >= set(rels)
            assert git(w, "log", "-1", "--format=%an").strip() == "Zoë"
            clone = tmp_path / "clone"
            git(tmp_path, "clone", "-q", str(w), str(clone))
            cloned = sorted(os.listdir(clone / "notes"))
            assert cloned == sorted(f"{t}.md" for t in C23_TITLES)
            assert all(unicodedata.is_normalized("NFC", n) for n in cloned)
            assert git(clone, "status", "--porcelain") == ""


# --------------------------------------------------------------------------- reading


def test_read_at_read_as_of_log_path_changed_paths(store: GitStore) -> None:
    w = store.wiki_dir
    base = time.time() + 1000  # after the first commit
    shas = []
    for i, when in enumerate([base, base + 100, base + 200]):
        write(w, "notes/p.md", f"v{i + 1}\n")
        write(w, "notes/other.md", f"o{i}\n")
        paths = ["notes/p.md"] if i != 1 else ["notes/other.md"]
        shas.append(store.commit(paths, "A", "a@x", f"c{i}", when=when))
    assert store.read_at("notes/p.md", shas[0] or "") == b"v1\n"
    assert store.read_at("notes/p.md", shas[1] or "") == b"v1\n"
    assert store.read_at("notes/p.md", (shas[2] or "")[:8]) == b"v3\n"
    assert store.read_at("notes/p.md", "main") == b"v3\n"
    assert store.read_at("notes/missing.md") is None
    assert store.read_at("notes") is None  # a folder is not a file
    with pytest.raises(KeyError):
        store.read_at("notes/p.md", "0" * 40)
    assert store.read_as_of("notes/p.md", base - 1) is None
    assert store.read_as_of("notes/p.md", base) == b"v1\n"
    assert store.read_as_of("notes/p.md", base + 150) == b"v1\n"
    assert store.read_as_of("notes/p.md", base + 10_000) == b"v3\n"
    assert [c.sha for c in store.log("notes/p.md")] == [shas[2], shas[0]]
    assert [c.sha for c in store.log("notes", limit=2)] == [shas[2], shas[1]]
    assert store.log("notes/p.md")[0].time == int(base + 200)
    assert store.changed_paths(shas[0], shas[2]) == ["notes/other.md", "notes/p.md"]
    assert store.changed_paths(None, shas[0])[:1] == [".gitignore"]
    assert store.diff("notes/p.md", shas[1] or "") == ""
    d = store.diff("notes/p.md", shas[2] or "")
    assert "-v1" in d and "+v3" in d


@pytest.mark.process
def test_maybe_pack(store: GitStore) -> None:
    w = store.wiki_dir
    assert store.pack() > 0  # the first commit's objects; the count starts again
    for i in range(4):
        write(w, f"n{i}.md", f"{i}\n")
        store.commit([f"n{i}.md"], "A", "a@x", f"{i}")
        assert store.maybe_pack(every=5) == 0
    write(w, "n4.md", "4\n")
    store.commit(["n4.md"], "A", "a@x", "4")
    assert store.maybe_pack(every=5) > 0
    objects = w / ".git" / "objects"
    loose = [d for d in objects.iterdir() if len(d.name) == 2 and any(d.iterdir())]
    assert loose == []
    assert store.maybe_pack(every=5) == 0
    write(w, "n5.md", "5\n")
    store.commit(["n5.md"], "A", "a@x", "5")
    for i in range(6):
        assert store.read_at(f"n{i}.md") == f"{i}\n".encode()
    assert_clean(store)
    if GIT:
        assert git(w, "fsck", "--strict") == ""


def test_pack_count_survives_restart(tmp_path: Path) -> None:
    wiki = tmp_path / "wiki"
    with GitStore(wiki) as s:
        for i in range(6):
            write(wiki, f"n{i}.md", f"{i}\n")
            s.commit([f"n{i}.md"], "A", "a@x", f"{i}")
    with GitStore(wiki) as s:  # a restart: loose objects of the last run still count
        assert s.maybe_pack(every=5) > 0


@pytest.mark.process
def test_symlink_and_executable_modes(store: GitStore) -> None:
    w = store.wiki_dir
    write(w, "target.md", "t\n")
    os.symlink("target.md", w / "link.md")
    write(w, "tool.sh", "#!/bin/sh\n")
    os.chmod(w / "tool.sh", 0o755)
    sha = store.commit(["target.md", "link.md", "tool.sh"], "A", "a@x", "modes")
    assert store.read_at("link.md", sha or "") == b"target.md"
    assert_clean(store)
    if GIT:
        modes = {
            line.split()[3]: line.split()[0] for line in git(w, "ls-tree", "HEAD").splitlines()
        }
        assert modes["link.md"] == "120000" and modes["tool.sh"] == "100755"


@pytest.mark.slow
def test_a_commit_reads_the_files_only_once_another_gits_index_lock_is_gone(tmp_path: Path):
    """A checkout by another git holds ``index.lock`` while it rewrites files: a commit
    waiting on that lock must read the files after it, never half old, half new."""
    wiki = tmp_path / "wiki"
    with GitStore(wiki, lock_wait_seconds=30) as s:
        (wiki / "a.md").write_text("old\n")
        s.commit(["a.md"], "u", "u@x", "first")
        lock = wiki / ".git" / "index.lock"
        lock.write_bytes(b"")  # another git is at work (no owner record: foreign)
        (wiki / "a.md").write_text("half-written\n")
        result: list[str | None] = []
        t = threading.Thread(
            target=lambda: result.append(s.commit(["a.md"], "u", "u@x", "hand edit"))
        )
        t.start()
        time.sleep(0.5)  # the commit is waiting for the lock now
        (wiki / "a.md").write_text("final\n")
        lock.unlink()
        t.join(60)
        assert result and result[0] is not None
        assert s.read_at("a.md") == b"final\n"
        assert s.is_clean()
