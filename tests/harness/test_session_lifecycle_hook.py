"""Case C61 through the installed hook: a real server, the hook command install-hooks
writes, run as the harness runs it with the shared payload shapes (../shared/data/hooks).

Claude Code: startup, three prompts, exit, resume with the same id, a compaction with a
20 kB summary, clear, ten sessions that only started; then a Codex thread resumed. Every
SessionStart prints a brief; an offer printed to a session that only started is open
again after its (short) lease."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from hookkit import free_port, hook_env, installed_command, run_hook, wait_until
from serverproc import ServerProcess
from support import shared_path

pytestmark = [pytest.mark.process, pytest.mark.slow]

PHRASE = "ornithopter-lagoon-saffron"


def shape(folder: str, event: str, **fields: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        shared_path("data", "hooks", folder, f"{event}.json").read_text()
    )
    data.update(fields)
    return data


class Agent:
    """One harness's installed hook commands, run against the server."""

    def __init__(self, agent: str, tmp: Path, url: str, work: Path) -> None:
        self.agent = agent
        self.tmp = tmp
        self.env = hook_env(tmp, url)
        self.work = work
        self.commands: dict[str, str] = {}
        self.contexts: list[str] = []

    def send(self, folder: str, event: str, sid: str, brief: bool = True, **fields: Any) -> None:
        if event not in self.commands:
            self.commands[event] = installed_command(self.agent, self.tmp, event)
        payload = shape(folder, event, session_id=sid, cwd=str(self.work), **fields)
        r = run_hook(self.commands[event], payload, self.env, timeout=30)
        assert r.rc == 0, r
        if event == "SessionStart":
            ctx = json.loads(r.stdout)["hookSpecificOutput"]["additionalContext"]
            assert ctx.strip() or not brief, f"an empty brief at {sid} {fields}"
            self.contexts.append(ctx)


def pages(data: Path) -> dict[str, str]:
    folder = data / "wiki" / "projects" / "atlas" / "sessions"
    return {p.name: p.read_text() for p in sorted(folder.glob("*.md"))} if folder.is_dir() else {}


def page_with(data: Path, sid: str) -> str:
    hits = [t for t in pages(data).values() if f"session_id: {sid}\n" in t]
    assert len(hits) == 1, (sid, list(pages(data)))
    return hits[0]


def timeline(text: str) -> str:
    return text.split("## Timeline", 1)[1]


def git_added(data: Path) -> list[str]:
    """Every path some commit added."""
    out = subprocess.run(
        ["git", "-C", str(data / "wiki"), "log", "--diff-filter=A", "--name-only", "--format="],
        capture_output=True,
        text=True,
        check=True,
    )
    return [line for line in out.stdout.splitlines() if line]


