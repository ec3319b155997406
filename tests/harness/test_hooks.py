"""The hook program against stand-in servers: output contract, failure modes, outbox.

Hooks run the way a harness runs them: the command install-hooks wrote, through
``sh -c``, with the event JSON on stdin. Cases C36 and C37 of ../shared/cases.
"""

from __future__ import annotations

import array
import fcntl
import json
import os
import shutil
import stat
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest
from hookkit import (
    HOOK_BOUND_SECONDS,
    HOOK_SCRIPT,
    HOOKS,
    BlackHole,
    StubServer,
    free_port,
    hook_env,
    installed_command,
    outbox_dir,
    payload_file,
    pending,
    run_hook,
    wait_idle,
    wait_until,
)
from support import REPO

from wiki_memory.harness.hooks_install import hook_command


def empty_context(agent: str) -> dict[str, Any]:
    if agent == "gemini-cli":
        return {"hookSpecificOutput": {"additionalContext": ""}}
    return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": ""}}


# ----------------------------------------------------------------------------- output contract


@pytest.mark.process
@pytest.mark.parametrize(
    ("agent", "folder"),
    [("claude-code", "claude-code"), ("codex", "codex"), ("gemini-cli", "gemini")],
)
def test_session_start_prints_one_json_object_with_the_brief(
    tmp_path: Path, agent: str, folder: str
) -> None:
    payload = payload_file(folder, "SessionStart.json")
    repo = tmp_path / "project"  # a git repository: that makes it a project
    (repo / ".git").mkdir(parents=True)
    payload["cwd"] = str(repo)
    with StubServer(brief="## Project memory\n- the upload step retries 3 times") as srv:
        env = hook_env(tmp_path, srv.url)
        r = run_hook(installed_command(agent, tmp_path, "SessionStart"), payload, env)
    assert r.rc == 0, r
    out = json.loads(r.stdout)  # the whole of stdout is one JSON object
    assert r.stdout.count(b"\n") == 1
    ctx = out["hookSpecificOutput"]
    assert ctx["additionalContext"] == "## Project memory\n- the upload step retries 3 times"
    if agent == "gemini-cli":
        assert set(ctx) == {"additionalContext"}
    else:
        assert ctx["hookEventName"] == "SessionStart"
    assert set(out) == {"hookSpecificOutput"}
    brief = [b for p, b in srv.requests if p == "/v1/brief"]
    assert brief == [
        {
            "project": "project",
            "cwd": str(repo),
            "harness": agent,
            "session_id": payload["session_id"],
            "budget_tokens": 1000,
            "source": payload["source"],
        }
    ]


@pytest.mark.process
@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini-cli"])
def test_session_start_without_brief_prints_empty_context(tmp_path: Path, agent: str) -> None:
    payload = {"session_id": "s1", "cwd": "/home/dev/demo", "hook_event_name": "SessionStart"}
    with StubServer(brief=None) as srv:  # /v1/brief answers 404
        r = run_hook(installed_command(agent, tmp_path), payload, hook_env(tmp_path, srv.url))
    assert r.rc == 0
    assert json.loads(r.stdout) == empty_context(agent)
    assert len(srv.stored) == 1


@pytest.mark.process
@pytest.mark.parametrize(
    ("agent", "folder"),
    [("claude-code", "claude-code"), ("codex", "codex"), ("gemini-cli", "gemini")],
)
def test_other_events_print_nothing_and_are_delivered(
    tmp_path: Path, agent: str, folder: str
) -> None:
    from support import shared_path

    files = sorted(
        p
        for p in shared_path("data", "hooks", folder).glob("*.json")
        if not p.name.startswith(("SessionStart", "response", "notify"))
    )
    assert files
    with StubServer() as srv:
        env = hook_env(tmp_path, srv.url)
        cmd = installed_command(agent, tmp_path)
        for f in files:
            r = run_hook(cmd, f.read_bytes(), env)
            assert r.rc == 0, (f.name, r)
            assert r.stdout == b"", (f.name, r)
        wait_idle(tmp_path)
    events = [e["event"] for e in srv.stored.values()]
    assert sorted(events) == sorted(json.loads(f.read_text())["hook_event_name"] for f in files)
    for ev in srv.stored.values():
        assert ev["harness"] == agent
        assert (ev["project"], ev["project_from"]) == (None, "none")
        assert ev["cwd"] == "/home/user/project"
        assert ev["payload"]["hook_event_name"] == ev["event"]
    assert pending(tmp_path) == []


