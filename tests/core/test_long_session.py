"""A long session: a compile renders only the events that arrived since the last one
(wiki/timelinememo.py) and the spool is read from where its last read stopped
(capture/spoolcache.py); what the page says must be what a compile of every event says,
and everything that reads a session page must still find what it holds."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from support import as_user

from wiki_memory.capture.observation import Observation, SessionMeta, parse_event
from wiki_memory.config import Settings
from wiki_memory.core.sessions import compiler_bytes
from wiki_memory.wiki import compiler
from wiki_memory.wiki.compiler import compile_session
from wiki_memory.wiki.pagemerge import merge_page
from wiki_memory.wiki.sessionparts import entry_page, part_paths

META = SessionMeta("abcd1234" + "0" * 16, "claude-code", "s1", "p", "ann", "/w/p", 0.0)
PATH = "projects/p/sessions/1970-01-01-abcd1234.md"


def obs(n: int, event: str, ts: float, offset: str = "Z", **payload: Any) -> Observation:
    iso = (datetime(1970, 1, 2, tzinfo=UTC) + timedelta(seconds=ts)).isoformat()[:19] + offset
    o = parse_event(
        {
            "harness": "claude-code",
            "event": event,
            "session_id": "s1",
            "cwd": "/w/p",
            "ts": iso,
            "payload": payload,
        },
        "ann",
    )
    o.obs_id = f"o-{n}"
    return o


def page(observations: list[Observation], memo: Any = None, **kw: Any) -> Any:
    return compile_session(
        META,
        observations,
        status="active",
        ended=None,
        now=100.0,
        created=1.0,
        path=PATH,
        memo=memo,
        **kw,
    )


def events() -> list[Observation]:
    """Batches' worth of events with what makes an incremental compile hard: a tool call
    whose PostToolUse comes a compile after its PreToolUse, a reply repeated, an offset
    sent only from the fourth event on, a failure for the summary, a late event."""
    out = [
        obs(1, "SessionStart", 1, source="startup"),
        obs(2, "UserPromptSubmit", 2, prompt="first prompt, the goal"),
        obs(
            3,
            "PreToolUse",
            3,
            tool_name="Bash",
            tool_use_id="u1",
            tool_input={"command": "pytest -x"},
        ),
    ]
    out += [
        obs(
            4,
            "PostToolUse",
            4,
            "+02:00",
            tool_name="Bash",
            tool_use_id="u1",
            tool_input={"command": "pytest -x"},
            tool_response="FAILED t.py 1 failed",
        ),
        obs(5, "Stop", 5, "+02:00", last_assistant_message="same reply"),
        obs(6, "Stop", 6, "+02:00", last_assistant_message="same reply"),
        obs(
            7,
            "PostToolUse",
            7,
            "+02:00",
            tool_name="Edit",
            tool_use_id="u2",
            tool_input={"file_path": "/w/p/a.py"},
            tool_response="ok",
        ),
    ]
    out += [obs(8 + i, "UserPromptSubmit", 8 + i, prompt=f"prompt {i}") for i in range(3)]
    return out


@pytest.mark.fast
def test_a_compile_of_the_new_events_writes_what_a_compile_of_all_of_them_writes():
    all_obs = events()
    cuts = [3, 7, 8, 10]
    comp = None
    reused = []
    for cut in cuts:
        got = page(all_obs[:cut], comp.memo if comp else None)
        full = page(all_obs[:cut])
        assert compiler_bytes(got) == compiler_bytes(full), cut
        assert got.summary == full.summary and got.timeline == full.timeline
        reused.append(comp is not None and got.memo is comp.memo)
        comp = got
    # the offset that first came with event 4 moves every earlier entry's mark: the second
    # compile starts again; the others only add
    assert reused == [False, False, True, True]
    text = compiler_bytes(comp).decode()
    assert text.count("tool **Bash** · failed") == 1 and "tool **Bash** · called" not in text
    assert text.count("same reply") == 2  # the entry once, and the summary's last reply


@pytest.mark.fast
def test_a_late_event_or_a_placeholder_makes_the_next_compile_start_again(monkeypatch):
    all_obs = [obs(n, "UserPromptSubmit", 10 * n, prompt=f"p{n}") for n in range(1, 5)]
    first = page(all_obs[:3])
    late = obs(9, "UserPromptSubmit", 15, prompt="arrived late, said early")
    again = page([*all_obs[:3], late], first.memo)
    assert again.memo is not first.memo
    assert compiler_bytes(again) == compiler_bytes(page([*all_obs[:3], late]))
    tl = again.timeline
    assert tl.index("p1") < tl.index("arrived late") < tl.index("p2")
    # an event that cannot be rendered is tried again by the next compile
    real = compiler._prompt_text

    def broken(o: Observation) -> str:
        if "poison" in str(o.payload.get("prompt")):
            raise ValueError("cannot render this one")
        return real(o)

    monkeypatch.setattr(compiler, "_prompt_text", broken)
    poison = [*all_obs[:3], obs(5, "UserPromptSubmit", 40, prompt="a poison prompt")]
    bad = page(poison)
    assert bad.unrendered == ["o-5"]
    monkeypatch.undo()
    good = page([*poison, obs(6, "Stop", 50, last_assistant_message="ok")], bad.memo)
    assert good.unrendered == [] and "a poison prompt" in good.timeline


def long_session(turns: int, start: int = 1) -> list[Observation]:
    out = []
    for t in range(start, start + turns):
        n = 3 * (t - 1)
        out += [
            obs(n + 1, "UserPromptSubmit", 3 * t, prompt=f"prompt {t}"),
            obs(
                n + 2,
                "PostToolUse",
                3 * t + 1,
                tool_name="Bash",
                tool_use_id=f"u{t}",
                tool_input={"command": f"make t{t}"},
                tool_response=f"out {t}",
            ),
            obs(n + 3, "Stop", 3 * t + 2, last_assistant_message=f"reply {t}"),
        ]
    return out


@pytest.mark.fast
def test_a_long_session_page_compiled_on_two_replicas_still_merges():
    """1,200 turns in common, compiled turn batch by turn batch here; a few more turns on
    each side: the entry-by-entry merge still gives one page, the hub's numbers kept."""
    shared = long_session(1200)
    comp = None
    for cut in range(600, 3601, 600):
        comp = page(shared[:cut], comp.memo if comp else None)
    assert comp is not None
    base = compiler_bytes(comp)
    assert base == compiler_bytes(page(shared))
    hub_tail = [obs(3601, "UserPromptSubmit", 5000, prompt="on the hub")]
    here_tail = [obs(3601, "UserPromptSubmit", 5001, prompt="here, after #^t3601")]
    hub = compiler_bytes(page(shared + hub_tail, comp.memo))
    here = compiler_bytes(page(shared + here_tail, comp.memo))
    moved: dict[int, int] = {}
    merged = merge_page(base, here, hub, moved, b"1970-01-01-abcd1234")
    assert merged is not None and moved == {3601: 3602}
    ids = re.findall(r"^\^t(\d+)$", merged.decode(), re.M)
    assert [int(i) for i in ids] == list(range(1, 3603))
    assert "after #^t3602" in merged.decode()


