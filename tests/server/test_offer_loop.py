"""The signature promise: quit one harness mid-task, start another in the same
project, and it picks up where the first left off, exactly once.

Through the installed hook commands of two harnesses and a real server: the first
session ends mid-task (an automatic handoff opens); the second starts and its brief, as
the hook returns it to the harness, offers the handoff; the claim instruction copied from
that text succeeds, run verbatim in a plain shell with only what the harness documents in
its environment, or through the MCP SDK client (the installed stdio bridge) with only the
arguments the brief shows. A third session is not offered it, and the offer code is in no
page, spool file, outbox or log. Both directions: Claude Code → Codex, Codex → Claude Code;
and Claude Code → Gemini CLI (a third hook format).
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from clikit import run_cli_here
from hookkit import hook_env, installed_command, run_hook
from serverproc import ServerProcess
from support import shared_path, wait_for

from wiki_memory.harness.mcp_install import plan_install

pytestmark = pytest.mark.process

FOLDER = {"claude-code": "claude-code", "codex": "codex", "gemini-cli": "gemini"}
#: what each harness documents in the environment of the commands its agent runs (none
#: of them hands a session id or wiki-memory's settings to a shell command)
DOCUMENTED_ENV = {"claude-code": ("CLAUDE_PROJECT_DIR",), "codex": (), "gemini-cli": ()}
#: the hook event that reports a finished tool call
TOOL_EVENT = {"claude-code": "PostToolUse", "codex": "PostToolUse", "gemini-cli": "AfterTool"}


def payload(harness: str, event: str, session: str, cwd: Path, **over: Any) -> dict[str, Any]:
    p = json.loads(shared_path("data", "hooks", FOLDER[harness], f"{event}.json").read_text())
    p["session_id"] = session
    p["cwd"] = str(cwd)
    p.update(over)
    return p


def plain_env(harness: str, home: Path, project: Path) -> dict[str, str]:
    """A plain shell's environment: PATH (with the installed ``wiki-memory``), HOME, and
    what the harness documents; no WIKI_MEMORY_* and no session id."""
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
    }
    for name in DOCUMENTED_ENV[harness]:
        env[name] = str(project)
    return env


def brief_text(run: Any) -> str:
    """The context a SessionStart hook hands its harness (both use ``hookSpecificOutput``)."""
    assert run.rc == 0, run
    out = run.json()
    return str(out["hookSpecificOutput"]["additionalContext"])


def end_mid_task(
    harness: str, cmds: dict[str, str], env: dict[str, str], proj: Path, tag: str
) -> None:
    """A session of ``harness`` stops with its last tool call failing (Claude Code ends
    with SessionEnd; Codex has no end event: its session ends when idle)."""
    sid = f"first-{harness}-{tag}"
    events = ["SessionStart", "UserPromptSubmit", "PreToolUse"]
    events += ["PostToolUseFailure", "SessionEnd"] if harness == "claude-code" else []
    for ev in events:
        over = {"tool_use_id": "toolu_0003"} if ev == "PreToolUse" else {}
        r = run_hook(cmds[ev], payload(harness, ev, sid, proj, **over), env)
        assert r.rc == 0, r


def files_text(*roots: Path) -> str:
    out = []
    for root in roots:
        if root.is_file():
            out.append(root.read_text(errors="replace"))
            continue
        for p in root.rglob("*"):
            if p.is_file() and ".git" not in p.parts[len(root.parts) :][:1]:
                out.append(p.read_text(errors="replace"))
    return "\n".join(out)


def git_objects_text(wiki: Path) -> str:
    r = subprocess.run(
        ["git", "-C", str(wiki), "log", "--all", "-p", "--format=%B"],
        capture_output=True,
        text=True,
    )
    return r.stdout


async def mcp_claim(harness: str, home: Path, data: Path, proj: Path, args: dict[str, Any]) -> Any:
    """Call handoff_claim through the stdio bridge exactly as ``install-mcp`` configures it
    for ``harness``, spawned in the project folder with a plain environment."""
    from mcp import Client, StdioServerParameters

    plan = plan_install(harness, home=home, data_dir=data)
    entry = plan.entry
    params = StdioServerParameters(
        command=entry["command"],
        args=list(entry["args"]),
        env=plain_env(harness, home, proj),
        cwd=str(proj),
    )
    async with Client(params) as c:
        return await c.call_tool("handoff_claim", args)


#: what the server of the loop tests is started with (a Codex session ends when idle)
LOOP_SERVER_ENV = {"WIKI_MEMORY_IDLE_SECONDS": "2", "WIKI_MEMORY_IDLE_CHECK_SECONDS": "0.5"}


class LoopServer:
    """One server for the loop's harness pairs (each pair in a project and home of its
    own); ``codes`` collects the offer codes handed out, looked for again everywhere once
    the server has stopped and committed all it held."""

    def __init__(self, srv: ServerProcess, data: Path) -> None:
        self.srv = srv
        self.data = data
        self.codes: list[str] = []


def everything_stored(data: Path, srv: ServerProcess) -> str:
    """Every page, spool file, log, outbox file, the server's stderr and every commit."""
    return "\n".join(
        [
            files_text(data / "wiki", data / "spool", data / "logs"),
            files_text(data / "outbox") if (data / "outbox").exists() else "",
            srv.stderr(),
            git_objects_text(data / "wiki"),
        ]
    )


