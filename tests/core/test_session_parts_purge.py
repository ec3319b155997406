"""Purge of a long session (docs/sessions.md, "Parts"; docs/operations.md, "Purge"): the
session page and every part beside it go, so a byte search over every file of the data
directory and every git object finds no word of any part. In-process Memory; git's
object listing is a child process, hence ``process``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from gitkit import all_objects
from support import as_user, make_memory

from wiki_memory.core.purge import purge_page
from wiki_memory.wiki.sessionparts import part_path, part_paths

pytestmark = pytest.mark.process

SID = "s-purge-long"
#: a word of the last part only, and one of a middle part (built at run time)
LATE = "-".join(["cobalt", "walrus", "9931"])
MIDDLE = "-".join(["saffron", "ibex", "2210"])


def cc(event: str, **fields: Any) -> dict[str, Any]:
    payload = {"hook_event_name": event, "session_id": SID, "cwd": "/home/u/atlas", **fields}
    return {"harness": "claude-code", "project": "atlas", "payload": payload}


def holding(data: Path, value: bytes) -> list[str]:
    found = [
        str(f.relative_to(data))
        for f in sorted(data.rglob("*"))
        if f.is_file()
        and ".git" not in f.relative_to(data).parts
        and (value in f.read_bytes() or value in str(f).encode())
    ]
    if value in all_objects(data / "wiki"):
        found.append("wiki/.git objects")
    return found


def test_purge_of_a_long_session_leaves_no_byte_of_any_part(tmp_path: Path) -> None:
    data = tmp_path / "data"
    mem = make_memory(data, session_part_events=6)
    try:
        for n in range(1, 11):  # 20 events: the session page and parts 2..4
            word = MIDDLE if n == 5 else LATE if n == 10 else f"turn{n}"
            for ev in (
                cc("UserPromptSubmit", prompt=f"prompt {n}: about {word}"),
                cc("Stop", last_assistant_message=f"reply {n}: done with {word}"),
            ):
                mem.capture(ev, as_user(mem, "alice"))
            mem.writer.flush()
        key = next(iter(mem.spool.sessions))
        path = str(mem.spool.sessions[key].state["path"])
        parts = part_paths(mem.wiki_dir, path)
        assert parts == [part_path(path, k) for k in (2, 3, 4)]
        for value in (LATE, MIDDLE):  # in the parts' files and committed
            found = holding(data, value.encode())
            assert "wiki/.git objects" in found and any(".part-" in f for f in found), found

        res = purge_page(mem, path, None)
        assert len(res.get("parts") or []) == 3, res
        for value in (LATE, MIDDLE):
            assert holding(data, value.encode()) == [], value
        assert not (mem.wiki_dir / path).exists()
        assert not any((mem.wiki_dir / p).exists() for p in parts)
    finally:
        mem.stop()
