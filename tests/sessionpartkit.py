"""Long sessions in parts for tests (docs/sessions.md, "Parts"): the pages the compiler
writes for a list of events (no Memory), and a six-turn session captured through an
in-process app whose part bound is :data:`PER` events."""

from __future__ import annotations

from typing import Any

from support import as_user

from wiki_memory.capture.observation import SessionMeta, parse_event
from wiki_memory.core.memory import Memory
from wiki_memory.core.sessionpartwrite import part_bytes
from wiki_memory.core.sessions import compiler_bytes
from wiki_memory.wiki.compiler import compile_session

#: events per part in these tests
PER = 4
PATH = "projects/p/sessions/1970-01-01-abcd1234.md"
META = SessionMeta("abcd1234" + "0" * 16, "claude-code", "s1", "p", "ann", "/w/p", 0.0)


def turns(words: list[str], start: int) -> list[tuple[str, dict[str, Any], int]]:
    """A prompt and a reply per word, two seconds apart from ``start`` (epoch seconds)."""
    out: list[tuple[str, dict[str, Any], int]] = []
    for i, w in enumerate(words):
        ts = start + 2 * i
        out.append(("UserPromptSubmit", {"prompt": f"look at {w} please"}, ts))
        out.append(("Stop", {"last_assistant_message": f"done with {w}"}, ts + 1))
    return out


def pages(events: list[tuple[str, dict[str, Any], int]], now: float) -> dict[str, bytes]:
    """The session page and its parts as the compiler writes them for ``events``."""
    obs = []
    for n, (event, payload, ts) in enumerate(events, start=1):
        o = parse_event(
            {"harness": "claude-code", "event": event, "session_id": "s1", "cwd": "/w/p",
             "ts": f"1970-01-01T00:00:{ts:02d}Z", "payload": payload},
            "ann",
        )  # fmt: skip
        o.obs_id = f"o-{n}"
        obs.append(o)
    comp = compile_session(
        META, obs, status="active", ended=None, now=now, created=1.0, path=PATH, part_events=PER
    )
    return {PATH: compiler_bytes(comp), **{p.path: part_bytes(p) for p in comp.parts}}


def cc(event: str, **fields: Any) -> dict[str, Any]:
    """A Claude Code event of session ``s-long`` in project ``atlas``."""
    payload = {"hook_event_name": event, "session_id": "s-long", "cwd": "/home/u/atlas", **fields}
    return {"harness": "claude-code", "project": "atlas", "payload": payload}


def six_turns(m: Memory, user: str) -> str:
    """Capture six turns (t1..t12: the page and parts 2 and 3 at :data:`PER`) as
    ``user``, each compiled; returns the session page's path."""
    for n in range(1, 7):
        for ev in (
            cc("UserPromptSubmit", prompt=f"prompt {n}: look at parser{n}word"),
            cc("Stop", last_assistant_message=f"reply {n}: fixed parser{n}word"),
        ):
            m.capture(ev, as_user(m, user))
        m.writer.flush()
    key = next(iter(m.spool.sessions))
    return str(m.spool.sessions[key].state["path"])
