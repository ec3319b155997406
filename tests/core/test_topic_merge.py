"""Topic pages across replicas (docs/git.md, "Topic pages in a merge"): two replicas
that compiled different topic parts from different sessions sync to a topic part equal
to a fresh compile of the union of the sessions, with both people's edits above the
marker and no conflict copy; and ``reindex`` only indexes topic pages, it never writes
them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from clikit import run_cli_here
from support import make_memory
from test_topic_pages import end_session, topics

from wiki_memory.wiki import replicate as rp
from wiki_memory.wiki import topics as tp

FOLDER = "projects/atlas/topics"


def fresh_compile(wiki: Path) -> dict[str, str]:
    """What a compile of ``wiki``'s atlas sessions writes below the markers: file name ->
    compiled part (the oracle, read from the files as they are)."""
    sessions, notes = [], []
    for full in sorted((wiki / "projects/atlas").rglob("*.md")):
        rel = full.relative_to(wiki).as_posix()
        if rel.startswith(FOLDER + "/"):
            continue
        raw = full.read_bytes()
        if (s := tp.read_session(rel, raw)) is not None:
            sessions.append(s)
        elif (n := tp.read_note(rel, raw)) is not None:
            notes.append(n)
    pages = tp.compiled_pages(sessions, notes, FOLDER)
    return {rel.rsplit("/", 1)[1]: body for rel, (_, body) in pages.items()}


def below(page: bytes) -> str:
    return page.decode().split(tp.MARKER + "\n\n", 1)[1]


def edit_above_marker(m: Any, name: str, line: str) -> None:
    rel = f"{FOLDER}/{name}"
    full = m.wiki_dir / rel
    text = full.read_text()
    full.write_text(text.replace(tp.MARKER, line + "\n\n" + tp.MARKER, 1))
    m._commit_hand_edits_now([rel])


@pytest.mark.process
@pytest.mark.skipif(shutil.which("git") is None, reason="needs stock git for the hub")
def test_two_replicas_topic_parts_recompile_from_the_union_of_sessions_no_copy(
    tmp_path: Path, stop_after: Any
) -> None:
    hub = tmp_path / "hub.git"
    subprocess.run(["git", "init", "-q", "--bare", str(hub)], check=True)
    a = make_memory(tmp_path / "a", topic_pages=True)
    b = make_memory(tmp_path / "b", owner="ben", topic_pages=True)
    for m in (a, b):
        stop_after(m)
        rp.add_remote(m.wiki_dir, "origin", str(hub))
    # a common start: two sessions on A give Melanie and the Pride Parade their pages
    end_session(a, "s0", 0, ["I went to the Pride Parade with Melanie."])
    end_session(a, "s1", 1, ["Melanie liked the Pride Parade photos."])
    a.sync.sync()
    b.sync.sync()
    assert "Melanie.md" in topics(b.wiki_dir)
    # each side: a person's line above Melanie's marker, then sessions of its own
    edit_above_marker(a, "Melanie.md", "Alice: Melanie is Caroline's friend.")
    edit_above_marker(b, "Melanie.md", "Ben: Melanie paints.")
    end_session(a, "s2", 2, ["Melanie joined the support group in Nova Scotia."])
    end_session(a, "s3", 3, ["The support group met again."])
    end_session(b, "s4", 4, ["Melanie took a pottery class in Nova Scotia."])
    end_session(b, "s5", 5, ["The pottery class was full."])
    before_a, before_b = topics(a.wiki_dir), topics(b.wiki_dir)
    assert below(before_a["Melanie.md"]) != below(before_b["Melanie.md"])
    assert "Nova Scotia.md" not in before_a and "Nova Scotia.md" not in before_b
    reports = b.sync.sync() + a.sync.sync() + b.sync.sync()
    assert all(not r.conflicts for r in reports), [r.conflicts for r in reports]
    for m in (a, b):
        assert not list(m.wiki_dir.rglob("*.conflict-*"))
    after = topics(a.wiki_dir)
    assert after == topics(b.wiki_dir)
    fresh = fresh_compile(a.wiki_dir)
    assert set(after) == set(fresh)
    assert "Nova Scotia.md" in after  # one session on each side: a topic only merged
    for name, page in after.items():
        assert below(page) == fresh[name], name
    melanie = after["Melanie.md"].decode()
    head = melanie.split(tp.MARKER)[0]
    assert "Alice: Melanie is Caroline's friend." in head and "Ben: Melanie paints." in head
    assert "**Seen in:** 4 sessions" in melanie
    # what the merge committed is what the working tree holds, and git agrees
    status = subprocess.run(
        ["git", "-C", str(a.wiki_dir), "status", "--porcelain", "--", FOLDER],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert status == ""


def test_reindex_indexes_topic_pages_and_never_writes_them(tmp_path: Path) -> None:
    data = tmp_path / "data"
    m = make_memory(data, topic_pages=True)
    try:
        end_session(m, "s0", 0, ["I went to the Pride Parade with Melanie."])
        end_session(m, "s1", 1, ["Melanie liked the Pride Parade photos."])
        wiki = m.wiki_dir
        made = topics(wiki)
        assert "Melanie.md" in made
        # a stale topic part, and a topic the sessions show but with no page now
        stale = wiki / FOLDER / "Melanie.md"
        stale.write_bytes(stale.read_bytes().replace(b"2 sessions", b"9 sessions"))
        (wiki / FOLDER / "Pride Parade.md").unlink()
        m._commit_hand_edits_now([f"{FOLDER}/Melanie.md", f"{FOLDER}/Pride Parade.md"])
        before = topics(wiki)
    finally:
        m.stop()
    res = run_cli_here(data, "reindex", env={"WIKI_MEMORY_TOPIC_PAGES": "true"})
    assert res.returncode == 0, res.stderr
    assert topics(data / "wiki") == before
    again = make_memory(data, topic_pages=True)
    try:  # indexed: the rebuilt index holds the stale page's links as they are
        links = tp.linked_entries(again.index.links_from(f"{FOLDER}/Melanie.md"))
        assert len(links) == 2
        assert topics(data / "wiki") == before
    finally:
        again.stop()


# ------------------------------------------------- the merge rule itself, without git


def _session(day: int, text: str) -> bytes:
    return (
        f"---\ntype: session\ntitle: s{day}\nstarted: 2023-11-1{day}T10:00:00Z\n---\n"
        f"# s{day}\n\n## Timeline\n\n**10:00:00** · prompt\n\n~~~~text\n{text}\n~~~~\n\n^t1\n"
    ).encode()


def _pages(sessions: dict[str, bytes]) -> dict[str, bytes]:
    read = [tp.read_session(p, raw) for p, raw in sessions.items()]
    out = tp.compiled_pages([s for s in read if s is not None], [], FOLDER)
    return {p: (head + tp.MARKER + "\n\n" + body).encode() for p, (head, body) in out.items()}


def _tree(repo: Any, files: dict[str, bytes]) -> dict[bytes, tuple[int, Any]]:
    from dulwich.objects import Blob

    out = {}
    for path, data in files.items():
        blob = Blob.from_string(data)
        repo.object_store.add_object(blob)
        out[path.encode()] = (0o100644, blob.id)
    return out


def _read(repo: Any, files: dict[bytes, tuple[int, Any]]) -> dict[str, bytes]:
    return {p.decode(): repo[e[1]].data for p, e in files.items()}


@pytest.mark.fast
def test_a_side_without_topic_pages_still_gets_the_union_compiled_and_one_side_alone_not():
    from dulwich.repo import MemoryRepo

    from wiki_memory.core import topicmerge

    repo = MemoryRepo()
    s = {f"projects/atlas/sessions/s{d}.md": _session(d, f"I saw Melanie in Nova Scotia on day {d}.")
         for d in range(4)}  # fmt: skip
    base = {k: s[k] for k in list(s)[:1]}
    ours = {k: s[k] for k in list(s)[:3]}
    ours.update(_pages(ours))  # this side compiled its topic pages
    theirs = {**base, "projects/atlas/sessions/s3.md": s["projects/atlas/sessions/s3.md"]}
    merged = topicmerge.merge_trees(
        repo, _tree(repo, base), _tree(repo, ours), _tree(repo, theirs), "origin"
    )
    got = _read(repo, merged.files)
    assert not merged.conflicts
    want = _pages(s)
    assert {p: got[p] for p in want} == want and b"4 sessions" in want[f"{FOLDER}/Nova Scotia.md"]
    # only one side changed the project: nothing is recompiled, that side's pages stand
    alone = topicmerge.merge_trees(
        repo, _tree(repo, base), _tree(repo, ours), _tree(repo, base), "origin"
    )
    assert _read(repo, alone.files) == ours


@pytest.mark.fast
def test_a_persons_page_that_quotes_the_marker_merges_as_any_page() -> None:
    """A page in the topics folder holding the marker line but no ``type: topic`` is a
    person's page (a compile leaves it alone): a merge keeps its text below the marker."""
    from dulwich.repo import MemoryRepo

    from wiki_memory.core import topicmerge

    repo = MemoryRepo()
    s = {f"projects/atlas/sessions/s{d}.md": _session(d, f"I saw Melanie in Nova Scotia on day {d}.")
         for d in range(4)}  # fmt: skip
    readme = f"{FOLDER}/README.md"
    text = f"---\ntitle: About topics\n---\nIntro.\n{tp.MARKER}\n\nA person's words below.\n"
    base = {readme: text.encode(), **{k: s[k] for k in list(s)[:1]}}
    ours = {**base, **{k: s[k] for k in list(s)[:3]}}
    ours.update(_pages(ours))
    theirs = {**base, "projects/atlas/sessions/s3.md": s["projects/atlas/sessions/s3.md"]}
    theirs.update(_pages({k: v for k, v in theirs.items() if "/sessions/" in k}))
    merged = topicmerge.merge_trees(
        repo, _tree(repo, base), _tree(repo, ours), _tree(repo, theirs), "origin"
    )
    got = _read(repo, merged.files)
    assert got[readme] == text.encode()
    assert not merged.conflicts
    want = _pages(s)
    assert {p: got[p] for p in want} == want  # the compiler's pages are still recompiled
