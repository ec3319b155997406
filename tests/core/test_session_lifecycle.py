"""Sessions as the harness keeps them (case C61), no echo (invariant 15) and accepted
means rendered: driven through an in-process Memory with the harnesses' payload shapes
(../shared/data/hooks)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support import all_text_under, as_user, git_objects, shared_path

from wiki_memory.core.forget import forget_page
from wiki_memory.core.purge import purge_page
from wiki_memory.core.remember import remember
from wiki_memory.wiki import compiler

pytestmark = pytest.mark.process

SUMMARY_PHRASE = "zeppelin-quasar-marmalade"


def shape(harness: str, event: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        shared_path("data", "hooks", harness, f"{event}.json").read_text()
    )
    return data


def cc(event: str, sid: str, **fields: Any) -> dict[str, Any]:
    """A Claude Code event of the shared shape, as the hook posts it."""
    payload = shape("claude-code", event)
    payload.update(session_id=sid, cwd="/home/user/atlas", **fields)
    for k in [k for k, v in fields.items() if v is None]:
        payload.pop(k)
    return {"harness": "claude-code", "project": "atlas", "payload": payload}


def run(mem: Any, events: list[dict[str, Any]]) -> None:
    for ev in events:
        mem.capture(ev, as_user(mem, "alice"))
    mem.writer.flush()


def turn(sid: str, n: int, origin: str | None = None) -> list[dict[str, Any]]:
    said = origin or sid  # a fork repeats its origin's prompts, ids and all
    return [
        cc("UserPromptSubmit", sid, prompt=f"prompt-{n} of {said}", prompt_id=f"p-{said}-{n}"),
        cc(
            "PostToolUse",
            sid,
            tool_use_id=f"toolu_{sid}_{n}",
            tool_name="Bash",
            tool_input={"command": f"echo tool-{n}"},
            tool_response={"stdout": f"out-{n}", "stderr": ""},
        ),
        cc("Stop", sid, last_assistant_message=f"answer-{n} of {sid}"),
    ]


def page_of(mem: Any, sid: str) -> tuple[str, str]:
    info = next(i for i in mem.spool.sessions.values() if i.session_id == sid)
    path = info.state["path"]
    return path, (mem.wiki_dir / path).read_text()


def timeline(text: str) -> str:
    return text.split("## Timeline", 1)[1]


def head_of(mem: Any) -> bytes:
    from dulwich.repo import Repo

    with Repo(str(mem.wiki_dir)) as repo:
        return repo.head()


def sessions_on_disk(mem: Any) -> list[Path]:
    return sorted((mem.wiki_dir / "projects").rglob("sessions/*.md"))


def test_claude_code_lifecycle_of_case_C61(mem):
    run(mem, [cc("SessionStart", "sess-0611", source="startup")])
    for n in range(3):
        run(mem, turn("sess-0611", n))
    run(mem, [cc("SessionEnd", "sess-0611", reason="exit")])
    path, text = page_of(mem, "sess-0611")
    assert "status: ended" in text
    # 2: resumed with the same id: the same page, active again, each prompt once
    run(mem, [cc("SessionStart", "sess-0611", source="resume"), *turn("sess-0611", 3)])
    path2, text = page_of(mem, "sess-0611")
    assert path2 == path and "status: active" in text and "ended: null" in text
    ids = [int(i) for i in re.findall(r"^\^t(\d+)$", text, re.M)]
    assert ids == sorted(ids) and len(ids) == len(set(ids))
    for n in range(4):
        assert timeline(text).count(f"prompt-{n} of sess-0611") == 1
    # 3: compaction with a 20 kB summary the harness types as the user
    summary = (
        "This session is being continued from a previous conversation that ran out of "
        f"context. {SUMMARY_PHRASE}. " + "Earlier work: the parser was fixed. " * 560
    )
    assert len(summary) > 20_000
    run(
        mem,
        [
            cc("PreCompact", "sess-0611", trigger="auto", custom_instructions=""),
            cc("SessionStart", "sess-0611", source="compact"),
            cc("UserPromptSubmit", "sess-0611", prompt=summary),
            *turn("sess-0611", 4),
        ],
    )
    _, text = page_of(mem, "sess-0611")
    assert SUMMARY_PHRASE not in text
    compactions = re.findall(r"context compaction.*\n\nthe harness's summary", text)
    assert len(compactions) == 1
    assert text.count("· prompt\n") == 5
    hits = mem.recall(SUMMARY_PHRASE, project="atlas", user=as_user(mem, "alice"))
    assert hits.items == []
    # 4: clear: a new page, linked to the previous one
    run(mem, [cc("SessionStart", "sess-0612", source="clear"), *turn("sess-0612", 0)])
    path3, text3 = page_of(mem, "sess-0612")
    assert path3 != path
    assert f"continues: {path}" in text3
    assert f"continues [[{path.removesuffix('.md')}]]" in text3
    # 5: a fork whose first events repeat the origin's last two prompts (same ids)
    run(
        mem,
        [
            cc("SessionStart", "sess-0613", source="startup"),
            *turn("sess-0613", 3, origin="sess-0611"),
            *turn("sess-0613", 4, origin="sess-0611"),
            *turn("sess-0613", 5),
        ],
    )
    _, fork = page_of(mem, "sess-0613")
    assert "prompt-3 of sess-0611" not in fork and "prompt-4 of sess-0611" not in fork
    links = re.findall(r"same prompt as \[\[([^\]]+)\]\]", fork)
    assert [link.split("#")[0] for link in links] == [path.removesuffix(".md")] * 2
    for n, link in zip((3, 4), links, strict=True):
        entry = text.split(f"^{link.split('#^')[1]}\n")[0].rsplit("\n^t", 1)[1]
        assert f"prompt-{n} of sess-0611" in entry  # the origin's entry of that prompt
    assert "title: prompt-5 of sess-0613" in fork
    # 6: ten sessions that only started: no page and no commit
    pages = sessions_on_disk(mem)
    head = head_of(mem)
    run(mem, [cc("SessionStart", f"sess-069{i}", source="startup") for i in range(10)])
    for i in range(10):
        key = next(k for k, v in mem.spool.sessions.items() if v.session_id == f"sess-069{i}")
        mem.request_compile(key, end=True).result(timeout=60)
    mem.writer.flush()
    assert sessions_on_disk(mem) == pages
    assert head_of(mem) == head


def test_a_codex_resume_continues_its_page(mem):
    def ev(event: str, **fields: Any) -> dict[str, Any]:
        payload = shape("codex", event)
        payload.update(session_id="thr-1", cwd="/home/user/atlas", **fields)
        return {"harness": "codex", "project": "atlas", "payload": payload}

    run(mem, [ev("SessionStart", source="startup")])
    for n in range(2):
        run(mem, [ev("UserPromptSubmit", prompt=f"codex-{n}"), ev("Stop")])
    key = next(k for k, v in mem.spool.sessions.items() if v.session_id == "thr-1")
    mem.request_compile(key, end=True).result(timeout=60)  # Codex ends by idleness
    mem.writer.flush()
    path, text = page_of(mem, "thr-1")
    assert "status: ended" in text
    run(mem, [ev("SessionStart", source="resume"), ev("UserPromptSubmit", prompt="codex-2")])
    run(mem, [ev("Stop", last_assistant_message="done")])
    path2, text = page_of(mem, "thr-1")
    assert path2 == path and "status: active" in text
    assert [timeline(text).count(f"codex-{n}") for n in range(3)] == [1, 1, 1]
    assert len(list((mem.wiki_dir / "projects/atlas/sessions").glob("*.md"))) == 1


NOTE_VALUE = "blue-heron-vault-7731"


def test_memory_recall_output_is_stored_as_a_reference(mem):
    note = remember(
        mem,
        f"The staging database port is {NOTE_VALUE}.",
        project="atlas",
        title="Staging port",
        user=as_user(mem, "alice"),
    )
    mem.writer.flush()
    note_path = note["path"]
    answer = [{"type": "text", "text": f"[{note_path}] The staging port is {NOTE_VALUE}."}]
    run(
        mem,
        [
            cc("UserPromptSubmit", "sess-echo", prompt="what is the staging port?"),
            cc(
                "PostToolUse",
                "sess-echo",
                tool_use_id="toolu_echo",
                tool_name="mcp__wiki-memory__memory_recall",
                tool_input={"query": "staging port"},
                tool_response=answer,
            ),
            cc(
                "PostToolUse",
                "sess-echo",
                tool_use_id="toolu_cli",
                tool_name="Bash",
                tool_input={"command": "/home/u/.local/bin/wiki-memory recall 'staging port'"},
                tool_response={"stdout": f"{note_path}\n{NOTE_VALUE}", "stderr": ""},
            ),
            cc("Stop", "sess-echo", last_assistant_message="It is in the note."),
        ],
    )
    path, text = page_of(mem, "sess-echo")
    assert NOTE_VALUE not in text
    assert "returned by the memory (`memory_recall`), not stored" in text
    assert f"`{note_path}`" in text and "returned by the memory (`cli recall`)" in text
    forget_page(mem, note_path, None)
    mem.writer.flush()
    hits = mem.recall(NOTE_VALUE, user=as_user(mem, "alice"))
    assert hits.items == []
    purge_page(mem, note_path, None)
    mem.writer.flush()
    data = Path(mem.settings.data_dir)
    assert NOTE_VALUE.encode() not in all_text_under(data)
    assert NOTE_VALUE.encode() not in git_objects(mem.wiki_dir)


def test_an_event_that_cannot_be_rendered_leaves_a_placeholder(mem, monkeypatch):
    real = compiler._prompt_text

    def broken(o: Any) -> str:
        if "poison" in str(o.payload.get("prompt")):
            raise ValueError("cannot render this one")
        return real(o)

    monkeypatch.setattr(compiler, "_prompt_text", broken)
    run(
        mem,
        [
            cc("UserPromptSubmit", "sess-bad", prompt="a good first prompt"),
            cc("UserPromptSubmit", "sess-bad", prompt="a poison prompt"),
            cc("UserPromptSubmit", "sess-bad", prompt="a good third prompt"),
            cc("Stop", "sess-bad", last_assistant_message="fine"),
        ],
    )
    _, text = page_of(mem, "sess-bad")
    assert "a good first prompt" in text and "a good third prompt" in text
    assert "unrendered event `UserPromptSubmit` · spool record `" in text
    assert "ValueError: cannot render this one" in text
    info = next(i for i in mem.spool.sessions.values() if i.session_id == "sess-bad")
    assert len(info.state["unrendered"]) == 1
    from wiki_memory.cli.checks_store import check_unrendered, unrendered_line
    from wiki_memory.cli.doctor import Context
    from wiki_memory.core.sessions import unrendered_count

    assert unrendered_count(mem.spool) == 1
    ctx = Context(mem.settings, 0)
    check_unrendered(ctx)
    assert ctx.rep["unrendered_events"] == 1 and "1 accepted event(s)" in ctx.findings[0].message
    assert unrendered_line(mem.settings) == 1
    # it compiles once the cause is gone: the placeholder goes, the count with it
    monkeypatch.setattr(compiler, "_prompt_text", real)
    run(mem, [cc("Stop", "sess-bad", last_assistant_message="again")])
    _, text = page_of(mem, "sess-bad")
    assert "a poison prompt" in text and "unrendered event" not in text
    assert unrendered_line(mem.settings) is None


def test_discarded_placeholders_are_no_longer_counted_but_stay_on_the_page(mem, monkeypatch):
    from wiki_memory.cli.checks_store import unrendered_line
    from wiki_memory.core.unrendered import discard_unrendered, list_unrendered
    from wiki_memory.errors import Forbidden

    def broken(o: Any) -> str:
        raise ValueError("never renders")

    run(mem, [cc("UserPromptSubmit", "sess-lost", prompt="a first prompt")])
    monkeypatch.setattr(compiler, "_prompt_text", broken)
    run(mem, [cc("UserPromptSubmit", "sess-lost", prompt="lost"), cc("Stop", "sess-lost")])
    (row,) = list_unrendered(mem, as_user(mem, "alice"))
    assert row["page"] and len(row["placeholders"]) == 2 and row["events"] == 2
    with pytest.raises(Forbidden):
        list_unrendered(mem, as_user(mem, "bob"))
    res = discard_unrendered(mem, as_user(mem, "alice"), row["session"][:10])
    assert res == {
        "session": row["session"],
        "page": row["page"],
        "discarded": 2,
        "dropped_spool": False,
    }
    assert (
        list_unrendered(mem, as_user(mem, "alice")) == [] and unrendered_line(mem.settings) is None
    )
    # the next compile does not count them again; the page still says what is missing
    run(mem, [cc("Stop", "sess-lost", last_assistant_message="later")])
    assert list_unrendered(mem, as_user(mem, "alice")) == []
    _, text = page_of(mem, "sess-lost")
    assert text.count("unrendered event `UserPromptSubmit`") == 2 and "later" in text
    audit = (mem.settings.logs_dir / "audit.jsonl").read_text()
    assert '"unrendered.discard"' in audit


def test_a_failing_compile_is_retried_with_back_off(mem, monkeypatch):
    import time

    calls: list[float] = []
    real = mem.sessions.compile_job

    def flaky(key: str, end: bool, remerge: bool = False) -> Any:
        calls.append(time.monotonic())
        if len(calls) <= 2:
            raise OSError("disk says no")
        return real(key, end, remerge)

    monkeypatch.setattr(mem.sessions, "compile_job", flaky)
    monkeypatch.setattr(mem.sessions.backoff, "first", 0.1)
    run(mem, [cc("UserPromptSubmit", "sess-retry", prompt="retry me")])
    key = next(k for k, v in mem.spool.sessions.items() if v.session_id == "sess-retry")
    mem.request_compile(key).result(timeout=10)  # fails, a retry is scheduled
    from support import wait_for

    wait_for(lambda: mem.spool.sessions[key].state.get("path"), 10, "the retried compile")
    assert len(calls) == 3
    assert calls[1] - calls[0] >= 0.09 and calls[2] - calls[1] >= 0.19  # waits double
    time.sleep(0.3)
    assert len(calls) == 3  # no loop once it compiled


def test_a_resumed_or_compacted_session_gets_a_shorter_brief_that_says_so(mem):
    from wiki_memory.core.brief import build_brief

    remember(mem, "The parser is in src/parse.py.", project="atlas", user=as_user(mem, "alice"))
    mem.writer.flush()
    kw = {"project": "atlas", "harness": "claude-code", "session_id": "sess-b"}
    first = build_brief(mem, as_user(mem, "alice"), budget_tokens=800, **kw)
    assert first["text"] and "resumed" not in first["text"]
    for source, words in (("resume", "Session resumed"), ("compact", "Context compacted")):
        again = build_brief(mem, as_user(mem, "alice"), budget_tokens=800, source=source, **kw)
        assert words in again["text"]
        assert again["budget_tokens"] == 400 and again["used_tokens"] <= 400


def test_a_session_with_no_project_hands_off_to_its_user(mem):
    def ev(event: str, **fields: Any) -> dict[str, Any]:
        payload = shape("claude-code", event)
        payload.update(session_id="sess-home", cwd="/home/user", **fields)
        return {"harness": "claude-code", "project_from": "none", "payload": payload}

    run(
        mem,
        [
            ev("SessionStart", source="startup"),
            ev("UserPromptSubmit", prompt="tidy my dotfiles and then the shell history"),
            ev(
                "PostToolUse",
                tool_use_id="toolu_home",
                tool_name="Bash",
                tool_input={"command": "ls ~/.config"},
                tool_response={"stdout": "nvim\nfish", "stderr": ""},
            ),
            ev("SessionEnd", reason="exit"),
        ],
    )
    path, text = page_of(mem, "sess-home")
    assert path.startswith("people/alice/sessions/") and "project: null" in text
    (h,) = mem.handoffs.list_handoffs(as_user(mem.handoffs, "alice"))
    assert h["path"].startswith("people/alice/handoffs/P-")
    assert h["visibility"] == "personal" and h.get("project") is None
    assert h["session_page"] == path
    assert mem.handoffs.list_handoffs(as_user(mem.handoffs, "bob")) == []


def test_an_offer_to_a_session_that_only_started_is_open_again_after_its_lease(mem):
    from wiki_memory.core.brief import build_brief

    h = mem.handoffs.create(
        as_user(mem, "alice"), project="atlas", title="Finish the parser", next_steps="wire it up"
    )
    mem.writer.flush()
    real = mem.handoffs.clock
    kw = {"project": "atlas", "harness": "claude-code"}
    # a SessionStart that briefs, then nothing: its offer is printed, no page, no claim
    run(mem, [cc("SessionStart", "sess-0690", source="startup")])
    b = build_brief(mem, as_user(mem, "alice"), session_id="sess-0690", **kw)
    assert [o["id"] for o in b["offers"]] == [h["id"]]
    key = next(k for k, v in mem.spool.sessions.items() if v.session_id == "sess-0690")
    mem.request_compile(key, end=True).result(timeout=60)
    assert mem.handoffs.list_handoffs(as_user(mem.handoffs, "alice"))[0]["status"] == "offered"
    lease = mem.handoffs.config.lease_seconds
    mem.handoffs.clock = lambda: real() + lease + 1
    (after,) = mem.handoffs.list_handoffs(as_user(mem.handoffs, "alice"))
    assert after["status"] == "open" and not after.get("claimed_by")
    nxt = build_brief(mem, as_user(mem, "alice"), session_id="sess-0700", **kw)
    assert [o["id"] for o in nxt["offers"]] == [h["id"]]
    assert sessions_on_disk(mem) == []


def test_a_gemini_cli_resume_continues_its_page(mem):
    clock = iter(range(100))

    def ev(event: str, **fields: Any) -> dict[str, Any]:
        payload = shape("gemini", event)
        stamp = f"2026-01-10T09:00:{next(clock):02d}.000Z"
        payload.update(session_id="gem-1", cwd="/home/user/atlas", timestamp=stamp, **fields)
        return {"harness": "gemini-cli", "project": "atlas", "payload": payload}

    def turn(n: int) -> list[dict[str, Any]]:
        said = {"prompt": f"gemini-{n}"}
        return [ev("BeforeAgent", **said), ev("AfterAgent", prompt_response=f"ok {n}", **said)]

    run(mem, [ev("SessionStart", source="startup"), *turn(0), ev("SessionEnd", reason="exit")])
    path, text = page_of(mem, "gem-1")
    assert "status: ended" in text
    run(mem, [ev("SessionStart", source="resume"), *turn(1)])
    path2, text = page_of(mem, "gem-1")
    assert path2 == path and "status: active" in text and "ended: null" in text
    assert [timeline(text).count(f"gemini-{n}\n") for n in range(2)] == [1, 1]
    ids = [int(i) for i in re.findall(r"^\^t(\d+)$", text, re.M)]
    assert ids == sorted(set(ids))
