"""A long session's timeline kept in parts of bounded size (docs/sessions.md, "Parts";
wiki/sessionparts.py): the session page holds the entries of the first
``session_part_events`` arrival numbers, later ones go to ``<stem>.part-NNN.md`` beside
it, and everything that reads a session reads it as its parts: recall and expand, forget
of one entry, forget and purge of the session, condensing, topic counts, the brief, the
web view and the merge of one session from two replicas. A short session's page is
byte for byte what it was before parts existed. Driven through an in-process Memory with
Claude Code's payload shapes (a real apsw index and dulwich repository)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from appkit import AppServer
from support import as_user, make_memory

from wiki_memory.capture.observation import SessionMeta, parse_event
from wiki_memory.core.condense import condense_sessions
from wiki_memory.core.forget import forget_page
from wiki_memory.core.memory import Memory
from wiki_memory.errors import Forbidden, NotFound
from wiki_memory.identity import Identity
from wiki_memory.wiki.compiler import compile_session
from wiki_memory.wiki.page import parse_metadata
from wiki_memory.wiki.sessionmerge import merge_session
from wiki_memory.wiki.sessionparts import (
    entry_page,
    part_of,
    part_path,
    part_paths,
    session_of_part,
)

pytestmark = pytest.mark.fast

PER = 6  # arrival numbers per part in these tests (the default is 600)
SID = "s-long"


def cc(event: str, sid: str = SID, **fields: Any) -> dict[str, Any]:
    payload = {"hook_event_name": event, "session_id": sid, "cwd": "/home/u/atlas", **fields}
    return {"harness": "claude-code", "project": "atlas", "payload": payload}


def turn(n: int, sid: str = SID) -> list[dict[str, Any]]:
    """Turn ``n``: a prompt and a reply, each with a word no other turn has."""
    return [
        cc("UserPromptSubmit", sid, prompt=f"prompt {n}: look at parser{n}word again"),
        cc("Stop", sid, last_assistant_message=f"reply {n}: fixed parser{n}word offsets"),
    ]


def capture(mem: Memory, events: list[dict[str, Any]]) -> None:
    for ev in events:
        mem.capture(ev, as_user(mem, "alice"))
    mem.writer.flush()


def long_session(mem: Memory, turns: int = 10, sid: str = SID) -> tuple[str, str]:
    """A session of ``turns`` turns captured turn by turn: its page and spool key."""
    for n in range(1, turns + 1):
        capture(mem, turn(n, sid))
    key = next(k for k, i in mem.spool.sessions.items() if i.session_id == sid)
    return str(mem.spool.sessions[key].state["path"]), key


def blocks(raw: str) -> list[int]:
    return [int(m) for m in re.findall(r"^\^t(\d+)r?$", raw, re.M)]


def text_of(mem: Memory, rel: str) -> str:
    return (mem.wiki_dir / rel).read_text(encoding="utf-8")


@pytest.fixture
def mem(tmp_path: Path) -> Any:
    m = make_memory(tmp_path / "data", session_part_events=PER)
    yield m
    m.stop()


def test_part_numbers_follow_from_entry_numbers() -> None:
    assert [part_of(n, 600) for n in (1, 600, 601, 1200, 1201)] == [1, 1, 2, 2, 3]
    s = "projects/p/sessions/2026-12-06-3b021981.md"
    assert part_path(s, 1) == s
    assert part_path(s, 3) == "projects/p/sessions/2026-12-06-3b021981.part-003.md"
    assert session_of_part(part_path(s, 3)) == (s, 3)
    assert session_of_part(s) == (s, 1)
    assert entry_page(s, "^t4523", 600) == part_path(s, 8)
    assert entry_page(part_path(s, 8), "t5", 600) == s
    assert entry_page(s, "Heading", 600) == s


def test_a_session_past_the_bound_gets_parts_with_every_entry_once(mem: Memory) -> None:
    path, _key = long_session(mem, 10)  # 20 events: parts 1..4
    parts = part_paths(mem.wiki_dir, path)
    assert parts == [part_path(path, k) for k in (2, 3, 4)]
    head = text_of(mem, path)
    seen: list[int] = blocks(head)
    assert seen and max(seen) <= PER
    for k, rel in enumerate(parts, start=2):
        raw = text_of(mem, rel)
        md = parse_metadata(raw.encode())
        assert md["type"] == "session" and md["part"] == k and md["part_of"] == path
        assert md["session_id"] == SID and md["project"] == "atlas" and md["user"] == "alice"
        assert f"[[{path[:-3]}]]" in raw  # a link back to the session page
        nums = blocks(raw)
        assert nums == sorted(nums) and all(part_of(n, PER) == k for n in nums)
        seen += nums
    assert len(seen) == len(set(seen)) == 20  # every entry once
    assert seen == sorted(seen)
    # the session page's summary links every part, and it stays bounded
    for rel in parts:
        assert f"[[{rel[:-3]}]]" in head
    timeline = head.split("\n## Timeline\n", 1)[1]
    assert "parser10word" not in timeline and "parser10word" in text_of(mem, parts[-1])
    # the whole timeline is what one page would hold, entry for entry
    obs = mem.spool.observations(_key)
    info = mem.spool.sessions[_key]
    meta = SessionMeta(info.key, info.harness, SID, "atlas", "alice", info.cwd, info.started)
    whole = compile_session(meta, obs, status="active", ended=None, now=0.0, path=path)
    assert blocks(whole.body) == seen


def test_a_turn_writes_the_open_part_only_and_the_end_refreshes_the_summary(
    mem: Memory,
) -> None:
    path, _key = long_session(mem, 10)  # part 4 holds events 19-24
    closed = [path, part_path(path, 2), part_path(path, 3)]
    before = {rel: (mem.wiki_dir / rel).read_bytes() for rel in closed}
    capture(mem, turn(11))  # events 21, 22: part 4
    assert {rel: (mem.wiki_dir / rel).read_bytes() for rel in closed} == before
    assert "parser11word" in text_of(mem, part_path(path, 4))
    capture(mem, turn(12) + turn(13))  # events 23-26: part 5 opens (25), the page links it
    head = text_of(mem, path)
    assert f"[[{part_path(path, 5)[:-3]}]]" in head  # written when the part opened
    (mem.wiki_dir / path).unlink()  # a person deleted the page: the next turn writes it
    capture(mem, turn(14))
    assert "reply 14" in text_of(mem, path)
    capture(mem, [cc("SessionEnd", reason="exit")])
    md = parse_metadata((mem.wiki_dir / path).read_bytes())
    assert md["status"] == "ended"


def test_a_short_session_is_byte_for_byte_what_it_was() -> None:
    events = [o for n in range(1, 3) for o in turn(n)]
    obs = [parse_event(e, "alice") for e in events]
    meta = SessionMeta("k" * 64, "claude-code", SID, "atlas", "alice", None, obs[0].ts)
    one = compile_session(meta, obs, status="active", ended=None, now=5.0)
    two = compile_session(meta, obs, status="active", ended=None, now=5.0, part_events=PER)
    assert (one.body, one.metadata, two.parts) == (two.body, two.metadata, [])
    # at the bound exactly: still one page
    four = compile_session(meta, obs, status="active", ended=None, now=5.0, part_events=4)
    assert four.body == one.body and four.parts == []


def test_recall_and_expand_find_an_entry_in_a_later_part(mem: Memory) -> None:
    path, _key = long_session(mem, 10)
    hits = mem.recall("parser9word", user=as_user(mem, "alice"))
    paths = {str(it.get("path")) for it in hits.items}
    assert part_path(path, 3) in paths, hits.items  # events 17, 18
    block = f"t{17}"
    # the session page's path with the entry's number: expand finds it on its part
    got = mem.expand([f"{path}#^{block}"], 2000, as_user(mem, "alice"))
    assert got["missing"] == [] and "parser9word" in got["items"][0]["text"]
    got = mem.expand([f"{part_path(path, 3)}#^{block}"], 2000, as_user(mem, "alice"))
    assert "parser9word" in got["items"][0]["text"]
    # an entry no page holds is missing, parts or not
    assert mem.expand([f"{path}#^t999"], 2000, as_user(mem, "alice"))["missing"]


def test_forget_of_an_entry_in_a_part(mem: Memory) -> None:
    path, _key = long_session(mem, 10)
    res = forget_page(mem, f"{path}#^t15", as_user(mem, "alice"))  # the prompt of turn 8
    assert res["path"] == part_path(path, 3) and res["changed"]
    raw = text_of(mem, part_path(path, 3))
    assert "parser8word" in raw  # the reply (t16) still says it
    assert "look at parser8word" not in raw
    hits = mem.recall("look parser8word again", user=as_user(mem, "alice"))
    assert not any("look at parser8word" in str(it) for it in hits.items), hits.items
    capture(mem, turn(11))  # a later compile keeps the stub
    assert "look at parser8word" not in text_of(mem, part_path(path, 3))
    assert "^t15" in text_of(mem, part_path(path, 3))


def test_forget_of_a_session_forgets_its_parts(mem: Memory) -> None:
    path, _key = long_session(mem, 10)
    forget_page(mem, path, as_user(mem, "alice"))
    for rel in [path, *part_paths(mem.wiki_dir, path)]:
        assert parse_metadata((mem.wiki_dir / rel).read_bytes()).get("state") == "forgotten"
    hits = mem.recall("parser9word", user=as_user(mem, "alice"))
    assert hits.items == [], hits.items


def test_a_late_tool_result_lands_in_its_closed_part(mem: Memory) -> None:
    """Part of an entry follows from its first event's number: a tool call's result that
    arrives after the call's part closed is written into that part, and only there."""
    cmd = {"command": "make slowbuild"}
    capture(mem, turn(1) + turn(2))  # events 1-4
    pre = cc("PreToolUse", tool_name="Bash", tool_use_id="u-late", tool_input=cmd)
    capture(mem, [pre, *turn(3)])  # events 5-7: the call is t5, part 2 opens at 7
    for n in range(4, 9):
        capture(mem, turn(n))  # events 8-17: parts 2 and 3
    key = next(iter(mem.spool.sessions))
    path = str(mem.spool.sessions[key].state["path"])
    closed = (mem.wiki_dir / part_path(path, 2)).read_bytes()
    assert "latebirdresult" not in text_of(mem, path)
    post = cc("PostToolUse", tool_name="Bash", tool_use_id="u-late", tool_input=cmd,
              tool_response={"stdout": "built latebirdresult", "stderr": ""})  # fmt: skip
    capture(mem, [post, cc("Stop", last_assistant_message="the build is done")])  # 18, 19
    head = text_of(mem, path)
    assert "latebirdresult" in head and head.count("\n^t5\n") == 1
    assert (mem.wiki_dir / part_path(path, 2)).read_bytes() == closed  # not rewritten
    later = [text_of(mem, rel) for rel in part_paths(mem.wiki_dir, path)]
    assert not any("latebirdresult" in t for t in later)
    assert "the build is done" in text_of(mem, part_path(path, 4))


