"""The rules capture keeps in one place each: ``<private>`` spans, the project of an
event, the head and tail of a long output, titles cut at word boundaries, a session's
real end and parts per project."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from wiki_memory.capture.observation import parse_event
from wiki_memory.capture.private import strip_private, strip_private_obj
from wiki_memory.capture.project import resolve_project
from wiki_memory.capture.spool import Spool
from wiki_memory.core.sessions import SessionChange, end_time
from wiki_memory.harness.hooks_install import plan_install
from wiki_memory.wiki.compiler import clip_bytes, cut_words


def test_private_spans_closed_nested_unclosed_and_stray() -> None:
    assert strip_private("key <private>s3cr3t</private> ok") == "key [private] ok"
    assert strip_private("a <private>x <PRIVATE>y</private> z</private> b") == "a [private] b"
    assert strip_private("tail <private>to the end\nof the string") == "tail [private]"
    assert strip_private("a </private> b") == "a  b"  # a stray close hides nothing
    assert strip_private("x < private >q</ Private> y") == "x [private] y"
    assert strip_private("<private>a</private>b<private>c</private>") == "[private]b[private]"
    assert strip_private("private matters, <privates> too") == "private matters, <privates> too"
    obj, n = strip_private_obj(
        {"prompt": "p <private>1</private>", "list": ["<private>2"], "n": 3, "k<private>": 1}
    )
    assert obj == {"prompt": "p [private]", "list": ["[private]"], "n": 3, "k[private]": 1}
    assert n == 3


def test_private_is_linear_on_many_tags() -> None:
    text = "<private>" * 50_000 + "x" + "</private>" * 50_000 + " after"
    assert strip_private(text) == "[private] after"


def git(*args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@e", *args], check=True)


@pytest.mark.process
def test_project_order(tmp_path: Path) -> None:
    atlas = tmp_path / "atlas"
    (atlas / "services" / "api").mkdir(parents=True)
    git("init", "-q", str(atlas))
    git("-C", str(atlas), "commit", "-q", "--allow-empty", "-m", "start")
    wt = tmp_path / "atlas-wt" / "feature-x"
    git("-C", str(atlas), "worktree", "add", "-q", str(wt))
    api = str(atlas / "services" / "api")
    assert (resolve_project(api).name, resolve_project(api).source) == ("atlas", "git")
    assert resolve_project(str(wt)).name == "atlas"  # a worktree maps to its main repository
    (atlas / ".wiki-memory.toml").write_text('# ours\nproject = "Atlas-Core"\n[capture]\n')
    assert resolve_project(api).name == "Atlas-Core"
    assert resolve_project(str(wt)).name == "Atlas-Core"  # the main repository's file
    (atlas / ".wiki-memory.toml").write_text('[capture]\nproject = "not top level"\n')
    assert resolve_project(api).name == "atlas"
    scratch = tmp_path / "tmp.Q2x9"
    scratch.mkdir()
    assert resolve_project(str(scratch)).name is None  # a folder name is no project
    assert resolve_project(str(scratch), session_project="atlas").source == "session"
    assert resolve_project(str(scratch), explicit=" borealis ").name == "borealis"
    assert resolve_project(None).source == "none"
    assert resolve_project("relative/path").name is None
    # a configuration file above a repository names the project of all below it
    (tmp_path / ".wiki-memory.toml").write_text("project = 'umbrella'\n")
    assert resolve_project(str(scratch)).name == "umbrella"
    assert resolve_project(str(atlas)).source == "config"


def event(sid: str, project: str | None, project_from: str, n: int) -> dict[str, object]:
    d: dict[str, object] = {
        "harness": "claude-code",
        "event": "UserPromptSubmit",
        "session_id": sid,
        "cwd": f"/nowhere/{n}",
        "event_id": f"e{n}",
        "ts": 1_796_000_000 + n,
        "project_from": project_from,
        "payload": {"prompt": f"p{n}"},
    }
    if project:
        d["project"] = project
    return d


def test_a_session_that_moves_continues_in_a_part_per_project(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool")
    evs = [
        event("s", "atlas", "config", 1),
        event("s", None, "none", 2),  # a subagent in a scratch folder
        event("s", "borealis", "git", 3),
        event("s", None, "none", 4),
        event("s", "atlas", "git", 5),
        event("home", None, "none", 6),
    ]
    acc = spool.append([parse_event(e, "alice") for e in evs])
    projects = [spool.sessions[a.session_key].project for a in acc]
    assert projects == ["atlas", "atlas", "borealis", "borealis", "atlas", ""]
    assert acc[0].session_key == acc[4].session_key != acc[2].session_key
    assert sorted(spool.parts_of(acc[0].session_key)) == sorted(
        {acc[0].session_key, acc[2].session_key}
    )
    spool.close()
    again = Spool(tmp_path / "spool")  # the current part survives a restart
    (a,) = again.append([parse_event(event("s", None, "none", 7), "alice")])
    assert again.sessions[a.session_key].project == "atlas"
    # a sender that does not resolve projects keeps the rule of earlier releases
    (b,) = again.append([parse_event(event("old", None, "", 8), "alice")])
    assert again.sessions[b.session_key].project == "8"
    again.close()


def test_clip_keeps_head_and_tail() -> None:
    log = "".join(f"line {i}\n" for i in range(20_000)) + "error: the last line\n"
    out = clip_bytes(log, 2000)
    assert out.startswith("line 0\n") and out.endswith("error: the last line\n")
    assert "bytes cut …]" in out and len(out.encode()) < 2100
    assert clip_bytes("short", 2000) == "short"
    assert clip_bytes("é" * 5000, 101).encode("utf-8")  # never splits a character


def test_titles_are_cut_at_word_boundaries() -> None:
    assert cut_words("Fix the flaky upload test", 80) == "Fix the flaky upload test"
    cut = cut_words("Investigate why the nightly reconciliation job double-counts", 40)
    assert cut == "Investigate why the nightly…"
    assert cut_words("x" * 100, 10) == "x" * 9 + "…"


def test_ended_is_the_time_of_the_ending_event() -> None:
    obs = [
        parse_event(
            {
                "harness": "gemini-cli",
                "event": e,
                "session_id": "g",
                "project": "p",
                "ts": f"2026-11-29T10:0{i}:00Z",
            },
            "alice",
        )
        for i, e in enumerate(["SessionStart", "BeforeAgent", "SessionEnd", "AfterAgent"])
    ]
    assert end_time(obs, 0.0) == obs[2].ts
    assert end_time(obs[:2], 0.0) == obs[1].ts  # ended by idleness: its last event
    assert end_time([], 5.0) == 5.0


def test_commit_lines_sum_up_in_one_commit() -> None:
    # the page's name, never its title (a first prompt)
    page = "projects/x/sessions/2026-12-06-3b021981.md"
    a = SessionChange(page, "Fix it", "codex", True, 1, 3, False)
    b = SessionChange(page, "Fix it", "codex", False, 2, 5, True)
    assert a.message() == "Add session 2026-12-06-3b021981 (codex)"
    assert b.message() == "Session 2026-12-06-3b021981: +2 turns, ended"
    assert a.plus(b).message() == "Add session 2026-12-06-3b021981 (codex), ended"
    c = SessionChange(page, "Fix it", "codex", False, 0, 1, False)
    assert c.message() == "Session 2026-12-06-3b021981: +1 event"


def test_agent_gemini_is_gemini_cli(tmp_path: Path) -> None:
    plan = plan_install("gemini", home=tmp_path, data_dir="/srv/wm")
    assert plan.agent.name == "gemini-cli"
    assert "--harness gemini-cli --data-dir /srv/wm" in plan.command
    assert plan.path == tmp_path / ".gemini" / "settings.json"
    env = {"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / "work")}
    assert plan_install("claude", env=env).path == tmp_path / "work" / "settings.json"
