"""Handoffs in process: the state machine, claim once, leases, invariant 8, scope, and the
automatic (zero-LLM) handoff's signals on real sample input."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from support import as_user, shared_path

from wiki_memory.capture.observation import parse_event
from wiki_memory.config import load_settings
from wiki_memory.core.handoffs import (
    HandoffConfig,
    HandoffConflict,
    HandoffForbidden,
    next_step_lines,
    session_signals,
)
from wiki_memory.core.memory import Memory
from wiki_memory.datadir import ensure_layout
from wiki_memory.errors import NotFound
from wiki_memory.wiki.page import parse_page


def compile_now(m: Memory, key: str) -> str:
    """Compile (and end) a session's page and commit it; returns its path."""
    path = m.request_compile(key, end=True).result(timeout=60).value
    m.writer.flush()
    return str(path)


def commits(m: Memory, path: str | None = None) -> list[str]:
    m.writer.flush()
    return [c.message for c in m.git.log(path, limit=1000)]


def new(svc, **kw):
    base = {"project": "proj", "title": "Fix the billing test", "harness": "claude-code"}
    base.update(kw)
    return svc.create(
        as_user(svc, kw.pop("user", "alice")), **{k: v for k, v in base.items() if k != "user"}
    )


# --------------------------------------------------------------------------- states


def test_create_writes_a_typed_page_with_every_key_and_section(mem):
    svc = mem.handoffs
    h = new(
        svc,
        session_id="s1",
        where_we_left_off="Half of the rounding fix is in.",
        what_failed="pytest tests/test_billing.py failed",
        open_questions=["Round half even?"],
        next_steps="Finish the fix\nRe-run the tests",
        files=["src/billing.py"],
    )
    assert h["id"] == "H-0001" and h["path"] == "projects/proj/handoffs/H-0001.md"
    raw = (mem.wiki_dir / h["path"]).read_bytes()
    page = parse_page(raw, h["path"])
    md = page.metadata
    for key in (
        "type",
        "id",
        "title",
        "created",
        "updated",
        "project",
        "status",
        "user",
        "harness",
        "session",
        "to",
        "visibility",
        "expires",
        "claimed_by",
        "claimed_harness",
        "claimed_session",
        "claimed_at",
        "done_at",
    ):
        assert key in md, key
    assert (md["type"], md["status"], md["user"], md["to"], md["visibility"]) == (
        "handoff",
        "open",
        "alice",
        "any",
        "project",
    )
    headings = [s.anchor for s in page.sections if s.level == 2]
    assert headings == ["Where we left off", "What failed", "Open questions", "Next steps", "Files"]
    assert h["sections"]["next_steps"] == "- Finish the fix\n- Re-run the tests"
    assert mem.git.is_clean()
    assert commits(mem, h["path"]) == [f"Handoff H-0001 opened: {h['path']}"]
    # ids keep counting
    assert new(svc)["id"] == "H-0002"


def test_claim_once_repeat_conflict_complete_and_final_states(mem):
    svc = mem.handoffs
    hid = new(svc)["id"]
    r = svc.claim(as_user(svc, "bob"), hid, harness="codex", session_id="b1")
    assert r["handoff"]["status"] == "claimed" and r["repeat"] is False
    assert r["handoff"]["claimed_by"] == "bob" and r["handoff"]["claimed_session"] == "b1"
    n = len(commits(mem))
    # the winner's repeat claim: 200, no write, no commit
    assert svc.claim(as_user(svc, "bob"), hid, harness="codex", session_id="b1")["repeat"] is True
    assert len(commits(mem)) == n
    # anyone else, the same user's other session included, gets a conflict naming bob
    for user, sess in (("carol", "c1"), ("bob", "b2")):
        with pytest.raises(HandoffConflict) as e:
            svc.claim(as_user(svc, user), hid, harness="codex", session_id=sess)
        assert e.value.code == "claimed" and "bob (codex session b1)" in str(e.value)
        assert e.value.holder == {"user": "bob", "harness": "codex", "session": "b1"}
    # only the claimant may complete or release; the creator may not cancel a claimed one
    with pytest.raises(HandoffConflict) as e:
        svc.complete(as_user(svc, "carol"), hid)
    assert e.value.code == "claimed" and "bob" in str(e.value)
    with pytest.raises(HandoffConflict):
        svc.cancel(as_user(svc, "alice"), hid)
    done = svc.complete(
        as_user(svc, "bob"), hid, harness="codex", session_id="b1", note="Rounded half even."
    )
    assert done["handoff"]["status"] == "done" and done["handoff"]["done_at"]
    assert done["handoff"]["sections"]["outcome"] == "Rounded half even."
    assert svc.complete(as_user(svc, "bob"), hid)["repeat"] is True
    for act in (
        lambda: svc.claim(as_user(svc, "carol"), hid),
        lambda: svc.release(as_user(svc, "bob"), hid),
        lambda: svc.cancel(as_user(svc, "alice"), hid),
    ):
        with pytest.raises(HandoffConflict) as e:
            act()
        assert e.value.code == "done" and "done" in str(e.value)
    # one claim commit, one done commit
    msgs = commits(mem, f"projects/proj/handoffs/{hid}.md")
    assert sum("claimed by" in m for m in msgs) == 1 and sum(" done by " in m for m in msgs) == 1


