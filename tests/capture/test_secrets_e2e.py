"""The secrets corpus end to end: every rule's fresh fakes (every
provider of docs/sanitizer.md and every writing style) planted in prompts, tool inputs,
tool outputs and file paths go into a real server two ways, through the installed hook
command and straight to ``POST /v1/observations`` (the server's own door, with no hook
redacting first), and never appear in the outbox, spool, pages, index, git objects,
logs or any response."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from dulwich.repo import Repo
from hookkit import hook_env, installed_command, outbox_dir, run_hook, wait_idle
from serverproc import ServerProcess
from support import all_text_under, git_objects, wait_for
from test_sanitize import CORPUS

pytestmark = pytest.mark.process

#: kinds per captured session (one session page each), so that ~100 kinds cost ~10
#: sessions of five hook runs rather than ~100
KINDS_PER_SESSION = 10


def events_for(label: str, secrets: list[str], sid: str, cwd: str) -> list[dict]:
    base = {"session_id": sid, "cwd": cwd, "transcript_path": "/tmp/t.jsonl"}
    joined = "\n".join(secrets)
    return [
        {
            **base,
            "hook_event_name": "UserPromptSubmit",
            "prompt": f"Deploy with these ({label}):\n{joined}\nthen report back.",
        },
        {
            **base,
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_use_id": f"t-{sid}",
            "tool_input": {"command": "printf '%s' '" + "' '".join(secrets) + "' > .env"},
        },
        {
            **base,
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_use_id": f"t-{sid}",
            "tool_input": {"command": "cat config"},
            "tool_response": {"stdout": f"$ cat config\n{joined}\nLOG_LEVEL=info\n", "stderr": ""},
        },
        {
            **base,
            "hook_event_name": "PostToolUse",
            "tool_name": "Read",
            "tool_use_id": f"r-{sid}",
            "tool_input": {"file_path": f"{cwd}/{secrets[0]}/notes.md"},
            "tool_response": {"filePath": f"{cwd}/{secrets[0]}/notes.md"},
        },
        {**base, "hook_event_name": "SessionEnd", "reason": "other"},
    ]


def sessions() -> list[tuple[str, list[str], list[str]]]:
    """(label, texts, values that must go) per session, ``KINDS_PER_SESSION`` kinds each."""
    by_kind: dict[str, list[tuple[str, list[str]]]] = defaultdict(list)
    for kind, text, gone in CORPUS:
        by_kind[kind].append((text, gone))
    kinds = sorted(by_kind)
    out = []
    for n in range(0, len(kinds), KINDS_PER_SESSION):
        group = kinds[n : n + KINDS_PER_SESSION]
        texts = [t for k in group for t, _ in by_kind[k]]
        gone = [g for k in group for _, gs in by_kind[k] for g in gs]
        out.append((", ".join(group), texts, gone))
    return out


def test_every_rule_corpus_through_hook_and_api(tmp_path: Path) -> None:
    groups = sessions()
    data = tmp_path / "data"
    responses: list[bytes] = []
    # the sessions' folders are git repositories: their names are the projects
    repos = {name: tmp_path / "work" / name for name in ("sechook", "secapi")}
    for repo in repos.values():
        repo.mkdir(parents=True)
        Repo.init(str(repo)).close()
    with ServerProcess(data) as srv:
        env = hook_env(tmp_path)
        cmd = installed_command("claude-code", tmp_path)
        for n, (label, texts, _) in enumerate(groups):
            for ev in events_for(label, texts, f"hook-{n}", str(repos["sechook"])):
                r = run_hook(cmd, ev, env)
                assert r.rc == 0, r
                responses.append(r.stdout + r.stderr)
            for ev in events_for(label, texts, f"api-{n}", str(repos["secapi"])):
                r = srv.post("/v1/observations", {"harness": "claude-code", "payload": ev})
                assert r.status_code == 202, r.text
                responses.append(r.content)
        wait_idle(tmp_path)
        for project in ("sechook", "secapi"):
            r = srv.post("/v1/recall", {"query": "deploy config", "budget_tokens": 8000})
            responses.append(r.content)
            params = {"project": project, "kind": "session", "limit": 1000}
            pages = wait_for(
                lambda p=params: (lambda got: got if len(got) == len(groups) else None)(
                    srv.get("/v1/pages", params=p).json()["pages"]
                ),
                what=f"{len(groups)} session pages in {project}",
            )
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
    assert len(CORPUS) >= 150
    leaks = []
    for label, _, gone in groups:
        for g in gone:
            for where, blob in stored.items():
                if g.encode() in blob or json.dumps(g)[1:-1].encode() in blob:
                    leaks.append((label, where, g[:24]))
    assert leaks == []
