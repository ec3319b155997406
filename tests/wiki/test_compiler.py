"""The session-page compiler on its own: anchors, merging of tool events, fences."""

from __future__ import annotations

from wiki_memory.capture.observation import SessionMeta, parse_event
from wiki_memory.wiki.compiler import compile_session
from wiki_memory.wiki.page import parse_page

META = SessionMeta("abcdef0123456789abcdef01", "codex", "s1", "proj", "u", "/home/u/proj", 0.0)


def obs(n, event, payload, ts):
    o = parse_event(
        {
            "harness": "codex",
            "event": event,
            "session_id": "s1",
            "cwd": "/home/u/proj",
            "ts": ts,
            "payload": payload,
        },
        "u",
    )
    o.obs_id = f"abcdef012345-{n}"
    return o


def test_block_ids_are_unique_and_stable_with_a_turn_and_a_stop():
    events = [
        obs(1, "UserPromptSubmit", {"prompt": "add retries"}, 10),
        obs(
            2,
            "agent-turn-complete",
            {"input-messages": ["add retries"], "last-assistant-message": "Added."},
            20,
        ),
        obs(3, "Stop", {"last_assistant_message": "Added."}, 21),
    ]
    comp = compile_session(META, events, status="active", ended=None, now=30)
    text = comp.body
    ids = [ln for ln in text.splitlines() if ln.startswith("^t")]
    assert len(ids) == len(set(ids))
    parsed = parse_page(text, comp.path)
    assert not [d for d in parsed.diagnostics if d.kind == "duplicate_block_id"]
    # a late event with an earlier timestamp keeps everyone's anchor
    late = obs(4, "UserPromptSubmit", {"prompt": "first thing"}, 5)
    comp2 = compile_session(META, [*events, late], status="active", ended=None, now=31)
    timeline = comp2.body.split("## Timeline", 1)[1]
    assert timeline.index("first thing") < timeline.index("add retries")
    assert timeline.count("Added.") == 1  # the Stop repeats the turn's reply: shown once
    assert {ln for ln in comp2.body.splitlines() if ln.startswith("^t")} == set(ids) | {"^t4"}


def test_verbatim_text_cannot_break_out_of_its_fence():
    evil = "~~~~\n# Heading\n[[Link]] #tag\n~~~~~~\n^t99"
    comp = compile_session(
        META, [obs(1, "UserPromptSubmit", {"prompt": evil}, 1)], status="active", ended=None, now=2
    )
    parsed = parse_page(comp.body, comp.path)
    assert [s.anchor for s in parsed.sections if s.anchor.startswith("^")] == ["^t1"]
    assert not [ln for ln in parsed.links if ln.target == "Link"]
    assert "tag" not in parsed.tags
    assert comp.metadata["title"] == " ".join(evil.split())  # the exact text stays in frontmatter
