"""A member's installed hook on a team server (docs/team-server.md, "Capture and new
projects"): capture into an existing project without a grant is refused with
``capture_refused``, which the hook treats as final (dropped, counted, never retried, named
in the next SessionStart brief, counted by ``doctor``); nothing lands in that project; the
same member's first capture into a project that does not exist yet creates it with their
grant."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from clikit import run_cli_here as run_cli
from dulwich.repo import Repo
from hookkit import hook_env, installed_command, pending, run_hook, wait_idle
from serverproc import ServerProcess
from support import access_lines, all_text_under, wait_for
from teamkit import make_token

from wiki_memory.auth import TokenStore

pytestmark = pytest.mark.process


def _event(name: str, cwd: Path, session: str, **extra: object) -> dict:
    return {"hook_event_name": name, "session_id": session, "cwd": str(cwd), **extra}


def _context(run) -> str:  # noqa: ANN001 - a HookRun
    out = json.loads(run.stdout)
    return str(out["hookSpecificOutput"]["additionalContext"])


def _observation_lines(data: Path) -> list[str]:
    log = data / "logs" / "access.log"
    return [ln for ln in log.read_text().splitlines() if "POST /v1/observations" in ln]


def test_refused_capture_is_final_and_a_new_project_is_the_members(tmp_path: Path) -> None:
    data = tmp_path / "srv"
    env0 = {"USER": "olivia", "LOGNAME": "olivia"}
    assert run_cli(data, "token", env=env0).returncode == 0
    note = data / "wiki" / "projects" / "atlas" / "notes" / "rates.md"
    note.parent.mkdir(parents=True)
    note.write_text("---\ntitle: Rates\n---\n# Rates\n\nATLAS-RATE-640 per day\n")
    mo = make_token(data, "mo", here=True)  # a member with no project
    cyd = make_token(data, "cyd", None, "atlas", here=True)
    assert (
        run_cli(
            data, "token", "grant", "--user", "cyd", "--project", "atlas", "--read-only"
        ).returncode
        == 0
    )
    work = tmp_path / "work"
    atlas, fresh = work / "atlas", work / "newproj"
    for repo in (atlas, fresh):  # git repositories: their names are the projects
        repo.mkdir(parents=True)
        Repo.init(str(repo)).close()
    with ServerProcess(data, env=env0) as srv:
        client = tmp_path / "mo"
        env = hook_env(client, srv.url, WIKI_MEMORY_TOKEN=mo)
        start = installed_command("claude-code", client, "SessionStart")
        prompt = installed_command("claude-code", client, "UserPromptSubmit")

        r = run_hook(start, _event("SessionStart", atlas, "s1", source="startup"), env)
        assert r.rc == 0, r
        for text in ("note the rate zqmoword", "and again zqmoword"):
            r = run_hook(prompt, _event("UserPromptSubmit", atlas, "s1", prompt=text), env)
            assert r.rc == 0, r
            assert b"refused" in r.stderr, r
        wait_idle(client)
        # dropped and counted, nothing kept for a retry
        assert pending(client) == []
        outbox = client / "data" / "outbox"
        dropped = [json.loads(x) for x in (outbox / "dropped.jsonl").read_text().splitlines()]
        assert [d["reason"] for d in dropped] == ["refused"] * 3
        assert {d["status"] for d in dropped} == {404}  # mo may not even read atlas
        refused = json.loads((outbox / "refused.json").read_text())
        assert refused["atlas"]["count"] == 3 and "write on project atlas" in str(refused)
        # each event reached the server once: nothing is retried
        time.sleep(1.0)  # the access log is written after each response is sent
        sent = len(_observation_lines(data))
        run_hook(installed_command("claude-code", client, "Stop"), _event("Stop", atlas, "s1"),
                 env)  # fmt: skip
        assert len(access_lines(data, "POST /v1/observations", at_least=sent + 1)) == sent + 1
        assert pending(client) == []

        # the next SessionStart names the refusal and why
        r = run_hook(start, _event("SessionStart", atlas, "s2", source="startup"), env)
        ctx = _context(r)
        assert "capture for project atlas is refused" in ctx, ctx
        assert "write on project atlas" in ctx and "not retried" in ctx

        # nothing of it in that project, the spool, the index or git
        assert sorted(p.name for p in (data / "wiki" / "projects" / "atlas").rglob("*.md")) == [
            "rates.md"
        ]
        assert b"zqmoword" not in all_text_under(data)

        # doctor (on the hook's data directory) counts the refused events
        doc = run_cli(client / "data", "doctor")
        assert "capture refused by the server for project atlas: 5 event(s)" in doc.stdout, (
            doc.stdout
        )

        # a read-only grant: the same code, 403
        ro = tmp_path / "cyd"
        env_ro = hook_env(ro, srv.url, WIKI_MEMORY_TOKEN=cyd)
        run_hook(
            installed_command("claude-code", ro, "UserPromptSubmit"),
            _event("UserPromptSubmit", atlas, "c1", prompt="cyd zqcydword"),
            env_ro,
        )
        wait_idle(ro)
        line = json.loads((ro / "data" / "outbox" / "dropped.jsonl").read_text())
        assert line["reason"] == "refused" and line["status"] == 403
        assert pending(ro) == []

        # the same member's first capture in a new project creates it with their grant
        r = run_hook(prompt, _event("UserPromptSubmit", fresh, "s3", prompt="start zqnewword"),
                     env)  # fmt: skip
        assert r.rc == 0 and b"refused" not in r.stderr, r
        wait_idle(client)
        assert pending(client) == []
        grants = {r.user: r.grants for r in TokenStore(data / "auth").list()}
        assert grants["mo"] == {"newproj": "write"}
        run_hook(installed_command("claude-code", client, "SessionEnd"),
                 _event("SessionEnd", fresh, "s3"), env)  # fmt: skip
        wait_for(lambda: list((data / "wiki" / "projects" / "newproj").rglob("*.md")), 30)
        r = run_hook(start, _event("SessionStart", fresh, "s4", source="startup"), env)
        assert "refused" not in _context(r)
        audit = [json.loads(x) for x in (data / "logs" / "audit.jsonl").read_text().splitlines()]
        mo_id = next(t.token_id for t in TokenStore(data / "auth").list() if t.user == "mo")
        created = [a for a in audit if a["op"] == "project.create"]
        assert [(a["user"], a["token_id"], a["target"]) for a in created] == [
            ("mo", mo_id, "projects/newproj")
        ]
        refusals = [a for a in audit if a["op"] == "capture" and a["result"] != "ok"]
        assert {(a["user"], a["result"]) for a in refusals} == {
            ("mo", "not_found"),
            ("cyd", "denied"),
        }
