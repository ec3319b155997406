"""People's edits win (invariant 8): a hand edit racing a compile into the same page, a
collision in the lines both changed, a save landing between the server's read and write,
and merges after a restart."""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

import pytest
from support import as_user

from wiki_memory.config import load_settings
from wiki_memory.core.memory import Memory
from wiki_memory.core.sessions import conflict_copy_path
from wiki_memory.datadir import ensure_layout
from wiki_memory.wiki.frontmatter import set_keys


def make_memory(data: Path, watch: bool = True) -> Memory:
    settings = load_settings(
        data,
        commit_delay_seconds=0.05,
        hand_edit_settle_seconds=0.2,
        idle_check_seconds=60,
        watch=watch,
    )
    ensure_layout(settings)
    m = Memory(settings, owner_user="owner")
    m.start()
    return m


def event(kind: str, **payload: object) -> dict[str, object]:
    return {
        "harness": "codex",
        "event": kind,
        "session_id": "race-1",
        "cwd": "/x/proj",
        "payload": payload,
    }


def compile_turn(m: Memory, prompt: str) -> str:
    """One prompt and one Stop; waits for the compile. Returns the page path."""
    m.capture(event("UserPromptSubmit", prompt=prompt), as_user(m, "alice"))
    m.capture(event("Stop", last_assistant_message=f"answered {prompt}"), as_user(m, "alice"))
    m.writer.flush()
    key = next(iter(m.spool.sessions))
    return str(m.spool.sessions[key].state["path"])


def editor_save(path: Path, fn) -> None:  # type: ignore[no-untyped-def]
    """A person's editor: read, change, save atomically (temp file + rename)."""
    data = path.read_bytes()
    new = fn(data)
    tmp = path.with_name(path.name + ".tmp-editor~")
    tmp.write_bytes(new)
    os.replace(tmp, path)


def add_key_and_paragraph(n: int):  # type: ignore[no-untyped-def]
    def fn(data: bytes) -> bytes:
        text = data.decode()
        head, sep, rest = text.partition("\n---\n")  # the closing fence
        return (
            head + f"\nreviewed_{n}: ann" + sep + rest.rstrip("\n") + f"\n\nHand note {n}.\n"
        ).encode()

    return fn


def settle(m: Memory, seconds: float = 0.9) -> None:
    """Wait until every save on disk is committed: the worktree is clean, the watcher has
    nothing pending, and neither HEAD nor the watcher's batch count moved over one poll.
    (A quiet spell alone is not enough: on a loaded machine the watcher may hear of a
    save later than one poll, which once let this return before a hand edit's commit.)"""
    deadline = time.monotonic() + 60
    last = None
    while time.monotonic() < deadline:
        time.sleep(seconds / 3)
        m.writer.flush()
        now = (
            m.watcher.batches if m.watcher else 0,
            m.git.head(),
            bool(m.watcher and m.watcher._pending),
        )
        if now == last and not now[2] and m.git.is_clean(include_untracked=True):
            return
        last = now
    raise AssertionError("did not settle")


@pytest.mark.slow
def test_hand_edit_racing_a_compile_loses_neither_text(tmp_path):
    m = make_memory(tmp_path / "data")
    try:
        rel = compile_turn(m, "prompt round 0")
        page = m.wiki_dir / rel
        settle(m)
        rng = random.Random(7)
        for n in range(1, 7):
            delay = rng.uniform(0, 0.06)
            person = threading.Thread(
                target=lambda n=n, d=delay: (
                    time.sleep(d),
                    editor_save(page, add_key_and_paragraph(n)),
                )
            )
            person.start()
            compile_turn(m, f"prompt round {n}")
            person.join()
            settle(m)
        settle(m)
        text = page.read_text()
        for n in range(1, 7):
            assert f"Hand note {n}." in text, n
            assert f"reviewed_{n}: ann" in text, n
            assert f"prompt round {n}" in text, n
        assert "prompt round 0" in text
        assert not (m.wiki_dir / conflict_copy_path(rel)).exists()
        # git holds the person's commits (the owner, by hand) and the server's (alice)
        log = m.git.log(rel, limit=200)
        hand = [c for c in log if c.message.startswith("Edit by hand")]
        server = [c for c in log if c.author_name == "alice"]
        assert hand and all(c.author_name == "owner" for c in hand)
        assert server
        for n in range(7):
            # every turn of the server's is in git: in the server's own commit, or (when
            # the person's editor saved it within the commit delay, having loaded it) in
            # the person's commit of that save
            assert any(
                f"prompt round {n}" in (m.git.read_at(rel, c.sha) or b"").decode() for c in log
            ), f"no commit holds round {n}"
        for n in range(1, 7):
            assert any(
                f"Hand note {n}." in (m.git.read_at(rel, c.sha) or b"").decode() for c in hand
            ), f"no hand-edit commit holds note {n}"
        assert m.git.is_clean(include_untracked=True)
        # the index has the merged page
        assert {h.path for h in m.index.query("Hand note 6", mode="and")} == {rel}
    finally:
        m.stop()


