"""Renaming a long session's page (``page_edit`` rename; docs/sessions.md, "Parts"):
its parts move with it in the same commit, each linking the new page (``part_of`` and
its ``Part N of [[...]]`` line), the page's list of parts links their new names, expand
of an entry on a part through the new path finds it, and a part alone is not renamed
(400 naming its session page). Real apsw, real dulwich, in process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dulwich.repo import Repo
from support import as_user, make_memory

from wiki_memory.core.edits import edit_page
from wiki_memory.core.memory import Memory
from wiki_memory.errors import BadRequest
from wiki_memory.wiki.page import parse_metadata
from wiki_memory.wiki.sessionparts import part_path

pytestmark = pytest.mark.fast

PER = 4
SID = "s-long"


def cc(event: str, **fields: Any) -> dict[str, Any]:
    payload = {"hook_event_name": event, "session_id": SID, "cwd": "/home/u/atlas", **fields}
    return {"harness": "claude-code", "project": "atlas", "payload": payload}


def long_session(mem: Memory, turns: int) -> str:
    for n in range(1, turns + 1):
        for ev in (
            cc("UserPromptSubmit", prompt=f"prompt {n}: look at parser{n}word again"),
            cc("Stop", last_assistant_message=f"reply {n}: fixed parser{n}word offsets"),
        ):
            mem.capture(ev, as_user(mem, "alice"))
        mem.writer.flush()
    key = next(k for k, i in mem.spool.sessions.items() if i.session_id == SID)
    return str(mem.spool.sessions[key].state["path"])


@pytest.fixture
def mem(tmp_path: Path) -> Any:
    m = make_memory(tmp_path / "data", session_part_events=PER)
    yield m
    m.stop()


def test_the_parts_follow_their_renamed_session_page(mem: Memory) -> None:
    path = long_session(mem, 6)  # t1..t12: the page and parts 2, 3
    alice = as_user(mem, "alice")
    new = "projects/atlas/sessions/parser-offsets.md"
    res = edit_page(mem, "rename", path, who=alice, new_path=new)
    assert res["path"] == new and res["parts"] == [part_path(new, 2), part_path(new, 3)]
    for k in (2, 3):
        assert not (mem.wiki_dir / part_path(path, k)).exists()
        raw = (mem.wiki_dir / part_path(new, k)).read_text(encoding="utf-8")
        meta = parse_metadata(raw.encode())
        assert meta["part_of"] == new and meta["part"] == k
        assert f"Part {k} of [[projects/atlas/sessions/parser-offsets]]" in raw
    page = (mem.wiki_dir / new).read_text(encoding="utf-8")
    assert "[[projects/atlas/sessions/parser-offsets.part-002]]" in page
    assert path.removesuffix(".md") + ".part-" not in page
    got = mem.expand([f"{new}#^t11"], 2000, alice)  # turn 6's prompt, on part 3
    assert not got["missing"] and "parser6word" in str(got), got
    # one commit holds the page and its parts
    repo = Repo(str(mem.wiki_dir))
    head = repo[repo.head()]
    changes = repo.object_store.tree_changes(repo[head.parents[0]].tree, head.tree)
    touched = {p.decode() for (old, new_), _, _ in changes for p in (old, new_) if p}
    assert {new, part_path(new, 2), part_path(new, 3), part_path(path, 2)} <= touched


def test_a_part_alone_is_not_renamed(mem: Memory) -> None:
    path = long_session(mem, 4)
    alice = as_user(mem, "alice")
    with pytest.raises(BadRequest) as err:
        edit_page(mem, "rename", part_path(path, 2), who=alice, new_path="notes/elsewhere.md")
    assert path in str(err.value)  # a 400 naming the session page
    assert (mem.wiki_dir / part_path(path, 2)).exists()
