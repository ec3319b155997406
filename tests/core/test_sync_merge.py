"""Merges finer than whole files (docs/git.md, "Merging"): two replicas that append to one
page, rename and edit it, add a tag and change a title, or add timeline entries to one
session page merge without a conflict copy; a true overlap gives one marked copy; no
blob ever holds a conflict marker. The page merge itself is checked without git too."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from support import make_memory

from wiki_memory.wiki import replicate as rp
from wiki_memory.wiki.page import parse_metadata
from wiki_memory.wiki.pagemerge import merge_page

BASE = b"---\nid: p1\ntitle: Plan\ntags: [a]\nupdated: 2026-01-01T00:00:00Z\n---\n# Plan\nstep 1\n"


@pytest.mark.fast
def test_page_merge_appends_tags_titles_and_times_from_both_sides_the_same_both_ways():
    ours = BASE.replace(b"tags: [a]", b"tags: [a, mine]") + b"ours appended\n"
    theirs = BASE.replace(b"title: Plan", b"title: Plan B") + b"theirs appended\n"
    theirs = theirs.replace(b"2026-01-01", b"2026-01-05")
    merged = merge_page(BASE, ours, theirs)
    assert merged is not None and merged == merge_page(BASE, theirs, ours)
    meta = parse_metadata(merged)
    assert meta["title"] == "Plan B" and meta["tags"] == ["a", "mine"]
    assert str(meta["updated"]).startswith("2026-01-05")
    assert merged.endswith(b"step 1\nours appended\ntheirs appended\n")


@pytest.mark.fast
def test_page_merge_a_true_overlap_is_none_and_tag_removal_wins():
    ours = BASE.replace(b"step 1", b"step one")
    theirs = BASE.replace(b"step 1", b"step uno")
    assert merge_page(BASE, ours, theirs) is None
    ours = BASE.replace(b"tags: [a]", b"tags: []")
    theirs = BASE.replace(b"tags: [a]", b"tags: [a, b]")
    merged = merge_page(BASE, ours, theirs)
    assert merged is not None and parse_metadata(merged)["tags"] == ["b"]


# ------------------------------------------------------------------ two replicas

pytestmark_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs stock git")


def bare(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    return path


def put(m, rel: str, data: bytes) -> None:
    full = m.wiki_dir / rel
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_bytes(data)
    m._commit_hand_edits_now([rel])


def no_markers(repo: Path) -> None:
    blobs = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
    ).stdout
    assert b"<<<<<<<" not in blobs and b">>>>>>>" not in blobs


@pytest.fixture
def pair(tmp_path, stop_after):
    hub = bare(tmp_path / "hub.git")
    a = make_memory(tmp_path / "a", files={"projects/p/index.md": "# p\n"})
    b = make_memory(tmp_path / "b", owner="ben")
    for m in (a, b):
        stop_after(m)
        rp.add_remote(m.wiki_dir, "origin", str(hub))
    return hub, a, b


def converge(a, b) -> None:
    a.sync.sync()
    b.sync.sync()
    a.sync.sync()


@pytestmark_git
@pytest.mark.process
def test_two_replicas_merge_append_rename_tag_title_and_a_session_without_a_copy(pair):
    hub, a, b = pair
    session = "projects/p/sessions/2026-01-01-abcd1234.md"
    sess = (
        b"---\ntype: session\nid: s-abcd1234\ntitle: work\nupdated: 2026-01-01T00:00:00Z\n"
        b"tools: [bash]\n---\n# work\n\n## Timeline\n\nfirst entry\n^t1\n"
    )
    put(a, "projects/p/notes/log.md", BASE)
    put(a, "projects/p/notes/old-name.md", b"---\nid: r1\ntitle: R\n---\nbody\nmore\n")
    put(a, "projects/p/notes/tagged.md", BASE.replace(b"id: p1", b"id: p2"))
    put(a, session, sess)
    converge(a, b)
    # append / append
    put(a, "projects/p/notes/log.md", BASE + b"from a\n")
    put(b, "projects/p/notes/log.md", BASE + b"from b\n")
    # rename on one side, edit on the other
    old = a.wiki_dir / "projects/p/notes/old-name.md"
    (a.wiki_dir / "projects/p/notes/new-name.md").write_bytes(old.read_bytes())
    old.unlink()
    a._commit_hand_edits_now(["projects/p/notes/old-name.md", "projects/p/notes/new-name.md"])
    put(b, "projects/p/notes/old-name.md", b"---\nid: r1\ntitle: R\n---\nbody\nmore\nedited\n")
    # a tag here, a title there
    tagged = BASE.replace(b"id: p1", b"id: p2")
    put(a, "projects/p/notes/tagged.md", tagged.replace(b"tags: [a]", b"tags: [a, new]"))
    put(b, "projects/p/notes/tagged.md", tagged.replace(b"title: Plan", b"title: Plan 2"))
    # one session, new entries on both sides
    put(a, session, sess.replace(b"2026-01-01T00", b"2026-01-02T00") + b"\nentry a\n^t2\n")
    put(b, session, sess.replace(b"2026-01-01T00", b"2026-01-03T00") + b"\nentry b\n^t2\n")
    # a page on B links B's new entry, by the number B gave it
    put(b, "projects/p/topics/t.md", b"# t\nsee [[2026-01-01-abcd1234#^t2]]\n")
    converge(a, b)
    reps = b.sync.sync() + a.sync.sync()
    assert all(not r.conflicts for r in reps)
    for m in (a, b):
        w = m.wiki_dir / "projects/p/notes"
        assert not list(m.wiki_dir.rglob("*.conflict-*")), list(m.wiki_dir.rglob("*.conflict-*"))
        log = (w / "log.md").read_bytes()
        assert b"from a\n" in log and b"from b\n" in log
        assert not (w / "old-name.md").exists()
        assert (w / "new-name.md").read_bytes().endswith(b"edited\n")
        meta = parse_metadata((w / "tagged.md").read_bytes())
        assert meta["tags"] == ["a", "new"] and meta["title"] == "Plan 2"
        page = (m.wiki_dir / session).read_bytes()
        assert b"entry a" in page and b"entry b" in page and b"first entry" in page
    assert (a.wiki_dir / session).read_bytes() == (b.wiki_dir / session).read_bytes()
    # A pushed first: its entry keeps ^t2; B's is numbered after it and B's link follows
    page = (a.wiki_dir / session).read_bytes()
    assert page.index(b"entry a\n^t2\n") < page.index(b"entry b\n^t3\n")
    assert b"#^t3]]" in (a.wiki_dir / "projects/p/topics/t.md").read_bytes()
    for repo in (a.wiki_dir, b.wiki_dir, hub):
        no_markers(repo)


@pytestmark_git
@pytest.mark.process
def test_a_true_overlap_gives_one_copy_marked_in_its_frontmatter(pair):
    hub, a, b = pair
    put(a, "projects/p/notes/x.md", BASE)
    converge(a, b)
    put(a, "projects/p/notes/x.md", BASE.replace(b"step 1", b"step A"))
    put(b, "projects/p/notes/x.md", BASE.replace(b"step 1", b"step B"))
    b.sync.sync()
    rep = a.sync.sync()
    copies = list(a.wiki_dir.rglob("*.conflict-*"))
    assert len(copies) == 1 and rep[0].conflicts
    meta = parse_metadata(copies[0].read_bytes())
    assert meta["conflict_of"] == "projects/p/notes/x.md" and meta["conflict_side"] == "origin"
    assert b"step B" in copies[0].read_bytes()
    assert b"step A" in (a.wiki_dir / "projects/p/notes/x.md").read_bytes()
    for repo in (a.wiki_dir, hub):
        no_markers(repo)


@pytest.mark.fast
def test_session_entries_added_on_both_sides_keep_the_hubs_numbers_and_follow_after():
    base = b"# s\n\n## Timeline\n\none\n^t1\n"
    ours = base + b"\nmine, see #^t2\n^t2\n"
    hub = base + b"\nhub's\n^t2\n\nhub's too\n^t3\n"
    moved: dict[int, int] = {}
    merged = merge_page(base, ours, hub, moved)
    assert moved == {2: 4}
    assert merged == base + b"\nhub's\n^t2\n\nhub's too\n^t3\n\nmine, see #^t4\n^t4\n"


# ------------------------------------------------- one session compiled on both sides


def _session_page(events, *, status="active", ended=None, now=100.0) -> bytes:
    from wiki_memory.capture.observation import SessionMeta, parse_event
    from wiki_memory.core.sessions import compiler_bytes
    from wiki_memory.wiki.compiler import compile_session

    meta = SessionMeta("abcd1234" + "0" * 16, "claude-code", "s1", "p", "ann", "/w/p", 0.0)
    obs = []
    for n, (event, payload, ts) in enumerate(events, start=1):
        o = parse_event(
            {
                "harness": "claude-code",
                "event": event,
                "session_id": "s1",
                "cwd": "/w/p",
                "ts": ts,
                "payload": payload,
            },
            "ann",
        )
        o.obs_id = f"o-{n}"
        obs.append(o)
    comp = compile_session(
        meta,
        obs,
        status=status,
        ended=ended,
        now=now,
        created=1.0,
        path="projects/p/sessions/1970-01-01-abcd1234.md",
    )
    return compiler_bytes(comp)


SHARED = [
    ("UserPromptSubmit", {"prompt": "fix the flaky test"}, 10),
    (
        "PostToolUse",
        {
            "tool_name": "Bash",
            "tool_use_id": "u1",
            "tool_input": {"command": "pytest -x"},
            "tool_response": "1 passed",
        },
        11,
    ),
    ("Stop", {"last_assistant_message": "It passes now."}, 12),
]
ON_HUB = [
    ("UserPromptSubmit", {"prompt": "now the docs"}, 20),
    (
        "PostToolUse",
        {
            "tool_name": "Edit",
            "tool_use_id": "u2",
            "tool_input": {"file_path": "/w/p/README.md"},
            "tool_response": "ok",
        },
        21,
    ),
    ("Stop", {"last_assistant_message": "Docs updated."}, 22),
    ("SessionEnd", {"reason": "exit"}, 23),
]
HERE = [
    ("UserPromptSubmit", {"prompt": "and the changelog, after #^t4"}, 30),
    ("Stop", {"last_assistant_message": "Changelog written."}, 31),
]


@pytest.mark.fast
def test_one_session_compiled_on_both_replicas_merges_entry_by_entry():
    """The same session's page compiled on each replica with different new entries (new
    summary lines, status and times on both sides) merges without a conflict: the hub's
    entries keep their numbers, this side's follow after the last, links follow."""
    base = _session_page(SHARED, now=50.0)
    hub = _session_page(SHARED + ON_HUB, status="ended", ended=23.0, now=200.0)
    here = _session_page(SHARED + HERE, now=150.0)
    moved: dict[int, int] = {}
    merged = merge_page(base, here, hub, moved, b"1970-01-01-abcd1234")
    assert merged is not None
    text = merged.decode()
    tl = text[text.index("## Timeline") :]
    ids = [x for x in tl.splitlines() if x.startswith("^t")]
    assert ids == ["^t1", "^t2", "^t3", "^t4", "^t5", "^t6", "^t7", "^t8", "^t9"], ids
    # the hub's entries as the hub numbered them, then this side's after the last
    assert tl.index("now the docs") < tl.index("^t4\n") < tl.index("Docs updated.")
    assert tl.index("session end") < tl.index("and the changelog") < tl.index("^t8\n")
    assert tl.index("Changelog written.") < tl.index("^t9\n")
    assert moved == {4: 8, 5: 9}
    # this side's own link to its entry 4 now names it by its new number
    assert "after #^t8" in text and "after #^t4" not in text
    for line in ("fix the flaky test", "It passes now.", "pytest -x"):
        assert tl.count(line) == 1, line  # the shared entries once
    meta = parse_metadata(merged)
    assert meta["status"] == "ended" and meta["ended"]  # the later side's
    assert set(meta["tools"]) >= {"Bash", "Edit"}
    assert "<<<<<<<" not in text
    # the other way round (the hub held this side's entries) gives one page too
    assert merge_page(base, hub, here, {}, b"1970-01-01-abcd1234") is not None


