"""End to end over a real server process: hook events → spool → session page → git → recall.

The data directory starts with both shared Obsidian vaults and one LoCoMo conversation
as distractor pages. One real uvicorn server (127.0.0.1, a free port) serves the module.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from dulwich.repo import Repo
from serverproc import ServerProcess
from support import shared_path, wait_for

from wiki_memory.recall.tokens import count_item
from wiki_memory.wiki.page import parse_page

pytestmark = pytest.mark.process

# fake secrets, assembled so that this file itself holds none
AWS_KEY = "AKIA" + "Q3EXAMPLE7TESTKEY1"[:16]
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY99"
GH_TOKEN = "ghp_" + "x7Rk2Lm9Qw4Tz8Vb1Nc6Hd3Jf5Gs0Ya2Pe7U"
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    + "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2yEXAMPLEONLYfakefakefake0\n" * 6
    + "-----END RSA PRIVATE KEY-----"
)
SECRETS = [AWS_KEY, AWS_SECRET, GH_TOKEN, "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2y"]


def locomo_distractor_pages(wiki: Path) -> int:
    data = json.loads(shared_path("data", "locomo", "locomo7-dev.json").read_text())
    conv = data[1]["conversation"]
    out = wiki / "projects" / "locomo-distractor" / "notes"
    out.mkdir(parents=True)
    n = 0
    for key, turns in conv.items():
        if not key.startswith("session_") or not isinstance(turns, list):
            continue
        lines = [f"# {data[1]['sample_id']} {key}", ""]
        for t in turns:
            lines.append(f"{t['speaker']}: {t['text']} ^{t['dia_id'].replace(':', '-')}")
            lines.append("")
        (out / f"{key}.md").write_text("\n".join(lines), encoding="utf-8")
        n += 1
    return n


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e")
    data = root / "data"
    wiki = data / "wiki"
    wiki.mkdir(parents=True)
    for name in ("obsidian-tasks-docs", "obsidian-tasks-demo"):
        shutil.copytree(shared_path("data", "vaults", name, "vault"), wiki / "vaults" / name)
    locomo_distractor_pages(wiki)
    srv = ServerProcess(data, env={"WIKI_MEMORY_COMMIT_DELAY_SECONDS": "0.1"})
    srv.start(timeout=120)
    yield srv
    srv.stop()


def claude_session(session_id: str) -> list[dict]:
    # a finished session: the failing test run comes before the fix and the final reply
    order = [
        "SessionStart",
        "UserPromptSubmit",
        "PreCompact",
        "PreToolUse",
        "PostToolUseFailure",
        "Notification",
        "SubagentStop",
        "PostToolUse",
        "Stop",
    ]
    events = []
    for i, name in enumerate(order):
        payload = json.loads(
            shared_path("data", "hooks", "claude-code", f"{name}.json").read_text()
        )
        payload["session_id"] = session_id
        if name == "UserPromptSubmit":
            payload["prompt"] += f" Use key {AWS_KEY} and secret aws_secret_access_key={AWS_SECRET}"
        if name == "PostToolUse":
            payload["tool_response"]["stdout"] = f"token {GH_TOKEN}\n{PEM}\n"
        events.append(
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
    return events


def recall(srv, query, **kw):
    r = srv.post("/v1/recall", {"query": query, **kw})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["used_tokens"] <= body["budget_tokens"]
    assert body["used_tokens"] == sum(count_item(i) for i in body["items"])
    return body


def session_pages(srv, project):
    r = srv.get("/v1/pages", params={"project": project, "kind": "session"})
    assert r.status_code == 200
    return r.json()["pages"]


def test_claude_code_session_becomes_a_committed_page(server):
    events = claude_session("cc-e2e-1")
    # the first prompt is searchable from the spool before any page exists
    for ev in events[:2]:
        r = server.post("/v1/observations", ev)
        assert r.status_code == 202, r.text
    running = wait_for(lambda: recall(server, "login test fail CI")["items"])
    assert "spool" in running[0]["why"] and running[0]["kind"] == "session"
    for ev in events[2:]:
        assert server.post("/v1/observations", ev).status_code == 202
    # the Stop compiled the page
    pages = wait_for(lambda: session_pages(server, "project"))
    assert len(pages) == 1
    path = pages[0]["path"]
    assert re.fullmatch(r"projects/project/sessions/2026-11-30-[^-/]{8}\.md", path), path
    body = recall(server, "login test fail CI")
    assert body["items"][0]["path"] == path
    # end the session
    end = json.loads(shared_path("data", "hooks", "claude-code", "SessionEnd.json").read_text())
    r = server.post(
        "/v1/observations",
        {
            "harness": "claude-code",
            "event": "SessionEnd",
            "session_id": "cc-e2e-1",
            "cwd": end["cwd"],
            "event_id": "cc-e2e-1-end",
            "ts": "2026-11-30T10:01:00Z",
            "payload": {**end, "session_id": "cc-e2e-1"},
        },
    )
    assert r.status_code == 202

    def ended():
        page = server.get(f"/v1/pages/{path}").json()
        return page if page["metadata"].get("status") == "ended" else None

    page = wait_for(ended)
    md = page["metadata"]
    for key in (
        "type",
        "id",
        "title",
        "created",
        "updated",
        "project",
        "harness",
        "session_id",
        "user",
        "started",
        "ended",
        "status",
        "files",
        "tools",
        "tags",
    ):
        assert key in md, key
    assert md["type"] == "session" and md["harness"] == "claude-code"
    assert md["session_id"] == "cc-e2e-1" and md["project"] == "project"
    assert "src/auth/session.py" in md["files"]
    assert {"Bash", "Edit"} <= set(md["tools"])
    text = page["content"]
    assert "## Summary" in text and "## Timeline" in text
    assert "test_rounding" in text  # the failed tool call with its error
    assert "raised it to 30 s" in text  # the last assistant message
    parsed = parse_page(text, path)
    anchors = {s.anchor for s in parsed.sections}
    assert {"^t1", "^t2", "^t3"} <= anchors
    # after the end, recall still returns the page first, from the page
    body = recall(server, "Why does the login test fail", budget_tokens=300)
    assert body["items"][0]["path"] == path and "spool" not in body["items"][0]["why"]


def test_commits_are_authored_by_the_user_and_git_is_clean(server):
    owner = json.loads((server.data_dir / "auth" / "tokens.json").read_text())["owner_user"]
    wiki = server.data_dir / "wiki"
    server.post(
        "/v1/observations",
        {
            "harness": "codex",
            "event": "Stop",
            "session_id": "flush",
            "cwd": "/x/p",
            "payload": {"last_assistant_message": "ok"},
        },
    )
    repo = Repo(str(wiki))

    def session_commit():
        for entry in repo.get_walker(max_entries=200):
            c = entry.commit
            if b"session" in c.message.lower() and c.author.startswith(owner.encode()):
                return c
        return None

    c = wait_for(session_commit)
    assert c.author == c.committer
    if shutil.which("git"):

        def clean():
            out = subprocess.run(
                ["git", "status", "--porcelain"],
                cwd=wiki,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            return out.strip() == ""

        wait_for(clean)


def generated_events(session_id: str, n: int = 300) -> list[dict]:
    evs = [
        {
            "harness": "claude-code",
            "event": "SessionStart",
            "session_id": session_id,
            "cwd": "/home/u/gen-proj",
            "event_id": f"{session_id}-start",
            "ts": "2026-11-29T09:00:00Z",
            "payload": {"source": "startup"},
        }
    ]
    evs.append(
        {
            "harness": "claude-code",
            "event": "UserPromptSubmit",
            "session_id": session_id,
            "cwd": "/home/u/gen-proj",
            "event_id": f"{session_id}-p",
            "ts": "2026-11-29T09:00:01Z",
            "payload": {"prompt": "Refactor the quaternion interpolation module"},
        }
    )
    for i in range(n):
        tuid = f"toolu_{i:04d}"
        sec = 2 + i
        # out-of-order timestamps: every 7th event claims an earlier time
        ts = (
            f"2026-11-29T09:{(sec // 60) % 60:02d}:{sec % 60:02d}Z"
            if i % 7
            else "2026-11-29T08:59:00Z"
        )
        evs.append(
            {
                "harness": "claude-code",
                "event": "PreToolUse",
                "session_id": session_id,
                "cwd": "/home/u/gen-proj",
                "event_id": f"{session_id}-pre-{i}",
                "ts": ts,
                "payload": {
                    "tool_name": "Read",
                    "tool_use_id": tuid,
                    "tool_input": {"file_path": f"/home/u/gen-proj/src/m{i % 9}.py"},
                },
            }
        )
        evs.append(
            {
                "harness": "claude-code",
                "event": "PostToolUse",
                "session_id": session_id,
                "cwd": "/home/u/gen-proj",
                "event_id": f"{session_id}-post-{i}",
                "ts": ts,
                "payload": {
                    "tool_name": "Read",
                    "tool_use_id": tuid,
                    "tool_input": {"file_path": f"/home/u/gen-proj/src/m{i % 9}.py"},
                    "tool_response": {"stdout": f"line {i}"},
                },
            }
        )
    return evs


def test_generated_session_with_parallel_calls_and_edge_cases(server):
    sid = "gen-e2e"
    evs = generated_events(sid, 150)
    assert server.post("/v1/observations", evs[0]).status_code == 202
    assert server.post("/v1/observations", evs[1]).status_code == 202
    with ThreadPoolExecutor(8) as pool:  # parallel PostToolUse calls
        codes = list(pool.map(lambda e: server.post("/v1/observations", e).status_code, evs[2:]))
    assert set(codes) == {202}
    # a retried event is a duplicate
    r = server.post("/v1/observations", evs[5])
    assert r.status_code == 202 and r.json()["duplicate"] is True
    # an unknown event name is accepted
    r = server.post(
        "/v1/observations",
        {
            "harness": "claude-code",
            "event": "WorktreeCreate",
            "session_id": sid,
            "cwd": "/home/u/gen-proj",
            "ts": "2026-11-29T11:00:00Z",
            "payload": {"x": 1},
        },
    )
    assert r.status_code == 202
    # a failure, then repeated Stops (stop_hook_active)
    r = server.post(
        "/v1/observations",
        {
            "harness": "claude-code",
            "event": "PostToolUseFailure",
            "session_id": sid,
            "cwd": "/home/u/gen-proj",
            "ts": "2026-11-29T11:00:00Z",
            "event_id": f"{sid}-fail",
            "payload": {
                "tool_name": "Bash",
                "tool_use_id": "toolu_f",
                "tool_input": {"command": "pytest -q"},
                "error": "Exit code 1\nFAILED test_slerp",
            },
        },
    )
    assert r.status_code == 202, r.text
    for k in range(3):
        r = server.post(
            "/v1/observations",
            {
                "harness": "claude-code",
                "event": "Stop",
                "session_id": sid,
                "cwd": "/home/u/gen-proj",
                "ts": "2026-11-29T11:00:00Z",
                "event_id": f"{sid}-stop-{k}",
                "payload": {
                    "stop_hook_active": k > 0,
                    "last_assistant_message": "Slerp refactored.",
                },
            },
        )
        assert r.status_code == 202, r.text
    # a 2 MiB tool output is over the 1 MiB body limit: 413, nothing else affected
    big = {
        "harness": "claude-code",
        "event": "PostToolUse",
        "session_id": sid,
        "cwd": "/home/u/gen-proj",
        "ts": "2026-11-29T11:00:00Z",
        "event_id": f"{sid}-big",
        "payload": {
            "tool_name": "Bash",
            "tool_use_id": "toolu_big",
            "tool_input": {"command": "cat huge.log"},
            "tool_response": {"stdout": "x" * (2 * 1024 * 1024)},
        },
    }
    r = server.post("/v1/observations", big)
    assert r.status_code == 413 and r.json()["error"] == "too_large"
    # truncated under the limit (as the hook does), it is accepted and excerpted in the page
    big["payload"]["tool_response"]["stdout"] = "y" * (900 * 1024)
    assert server.post("/v1/observations", big).status_code == 202
    r = server.post(
        "/v1/observations",
        {
            "harness": "claude-code",
            "event": "SessionEnd",
            "session_id": sid,
            "cwd": "/home/u/gen-proj",
            "ts": "2026-11-29T11:00:00Z",
            "event_id": f"{sid}-end",
            "payload": {"reason": "other"},
        },
    )
    assert r.status_code == 202, r.text

    def page():
        pages = session_pages(server, "gen-proj")
        if not pages:
            return None
        p = server.get(f"/v1/pages/{pages[0]['path']}", params={"max_bytes": 4_000_000}).json()
        if p["metadata"].get("status") != "ended":
            return None
        # the page can say ended before the last accepted events are on it (the 900 KiB
        # one is captured off the event loop): wait until every one is, or time out
        entries = [s for s in parse_page(p["content"], p["path"]).sections if s.anchor[:2] == "^t"]
        return p if len(entries) >= 150 + 6 else None

    p = wait_for(page, timeout=60)
    assert len(session_pages(server, "gen-proj")) == 1
    text = p["content"]
    parsed = parse_page(text, p["path"])
    tl = [s for s in parsed.sections if s.anchor.startswith("^t")]
    # one entry per tool call (Pre and Post merged), plus prompt, start, failure, reply, end, other
    assert 150 + 6 <= len(tl) <= 150 + 8
    assert text.count("Slerp refactored.") == 2  # the reply once in the timeline, once in summary
    assert "FAILED test_slerp" in text
    assert "bytes cut …]" in text and len(text) < 400_000  # the big output is excerpted
    # entries are in time order: the out-of-order events (08:59:00) come first
    times = [s.text.split("**")[1] for s in tl if s.text.startswith("**")]
    assert times == sorted(times)


def test_bad_requests_get_clear_errors_and_change_nothing(server):
    before = session_pages(server, "project")
    r = server.post("/v1/observations", {"event": "Stop"})
    assert r.status_code == 400 and r.json()["field"] == "harness"
    r = server.post("/v1/observations", {"harness": "h", "event": "Stop", "session_id": "s"})
    assert r.status_code == 400 and r.json()["field"] == "cwd"
    import httpx

    r = httpx.post(
        server.url + "/v1/observations",
        content=b"{not json",
        headers={**server.headers, "content-type": "application/json"},
    )
    assert r.status_code == 400 and r.json()["error"] == "bad_json"
    r = server.post("/v1/recall", {"query": "x", "budget_tokens": -1})
    assert r.status_code == 400 and r.json()["field"] == "budget_tokens"
    assert session_pages(server, "project") == before


def test_budget_zero_and_small_budgets(server):
    body = recall(server, "tasks", budget_tokens=0)
    assert body["items"] == [] and body["omitted"] > 0
    for b in (1, 20, 60, 200):
        body = recall(server, "tasks query filter", budget_tokens=b)
        assert body["used_tokens"] <= b


def test_secrets_never_reach_disk_index_logs_or_git(server):
    # the Claude Code session planted an AWS key pair, a GitHub token and a PEM key
    wait_for(lambda: session_pages(server, "project"))
    server.post(
        "/v1/observations",
        {
            "harness": "codex",
            "event": "Stop",
            "session_id": "flush2",
            "cwd": "/x/p",
            "payload": {"last_assistant_message": "ok"},
        },
    )
    time.sleep(1.0)
    data = server.data_dir
    hits = []
    for f in data.rglob("*"):
        if not f.is_file():
            continue
        raw = f.read_bytes()
        candidates = [raw]
        if "/.git/objects/" in f.as_posix() and "/pack/" not in f.as_posix():
            try:
                candidates.append(zlib.decompress(raw))
            except zlib.error:
                pass
        for blob in candidates:
            for s in SECRETS:
                if s.encode() in blob:
                    hits.append((str(f.relative_to(data)), s[:8]))
    assert hits == []
    # and every git object, packed or loose, read through dulwich
    repo = Repo(str(data / "wiki"))
    for sha in repo.object_store:
        raw = repo.object_store[sha].as_raw_string()
        assert not any(s.encode() in raw for s in SECRETS)
    page = server.get(f"/v1/pages/{session_pages(server, 'project')[0]['path']}").json()
    assert "[REDACTED:" in page["content"]