def test_the_same_lines_changed_on_both_sides_keep_the_persons_and_copy_the_servers(tmp_path):
    m = make_memory(tmp_path / "data", watch=False)
    try:
        rel = compile_turn(m, "first question")
        page = m.wiki_dir / rel
        # the person ends the session by hand (status is a key the server also changes)
        # and adds a line of their own to the summary
        text = page.read_text()
        assert "status: active" in text
        edited = text.replace("status: active", "status: parked # by ann").replace(
            "## Summary\n", "## Summary\n\nAnn: parked until Monday.\n"
        )
        page.write_text(edited)
        m.capture(event("UserPromptSubmit", prompt="second question"), as_user(m, "alice"))
        m.capture(event("SessionEnd"), as_user(m, "alice"))
        m.writer.flush()
        final = page.read_text()
        assert "status: parked # by ann" in final  # the person's line won
        assert "Ann: parked until Monday." in final
        assert "second question" in final  # the rest of the server's change merged
        copy = m.wiki_dir / conflict_copy_path(rel)
        assert copy.exists()
        ctext = copy.read_text()
        assert "status: ended" in ctext and "type: conflict" in ctext
        assert f"conflict_of: {rel}" in ctext
        page_json = m.read_page(rel)
        kinds = [d["kind"] for d in page_json["diagnostics"]]
        assert "merge_conflict" in kinds
        # the copy is a page of its own, with another id
        assert m.index.page_meta(conflict_copy_path(rel))["id"].endswith("-server-copy")  # type: ignore[index]
    finally:
        m.stop()


def test_a_save_between_the_servers_read_and_write_is_merged_not_replaced(tmp_path):
    m = make_memory(tmp_path / "data", watch=False)
    try:
        path = m.wiki_dir / "notes" / "n.md"
        path.parent.mkdir(parents=True)
        path.write_text("---\ntitle: N\nstatus: open\n---\n# N\n\nbody\n")
        calls = []

        def fn(cur: bytes | None) -> bytes:
            calls.append(cur)
            if len(calls) == 1:  # a person saves while the server prepares its write
                path.write_text("---\ntitle: N\nstatus: open\nowner: ann\n---\n# N\n\nbody\nmore\n")
            return set_keys(cur or b"", {"status": "done"})

        res = m.update_page("notes/n.md", fn, user="alice", message="close")
        assert res.value is not None and len(calls) == 2
        assert (
            path.read_text() == "---\ntitle: N\nstatus: done\nowner: ann\n---\n# N\n\nbody\nmore\n"
        )
    finally:
        m.stop()


def test_a_save_between_the_servers_look_and_its_commit_is_committed_as_the_persons(tmp_path):
    # CI once saw a hand note reach git only inside the server's commit: the person saved
    # after the server decided the page was its own and before git read the file
    m = make_memory(tmp_path / "data", watch=False)
    try:
        rel = compile_turn(m, "first question")
        page = m.wiki_dir / rel
        real_commit = m.git.commit
        saved = []

        def commit_after_a_save(paths, name, *args, **kwargs):  # type: ignore[no-untyped-def]
            if name == "alice" and not saved:  # the person's editor saves at this moment
                editor_save(page, add_key_and_paragraph(1))
                saved.append(True)
            return real_commit(paths, name, *args, **kwargs)

        m.git.commit = commit_after_a_save  # type: ignore[method-assign]
        compile_turn(m, "second question")
        m.writer.flush()
        assert saved
        log = m.git.log(rel, limit=50)
        server = [c for c in log if c.author_name == "alice"]
        hand = [c for c in log if c.message.startswith("Edit by hand")]
        assert server and not any(
            "Hand note 1." in (m.git.read_at(rel, c.sha) or b"").decode() for c in server
        )
        assert hand and hand[0].author_name == "owner"
        assert "Hand note 1." in (m.git.read_at(rel, hand[0].sha) or b"").decode()
        # the server's turn is kept: merged back into the person's save, or in its commit
        text = page.read_text()
        assert "Hand note 1." in text and "second question" in text
        m.writer.flush()
        assert m.git.is_clean(include_untracked=True)
    finally:
        m.stop()


def test_merge_after_a_restart_uses_the_rendering_kept_in_the_session_state(tmp_path):
    data = tmp_path / "data"
    m = make_memory(data, watch=False)
    rel = compile_turn(m, "before restart")
    m.stop()
    page = m.wiki_dir / rel
    editor_save(page, add_key_and_paragraph(1))
    m2 = make_memory(data, watch=False)
    try:
        compile_turn(m2, "after restart")
        text = page.read_text()
        assert "Hand note 1." in text and "reviewed_1: ann" in text
        assert "before restart" in text and "after restart" in text
        assert not (m2.wiki_dir / conflict_copy_path(rel)).exists()
        # the recovery at start committed the hand edit as the owner's
        assert any(c.author_name == "owner" for c in m2.git.log(rel))
    finally:
        m2.stop()


@pytest.mark.parametrize("eol", ["\r\n", "\n"])
def test_merge_keeps_the_persons_line_endings_and_bom(tmp_path, eol):
    m = make_memory(tmp_path / "data", watch=False)
    try:
        rel = compile_turn(m, "line endings")
        page = m.wiki_dir / rel
        text = page.read_text()
        page.write_bytes(b"\xef\xbb\xbf" + (text + "\nMine.\n").replace("\n", eol).encode())
        compile_turn(m, "second turn")
        data = page.read_bytes()
        assert data.startswith(b"\xef\xbb\xbf")
        body = data[3:].decode()
        assert "Mine." in body and "second turn" in body
        if eol == "\r\n":
            assert "\n" not in body.replace("\r\n", "")  # never mixed
    finally:
        m.stop()
