"""``wiki-memory setup``, run as a user runs it on a temporary HOME with fake harness
installations (docs/operations.md, "Install and run"): the plan first, files that match
golden files, a self-check that leaves no page and no commit, nothing changed by a second
run, and an uninstall that takes back exactly what setup added and keeps the user's own
edits."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest
from serverproc import free_port
from support import cli_as, home_env, wait_for

from wiki_memory.harness.hooks_install import interpreter_path
from wiki_memory.harness.mcp_install import BRIDGE_SCRIPT
from wiki_memory.harness.outbox import HOOK_SCRIPT

GOLDEN = Path(__file__).resolve().parent / "golden" / "setup"
#: file under HOME -> golden file
WRITTEN = {
    ".config/systemd/user/wiki-memory.service": "wiki-memory.service",
    ".claude/settings.json": "claude-settings.json",
    ".claude.json": "claude.json",
    ".codex/hooks.json": "codex-hooks.json",
    ".codex/config.toml": "codex-config.toml",
    ".gemini/settings.json": "gemini-settings.json",
}
#: what the user had before setup (a harness's own keys and a hook of their own)
CLAUDE_BEFORE = {
    "theme": "dark",
    "hooks": {
        "PreToolUse": [{"hooks": [{"type": "command", "command": "~/bin/guard.sh", "timeout": 3}]}]
    },
}
GEMINI_BEFORE = {"ui": {"theme": "GitHub"}}


def tree(home: Path) -> dict[str, bytes]:
    """Every file under ``home`` but the data directory, with its bytes."""
    out = {}
    for p in sorted(home.rglob("*")):
        rel = p.relative_to(home).as_posix()
        if p.is_file() and not rel.startswith(".local/share/wiki-memory"):
            out[rel] = p.read_bytes()
    return out


def golden(name: str, home: Path, port: int) -> str:
    """A golden file with its ``{HOME}``, ``{PYTHON}``, ``{PORT}``, ``{HOOK}`` and
    ``{BRIDGE}`` fields filled in for this run."""
    text = (GOLDEN / name).read_text(encoding="utf-8")
    fields = {
        "{HOME}": str(home),
        "{PYTHON}": interpreter_path(),
        "{PORT}": str(port),
        "{HOOK}": str(HOOK_SCRIPT),
        "{BRIDGE}": str(BRIDGE_SCRIPT),
    }
    for k, v in fields.items():
        text = text.replace(k, v)
    return text


def stop_server(data: Path) -> None:
    """SIGTERM whatever server a failed test left on ``data``."""
    try:
        pid = json.loads((data / "server.json").read_text())["pid"]
        os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError, KeyError):
        return
    wait_for(lambda: not (data / "server.json").exists(), 60, "the server stops")


@pytest.fixture
def user(tmp_path: Path):
    """A HOME with Claude Code (with settings of its own), Codex (an empty folder) and
    Gemini CLI (with settings of its own) installed; no Cursor."""
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text(json.dumps(CLAUDE_BEFORE, indent=2) + "\n")
    (home / ".codex").mkdir()
    (home / ".gemini").mkdir()
    (home / ".gemini" / "settings.json").write_text(json.dumps(GEMINI_BEFORE, indent=2) + "\n")
    env = home_env(home, PATH=os.path.dirname(interpreter_path()) + ":/usr/bin:/bin")
    data = home / ".local" / "share" / "wiki-memory"
    try:
        yield home, env, data
    finally:
        stop_server(data)


@pytest.mark.process
def test_setup_dry_run_setup_again_and_uninstall(user) -> None:
    home, env, data = user
    port = free_port()
    before = tree(home)

    # the plan, and nothing written
    dry = cli_as(env, "setup", "--dry-run", "--port", str(port))
    assert dry.returncode == 0, dry.stderr
    for rel in WRITTEN:
        assert str(home / rel) in dry.stdout, (rel, dry.stdout)
    assert "Cursor" not in dry.stdout.split("self-check")[0].split("harnesses")[-1]
    assert tree(home) == before and not data.exists()

    # setup: the files, the running server, the self-check
    first = cli_as(env, "setup", "--port", str(port))
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.index("the plan") < first.stdout.index("wrote ")
    assert "self-check: ok" in first.stdout, first.stdout
    assert f"http://127.0.0.1:{port}/" in first.stdout and "wiki-memory status" in first.stdout
    for rel, name in WRITTEN.items():
        assert (home / rel).read_text() == golden(name, home, port), rel
    assert (data / "auth" / "owner.token").is_file()
    # the self-check left no page and no commit: the repository has its first commit only
    from dulwich.repo import Repo

    assert list((data / "wiki").rglob("*.md")) == []
    with Repo(str(data / "wiki")) as repo:
        assert len(list(repo.get_walker())) == 1
    assert list((data / "spool").glob("*.jsonl")) == []
    st = json.loads(cli_as(env, "status", "--json").stdout)
    assert st["server"]["running"] and st["ok"], st
    assert st["service"]["installed"] and st["service"]["enabled"], st["service"]

    # again: nothing changes (bytes, times, no new backup), the same server keeps running
    after = tree(home)
    stamps = {rel: (home / rel).stat().st_mtime_ns for rel in WRITTEN}
    pid = json.loads((data / "server.json").read_text())["pid"]
    second = cli_as(env, "setup", "--port", str(port))
    assert second.returncode == 0, second.stdout + second.stderr
    assert "wrote " not in second.stdout and "self-check: ok" in second.stdout
    assert tree(home) == after
    assert {rel: (home / rel).stat().st_mtime_ns for rel in WRITTEN} == stamps
    assert json.loads((data / "server.json").read_text())["pid"] == pid
    with Repo(str(data / "wiki")) as repo:
        assert len(list(repo.get_walker())) == 1

    # the user changes their Claude Code settings after setup
    settings = home / ".claude" / "settings.json"
    edited = json.loads(settings.read_text())
    edited["model"] = "opus"
    settings.write_text(json.dumps(edited, indent=2) + "\n")

    # and gives the MCP server an environment variable of their own
    claude_json = home / ".claude.json"
    mine = json.loads(claude_json.read_text())
    mine["mcpServers"]["wiki-memory"]["env"] = {"WIKI_MEMORY_LOG": "debug"}
    claude_json.write_text(json.dumps(mine, indent=2) + "\n")

    out = cli_as(env, "uninstall")
    assert out.returncode == 0, out.stdout + out.stderr
    assert not (data / "server.json").exists()  # the server setup started is stopped
    # the data directory stays; everything else is as before, but the user's edit
    assert (data / "auth" / "owner.token").is_file() and (data / "wiki" / ".git").is_dir()
    left = tree(home)
    assert json.loads(left.pop(".claude/settings.json")) == {**CLAUDE_BEFORE, "model": "opus"}
    # the backup of the file as it was before setup stays beside it (it differs now)
    kept = [k for k in left if k.startswith(".claude/settings.json.wiki-memory-backup-")]
    assert len(kept) == 1 and json.loads(left.pop(kept[0])) == CLAUDE_BEFORE
    # the MCP entry they changed stays, in the file setup created for it
    assert json.loads(left.pop(".claude.json")) == mine
    assert left == {k: v for k, v in before.items() if k != ".claude/settings.json"}
    assert not (home / ".config").exists()
    # the sanitizer's compiled rules, kept in the user's cache folder, are gone with it
    cache = home / ".cache"
    assert not (cache / "wiki-memory").exists()
    assert sorted(p.name for p in home.iterdir() if p != cache or any(cache.iterdir())) == [
        ".claude",
        ".claude.json",
        ".codex",
        ".gemini",
        ".local",
    ]
    assert f"kept: {home / kept[0]}" in out.stdout
    assert f"kept: {claude_json}: " in out.stdout


@pytest.mark.process
def test_uninstall_without_setup_changes_nothing(tmp_path: Path) -> None:
    env = home_env(tmp_path / "home")
    out = cli_as(env, "--data-dir", str(tmp_path / "data"), "uninstall")
    assert out.returncode == 0 and "nothing to undo" in out.stdout
    assert not (tmp_path / "data").exists()


@pytest.mark.process
def test_print_unit_fills_in_the_packaged_template(tmp_path: Path) -> None:
    env = home_env(tmp_path / "home")
    data = tmp_path / "data"
    out = cli_as(env, "--data-dir", str(data), "setup", "--print-unit", "system", "--port", "9")
    assert out.returncode == 0, out.stderr
    assert "User=wiki-memory" in out.stdout and "ProtectSystem=strict" in out.stdout
    assert f"ReadWritePaths=-{data}" in out.stdout
    assert f"--data-dir {data} serve --host 127.0.0.1 --port 9" in out.stdout
    assert not data.exists()


@pytest.mark.process
def test_the_plan_numbers_every_step_when_no_harness_is_found(tmp_path: Path) -> None:
    # a new user's first `setup --dry-run` on a machine with no harness printed steps
    # 1, 2, 3 and 5: the MCP step vanished instead of saying there was nothing to do
    home = tmp_path / "home"
    home.mkdir()
    env = home_env(home, PATH=os.path.dirname(interpreter_path()) + ":/usr/bin:/bin")
    dry = cli_as(env, "setup", "--dry-run", "--port", str(free_port()))
    assert dry.returncode == 0, dry.stderr
    steps = re.findall(r"^  (\d)\. ", dry.stdout, re.MULTILINE)
    assert steps == ["1", "2", "3", "4", "5"], dry.stdout
    assert "4. MCP: nothing to set up (no harness found)" in dry.stdout
    assert not (home / ".local").exists()