def test_release_reopens_and_cancel_is_for_the_creator(mem):
    svc = mem.handoffs
    hid = new(svc)["id"]
    with pytest.raises(HandoffConflict) as e:
        svc.release(as_user(svc, "bob"), hid)
    assert e.value.code == "not_claimed"
    with pytest.raises(HandoffConflict) as e:
        svc.complete(as_user(svc, "bob"), hid)
    assert e.value.code == "not_claimed"
    svc.claim(as_user(svc, "bob"), hid, harness="codex", session_id="b1")
    with pytest.raises(HandoffConflict) as e:
        svc.release(as_user(svc, "carol"), hid)
    assert e.value.code == "claimed"
    r = svc.release(as_user(svc, "bob"), hid, harness="cli", session_id="cli")
    assert r["handoff"]["status"] == "open" and r["handoff"]["claimed_by"] is None
    assert svc.claim(as_user(svc, "carol"), hid)["handoff"]["claimed_by"] == "carol"
    svc.release(as_user(svc, "carol"), hid)
    with pytest.raises(HandoffForbidden):
        svc.cancel(as_user(svc, "bob"), hid)
    c = svc.cancel(as_user(svc, "alice"), hid, reason="not needed")
    assert c["handoff"]["status"] == "cancelled"
    assert svc.cancel(as_user(svc, "alice"), hid)["repeat"] is True
    with pytest.raises(HandoffConflict) as e:
        svc.claim(as_user(svc, "bob"), hid)
    assert e.value.code == "cancelled" and "cancelled" in str(e.value)
    # the wiki's owner may cancel anyone's handoff
    hid2 = new(svc, user="bob")["id"]
    assert svc.cancel(as_user(svc, "alice"), hid2)["handoff"]["status"] == "cancelled"


def test_expiry_is_a_state_in_the_page(mem):
    svc = mem.handoffs
    hid = new(svc, expires_in_seconds=60)["id"]
    path = f"projects/proj/handoffs/{hid}.md"
    real = time.time
    svc.clock = lambda: real() + 120
    assert svc.show(as_user(svc, "bob"), hid)["status"] == "expired"
    with pytest.raises(HandoffConflict) as e:
        svc.claim(as_user(svc, "bob"), hid)
    assert e.value.code == "expired" and "expired at" in str(e.value)
    # the expiry the claim ran into is now written down and committed
    assert parse_page((mem.wiki_dir / path).read_bytes(), path).metadata["status"] == "expired"
    assert mem.git.is_clean()
    assert [h["id"] for h in svc.list_handoffs(as_user(svc, "bob"), status="expired")] == [hid]
    with pytest.raises(ValueError):
        new(svc, expires="2000-01-01T00:00:00Z")
    with pytest.raises(ValueError):
        svc.list_handoffs(as_user(svc, "bob"), status="nonsense")