@pytest.mark.serial  # asserts a time bound
def test_codex_notify_takes_json_from_argv_and_never_reads_stdin(tmp_path: Path) -> None:
    note = payload_file("codex", "notify-agent-turn-complete.json")
    sentinel = b"not json: the hook must not read this"
    # stdin is a pipe holding a few bytes that nobody ever closes: reading it would wait.
    # The test keeps the pipe's read end too, so afterwards it sees how many bytes the hook
    # consumed (FIONREAD): the work done, not the time it took.
    r_fd, w_fd = os.pipe()
    os.write(w_fd, sentinel)
    with StubServer() as srv:
        argv = [sys.executable, "-S", str(HOOK_SCRIPT), "--harness", "codex", json.dumps(note)]
        t0 = time.monotonic()
        p = subprocess.Popen(
            argv,
            stdin=r_fd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=hook_env(tmp_path, srv.url),
        )
        try:
            p.wait(HOOK_BOUND_SECONDS + 10)  # a hang guard, with stdin still open
            took = time.monotonic() - t0
            unread = array.array("i", [0])
            fcntl.ioctl(r_fd, termios.FIONREAD, unread)
        finally:
            os.close(w_fd)
            os.close(r_fd)
        out, err = p.stdout.read(), p.stderr.read()  # type: ignore[union-attr]
    assert p.returncode == 0, err
    assert out == b""
    assert unread[0] == len(sentinel)  # not one byte of stdin was read
    assert took < HOOK_BOUND_SECONDS  # the hook's deadline, with a margin for its start
    (ev,) = srv.stored.values()
    assert ev["event"] == "agent-turn-complete"
    assert ev["session_id"] == "sess-0002"
    assert ev["event_id"] == "agent-turn-complete:turn-0001"
    assert ev["payload"]["input-messages"] == ["Add a retry to the flaky upload step."]


# ----------------------------------------------------------------------------- C36


def _c36_events() -> list[tuple[str, dict[str, Any]]]:
    claude = {
        "session_id": "sess-0200",
        "cwd": "/home/dev/demo",
        "transcript_path": "/home/dev/.claude/projects/demo/sess-0200.jsonl",
    }
    codex = {
        "session_id": "sess-0201",
        "cwd": "/home/dev/demo",
        "model": "gpt-5-codex",
        "turn_id": "turn-1",
    }
    out: list[tuple[str, dict[str, Any]]] = []
    for agent, base in (("claude-code", claude), ("codex", codex)):
        out += [
            (agent, {**base, "hook_event_name": "SessionStart", "source": "startup"}),
            (
                agent,
                {
                    **base,
                    "hook_event_name": "UserPromptSubmit",
                    "prompt": "add a retry to the fetcher",
                },
            ),
            (
                agent,
                {
                    **base,
                    "hook_event_name": "PostToolUse",
                    "tool_name": "Bash",
                    "tool_use_id": f"toolu-{agent}",
                    "tool_input": {"command": "pytest -q"},
                    "tool_response": {"stdout": "3 passed", "stderr": ""},
                },
            ),
            (
                agent,
                {
                    **base,
                    "hook_event_name": "Stop",
                    "stop_hook_active": False,
                    "last_assistant_message": "Added the retry.",
                },
            ),
        ]
    return out