@pytest.fixture(scope="module")
def loop_server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    data = tmp_path_factory.mktemp("offer-loop") / "data"
    srv = ServerProcess(data, env=LOOP_SERVER_ENV).start()
    loop = LoopServer(srv, data)
    try:
        yield loop
    finally:
        srv.stop()
    # stopped: every pending page is written and committed; no code reached any of it
    everything = everything_stored(data, srv)
    for code in loop.codes:
        assert code not in everything and code[4:] not in everything
    if loop.codes:
        assert "[REDACTED:wiki-memory-offer-code]" in everything


@pytest.mark.parametrize(
    ("first", "second", "how"),
    [
        ("claude-code", "codex", "shell"),
        ("claude-code", "codex", "mcp"),
        ("codex", "claude-code", "shell"),
        ("codex", "claude-code", "mcp"),
        ("claude-code", "gemini-cli", "shell"),
        ("claude-code", "gemini-cli", "mcp"),
    ],
)
def test_end_mid_task_then_the_other_harness_claims_its_offer(
    tmp_path: Path, loop_server: LoopServer, first: str, second: str, how: str
) -> None:
    # one server for every pair: each pair has its own project, home and sessions
    data = loop_server.data
    home = tmp_path / "home"
    tag = f"{first}-{second}-{how}"
    name = f"billing-{tag}"
    proj = tmp_path / "work" / name
    (proj / ".git").mkdir(parents=True)
    # The hook's own time limits are tested against a silent and a slow server
    # (tests/harness/test_hooks.py, C36); here a machine at several times its cores'
    # load must still show the loop, so the hook may wait longer for the brief.
    env = hook_env(
        tmp_path,
        WIKI_MEMORY_HOME=str(data),
        WIKI_MEMORY_HOOK_DEADLINE_SECONDS="12",
        WIKI_MEMORY_HOOK_SESSION_START_DEADLINE_SECONDS="12",
    )
    srv = loop_server.srv
    cmds = {
        h: {
            ev: installed_command(h, tmp_path, ev)
            for ev in (
                ("SessionStart", TOOL_EVENT[h])
                if h == second
                else ("SessionStart", "UserPromptSubmit", "PreToolUse")
            )
            + (("PostToolUseFailure", "SessionEnd") if h == "claude-code" else ())
        }
        for h in (first, second)
    }

    # 1. the first agent stops mid-task: an automatic handoff opens
    end_mid_task(first, cmds[first], env, proj, tag)

    def auto() -> list[dict[str, Any]]:
        hs = srv.get("/v1/handoffs", params={"project": name}).json()["handoffs"]
        return [h for h in hs if h["auto"] and h["status"] == "open"]

    (handoff,) = wait_for(auto, 60, "an automatic handoff")
    hid = handoff["id"]

    # 2. the second agent starts: its brief, as the hook hands it over, offers it
    sid = f"second-{second}-{tag}"
    text = brief_text(
        run_hook(cmds[second]["SessionStart"], payload(second, "SessionStart", sid, proj), env)
    )
    assert hid in text and "offered" in text, text
    shell = re.search(r"run `([^`]+)`", text)
    mcp_args = re.search(r"handoff_claim (\{[^}\n]+\})", text)
    assert shell and mcp_args, text
    code = json.loads(mcp_args.group(1))["id"]
    assert code.startswith("wmo_") and code in shell.group(1)
    loop_server.codes.append(code)

    # 3. a third session of the same project, meanwhile, is not offered it
    third = run_hook(
        cmds[first]["SessionStart"], payload(first, "SessionStart", f"third-{tag}", proj), env
    )
    assert hid not in brief_text(third) and code not in brief_text(third)

    # 4. the claim, exactly as the brief gives it
    if how == "shell":
        r = subprocess.run(
            ["sh", "-c", shell.group(1)],
            capture_output=True,
            text=True,
            env=plain_env(second, home, proj),
            cwd=proj,
            timeout=60,
        )
        assert r.returncode == 0, (r.stdout, r.stderr)
        assert f"{hid} claimed" in r.stdout
        output = r.stdout
        command = shell.group(1)
    else:
        res = asyncio.run(mcp_claim(second, home, data, proj, json.loads(mcp_args.group(1))))
        output = "\n".join(c.text for c in res.content if c.type == "text")
        assert not res.is_error, output
        command = f"handoff_claim {mcp_args.group(1)}"
    h = srv.get(f"/v1/handoffs/{hid}").json()["handoff"]
    assert h["status"] == "claimed"
    assert (h["claimed_harness"], h["claimed_session"]) == (second, sid)

    # the agent's tool call, as its hooks capture it (the claim command and its output)
    response: dict[str, Any] = {"stdout": output, "stderr": "", "exit_code": 0}
    if second == "gemini-cli":
        response = {"llmContent": output, "returnDisplay": output}
    tool = payload(
        second,
        TOOL_EVENT[second],
        sid,
        proj,
        tool_name="Bash" if second != "gemini-cli" else "run_shell_command",
        tool_input={"command": command},
        tool_response=response,
        tool_use_id="toolu_claim",
    )
    assert run_hook(cmds[second][TOOL_EVENT[second]], tool, env).rc == 0

    # claim once: the code is spent, the third session still gets nothing
    again = subprocess.run(
        ["sh", "-c", shell.group(1)],
        capture_output=True,
        text=True,
        env=plain_env(second, home, proj),
        timeout=60,
    )
    assert again.returncode == 3 and "used already" in again.stderr, again.stderr
    third = run_hook(
        cmds[first]["SessionStart"], payload(first, "SessionStart", f"third-{tag}", proj), env
    )
    assert hid not in brief_text(third)
    # resumed, the second session's brief shows it held (no code needed any more)
    resumed = brief_text(
        run_hook(cmds[second]["SessionStart"], payload(second, "SessionStart", sid, proj), env)
    )
    assert hid in resumed and "holds" in resumed and code not in resumed

    # 5. the offer code is in no page, spool file, outbox, log or commit (looked for
    # again once the server has stopped and committed everything: the fixture)
    mark = "[REDACTED:wiki-memory-offer-code]"

    def spooled() -> bool:
        spool = [p.read_text(errors="replace") for p in (data / "spool").rglob("*") if p.is_file()]
        mine = files_text(data / "wiki" / "projects" / name)
        return any(mark in t and sid in t for t in spool) or mark in mine

    wait_for(spooled, 30, "the claim's tool call captured")
    srv.post("/v1/admin/reindex", {})
    everything = everything_stored(data, srv)
    assert code not in everything
    assert code[4:] not in everything  # not even without its prefix