def test_unknown_malformed_and_non_handoff_ids(mem):
    svc = mem.handoffs
    with pytest.raises(NotFound):
        svc.claim(as_user(svc, "bob"), "H-9999")
    with pytest.raises(ValueError):
        svc.show(as_user(svc, "bob"), "../../etc/passwd")
    with pytest.raises(ValueError):
        svc.show(as_user(svc, "bob"), "H-*")
    note = mem.wiki_dir / "projects/proj/handoffs/H-0500.md"
    note.parent.mkdir(parents=True)
    note.write_text("# just a note\n")
    with pytest.raises(NotFound):
        svc.claim(as_user(svc, "bob"), "H-0500")
    # a person's page with that number is never overwritten: the next id skips it
    svc._next_num = 500
    assert new(svc)["id"] == "H-0501"


def test_server_edits_keep_a_persons_edits_byte_for_byte(mem):
    svc = mem.handoffs
    h = new(svc, next_steps=["one"])
    full = mem.wiki_dir / h["path"]
    raw = full.read_text()
    # a person adds a comment, a key of their own (quoted), and body text
    edited = raw.replace("to: any\n", "to: any  # anyone may take it\nreviewer: 'dana'\n")
    edited = edited.replace("- one\n", "- one\n- two (added by hand)\n") + "\nMy own notes.\n"
    full.write_text(edited)
    svc.claim(as_user(svc, "bob"), h["id"], harness="codex", session_id="b1")
    after = full.read_text()
    changed = {
        ln.split(":", 1)[0]
        for ln in set(after.splitlines()) ^ set(edited.splitlines())
        if ln.strip()
    }
    assert changed <= {
        "status",
        "claimed_by",
        "claimed_harness",
        "claimed_session",
        "claimed_at",
        "updated",
    }
    assert "to: any  # anyone may take it\nreviewer: 'dana'\n" in after
    assert "- two (added by hand)" in after and after.endswith("\nMy own notes.\n")
    svc.complete(as_user(svc, "bob"), h["id"], note="Fixed.")
    final = full.read_text()
    assert "reviewer: 'dana'" in final and "My own notes." in final and "## Outcome" in final


