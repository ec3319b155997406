"""An event without a repository id is filed by name only into a project with no id (or
its session's id's project); otherwise it waits until its session's id arrives, then
goes in before the event that brought it; after ten minutes without the id it goes to
its session's current project or its user's own sessions, never into the other
repository's project (docs/hooks.md, "An event without an id")."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import as_user
from test_repos import B, C, ev

from wiki_memory.capture.observation import session_key
from wiki_memory.config import load_settings
from wiki_memory.core.idwait import HOLD_SECONDS
from wiki_memory.core.memory import Memory
from wiki_memory.datadir import ensure_layout


def _memory(data: Path) -> Memory:
    s = load_settings(data, watch=False, commit_delay_seconds=0.02)
    ensure_layout(s)
    m = Memory(s, owner_user="alice")
    m.start()
    return m


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    m = _memory(tmp_path / "data")
    yield m
    m.stop()


def where(m: Memory, marker: str) -> list[tuple[str, str]]:
    """(project, session id) of every spooled event whose payload holds ``marker``."""
    return [
        (info.project, info.session_id)
        for info, obs in m.spool.iter_all()
        if marker in json.dumps(obs.payload)
    ]


def texts(m: Memory, sid: str) -> list[str]:
    out: list[str] = []
    for key, info in m.spool.sessions.items():
        if info.session_id == sid:
            out += [str(o.payload.get("prompt")) for o in m.spool.observations(key)]
    return out


def idless(sid: str, text: str, **kw: Any) -> dict[str, Any]:
    return ev(sid, "api", None, text, **kw)


@pytest.mark.fast
def test_the_first_id_less_event_of_a_second_api_waits_for_its_id(mem: Memory) -> None:
    m = mem
    m.capture(ev("s-job", "api", B, "job work"), as_user(m, "alice"))
    got = m.capture(idless("s-hobby", "HOBBY-FIRST-MARKER weather bot"), as_user(m, "alice"))
    assert got[0].get("held") is True
    assert where(m, "HOBBY-FIRST-MARKER") == []
    hits = m.recall(
        "HOBBY-FIRST-MARKER", project="api", user=as_user(m, "alice"), budget_tokens=4000
    )
    assert "HOBBY-FIRST-MARKER" not in " ".join(str(i) for i in hits.items)
    # a second id-less event of the session waits behind it
    assert m.capture(idless("s-hobby", "HOBBY-SECOND"), as_user(m, "alice"))[0].get("held") is True
    # the id arrives: the waiting events go first, into the id's project
    m.capture(ev("s-hobby", "api", C, "HOBBY-THIRD with its id"), as_user(m, "alice"))
    assert where(m, "HOBBY-FIRST-MARKER") == [("api-2", "s-hobby")]
    assert texts(m, "s-hobby") == [
        "HOBBY-FIRST-MARKER weather bot",
        "HOBBY-SECOND",
        "HOBBY-THIRD with its id",
    ]
    assert m.capturer.held.count() == 0
    # the session's id is known now: a later id-less event goes straight to its project
    got = m.capture(idless("s-hobby", "HOBBY-FOURTH"), as_user(m, "alice"))
    assert not got[0].get("held")
    assert where(m, "HOBBY-FOURTH") == [("api-2", "s-hobby")]
    assert not [p for p, _ in where(m, "HOBBY") if p == "api"]


@pytest.mark.fast
def test_in_one_list_the_id_less_event_goes_with_its_sessions_id(mem: Memory) -> None:
    m = mem
    m.capture(ev("s-job", "api", B, "job work"), as_user(m, "alice"))
    got = m.capture(
        [idless("s-hobby", "LIST-FIRST"), ev("s-hobby", "api", C, "LIST-SECOND")],
        as_user(m, "alice"),
    )
    assert [g.get("held") for g in got] == [None, None]  # no wait: the id is in the list
    assert texts(m, "s-hobby") == ["LIST-FIRST", "LIST-SECOND"]
    assert where(m, "LIST-FIRST") == [("api-2", "s-hobby")]


@pytest.mark.fast
def test_a_name_with_no_id_is_filed_by_name_at_once(mem: Memory) -> None:
    m = mem
    got = m.capture(idless("s-old", "OLD-HOOK-EVENT"), as_user(m, "alice"))
    assert not got[0].get("held")
    assert where(m, "OLD-HOOK-EVENT") == [("api", "s-old")]
    # an explicit project (not a repository's folder name) names the folder
    m.capture(ev("s-job", "api", B, "job work"), as_user(m, "alice"))
    m.capture({**idless("s-cli", "EXPLICIT-API"), "project_from": "explicit"}, as_user(m, "alice"))
    assert where(m, "EXPLICIT-API") == [("api", "s-cli")]


@pytest.mark.fast
def test_an_event_waits_across_a_restart(tmp_path: Path) -> None:
    m = _memory(tmp_path / "data")
    try:
        m.capture(ev("s-job", "api", B, "job work"), as_user(m, "alice"))
        m.capture(idless("s-hobby", "RESTART-MARKER"), as_user(m, "alice"))
    finally:
        m.stop()
    m = _memory(tmp_path / "data")
    try:
        assert m.capturer.held.count() == 1
        m.capture(ev("s-hobby", "api", C, "after the restart"), as_user(m, "alice"))
        assert where(m, "RESTART-MARKER") == [("api-2", "s-hobby")]
    finally:
        m.stop()


@pytest.mark.fast
def test_an_id_that_never_comes_files_the_event_as_its_users_own(mem: Memory) -> None:
    m = mem
    m.capture(ev("s-job", "api", B, "job work"), as_user(m, "alice"))
    m.capture(idless("s-lost", "LOST-ID-MARKER"), as_user(m, "alice"))
    assert m.capturer.expire_held(time.time() + HOLD_SECONDS / 2) == 0
    assert where(m, "LOST-ID-MARKER") == []
    assert m.capturer.expire_held(time.time() + HOLD_SECONDS + 1) == 1
    # no project: its user's own session, never the other repository's api
    assert where(m, "LOST-ID-MARKER") == [("", "s-lost")]
    assert m.capturer.held.count() == 0


@pytest.mark.fast
def test_purge_reaches_an_event_that_waits(mem: Memory) -> None:
    m = mem
    m.capture(ev("s-job", "api", B, "job work"), as_user(m, "alice"))
    m.capture(idless("s-hobby", "PURGE-ME-7731 in a waiting event"), as_user(m, "alice"))
    held = m.capturer.held.dir
    assert b"PURGE-ME-7731" in b"".join(f.read_bytes() for f in held.iterdir())
    assert m.capturer.held.scrub([b"PURGE-ME-7731"], b"[purged]") == 1
    assert b"PURGE-ME-7731" not in b"".join(f.read_bytes() for f in held.iterdir())


@pytest.mark.fast
def test_a_reader_has_nothing_kept_waiting(tmp_path: Path) -> None:
    from wiki_memory.auth import TokenStore
    from wiki_memory.errors import CaptureRefused

    s = load_settings(tmp_path / "data", watch=False, commit_delay_seconds=0.02)
    ensure_layout(s)
    tokens = TokenStore(s.auth_dir, owner_user="alice")
    tokens.ensure_owner()
    tokens.create("rita", "reader", ["api"])
    m = Memory(s, owner_user="alice", directory=tokens)
    m.start()
    try:
        m.capture(ev("s-job", "api", B, "job work"), as_user(m, "alice"))
        with pytest.raises(CaptureRefused):
            m.capture(idless("s-rita", "READER-MARKER"), as_user(m, "rita"))
        assert m.capturer.held.count() == 0 and where(m, "READER-MARKER") == []
    finally:
        m.stop()


@pytest.mark.fast
def test_an_event_whose_id_came_by_another_request_goes_to_that_project(mem: Memory) -> None:
    m = mem
    m.capture(ev("s-job", "api", B, "job work"), as_user(m, "alice"))
    m.capture(idless("s-race", "RACE-MARKER"), as_user(m, "alice"))
    # the id arrives, but the waiting event is not taken (two requests crossed)
    m.capturer.held.note(session_key("alice", "claude-code", "s-race"), "api", C)
    m.capture(ev("s-other", "api", C, "binds C"), as_user(m, "alice"))
    assert m.capturer.expire_held(time.time() + HOLD_SECONDS + 1) == 1
    assert where(m, "RACE-MARKER") == [("api-2", "s-race")]
