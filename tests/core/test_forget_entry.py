"""Forgetting one timeline entry of a session page (``forget PATH#^tN``; docs/knowledge.md):
the entry becomes a stub that keeps its block id, its words leave the index, and no
later compile (a new event, a compile from scratch, a merge with another replica's
copy) brings its text back. Driven through an in-process Memory with Claude Code's
payload shapes; the scope rule decides who may."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from clikit import run_cli_here
from support import as_user, make_memory

from wiki_memory.core.forget import forget_page
from wiki_memory.core.memory import Memory
from wiki_memory.errors import Forbidden, NotFound
from wiki_memory.identity import Identity
from wiki_memory.wiki.entryforget import entry_hash, stub_entry
from wiki_memory.wiki.page import parse_page
from wiki_memory.wiki.sessionmerge import merge_session

UNIQUE = "okapiwombat"  # a word only the forgotten prompt holds


def cc(event: str, sid: str, **fields: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "hook_event_name": event,
        "session_id": sid,
        "cwd": "/home/user/atlas",
        **fields,
    }
    return {"harness": "claude-code", "project": "atlas", "payload": payload}


def turn(sid: str, prompt: str, reply: str) -> list[dict[str, Any]]:
    return [
        cc("UserPromptSubmit", sid, prompt=prompt),
        cc("Stop", sid, last_assistant_message=reply),
    ]


class Grants:
    """bob may read project atlas, cid sees nothing of it."""

    def identity_of(self, user: str) -> Identity | None:
        return {
            "bob": Identity("bob", role="member", grants={"atlas": "read"}),
            "cid": Identity("cid", role="member", grants={"other": "write"}),
        }.get(user)


def session(mem: Memory, sid: str = "s-forget") -> tuple[str, str]:
    """A session of three turns, the second holding UNIQUE: its page and the key."""
    events = (
        turn(sid, "Set up the staging database for atlas", "done, it listens on 5432")
        + turn(sid, f"Use the {UNIQUE} mirror for the builds", f"noted the {UNIQUE} one")
        + turn(sid, "Now run the migrations", "migrations ran")
    )
    for ev in events:
        mem.capture(ev, as_user(mem, "alice"))
    mem.writer.flush()
    key = next(iter(mem.spool.sessions))
    path = str(mem.spool.sessions[key].state["path"])
    return path, key


def block_of(text: str, word: str) -> str:
    """The block id of the entry whose text holds ``word``."""
    lines = text.splitlines()
    at = next(i for i, x in enumerate(lines) if word in x and not x.startswith("- **"))
    return next(x for x in lines[at:] if x.startswith("^t"))[1:]


def found(mem: Memory, word: str) -> set[str]:
    return {i["path"] for i in mem.recall(word, user=as_user(mem, "alice")).items}


@pytest.fixture
def mem(tmp_path: Path) -> Any:
    m = make_memory(tmp_path / "data", files={"projects/atlas/notes/seed.md": "# seed\n"})
    yield m
    m.stop()


def test_one_entry_is_forgotten_and_no_compile_brings_it_back(mem: Memory) -> None:
    path, key = session(mem)
    page = mem.wiki_dir / path
    before = page.read_text(encoding="utf-8")
    block = block_of(before, f"Use the {UNIQUE}")
    assert found(mem, UNIQUE) == {path}
    # another page links to the entry
    link = f"[[{path.removesuffix('.md')}#^{block}]]"
    ref = f"# ref\n\nsee {link}\n".encode()
    mem.write_page("projects/atlas/notes/ref.md", ref, user="alice", message="ref")

    res = forget_page(mem, f"{path}#^{block}", as_user(mem, "alice"))
    assert res == {"path": path, "entry": block, "state": "forgotten", "changed": True}
    assert forget_page(mem, f"{path}#^{block}", as_user(mem, "alice"))["changed"] is False

    text = page.read_text(encoding="utf-8")
    assert f"Use the {UNIQUE}" not in text and f"^{block}\n" in text
    assert "· forgotten entry `" in text
    assert UNIQUE in text  # the reply entry, t{N}: not forgotten, still there
    assert found(mem, UNIQUE) == {path}  # ... and found through the reply alone
    forget_page(mem, f"{path}#^{block_of(text, UNIQUE)}", as_user(mem, "alice"))
    text = page.read_text(encoding="utf-8")
    assert UNIQUE not in text, text  # summary ("Last reply") and title included
    assert found(mem, UNIQUE) == set()
    meta = parse_page(text.encode(), path).metadata
    assert meta["title"].startswith("Set up the staging database")

    # the page reads with the stub; the link still resolves to the entry
    read = mem.read_page(path, user=as_user(mem, "alice"))
    assert UNIQUE not in read["content"] and "forgotten entry" in read["content"]
    links = mem.read_page("projects/atlas/notes/ref.md", user=as_user(mem, "alice"))["links"]
    assert [(lk["status"], lk["path"], lk["fragment_found"]) for lk in links] == [
        ("resolved", path, True)
    ]

    # a further event of the same session, then a compile from scratch
    for ev in turn("s-forget", "One more thing", "ok"):
        mem.capture(ev, as_user(mem, "alice"))
    mem.writer.flush()
    text = page.read_text(encoding="utf-8")
    assert UNIQUE not in text and "One more thing" in text
    state = dict(mem.spool.sessions[key].state)
    mem.spool.write_state(key, {**state, "compiled_count": 0, "renders": []})
    page.unlink()
    mem.writer.call(lambda: mem.sessions.compile_job(key, False))
    mem.writer.flush()
    again = page.read_text(encoding="utf-8")
    assert UNIQUE not in again and f"^{block}\n" in again and "One more thing" in again
    assert not (page.parent / (page.stem + ".server-copy.md")).exists()
    assert found(mem, UNIQUE) == set()


def test_who_may_forget_an_entry_and_the_audit_line(mem: Memory) -> None:
    path, _ = session(mem)
    text = (mem.wiki_dir / path).read_text(encoding="utf-8")
    block = block_of(text, f"Use the {UNIQUE}")
    mem.scope.directory = Grants()  # type: ignore[assignment]
    with pytest.raises(Forbidden):
        forget_page(mem, f"{path}#^{block}", as_user(mem, "bob"))  # may read, not write
    with pytest.raises(NotFound):
        forget_page(mem, f"{path}#^{block}", as_user(mem, "cid"))  # may not see it
    with pytest.raises(NotFound):
        forget_page(mem, f"{path}#^t999", as_user(mem, "alice"))  # no such entry
    with pytest.raises(NotFound):
        forget_page(mem, f"{path}#Summary", as_user(mem, "alice"))  # a heading is no entry
    assert (mem.wiki_dir / path).read_text(encoding="utf-8") == text
    forget_page(mem, f"{path}#^{block}", as_user(mem, "alice"))
    audit = (mem.settings.data_dir / "logs" / "audit.jsonl").read_text(encoding="utf-8")
    assert '"forget"' in audit and UNIQUE not in audit


def test_cli_forgets_one_entry(tmp_path: Path) -> None:
    mem = make_memory(tmp_path / "data")
    try:
        path, _ = session(mem)
        block = block_of((mem.wiki_dir / path).read_text(encoding="utf-8"), f"Use the {UNIQUE}")
    finally:
        mem.stop()
    out = run_cli_here(tmp_path / "data", "forget", f"{path}#^{block}")
    assert out.returncode == 0, out.stderr
    assert f"forgot {path}#^{block}" in out.stdout
    assert f"Use the {UNIQUE}" not in (tmp_path / "data" / "wiki" / path).read_text("utf-8")


def test_a_merge_with_another_replicas_copy_keeps_the_stub() -> None:
    page = (
        "---\ntype: session\nupdated: 2026-01-01T00:00:00Z\n---\n# S\n\n## Summary\n\n- x\n\n"
        "## Timeline\n\n**10:00** · prompt\n\n~~~\nhello\n~~~\n\n^t1\n\n"
        f"**10:01** · prompt\n\n~~~\nthe {UNIQUE} key\n~~~\n\n^t2\n"
    )
    ours, code, old = stub_entry(page, "t2")
    assert code == entry_hash(old) and UNIQUE not in ours
    theirs = page + "\n**10:02** · reply\n\n~~~\nbye\n~~~\n\n^t3\n"

    def split(raw: bytes) -> tuple[bytes, bytes]:
        end = raw.index(b"\n---\n", 4) + 5
        return raw[:end], raw[end:]

    def same(b: bytes, o: bytes, t: bytes) -> bytes | None:
        return t if o == b else o if t == b else (o if o == t else None)

    for a, b in ((ours, theirs), (theirs, ours)):
        merged = merge_session(
            page.encode(),
            a.encode(),
            b.encode(),
            {},
            stem=b"s",
            split=split,
            merge_front=same,
            merge_lines=same,
        )
        assert merged is not None
        assert UNIQUE.encode() not in merged and b"bye" in merged
        assert merged.count(b"^t2\n") == 1 and b"forgotten entry" in merged


def test_without_the_spool_the_head_lines_quoting_the_entry_go_too(tmp_path: Path) -> None:
    path = "projects/atlas/sessions/2026-01-02-abcdef12.md"
    page = (
        "---\ntype: session\nsession_id: s-far\n"
        f"title: Rotate the {UNIQUE} replica before noon\n---\n"
        f"# Rotate the {UNIQUE} replica before noon\n\n## Summary\n\n"
        f"- **Goal:** `Rotate the {UNIQUE} replica before noon`\n- **Last reply:** `ok`\n\n"
        "## Timeline\n\n"
        f"**10:00** · prompt\n\n~~~\nRotate the {UNIQUE} replica before noon\n~~~\n\n^t1\n\n"
        "**10:01** · reply\n\n~~~\nok\n~~~\n\n^t2\n"
    )
    m = make_memory(tmp_path / "data", files={path: page})
    try:
        assert found(m, UNIQUE) == {path}
        assert forget_page(m, f"{path}#^t1", as_user(m, "alice"))["changed"] is True
        text = (m.wiki_dir / path).read_text(encoding="utf-8")
        assert UNIQUE not in text, text
        assert "- **Last reply:** `ok`" in text and "^t1\n" in text and "ok\n~~~" in text
        assert parse_page(text.encode(), path).metadata["title"] == "Session s-far"
        assert found(m, UNIQUE) == set()
    finally:
        m.stop()