def test_condensing_a_cold_long_session_condenses_its_parts(mem: Memory) -> None:
    talk = "the parser keeps its offsets in a table now " * 40
    for n in range(1, 11):
        capture(mem, [
            cc("UserPromptSubmit", prompt=f"prompt {n}: look at the parser"),
            cc("Stop", last_assistant_message=f"reply {n}: {talk}"),
        ])  # fmt: skip
    capture(mem, [cc("SessionEnd", reason="exit")])
    key = next(iter(mem.spool.sessions))
    path = str(mem.spool.sessions[key].state["path"])
    res = condense_sessions(mem, None, older_than_days=1, now=10.0**10)
    done = {r["path"] for r in res["pages"]}
    assert path in done and part_path(path, 2) in done, res
    for rel in [path, *part_paths(mem.wiki_dir, path)]:
        md = parse_metadata((mem.wiki_dir / rel).read_bytes())
        assert md.get("condensed"), rel


def test_the_brief_lists_the_session_once(mem: Memory) -> None:
    path, _key = long_session(mem, 10)
    rows = mem.list_pages(project="atlas", kind="session", user=as_user(mem, "alice"))
    assert {r["path"] for r in rows} == {path}  # listings show the session once
    from wiki_memory.core.brief import build_brief

    text = build_brief(mem, as_user(mem, "alice"), project="atlas")
    assert ".part-00" not in str(text)