def capture_turns(mem: Any, first: int, last: int, sid: str = "long") -> None:
    batch: list[dict[str, Any]] = []
    for t in range(first, last + 1):
        batch += turn(sid, t)
        if len(batch) >= 600:
            mem.capture(batch, as_user(mem, "alice"))
            batch = []
    if batch:
        mem.capture(batch, as_user(mem, "alice"))
    mem.writer.flush()


def cc(sid: str, event: str, **payload: Any) -> dict[str, Any]:
    payload.update(session_id=sid, cwd="/home/dev/atlas", hook_event_name=event)
    return {"harness": "claude-code", "project": "atlas", "payload": payload}


def word(t: int) -> str:
    """A word of its own for turn ``t`` (letters only, so the index keeps it whole)."""
    letters = "bcdfghjklmnpqrstvwxz"
    return "qu" + "".join(letters[int(d)] for d in str(t)) + "ova"


def turn(sid: str, t: int) -> list[dict[str, Any]]:
    return [
        cc(sid, "UserPromptSubmit", prompt=f"prompt {t}: look at {word(t)} again"),
        cc(
            sid,
            "PostToolUse",
            tool_name="Bash",
            tool_use_id=f"toolu_{t}",
            tool_input={"command": f"grep -n parse src/mod{t % 7}.py"},
            tool_response={"stdout": f"{t}: def parse(x):\n", "stderr": ""},
        ),
        cc(sid, "Stop", last_assistant_message=f"reply {t}: done"),
    ]


def whole_session(mem: Any, path: str) -> str:
    """A session's text: its page, then each of its parts (wiki/sessionparts.py)."""
    pages = [path, *part_paths(mem.wiki_dir, path)]
    return "".join((mem.wiki_dir / p).read_text() for p in pages)


PARTS = Settings().session_part_events


@pytest.mark.slow
def test_a_long_session_keeps_its_numbers_links_recall_and_resume(mem):
    capture_turns(mem, 1, 1197)
    for t in (1198, 1199, 1200):  # a turn at a time, as the hook posts them
        capture_turns(mem, t, t)
    info = next(i for i in mem.spool.sessions.values() if i.session_id == "long")
    path = info.state["path"]
    text = whole_session(mem, path)  # the session page and its parts (sessionparts.py)
    ids = [int(i) for i in re.findall(r"^\^t(\d+)$", text, re.M)]
    assert ids == list(range(1, 3601))  # unique, increasing, every event's entry
    # the pages are what a compile of the whole spool writes
    full = compile_session(
        SessionMeta(
            info.key, info.harness, info.session_id, info.project, info.user, info.cwd, info.started
        ),
        mem.spool.observations(info.key),
        status="active",
        ended=None,
        now=0.0,
        path=path,
        part_events=mem.settings.session_part_events,
    )
    assert full.timeline in (mem.wiki_dir / path).read_text()
    for part in full.parts:
        assert part.body in (mem.wiki_dir / part.path).read_text()
    # every earlier entry is still found by its link
    wanted = [1, 2, 3, 1500, 3000, 3600]
    got = mem.expand([f"{path}#^t{n}" for n in wanted], 100_000, as_user(mem, "alice"))
    assert got["missing"] == [] and len(got["items"]) == len(wanted)
    assert "prompt 1:" in got["items"][0]["text"] and "reply 1200" in got["items"][-1]["text"]
    # recall finds an early and a late entry by a word only each holds
    for t, anchor in ((3, "^t7"), (1199, "^t3595")):
        hits = mem.recall(word(t), user=as_user(mem, "alice"))
        assert any(
            str(h.get("id", "")).endswith(f"{path}#{anchor}")
            or (h.get("path") == entry_page(path, anchor, PARTS) and anchor in str(h))
            for h in hits.items
        ), hits.items[:3]
    # a resume continues the numbering
    mem.capture(cc("long", "SessionStart", source="resume"), as_user(mem, "alice"))
    capture_turns(mem, 1201, 1201)
    text = whole_session(mem, path)
    ids = [int(i) for i in re.findall(r"^\^t(\d+)$", text, re.M)]
    assert ids[-4:] == [3601, 3602, 3603, 3604] and len(set(ids)) == len(ids)
    assert text.count("prompt 1200:") == 1