def test_an_offer_code_is_bound_to_its_user_and_answers_like_a_missing_handoff(
    tmp_path: Path,
) -> None:
    from wiki_memory.auth import TokenStore

    with ServerProcess(tmp_path / "data") as srv:
        r = srv.post(
            "/v1/handoffs",
            {"project": "p", "title": "Finish it", "cwd": None, "harness": "x", "session_id": "a"},
        )
        # no such project yet: an explicit name must be one the caller may read
        assert r.status_code == 404 and r.json()["error"] == "unknown_project"
        assert r.json()["field"] == "project" and r.json()["projects"] == []
        (srv.data_dir / "wiki" / "projects" / "p").mkdir(parents=True)
        hid = srv.post(
            "/v1/handoffs",
            {"project": "P", "title": "Finish it", "harness": "x", "session_id": "a"},
        ).json()["handoff"]["id"]
        brief = srv.post(
            "/v1/brief", {"project": "p", "harness": "codex", "session_id": "b"}
        ).json()
        (offer,) = brief["offers"]
        code = offer["code"]
        bob = {
            "Authorization": "Bearer "
            + TokenStore(srv.data_dir / "auth").create("bob", projects=["p"])
        }
        import httpx

        theirs = httpx.post(f"{srv.url}/v1/handoffs/{code}/claim", headers=bob, timeout=30)
        missing = httpx.post(f"{srv.url}/v1/handoffs/H-9999/claim", headers=bob, timeout=30)
        assert theirs.status_code == missing.status_code == 404
        assert theirs.json()["error"] == missing.json()["error"] == "not_found"
        assert code not in theirs.text
        # bob's claim by id is refused while the offer to the owner runs
        assert httpx.post(f"{srv.url}/v1/handoffs/{hid}/claim", headers=bob).status_code == 409
        # the owner, from another session, claims by id: the offered session's claim
        mine = srv.post(f"/v1/handoffs/{hid}/claim", {"harness": "cli", "session_id": "cli"})
        assert mine.status_code == 200, mine.text
        h = mine.json()["handoff"]
        assert (h["claimed_by"], h["claimed_harness"], h["claimed_session"]) == (
            "owner",
            "codex",
            "b",
        )
        # the code was spent with it
        used = srv.post(f"/v1/handoffs/{code}/claim", {})
        assert used.status_code == 409 and used.json()["error"] == "used"
        log = (srv.data_dir / "logs").rglob("*")
        assert all(code not in p.read_text(errors="replace") for p in log if p.is_file())


def test_brief_for_an_unknown_project_exits_non_zero_and_lists_projects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with ServerProcess(tmp_path / "data") as srv:
        (srv.data_dir / "wiki" / "projects" / "atlas").mkdir(parents=True)
        (srv.data_dir / "wiki" / "projects" / "borealis").mkdir(parents=True)
        # the command in this process, from a folder that is no repository
        r = run_cli_here(srv.data_dir, "brief", "--project", "atlsa")
        assert r.returncode == 4, (r.stdout, r.stderr)
        assert r.stdout == ""
        assert "did you mean atlas?" in r.stderr and "atlas, borealis" in r.stderr
        ok = run_cli_here(srv.data_dir, "brief", "--project", "ATLAS")
        assert ok.returncode == 0, ok.stderr