def test_the_merge_of_one_part_from_two_replicas_keeps_both_sides(mem: Memory) -> None:
    path, _key = long_session(mem, 9)  # events 13-18: part 3 holds turns 7-9
    text = text_of(mem, part_path(path, 3))
    cut = text.index("\n^t16\n") + len("\n^t16\n")
    base = text[:cut]  # what both replicas had: turns 7 and 8
    ours = text  # this replica went on: turn 9 (t17, t18)
    theirs = base + "\n**00:00:09** · prompt\n\n~~~~\nhubonlyword\n~~~~\n\n^t17\n"

    def split(raw: bytes) -> tuple[bytes, bytes]:
        end = raw.index(b"\n---\n", 4) + 5
        return raw[:end], raw[end:]

    def same(b: bytes, o: bytes, t: bytes) -> bytes | None:
        return t if o == b else o if t == b else (o if o == t else None)

    merged = merge_session(
        base.encode(), ours.encode(), theirs.encode(), {},
        stem=part_path(path, 3).rsplit("/", 1)[-1][:-3].encode(),
        split=split, merge_front=same, merge_lines=same,
    )  # fmt: skip
    assert merged is not None
    assert b"hubonlyword" in merged and b"parser9word" in merged
    nums = blocks(merged.decode())
    assert len(nums) == len(set(nums)), nums  # every entry once, numbers unique


