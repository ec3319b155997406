"""One session captured on two replicas (docs/sessions.md, "Parts"): replica 2 pulls
replica 1's session page and parts, then captures the same session id. Its compile must
keep replica 1's entries on a part it had already closed (no rendering of that part is
known on replica 2): every entry the pulled part holds stays beside replica 2's own, and
no block id is there twice. Real apsw, real dulwich, two apps in process; the pull is
the pulled files landing in replica 2's wiki and committed, as a sync leaves them."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from appkit import AppServer
from support import as_user

from wiki_memory.wiki.sessionparts import part_path

pytestmark = pytest.mark.fast

PER = 4


def cc(event: str, ts: int, **fields: Any) -> dict[str, Any]:
    payload = {"hook_event_name": event, "session_id": "shared-sess", "cwd": "/home/u/atlas"}
    return {
        "harness": "claude-code",
        "project": "atlas",
        "ts": ts,
        "payload": {**payload, **fields},
    }


def stretches() -> tuple[int, int]:
    """When each replica's events happen (UTC epoch seconds of the first): replica 1's
    from a minute ago, replica 2's half a minute later, in one UTC day. An entry is one
    event by its number, clock (to the second) and kind (docs/sessions.md, "Parts"), so
    the two replicas' entries are told apart by their clocks, as when a session moves from
    one machine to another; captured as fast as a test captures, the two stretches could
    share a second."""
    one = int(time.time()) - 60
    if one // 86400 != (one + 40) // 86400:
        one = (one + 40) // 86400 * 86400
    return one, one + 30


def turns(srv: AppServer, tag: str, n: int, start: int) -> str:
    """``n`` turns (a prompt and a reply each) of the shared session from ``start``, one
    event a second."""
    m = srv.memory
    assert m is not None and srv.tokens is not None
    me = as_user(m, srv.tokens.owner_name())
    for i in range(1, n + 1):
        at = start + 2 * (i - 1)
        m.capture(cc("UserPromptSubmit", at, prompt=f"{tag} prompt {i}: {tag}word{i}"), me)
        m.capture(cc("Stop", at + 1, last_assistant_message=f"{tag} reply {i}: {tag}done{i}"), me)
        m.writer.flush()
    key = next(iter(m.spool.sessions))
    return str(m.spool.sessions[key].state["path"])


def test_a_pulled_closed_part_keeps_the_other_replicas_entries(tmp_path: Path) -> None:
    one, two = stretches()
    with AppServer(tmp_path / "r1", session_part_events=PER) as r1:
        path = turns(r1, "one", 5, one)  # t1..t10: the page, parts 2 and 3
        assert r1.memory is not None
        pulled = {
            rel: (r1.memory.wiki_dir / rel).read_bytes()
            for rel in (path, part_path(path, 2), part_path(path, 3))
        }
    assert b"oneword3" in pulled[part_path(path, 2)]
    with AppServer(tmp_path / "r2", session_part_events=PER) as r2:
        m = r2.memory
        assert m is not None
        for rel, data in pulled.items():
            (m.wiki_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            (m.wiki_dir / rel).write_bytes(data)
        m.commit_hand_edits(sorted(pulled)).result()
        assert turns(r2, "two", 4, two) == path  # t1..t8: its own page and part 2
        part2 = (m.wiki_dir / part_path(path, 2)).read_text(encoding="utf-8")
        for word in ("oneword3", "onedone3", "oneword4", "onedone4"):
            assert word in part2, f"replica 1's {word} left part 2"
        for word in ("twoword3", "twodone4"):
            assert word in part2, f"replica 2's {word} missing from part 2"
        ids = re.findall(r"^\^t\d+r?$", part2, re.M)
        assert len(ids) == len(set(ids)), ids
        page = (m.wiki_dir / path).read_text(encoding="utf-8")
        assert "oneword1" in page and "twoword1" in page, page


def test_an_entry_rendered_again_replaces_its_old_text_on_a_kept_part(tmp_path: Path) -> None:
    from wiki_memory.core.keepentries import keep_entries

    def part(body: str, extra: str = "") -> bytes:
        return (
            "---\ntype: session\npart: 2\npart_of: s/x.md\n---\n\n# x · part 2\n\n"
            f"## Timeline\n\n**10:00:00** · tool\n\n{body}\n\n^t5\n{extra}"
        ).encode()

    pulled = part("call pending", "\n**10:00:01** · prompt\n\nother side\n\n^t6\n")
    fresh = part("call done: 3 files")
    out = keep_entries(tmp_path, "s/x.part-002.md", pulled, fresh)
    assert out is not None
    text = out.decode()
    assert "call done: 3 files" in text and "call pending" not in text, text
    assert "other side" in text and text.count("^t5\n") == 1, text
