"""Whether a session's events ended it is read from the events that came since the last
compile (core/lifecycle.py EndMemo); the answer must be what a walk of every event gives,
through an end, a resume, an end again and a spool read again from its start."""

from __future__ import annotations

import random
from typing import Any

from wiki_memory.capture.observation import Observation, parse_event
from wiki_memory.core.lifecycle import EndMemo, ended_by_events


def obs(n: int, event: str, **payload: Any) -> Observation:
    o = parse_event(
        {
            "harness": "claude-code",
            "event": event,
            "session_id": "s1",
            "cwd": "/w/p",
            "ts": float(n),
            "payload": payload,
        },
        "ann",
    )
    o.obs_id = f"o-{n}"
    return o


def kinds(n: int, rng: random.Random) -> Observation:
    pick = rng.random()
    if pick < 0.05:
        return obs(n, "SessionEnd", reason="exit")
    if pick < 0.10:
        return obs(n, "SessionStart", source="resume")
    if pick < 0.55:
        return obs(n, "UserPromptSubmit", prompt=f"prompt {n}")
    return obs(n, "Stop", last_assistant_message=f"reply {n}")


def test_the_memo_answers_as_a_walk_of_every_event_batch_by_batch() -> None:
    rng = random.Random(7)
    events = [obs(0, "UserPromptSubmit", prompt="first")]
    memo = EndMemo()
    seen = set()
    for n in range(1, 400):
        events.append(kinds(n, rng))
        if rng.random() < 0.4:  # a compile now, of every event so far
            got = memo.ended("k", events)
            assert got == ended_by_events(events), n
            seen.add(got)
    assert seen == {True, False}  # both answers were given from the memo


def test_an_end_then_a_resume_then_prompts_is_active_again() -> None:
    memo = EndMemo()
    events = [obs(1, "UserPromptSubmit", prompt="a"), obs(2, "SessionEnd", reason="exit")]
    assert memo.ended("k", events) is True
    events += [obs(3, "SessionStart", source="resume"), obs(4, "UserPromptSubmit", prompt="b")]
    assert memo.ended("k", events) is False
    events.append(obs(5, "Stop", last_assistant_message="done"))
    assert memo.ended("k", events) is False
    events.append(obs(6, "SessionEnd", reason="exit"))
    assert memo.ended("k", events) is True


def test_events_read_again_that_differ_from_those_answered_for_are_walked_whole() -> None:
    memo = EndMemo()
    ended = [obs(1, "UserPromptSubmit", prompt="a"), obs(2, "SessionEnd", reason="exit")]
    assert memo.ended("k", ended) is True
    # the spool read again: other events at the remembered place, and fewer of them
    other = [obs(1, "UserPromptSubmit", prompt="a"), obs(9, "Stop", last_assistant_message="x")]
    assert memo.ended("k", other) is False
    assert memo.ended("k", other[:1]) is False
    # another session's key has its own answer
    assert memo.ended("j", ended) is True