def test_the_web_view_links_every_part(tmp_path: Path) -> None:
    with AppServer(tmp_path / "data", session_part_events=PER) as srv:
        m = srv.memory
        assert m is not None and srv.tokens is not None
        me = srv.tokens.owner_name()
        for n in range(1, 11):
            for ev in turn(n):
                m.capture(ev, as_user(m, me))
            m.writer.flush()
        key = next(iter(m.spool.sessions))
        path = str(m.spool.sessions[key].state["path"])
        c = srv.sign_in()
        html = c.get(srv.url + "/page/" + path).text  # type: ignore[attr-defined]
        for k in (2, 3, 4):
            assert part_path(path, k) in html or part_path(path, k)[:-3] in html, k
        part = c.get(srv.url + "/page/" + part_path(path, 4)).text  # type: ignore[attr-defined]
        assert "parser10word" in part and path[:-3] in part


class Grants:
    """bob may read project atlas, cid sees nothing of it."""

    def identity_of(self, user: str) -> Identity | None:
        return {
            "bob": Identity("bob", role="member", grants={"atlas": "read"}),
            "cid": Identity("cid", role="member", grants={"other": "write"}),
        }.get(user)


def test_a_part_is_visible_exactly_as_its_session_page(mem: Memory) -> None:
    path, _key = long_session(mem, 10)
    mem.scope.directory = Grants()  # type: ignore[assignment]
    part = part_path(path, 3)
    bob, cid = as_user(mem, "bob"), as_user(mem, "cid")
    assert mem.scope.read(bob, part).rel == part and mem.scope.read(bob, path).rel == path
    got = mem.expand([f"{path}#^t17"], 2000, bob)
    assert "parser9word" in got["items"][0]["text"]
    for rel in (path, part):
        with pytest.raises(NotFound):
            mem.scope.read(cid, rel)
    assert mem.expand([f"{path}#^t17"], 2000, cid)["missing"] == [f"{path}#^t17"]
    with pytest.raises(Forbidden):
        forget_page(mem, f"{path}#^t17", bob)  # may read, not write