def test_fifty_threads_claim_at_once_one_wins(mem):
    svc = mem.handoffs
    for _ in range(3):
        hid = new(svc)["id"]
        barrier = threading.Barrier(50)
        results: list[tuple[str, object]] = []

        def claimer(
            i: int,
            hid: str = hid,
            barrier: threading.Barrier = barrier,
            results: list[tuple[str, object]] = results,
        ) -> None:
            barrier.wait()
            try:
                svc.claim(as_user(svc, f"user{i}"), hid, harness="codex", session_id=f"s{i}")
                out: tuple[str, object] = ("ok", i)
            except HandoffConflict as exc:
                out = ("409", str(exc))
            results.append(out)  # list.append is atomic

        threads = [threading.Thread(target=claimer, args=(i,)) for i in range(50)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wins = [r[1] for r in results if r[0] == "ok"]
        assert len(wins) == 1
        winner = f"user{wins[0]} (codex session s{wins[0]})"
        losses = [r[1] for r in results if r[0] == "409"]
        assert len(losses) == 49 and all(winner in str(m) for m in losses)
        msgs = commits(mem, f"projects/proj/handoffs/{hid}.md")
        assert sum("claimed by" in m for m in msgs) == 1


# --------------------------------------------------------------------------- offers


@pytest.mark.slow
def test_offers_are_leases_that_run_out(mem):
    svc = mem.handoffs
    svc.config = HandoffConfig(lease_seconds=0.5)
    hid = new(svc)["id"]
    x = ("dave", "codex", "x")
    held, offered = svc.offer(svc_claimant(*x), "proj")
    assert [h.id for h in offered] == [hid] and not held
    assert svc.show(as_user(svc, "bob"), hid)["status"] == "offered"
    # while the lease runs nobody else is offered it or can claim it
    assert svc.offer(svc_claimant("erin", "codex", "y"), "proj")[1] == []
    with pytest.raises(HandoffConflict) as e:
        svc.claim(as_user(svc, "erin"), hid, harness="codex", session_id="y")
    assert e.value.code == "offered" and "dave (codex session x)" in str(e.value)
    # the same session asking again keeps its offer
    assert [h.id for h in svc.offer(svc_claimant(*x), "proj")[1]] == [hid]
    time.sleep(0.7)
    assert svc.show(as_user(svc, "bob"), hid)["status"] == "open"
    assert [h.id for h in svc.offer(svc_claimant("erin", "codex", "y"), "proj")[1]] == [hid]
    assert (
        svc.claim(as_user(svc, "erin"), hid, harness="codex", session_id="y")["handoff"]["status"]
        == "claimed"
    )
    with pytest.raises(HandoffConflict) as e:
        svc.claim(as_user(svc, "dave"), hid, harness="codex", session_id="x")
    assert e.value.code == "claimed" and "erin" in str(e.value)


def test_offers_respect_to_visibility_and_own_handoffs(mem):
    svc = mem.handoffs
    a = new(svc, to="codex", title="for codex")["id"]
    b = new(svc, to="gemini-cli", title="for gemini")["id"]
    c = new(svc, to="bob", title="for bob")["id"]
    mine = new(svc, session_id="me", title="mine")["id"]
    held, offered = svc.offer(svc_claimant("bob", "codex", "s"), "proj", max_offers=10)
    assert {h.id for h in offered} == {a, c, mine}
    assert b not in {h.id for h in offered}
    # the session that left a handoff is not offered it back
    held, offered = svc.offer(svc_claimant("alice", "claude-code", "me"), "proj", max_offers=10)
    assert mine not in {h.id for h in offered}


def test_claiming_one_offer_gives_back_the_others(mem):
    svc = mem.handoffs
    ids = [new(svc, title=f"task {i}")["id"] for i in range(3)]
    x = svc_claimant("bob", "codex", "x")
    offered = svc.offer(x, "proj")[1]
    assert len(offered) == 3
    svc.claim(as_user(svc, "bob"), ids[0], harness="codex", session_id="x")
    assert {svc.show(as_user(svc, "carol"), i)["status"] for i in ids[1:]} == {"open"}


def svc_claimant(user, harness, session):
    from wiki_memory.core.handoffs import Claimant

    return Claimant(user, harness, session)


# --------------------------------------------------------------------------- personal


def test_personal_handoffs_are_seen_by_their_owner_alone(mem):
    svc = mem.handoffs
    h = new(
        svc,
        user="bob",
        visibility="personal",
        title="Zanzibar quokka migration plan",
        where_we_left_off="zanzibar quokka notes",
    )
    assert h["path"].startswith("people/bob/handoffs/")
    assert [x["id"] for x in svc.list_handoffs(as_user(svc, "bob"))] == [h["id"]]
    assert svc.list_handoffs(as_user(svc, "carol")) == []
    with pytest.raises(NotFound):
        svc.show(as_user(svc, "carol"), h["id"])
    with pytest.raises(NotFound):
        svc.claim(as_user(svc, "carol"), h["id"])
    assert svc.offer(svc_claimant("carol", "codex", "c"), "proj")[1] == []
    assert "zanzibar" not in json.dumps(
        mem.recall("zanzibar quokka", user=as_user(mem, "carol")).items
    )
    assert "zanzibar" not in json.dumps(mem.recall("zanzibar quokka").items)
    assert mem.recall("zanzibar quokka", user=as_user(mem, "bob")).items
    assert svc.claim(as_user(svc, "bob"), h["id"])["handoff"]["status"] == "claimed"


# --------------------------------------------------------------------------- signals


def events(names: list[str], session_id: str, **over) -> list[dict]:
    out = []
    for i, name in enumerate(names):
        payload = json.loads(
            shared_path("data", "hooks", "claude-code", f"{name}.json").read_text()
        )
        payload["session_id"] = session_id
        payload.update(over.get(name, {}))
        out.append(
            {
                "harness": "claude-code",
                "event": name,
                "session_id": session_id,
                "cwd": payload["cwd"],
                "event_id": f"{session_id}-{i}",
                "ts": f"2026-11-30T10:00:{i:02d}Z",
                "payload": payload,
            }
        )
    return out


CLEAN = [
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Notification",
    "SubagentStop",
    "PreCompact",
    "Stop",
    "SessionEnd",
]


def obs(evs: list[dict]):
    return [parse_event(e, "alice") for e in evs]


def test_signals_on_the_claude_code_samples():
    assert session_signals(obs(events(CLEAN, "s"))).names == []
    failing = [n for n in CLEAN if n != "Stop"]
    failing.insert(4, "PostToolUseFailure")
    sig = session_signals(obs(events(failing, "s")))
    assert sig.names == ["tool_failed", "unanswered_prompt", "late_compaction"]
    assert sig.failed_tool and "test_rounding" in sig.failed_tool[2]
    assert sig.failed_tool[1] == "pytest -q tests/test_billing.py"
    todo = events(
        CLEAN,
        "s",
        Stop={"last_assistant_message": "Done with step 1.\n\nNext steps:\n- run CI\n- tag it"},
    )
    assert session_signals(obs(todo)).next_steps == ["Next steps:", "- run CI", "- tag it"]
    # a prompt and an end with no agent activity at all is not unfinished work
    assert session_signals(obs(events(["UserPromptSubmit", "SessionEnd"], "s"))).names == []


def test_next_step_lines_only_take_marked_lines():
    assert next_step_lines("TODO: wire the flag\nall good") == ["TODO: wire the flag"]
    assert next_step_lines("- [ ] update docs\n- [x] tests") == ["- [ ] update docs"]
    assert next_step_lines("**Remaining work:** the migration") == [
        "**Remaining work:** the migration"
    ]
    for text in (
        "I'll go there next week.",
        "Next, we rebuilt it and it passed.",
        "todo list app is done",
        "The remaining tests pass.",
    ):
        assert next_step_lines(text) == [], text


def locomo_conversation():
    data = json.loads(shared_path("data", "locomo", "locomo7-dev.json").read_text())
    return data


def test_no_locomo_turn_reads_as_a_next_step():
    n = 0
    for sample in locomo_conversation():
        for key, turns in sample["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                for t in turns:
                    n += 1
                    assert next_step_lines(t["text"]) == [], t["text"]
    assert n > 4000


def locomo_events(sample: dict, session_id: str, alternate: bool) -> list[dict]:
    conv = sample["conversation"]
    out = []
    i = 0
    for key in sorted(
        (k for k in conv if k.startswith("session_") and isinstance(conv[k], list)),
        key=lambda k: int(k.split("_")[1]),
    ):
        for t in conv[key]:
            i += 1
            reply = alternate and t["speaker"] == conv["speaker_b"]
            payload = {"speaker": t["speaker"], "dia_id": t["dia_id"]}
            if reply:
                payload["last_assistant_message"] = t["text"]
            else:
                payload["prompt"] = t["text"]
            out.append(
                {
                    "harness": "locomo",
                    "event": "Stop" if reply else "UserPromptSubmit",
                    "session_id": session_id,
                    "project": "locomo",
                    "event_id": f"{session_id}-{i}",
                    "ts": 1_700_000_000 + i,
                    "payload": payload,
                }
            )
    out.append(
        {
            "harness": "locomo",
            "event": "SessionEnd",
            "session_id": session_id,
            "project": "locomo",
            "ts": 1_700_000_000 + i + 1,
            "payload": {"reason": "other"},
        }
    )
    return out


def test_ingesting_a_locomo_conversation_opens_no_handoff(mem):
    svc = mem.handoffs
    sample = locomo_conversation()[0]
    for sid, alternate in (("conv-a", False), ("conv-b", True)):
        evs = locomo_events(sample, sid, alternate)
        assert session_signals(obs(evs)).names == []
        for i in range(0, len(evs), 500):
            mem.capture(evs[i : i + 500], as_user(mem, "alice"))
        key = next(k for k, v in mem.spool.sessions.items() if v.session_id == sid)
        compile_now(mem, key)
    assert mem.list_pages(project="locomo", kind="session")
    assert svc.list_handoffs(as_user(svc, "alice")) == []
    assert not list((mem.wiki_dir / "projects" / "locomo").glob("handoffs/*"))


def test_session_end_opens_a_linked_automatic_handoff_that_supersedes_older(mem):
    svc = mem.handoffs
    assert mem.on_session_end.count(svc.on_session_end) == 1
    assert mem.on_session_end.count(svc.on_session_end) == 1
    failing = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUseFailure"]
    mem.capture(events(failing + ["SessionEnd"], "a1"), as_user(mem, "alice"))
    key = next(k for k, v in mem.spool.sessions.items() if v.session_id == "a1")
    page = compile_now(mem, key)
    hs = svc.list_handoffs(as_user(svc, "bob"), project="project")
    assert len(hs) == 1 and hs[0]["auto"] and hs[0]["status"] == "open"
    assert hs[0]["session_page"] == page
    full = svc.show(as_user(svc, "bob"), hs[0]["id"])
    assert f"[[{page.removesuffix('.md')}|" in full["content"]
    assert "test_rounding" in full["sections"]["what_failed"]
    assert full["metadata"]["signals"][0] == "tool_failed"
    # the session page and the handoff are committed together, by the session's user
    assert mem.git.is_clean()
    # a later unfinished session of the same user and project supersedes it
    mem.capture(events(failing + ["SessionEnd"], "a2"), as_user(mem, "alice"))
    key2 = next(k for k, v in mem.spool.sessions.items() if v.session_id == "a2")
    compile_now(mem, key2)
    hs = {h["id"]: h for h in svc.list_handoffs(as_user(svc, "bob"), project="project")}
    old, newer = sorted(hs)
    assert hs[old]["status"] == "cancelled" and hs[old]["superseded_by"] == newer
    assert hs[newer]["status"] == "open"
    with pytest.raises(HandoffConflict) as e:
        svc.claim(as_user(svc, "bob"), old)
    assert e.value.code == "cancelled" and newer in str(e.value)


def test_no_automatic_handoff_when_off_or_when_the_session_left_one(mem, monkeypatch):
    svc = mem.handoffs
    failing = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUseFailure"]
    # the session left an explicit handoff
    mem.capture(events(failing, "e1"), as_user(mem, "alice"))
    svc.create(
        as_user(svc, "alice"),
        project="project",
        title="explicit",
        harness="claude-code",
        session_id="e1",
    )
    mem.capture([{**events(["SessionEnd"], "e1")[0], "event_id": "e1-end"}], as_user(mem, "alice"))
    key = next(k for k, v in mem.spool.sessions.items() if v.session_id == "e1")
    compile_now(mem, key)
    assert [h["title"] for h in svc.list_handoffs(as_user(svc, "alice"), project="project")] == [
        "explicit"
    ]
    # the setting turns it off
    monkeypatch.setenv("WIKI_MEMORY_HANDOFF_AUTO", "0")
    svc.config = HandoffConfig.load(mem.settings)
    assert svc.config.auto is False
    mem.capture(events(failing + ["SessionEnd"], "e2"), as_user(mem, "alice"))
    key = next(k for k, v in mem.spool.sessions.items() if v.session_id == "e2")
    compile_now(mem, key)
    assert len(svc.list_handoffs(as_user(svc, "alice"), project="project")) == 1


def test_config_from_toml_and_env(tmp_path, monkeypatch):
    settings = load_settings(tmp_path / "d")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "config.toml").write_text(
        "handoff_lease_seconds = 60\nhandoff_max_offers = 1\n"
    )
    cfg = HandoffConfig.load(settings)
    assert (cfg.lease_seconds, cfg.max_offers, cfg.auto) == (60.0, 1, True)
    monkeypatch.setenv("WIKI_MEMORY_HANDOFF_LEASE_SECONDS", "5")
    assert HandoffConfig.load(settings).lease_seconds == 5.0


def test_state_survives_a_restart_and_a_reindex(tmp_path):
    settings = load_settings(tmp_path / "data", watch=False, commit_delay_seconds=0.02)
    ensure_layout(settings)
    m = Memory(settings, owner_user="alice")
    m.start()
    svc = m.handoffs
    hid = svc.create(as_user(svc, "alice"), project="proj", title="t")["id"]
    svc.claim(as_user(svc, "bob"), hid, harness="codex", session_id="b")
    m.stop()
    (Path(settings.index_path)).unlink()
    m2 = Memory(settings, owner_user="alice")
    m2.start()
    try:
        svc2 = m2.handoffs
        assert svc2.show(as_user(svc2, "carol"), hid)["claimed_by"] == "bob"
        assert [h["status"] for h in svc2.list_handoffs(as_user(svc2, "carol"))] == ["claimed"]
        with pytest.raises(HandoffConflict):
            svc2.claim(as_user(svc2, "carol"), hid)
        assert svc2.create(as_user(svc2, "alice"), project="proj", title="t2")["id"] == "H-0002"
    finally:
        m2.stop()
