"""Issue 5's secrets corpus end to end: for every detector, its fake secrets planted in
prompts, tool inputs, tool outputs and file paths go through the installed hook command
into a real server, and never appear in the outbox, spool, pages, index, git objects,
logs or any response."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from hookkit import hook_env, installed_command, outbox_dir, run_hook, wait_idle
from serverproc import ServerProcess
from support import all_text_under, git_objects
from test_sanitize import CORPUS

pytestmark = pytest.mark.slow


def events_for(kind: str, secrets: list[str], n: int) -> list[dict]:
    sid = f"sec-{n}"
    base = {"session_id": sid, "cwd": "/home/dev/secproj", "transcript_path": "/tmp/t.jsonl"}
    joined = "\n".join(secrets)
    return [
        {
            **base,
            "hook_event_name": "UserPromptSubmit",
            "prompt": f"Deploy with these ({kind}):\n{joined}\nthen report back.",
        },
        {
            **base,
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_use_id": f"t{n}",
            "tool_input": {"command": "printf '%s' '" + "' '".join(secrets) + "' > .env"},
        },
        {
            **base,
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_use_id": f"t{n}",
            "tool_input": {"command": "cat config"},
            "tool_response": {"stdout": f"$ cat config\n{joined}\nLOG_LEVEL=info\n", "stderr": ""},
        },
        {
            **base,
            "hook_event_name": "PostToolUse",
            "tool_name": "Read",
            "tool_use_id": f"r{n}",
            "tool_input": {"file_path": f"/home/dev/secproj/{secrets[0]}/notes.md"},
            "tool_response": {"filePath": f"/home/dev/secproj/{secrets[0]}/notes.md"},
        },
        {**base, "hook_event_name": "SessionEnd", "reason": "other"},
    ]


def test_every_detector_corpus_through_hook_and_server(tmp_path: Path) -> None:
    by_kind: dict[str, list[tuple[str, list[str]]]] = defaultdict(list)
    for kind, text, gone in CORPUS:
        by_kind[kind].append((text, gone))
    data = tmp_path / "data"
    responses: list[bytes] = []
    with ServerProcess(data) as srv:
        env = hook_env(tmp_path)
        cmd = installed_command("claude-code", tmp_path)
        for n, (kind, items) in enumerate(sorted(by_kind.items())):
            for ev in events_for(kind, [t for t, _ in items], n):
                r = run_hook(cmd, ev, env)
                assert r.rc == 0, r
                responses.append(r.stdout + r.stderr)
        wait_idle(tmp_path)
        for kind in by_kind:
            r = srv.post("/v1/recall", {"query": f"deploy {kind} config", "budget_tokens": 4000})
            responses.append(r.content)
        pages = srv.get(
            # /home/dev/secproj is no repository here: the sessions have no project
            "/v1/pages",
            params={"kind": "session", "limit": 1000},
        ).json()["pages"]
        assert len(pages) == len(by_kind)
        for p in pages:
            body = srv.get(f"/v1/pages/{p['path']}", params={"max_bytes": 4_000_000}).content
            responses.append(body)
            assert b"[REDACTED:" in body
    stored = {
        "outbox": all_text_under(outbox_dir(tmp_path)),
        "spool": all_text_under(data / "spool"),
        "pages": all_text_under(data / "wiki"),
        "index": b"".join(f.read_bytes() for f in data.glob("index.db*")),
        "git objects": git_objects(data / "wiki"),
        "logs": all_text_under(data / "logs"),
        "responses": b"".join(responses),
    }
    leaks = []
    for kind, items in by_kind.items():
        for _, gone in items:
            for g in gone:
                for where, blob in stored.items():
                    if g.encode() in blob or json.dumps(g)[1:-1].encode() in blob:
                        leaks.append((kind, where, g[:24]))
    assert leaks == []