@pytest.mark.serial  # asserts a time bound
@pytest.mark.process
@pytest.mark.parametrize("state", ["refused", "black-hole", "500", "slow-30s"])
def test_c36_server_away_hooks_exit_0_in_time_and_deliver_once_later(
    tmp_path: Path, state: str
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = hook_env(
        tmp_path,
        url,
        WIKI_MEMORY_HOOK_DRAIN_REQUEST_SECONDS="1",
        WIKI_MEMORY_HOOK_BACKOFF_SECONDS="3",
        WIKI_MEMORY_HOOK_BACKOFF_MAX_SECONDS="3",
    )
    cmds = {a: installed_command(a, tmp_path) for a in ("claude-code", "codex")}
    hole: BlackHole | None = None
    srv: StubServer | None = None
    if state == "black-hole":
        hole = BlackHole(port)
    elif state in ("500", "slow-30s"):
        srv = StubServer(port, mode="500" if state == "500" else "slow").__enter__()
    events = _c36_events()
    try:
        for agent, payload in events:
            r = run_hook(cmds[agent], payload, env)
            assert r.rc == 0, (state, payload["hook_event_name"], r)
            assert r.seconds < HOOK_BOUND_SECONDS, (state, payload["hook_event_name"], r)
            if payload["hook_event_name"] == "SessionStart":
                # never silently empty while the server is away: the agent is told (C45);
                # a server that answers (500) is not away: the hook says so only when it
                # saw the 500 itself
                ctx = json.loads(r.stdout)["hookSpecificOutput"]["additionalContext"]
                if state != "500":
                    assert ctx.startswith("wiki-memory: ") and "unavailable" in ctx, r
            else:
                assert r.stdout == b"", r
            lines = r.stderr.decode().strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("wiki-memory hook:"), r
        wait_idle(tmp_path)
        # past the back-off (3 s for the test) the failures started, if they did: the
        # next hook tries the network again
        outbox = HOOKS.Outbox(str(outbox_dir(tmp_path)))
        assert wait_until(lambda: HOOKS.in_backoff(outbox) is None, 10), HOOKS.in_backoff(outbox)
        queued = pending(tmp_path)
        assert len({e["event_id"] for e in queued}) == len(events)
        assert [(e["harness"], e["event"]) for e in queued] == [
            (a, p["hook_event_name"]) for a, p in events
        ]
        # The server comes back on the same address.
        if hole is not None:
            hole.__exit__()
            hole = None
        if srv is None:
            srv = StubServer(port).__enter__()
        else:
            srv.mode = "ok"
            srv.stop_event.set()  # answer the late requests still held
        extra = {**events[1][1], "prompt": "and log each attempt"}
        r = run_hook(cmds["claude-code"], extra, env)
        assert r.rc == 0 and r.stdout == b""
        assert wait_until(lambda: not pending(tmp_path), 15), pending(tmp_path)
        wait_idle(tmp_path)
    finally:
        if hole is not None:
            hole.__exit__()
    assert srv is not None
    try:
        ids = [e["event_id"] for e in queued]
        assert len(srv.stored) == len(events) + 1
        assert set(ids) <= set(srv.stored)
        if state != "slow-30s":  # the slow server stored the first tries as they came
            assert list(srv.stored)[: len(ids)] == ids  # delivered in order
        posts_before = len(srv.observation_posts())
        rec = subprocess.run(
            [
                sys.executable,
                "-m",
                "wiki_memory.cli.main",
                "--data-dir",
                str(tmp_path / "data"),
                "recover",
                "--url",
                url,
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
        )
        assert rec.returncode == 0, rec.stderr
        assert "nothing to send" in rec.stdout
        assert len(srv.observation_posts()) == posts_before
    finally:
        srv.__exit__()


def test_c36_installed_timeouts_are_in_each_harness_unit(tmp_path: Path) -> None:
    from hookkit import install

    for agent, unit_max in (("claude-code", 10), ("codex", 10), ("gemini-cli", 10_000)):
        cfg = install(agent, tmp_path / "home")
        timeouts = [
            h["timeout"] for groups in cfg["hooks"].values() for g in groups for h in g["hooks"]
        ]
        assert timeouts and all(isinstance(t, int) for t in timeouts)
        assert all(t <= unit_max for t in timeouts)
        if agent == "gemini-cli":
            assert all(t >= 1000 for t in timeouts)  # milliseconds, not seconds
        else:
            assert all(t <= 10 for t in timeouts)  # seconds, not milliseconds


# ----------------------------------------------------------------------------- C37


def stream_hook(
    command: str, chunks: list[bytes], delay: float, env: dict[str, str]
) -> tuple[int, bytes, bytes, bool]:
    """Write ``chunks`` to the hook's stdin ``delay`` seconds apart; report a broken pipe."""
    p = subprocess.Popen(
        ["sh", "-c", command],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert p.stdin is not None
    broken = False
    try:
        for c in chunks:
            p.stdin.write(c)
            p.stdin.flush()
            if delay:
                time.sleep(delay)
        p.stdin.close()
    except BrokenPipeError:
        broken = True
    p.wait(timeout=15)
    out, err = p.stdout.read(), p.stderr.read()  # type: ignore[union-attr]
    return p.returncode, out, err, broken


@pytest.mark.process
def test_c37_io_contract(tmp_path: Path) -> None:
    a = {
        "session_id": "sess-0300",
        "transcript_path": "/home/dev/.claude/projects/demo/sess-0300.jsonl",
        "cwd": "/home/dev/demo",
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    b = {
        "session_id": "sess-0301",
        "cwd": "/home/dev/demo",
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    c = {
        "session_id": "sess-0301",
        "cwd": "/home/dev/demo",
        "hook_event_name": "Stop",
        "last_assistant_message": "done",
        "stop_hook_active": False,
    }
    big = b"log line\n" * (2_097_152 // 9 + 1)
    big = big[:2_097_152]
    d = {
        "session_id": "sess-0302",
        "cwd": "/home/dev/demo",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_use_id": "toolu_big",
        "tool_input": {"command": "make logs"},
        "tool_response": {"stdout": big.decode(), "stderr": "", "interrupted": False},
    }
    with StubServer(brief="memory: the fetcher retries") as srv:
        env = hook_env(tmp_path, srv.url)
        claude = installed_command("claude-code", tmp_path)
        codex = installed_command("codex", tmp_path)
        ra = run_hook(claude, a, env)
        rb = run_hook(codex, b, env)
        rc = run_hook(codex, c, env)
        data_d = json.dumps(d).encode()
        assert len(data_d) > 2_097_152
        code_d, out_d, err_d, broken_d = stream_hook(
            claude, [data_d[i : i + 65536] for i in range(0, len(data_d), 65536)], 0, env
        )
        padded = dict(a, session_id="sess-0303", padding="x" * 6000)
        data_e = json.dumps(padded).encode()
        code_e, out_e, err_e, broken_e = stream_hook(
            claude, [data_e[i : i + 1024] for i in range(0, len(data_e), 1024)], 0.1, env
        )
        wait_idle(tmp_path)
    # A: one JSON object, the whole of stdout, in Claude Code's format.
    assert ra.rc == 0
    assert json.loads(ra.stdout) == {
        "hookSpecificOutput": {
            "hookEventName": "SessionStart",
            "additionalContext": "memory: the fetcher retries",
        }
    }
    # B: Codex's SessionStart format, never plain text.
    assert rb.rc == 0
    assert json.loads(rb.stdout)["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    # C: Codex Stop prints nothing (Codex rejects `{}`).
    assert rc.rc == 0 and rc.stdout == b""
    # D: all 2 MiB read from stdin; stored truncated with a marker, under the server limit.
    assert code_d == 0 and not broken_d and out_d == b"", err_d
    (big_ev,) = [e for e in srv.stored.values() if e["session_id"] == "sess-0302"]
    size = len(json.dumps(big_ev, ensure_ascii=False, separators=(",", ":")).encode())
    assert 200_000 < size <= 256 * 1024  # the hook's default max_event_bytes
    stdout = big_ev["payload"]["tool_response"]["stdout"]
    assert stdout.rstrip().endswith("log line")  # head and tail kept
    assert "truncated by wiki-memory hook" in stdout
    assert stdout.startswith("log line\nlog line\n")
    assert big_ev["payload"]["tool_input"] == {"command": "make logs"}
    # E: a slow writer: read to EOF, no broken pipe, one JSON object.
    assert code_e == 0 and not broken_e, err_e
    assert json.loads(out_e)["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert any(e["session_id"] == "sess-0303" for e in srv.stored.values())
    # No payload through the environment: the installed command names none.
    assert "$" not in claude and "$" not in codex


# ----------------------------------------------------------------------------- never exit 2


@pytest.mark.process
def test_installed_command_exits_0_when_the_hook_is_gone(tmp_path: Path) -> None:
    copy = tmp_path / "hookcopy"
    shutil.copytree(REPO / "hooks", copy, ignore=shutil.ignore_patterns("__pycache__"))
    payload = payload_file("claude-code", "UserPromptSubmit.json")
    env = hook_env(tmp_path, f"http://127.0.0.1:{free_port()}")
    cmd = installed_command(
        "claude-code", tmp_path, "UserPromptSubmit", script=copy / "wiki_memory_hook.py"
    )
    assert run_hook(cmd, payload, env).rc == 0
    # The library gone: the launcher still reads stdin to EOF and exits 0.
    (copy / "wiki_memory_hooklib.py").unlink()
    r = run_hook(cmd, payload, env)
    assert (r.rc, r.stdout) == (0, b""), r
    # The script gone: Python alone would exit 2 ("block" for Claude Code)...
    (copy / "wiki_memory_hook.py").unlink()
    bare = subprocess.run(
        [sys.executable, str(copy / "wiki_memory_hook.py")], input=b"{}", capture_output=True
    )
    assert bare.returncode == 2
    # ...the installed command does not.
    r = run_hook(cmd, payload, env)
    assert (r.rc, r.stdout) == (0, b""), r
    rc, out, err, broken = stream_hook(cmd, [json.dumps(payload).encode() * 50], 0, env)
    assert (rc, out, broken) == (0, b"", False)
    # The interpreter gone too.
    cmd2 = hook_command(
        "claude-code", python=str(tmp_path / "no-such-python"), script=copy / "wiki_memory_hook.py"
    )
    assert run_hook(cmd2, payload, env).rc == 0


@pytest.mark.process
def test_garbage_on_stdin_exits_0_quietly(tmp_path: Path) -> None:
    env = hook_env(tmp_path, f"http://127.0.0.1:{free_port()}")
    cmd = installed_command("claude-code", tmp_path)
    for data in (b"", b"not json", b"[1,2]", b"\xff\xfe{", b'{"hook_event_name": 5}'):
        r = run_hook(cmd, data, env)
        assert r.rc == 0 and r.stdout == b"", (data, r)


# ----------------------------------------------------------------------------- outbox


@pytest.mark.process
def test_outbox_is_owner_only_bounded_and_counts_drops(tmp_path: Path) -> None:
    env = hook_env(
        tmp_path, f"http://127.0.0.1:{free_port()}", WIKI_MEMORY_HOOK_OUTBOX_MAX_EVENTS="3"
    )
    cmd = installed_command("claude-code", tmp_path)
    for i in range(5):
        p = {
            "session_id": "s",
            "cwd": "/home/dev/demo",
            "hook_event_name": "UserPromptSubmit",
            "prompt": f"prompt {i}",
        }
        assert run_hook(cmd, p, env).rc == 0
    wait_idle(tmp_path)
    left = pending(tmp_path)
    assert [e["payload"]["prompt"] for e in left] == ["prompt 2", "prompt 3", "prompt 4"]
    ob = outbox_dir(tmp_path)
    assert stat.S_IMODE(ob.stat().st_mode) == 0o700
    for f in ob.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    assert HOOKS.Outbox(str(ob)).dropped_counts() == {"overflow": 2}


@pytest.mark.process
def test_drain_drops_and_counts_4xx_and_keeps_order(tmp_path: Path) -> None:
    ob = HOOKS.Outbox(str(tmp_path / "outbox"))
    evs = []
    for i in range(6):
        ev = {
            "harness": "claude-code",
            "event": "UserPromptSubmit",
            "session_id": "s",
            "cwd": "/x/p",
            "event_id": f"e{i}",
            "payload": {"prompt": f"p{i}", "reject": i == 2},
        }
        ob.write(ev)
        evs.append(ev)
    with StubServer(mode="reject") as srv:
        cfg = HOOKS.load_config(str(tmp_path), srv.url)
        stats = HOOKS.drain(cfg, ob, 10, 2)
        again = HOOKS.drain(cfg, ob, 10, 2)
    assert stats["sent"] == 5 and stats["rejected"] == 1 and stats["left"] == 0
    assert list(srv.stored) == ["e0", "e1", "e3", "e4", "e5"]
    assert ob.dropped_counts() == {"rejected": 1}
    assert again["sent"] == 0
    # Nothing is retried forever: the rejected event is gone.
    assert ob.pending() == []


@pytest.mark.process
def test_5xx_and_auth_errors_keep_events(tmp_path: Path) -> None:
    ob = HOOKS.Outbox(str(tmp_path / "outbox"))
    ob.write({"harness": "codex", "event": "Stop", "session_id": "s", "cwd": "/p", "event_id": "a"})
    for status in (500, 503, 401, 403, 404, 429):
        assert HOOKS.classify(status) == "retry"
    for status in (400, 413, 422):
        assert HOOKS.classify(status) == "rejected"
    with StubServer(mode="500") as srv:
        stats = HOOKS.drain(HOOKS.load_config(str(tmp_path), srv.url), ob, 5, 2)
    assert stats["failed"] == 1 and stats["left"] == 1 and ob.dropped_counts() == {}


@pytest.mark.process
def test_413_from_a_server_with_a_lower_limit_shrinks_once(tmp_path: Path) -> None:
    ob = HOOKS.Outbox(str(tmp_path / "outbox"))
    text = "word " * 40_000
    ob.write(
        {
            "harness": "codex",
            "event": "PostToolUse",
            "session_id": "s",
            "cwd": "/p",
            "event_id": "big",
            "payload": {"tool_response": text},
        }
    )
    ob.write(
        {
            "harness": "codex",
            "event": "Stop",
            "session_id": "s",
            "cwd": "/p",
            "event_id": "small",
            "payload": {},
        }
    )
    with StubServer() as srv:
        srv.limit_bytes = 100_000
        stats = HOOKS.drain(HOOKS.load_config(str(tmp_path), srv.url), ob, 10, 2)
    assert stats["sent"] == 2 and stats["rejected"] == 0 and ob.pending() == []
    assert list(srv.stored) == ["big", "small"]
    big = srv.stored["big"]["payload"]["tool_response"]
    assert "truncated by wiki-memory hook" in big and len(big) < 70_000


@pytest.mark.process
def test_hook_writes_outbox_before_sending(tmp_path: Path) -> None:
    """A hook killed mid-send leaves its event in the outbox (the black hole holds it)."""
    with BlackHole() as hole:
        env = hook_env(tmp_path, hole.url)
        cmd = installed_command("claude-code", tmp_path)
        p = subprocess.Popen(
            ["sh", "-c", cmd],
            stdin=subprocess.PIPE,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        p.stdin.write(json.dumps(payload_file("claude-code", "Stop.json")).encode())  # type: ignore[union-attr]
        p.stdin.close()  # type: ignore[union-attr]
        assert wait_until(lambda: bool(pending(tmp_path)), 5)
        p.kill()
        p.wait()
    (ev,) = pending(tmp_path)
    assert ev["event"] == "Stop" and ev["session_id"] == "sess-0001"


# ----------------------------------------------------------------------------- pieces


def test_event_ids_are_stable_and_distinct() -> None:
    pre = payload_file("claude-code", "PreToolUse.json")
    post = dict(pre, hook_event_name="PostToolUse", tool_response={"stdout": "ok"})
    eid = HOOKS.event_id_for
    assert eid("claude-code", "PreToolUse", pre, b"", 1.0) == "PreToolUse:toolu_0001"
    assert eid("claude-code", "PostToolUse", post, b"", 1.0) == "PostToolUse:toolu_0001"
    p1 = {"session_id": "s", "prompt": "yes"}
    raw = json.dumps(p1).encode()
    assert eid("claude-code", "UserPromptSubmit", p1, raw, 100.2) == eid(
        "claude-code", "UserPromptSubmit", p1, raw, 100.7
    )  # the same hook installed twice: one observation
    assert eid("claude-code", "UserPromptSubmit", p1, raw, 100.2) != eid(
        "claude-code", "UserPromptSubmit", p1, raw, 160.0
    )  # the same words typed again later: two
    g = payload_file("gemini", "BeforeAgent.json")
    graw = json.dumps(g).encode()
    assert eid("gemini-cli", "BeforeAgent", g, graw, 1.0) == eid(
        "gemini-cli", "BeforeAgent", g, graw, 999.0
    )


def test_project_from_git_toplevel_or_repo_config(tmp_path: Path) -> None:
    repo = tmp_path / "my-service"
    (repo / ".git").mkdir(parents=True)
    (repo / "src" / "deep").mkdir(parents=True)
    root, cfg = HOOKS.find_repo_config(str(repo / "src" / "deep"))
    assert HOOKS.resolve_project(str(repo / "src" / "deep"), cfg) == ("my-service", "git")
    (repo / ".wiki-memory.toml").write_text('project = "billing"\n')
    root, cfg = HOOKS.find_repo_config(str(repo / "src" / "deep"))
    assert root == str(repo)
    assert HOOKS.resolve_project(str(repo / "src" / "deep"), cfg) == ("billing", "config")
    # a folder name alone is no project: the server decides (the session's, or none)
    assert HOOKS.resolve_project("/no/such/dir/demo", {}) == (None, "none")
    # A linked worktree maps to its main repository
    main = tmp_path / "atlas"
    (main / ".git" / "worktrees" / "feature-x").mkdir(parents=True)
    (main / ".git" / "worktrees" / "feature-x" / "commondir").write_text("../..\n")
    wt = tmp_path / "atlas-wt" / "feature-x"
    (wt / "a").mkdir(parents=True)
    (wt / ".git").write_text(f"gitdir: {main / '.git' / 'worktrees' / 'feature-x'}\n")
    assert HOOKS.resolve_project(str(wt / "a"), {}) == ("atlas", "git")


def test_capture_rules(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    root = str(repo)
    rules = {"capture": {"ignore_paths": [".env", "secrets/**", "*.pem"]}}

    def decide(payload: dict[str, Any], cfg: dict[str, Any] = rules) -> str | None:
        return HOOKS.capture_decision(payload, cfg, root)

    read_env = {"tool_name": "Read", "tool_input": {"file_path": f"{root}/.env"}}
    cat_env = {"tool_name": "Bash", "tool_input": {"command": "cat .env | grep KEY"}}
    key = {"tool_name": "Read", "tool_input": {"file_path": f"{root}/deploy/prod.pem"}}
    sec = {
        "tool_name": "Write",
        "tool_input": {"file_path": f"{root}/secrets/db.txt", "content": "x"},
    }
    patch = {
        "tool_name": "apply_patch",
        "tool_input": {"command": "*** Begin Patch\n*** Update File: secrets/a.yml\n@@\n-a\n+b\n"},
    }
    src = {"tool_name": "Edit", "tool_input": {"file_path": f"{root}/src/app.py"}}
    gem = {"tool_name": "read_file", "tool_input": {"absolute_path": f"{root}/.env"}}
    prompt = {"prompt": "what is in .env?"}
    for p in (read_env, cat_env, key, sec, patch, gem):
        assert decide(p) == "ignored path", p
    assert decide(src) is None and decide(prompt) is None
    assert decide(src, {"capture": {"enabled": False}}) == "capture disabled"
    allow = {"capture": {"mode": "allowlist", "paths": ["src/**"]}}
    assert decide(src, allow) is None
    assert decide(key, allow) == "not in allowlist"
    assert decide(prompt, allow) is None
    assert (
        decide({"tool_name": "Bash", "tool_input": {"command": "ls"}}, allow) == "not in allowlist"
    )


@pytest.mark.process
def test_repo_config_turns_capture_off_end_to_end(tmp_path: Path) -> None:
    repo = tmp_path / "private"
    repo.mkdir()
    (repo / ".wiki-memory.toml").write_text("[capture]\nenabled = false\n")
    with StubServer(brief="should not be asked") as srv:
        env = hook_env(tmp_path, srv.url)
        cmd = installed_command("claude-code", tmp_path)
        for ev in ("SessionStart", "UserPromptSubmit"):
            r = run_hook(
                cmd,
                {"session_id": "s", "cwd": str(repo), "hook_event_name": ev, "prompt": "hi"},
                env,
            )
            assert r.rc == 0
            if ev == "SessionStart":
                assert json.loads(r.stdout) == empty_context("claude-code")
            else:
                assert r.stdout == b""
    assert srv.requests == [] and pending(tmp_path) == []


@pytest.mark.process
def test_ignored_files_never_leave_the_machine(tmp_path: Path) -> None:
    repo = tmp_path / "app"
    repo.mkdir()
    (repo / ".wiki-memory.toml").write_text('project = "app"\n[capture]\nignore_paths = [".env"]\n')
    with StubServer() as srv:
        env = hook_env(tmp_path, srv.url)
        cmd = installed_command("claude-code", tmp_path)
        base = {"session_id": "s", "cwd": str(repo), "tool_use_id": "t1"}
        run_hook(
            cmd,
            {
                **base,
                "hook_event_name": "PostToolUse",
                "tool_name": "Read",
                "tool_input": {"file_path": str(repo / ".env")},
                "tool_response": {"content": "DB_PASSWORD=hunter2hunter2"},
            },
            env,
        )
        run_hook(
            cmd,
            {
                **base,
                "tool_use_id": "t2",
                "hook_event_name": "PostToolUse",
                "tool_name": "Edit",
                "tool_input": {"file_path": str(repo / "main.py")},
            },
            env,
        )
        wait_idle(tmp_path)
    assert [e["event_id"] for e in srv.stored.values()] == ["PostToolUse:t2"]
    assert all(e["project"] == "app" for e in srv.stored.values())
    assert "hunter2" not in json.dumps(srv.requests)


def test_truncate_event_cuts_longest_strings_at_word_boundaries() -> None:
    words = ("alpha beta gamma " * 50_000).strip()
    ev = {
        "event": "PostToolUse",
        "payload": {
            "tool_input": {"command": "x" * 300},
            "tool_response": {"stdout": words, "stderr": "e" * 400},
        },
    }
    assert HOOKS.truncate_event(ev, 100_000)
    assert HOOKS._size(ev) <= 100_000
    out = ev["payload"]["tool_response"]["stdout"]
    head, mark = out.split("\n[... truncated by wiki-memory hook:")
    assert head.endswith(("alpha ", "beta ", "gamma "))
    assert ev["payload"]["tool_input"]["command"] == "x" * 300  # short strings untouched
    small = {"payload": {"a": "b"}}
    assert not HOOKS.truncate_event(small, 1000)
    # Many medium strings: still under the limit.
    many = {"payload": {"items": ["y" * 1000 for _ in range(2000)]}}
    HOOKS.truncate_event(many, 200_000)
    assert HOOKS._size(many) <= 200_000


def test_data_dir_follows_platformdirs() -> None:
    import platformdirs

    env = {k: v for k, v in os.environ.items() if k != "WIKI_MEMORY_HOME"}
    assert HOOKS.default_data_dir(env) == platformdirs.user_data_dir("wiki-memory", appauthor=False)
    assert HOOKS.default_data_dir({"XDG_DATA_HOME": "/x/data"}) == "/x/data/wiki-memory"
    assert HOOKS.default_data_dir({"WIKI_MEMORY_HOME": "/w"}) == "/w"


def test_config_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for k in list(os.environ):
        if k.startswith("WIKI_MEMORY_"):
            monkeypatch.delenv(k)
    d = tmp_path / "data"
    (d / "auth").mkdir(parents=True)
    (d / "auth" / "owner.token").write_text("owner-token\n")
    cfg = HOOKS.load_config(str(d))
    # no server runs on the data directory: no address at all, never a default port
    assert (cfg.url, cfg.token) == ("", "owner-token")
    (d / "server.json").write_text(
        json.dumps({"pid": os.getpid(), "address": "http://127.0.0.1:9999"})
    )
    assert HOOKS.load_config(str(d)).url == "http://127.0.0.1:9999"
    # the same file once its process is gone (a kill -9): away again
    (d / "server.json").write_text(json.dumps({"pid": 2**30, "address": "http://127.0.0.1:9999"}))
    assert HOOKS.load_config(str(d)).url == ""
    (tmp_path / "team.token").write_text("team-token")
    (d / "hook.toml").write_text(
        f'url = "http://memory.lan:8765/"\ntoken_file = "{tmp_path / "team.token"}"\n'
        "deadline_seconds = 1.5\n"
    )
    cfg = HOOKS.load_config(str(d))
    assert (cfg.url, cfg.token, cfg.get("deadline_seconds")) == (
        "http://memory.lan:8765",
        "team-token",
        1.5,
    )
    monkeypatch.setenv("WIKI_MEMORY_URL", "http://other:1")
    monkeypatch.setenv("WIKI_MEMORY_TOKEN_FILE", str(d / "auth" / "owner.token"))
    cfg = HOOKS.load_config(str(d))
    assert (cfg.url, cfg.token) == ("http://other:1", "owner-token")


@pytest.mark.serial  # asserts a time bound
@pytest.mark.process
def test_http_post_raw_client(tmp_path: Path) -> None:
    with StubServer(brief="hi") as srv:
        status, body = HOOKS.http_post(srv.url, "/v1/brief", "tok", b"{}", time.monotonic() + 2)
    assert status == 200 and json.loads(body) == {"text": "hi"}
    with pytest.raises(OSError):
        HOOKS.http_post(
            f"http://127.0.0.1:{free_port()}", "/v1/brief", None, b"{}", time.monotonic() + 1
        )
    with BlackHole() as hole:
        t0 = time.monotonic()
        with pytest.raises(OSError):
            HOOKS.http_post(hole.url, "/v1/brief", None, b"{}", time.monotonic() + 0.3)
        # the 0.3 s deadline is honoured (no deadline: it would wait forever on the hole),
        # with room for a loaded machine
        assert time.monotonic() - t0 < 0.3 + 2.0


@pytest.mark.process
def test_hook_redacts_before_the_outbox(tmp_path: Path) -> None:
    """C32 on the hook's side: secrets never reach the outbox (the server is away)."""
    from support import shared_path

    case = json.loads(shared_path("cases", "inputs", "C32.json").read_text())
    probe, n = HOOKS.redact("GITHUB_TOKEN=ghp_FAKEexampleFAKEexampleFAKEexample0003")
    if not n:
        pytest.skip("wiki_memory.capture.sanitize has no detectors yet")
    env = hook_env(tmp_path, f"http://127.0.0.1:{free_port()}")
    cmd = installed_command("claude-code", tmp_path)
    for p in case["payloads"]:
        assert run_hook(cmd, p, env).rc == 0
    wait_idle(tmp_path)
    blob = "".join(f.read_text() for f in outbox_dir(tmp_path).iterdir() if f.is_file())
    assert len(pending(tmp_path)) == 3
    for secret in case["secret_values_that_must_not_survive"]:
        assert secret not in blob, secret
    for keep in case["non_secret_text_that_must_survive"]:
        assert keep in blob, keep
    assert "[REDACTED:" in blob


def test_a_private_key_cut_by_truncation_leaves_nothing_behind():
    key_line = "MIIEowIBAAKCAQEAx9Qv3fake" + "Ab1Cd2Ef3Gh4" * 3
    pem = (
        "-----BEGIN RSA PRIVATE KEY-----\n"
        + "\n".join([key_line] * 60)
        + "\n-----END RSA PRIVATE KEY-----"
    )
    # the key sits where a head+tail cut of the long output falls
    out = "x" * 300_000 + "\n" + pem + "\n" + "y" * 61_500
    payload = {
        "session_id": "s",
        "cwd": "/p",
        "tool_name": "Bash",
        "tool_input": {"command": "cat id_rsa"},
        "tool_response": {"stdout": out},
    }
    ev = HOOKS.build_event("claude-code", "PostToolUse", payload, b"{}", None, 256 * 1024, 0.0)
    text = json.dumps(ev)
    assert "Ab1Cd2Ef3Gh4" not in text and "END RSA PRIVATE KEY" not in text
    assert len(text.encode()) <= 256 * 1024