@pytestmark_git
@pytest.mark.process
def test_one_session_compiled_on_both_replicas_syncs_without_a_copy(pair):
    hub, a, b = pair
    path = "projects/p/sessions/1970-01-01-abcd1234.md"
    put(a, path, _session_page(SHARED, now=50.0))
    converge(a, b)
    put(a, path, _session_page(SHARED + ON_HUB, status="ended", ended=23.0, now=200.0))
    put(b, path, _session_page(SHARED + HERE, now=150.0))
    put(b, "projects/p/topics/t.md", b"# t\nsee [[1970-01-01-abcd1234#^t5]]\n")
    a.sync.sync()  # the hub holds A's entries first
    reps = b.sync.sync() + a.sync.sync()
    assert all(not r.conflicts for r in reps), [r.conflicts for r in reps]
    for m in (a, b):
        assert not list(m.wiki_dir.rglob("*.conflict-*"))
    page = (a.wiki_dir / path).read_bytes()
    assert page == (b.wiki_dir / path).read_bytes()
    tl = page.decode()[page.decode().index("## Timeline") :]
    assert tl.index("Docs updated.") < tl.index("^t7\n") < tl.index("Changelog written.")
    assert tl.index("Changelog written.") < tl.index("^t9\n")
    assert b"#^t9]]" in (a.wiki_dir / "projects/p/topics/t.md").read_bytes()
    for repo in (a.wiki_dir, b.wiki_dir, hub):
        no_markers(repo)


@pytest.mark.fast
def test_a_session_page_first_written_on_both_sides_and_a_reply_with_its_prompt():
    """A page that had no entry yet on one side takes the other's entries without its
    placeholder line; this side's prompt and the reply carried by the same event
    (``^tNr``) keep one number between them."""
    head = b"---\ntype: session\nid: s1\nupdated: 2026-01-01T00:00:00Z\n---\n# s\n\n## Timeline\n\n"
    empty = head + b"(no events yet)\n"
    first = head + b"a\n\n^t1\n"
    assert merge_page(None, empty, first, {}, b"s") == first
    assert merge_page(None, first, empty, {}, b"s") == first
    ours = first + b"\nmy turn\n\n^t2\n\nits reply\n\n^t2r\n"
    hub = first + b"\nhub turn\n\n^t2\n"
    moved: dict[int, int] = {}
    merged = merge_page(first, ours, hub, moved, b"s")
    assert merged == hub + b"\nmy turn\n\n^t3\n\nits reply\n\n^t3r\n" and moved == {2: 3}