def test_C61_through_the_installed_hook(tmp_path: Path) -> None:
    data = tmp_path / "data"
    work = tmp_path / "code" / "atlas"
    (work / ".git").mkdir(parents=True)
    env = {
        "WIKI_MEMORY_HANDOFF_LEASE_SECONDS": "3",
        "WIKI_MEMORY_IDLE_SECONDS": "8",  # not while a busy machine runs the hooks
        "WIKI_MEMORY_IDLE_CHECK_SECONDS": "0.2",
    }
    with ServerProcess(data, port=free_port(), env=env).start() as srv:
        cc = Agent("claude-code", tmp_path, srv.url, work)
        # a session opened and quit makes the repository a project (and no page)
        cc.send("claude-code", "SessionStart", "sess-0600", brief=False, source="startup")
        made = srv.post("/v1/remember", {"project": "atlas", "text": "The lexer is in lex.py."})
        assert made.status_code < 300, made.text
        h = srv.post(
            "/v1/handoffs",
            {"project": "atlas", "title": "Finish the tokenizer", "next_steps": "wire it"},
        ).json()["handoff"]
        cc.send("claude-code", "SessionStart", "sess-0611", source="startup")
        settings = json.loads((tmp_path / "home" / ".claude" / "settings.json").read_text())
        for group in settings["hooks"]["SessionStart"]:
            assert group.get("matcher") in (None, "", "*"), group

        def turn(sid: str, n: int) -> None:
            cc.send("claude-code", "UserPromptSubmit", sid, prompt=f"prompt-{n} of {sid}")
            cc.send(
                "claude-code",
                "PostToolUse",
                sid,
                tool_use_id=f"toolu_{sid}_{n}",
                tool_input={"command": f"echo tool-{n}"},
                tool_response={"stdout": f"out-{n}", "stderr": ""},
            )
            cc.send("claude-code", "Stop", sid, last_assistant_message=f"answer-{n}")

        # 1 and 2: startup, three prompts, exit; resume with the same id, one prompt
        for n in range(3):
            turn("sess-0611", n)
        cc.send("claude-code", "SessionEnd", "sess-0611", reason="exit")
        cc.send("claude-code", "SessionStart", "sess-0611", source="resume")
        assert "Session resumed" in cc.contexts[-1]
        turn("sess-0611", 3)
        assert wait_until(lambda: "prompt-3 of sess-0611" in str(pages(data)), 30)
        text = page_with(data, "sess-0611")
        assert "status: active" in text
        ids = [int(i) for i in re.findall(r"^\^t(\d+)$", text, re.M)]
        assert ids == sorted(set(ids))
        assert [timeline(text).count(f"prompt-{n} of sess-0611") for n in range(4)] == [1] * 4
        # 3: compaction, its summary typed as the user's, then a prompt
        summary = (
            "This session is being continued from a previous conversation that ran out of "
            f"context. {PHRASE}. " + "The tokenizer now splits on camel case. " * 520
        )
        assert len(summary) > 20_000
        cc.send("claude-code", "PreCompact", "sess-0611", trigger="auto", custom_instructions="")
        cc.send("claude-code", "SessionStart", "sess-0611", source="compact")
        assert "Context compacted" in cc.contexts[-1]
        cc.send("claude-code", "UserPromptSubmit", "sess-0611", prompt=summary)
        turn("sess-0611", 4)
        assert wait_until(lambda: "prompt-4 of sess-0611" in str(pages(data)), 30)
        text = page_with(data, "sess-0611")
        assert PHRASE not in text and timeline(text).count("· prompt\n") == 5
        assert len(re.findall(r"· context compaction[^\n]*\n\nthe harness's summary", text)) == 1
        found = srv.post("/v1/recall", {"query": PHRASE, "project": "atlas"}).json()
        assert PHRASE not in json.dumps(found)
        # 4: clear: a new id, a new page linked to the previous one
        cc.send("claude-code", "SessionStart", "sess-0612", source="clear")
        turn("sess-0612", 0)
        assert wait_until(lambda: "prompt-0 of sess-0612" in str(pages(data)), 30)
        assert "continues: projects/atlas/sessions/" in page_with(data, "sess-0612")
        # 6: ten sessions that only started; the first is offered the handoff
        before = set(pages(data))
        time.sleep(3.2)  # the leases of the offers printed so far are over
        for i in range(10):
            cc.send("claude-code", "SessionStart", f"sess-069{i}", source="startup")
        assert h["id"] in cc.contexts[-10], cc.contexts[-10]
        time.sleep(8 + 1.5)  # their idleness ends them; the offer's lease (3 s) is over
        assert set(pages(data)) == before
        time.sleep(0.5)  # the last grouped commit
        added = {p.rsplit("/", 1)[-1] for p in git_added(data) if "/sessions/" in p}
        assert added == before, (added, before)  # no commit adds a page for the ten
        listed = srv.get("/v1/handoffs", params={"project": "atlas"}).json()
        (mine,) = [x for x in listed["handoffs"] if x["id"] == h["id"]]
        assert mine["status"] == "open" and not mine.get("claimed_by")
        cc.send("claude-code", "SessionStart", "sess-0700", source="startup")
        assert h["id"] in cc.contexts[-1]
        # 7: Codex: a thread with two turns, then resumed with the same id
        cx = Agent("codex", tmp_path, srv.url, work)
        cx.send("codex", "SessionStart", "thr-0611", source="startup")
        for n in range(2):
            turn_id = f"turn-{n}"
            cx.send("codex", "UserPromptSubmit", "thr-0611", prompt=f"codex-{n}", turn_id=turn_id)
            cx.send(
                "codex", "Stop", "thr-0611", last_assistant_message=f"answer {n}", turn_id=turn_id
            )
        cx.send("codex", "SessionStart", "thr-0611", source="resume")
        cx.send("codex", "UserPromptSubmit", "thr-0611", prompt="codex-2", turn_id="turn-2")
        cx.send("codex", "Stop", "thr-0611", last_assistant_message="answer 2", turn_id="turn-2")
        assert wait_until(lambda: "codex-2" in str(pages(data)), 30)
        text = page_with(data, "thr-0611")
        assert [timeline(text).count(f"codex-{n}\n") for n in range(3)] == [1, 1, 1]
        assert "status: active" in text
