"""install-hooks / uninstall-hooks on a temporary HOME, per harness, against golden files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from clikit import run_in_process

from wiki_memory.harness.hooks_install import (
    AGENTS,
    InstallError,
    hook_command,
    interpreter_path,
    plan_install,
    plan_uninstall,
)

GOLDEN = Path(__file__).resolve().parent / "golden" / "hooks"
PY = "/usr/bin/python3"
SCRIPT = "/opt/wiki-memory/hooks/wiki_memory_hook.py"
FILES = {
    "claude-code": (".claude/settings.json", "claude-code.settings.json"),
    "codex": (".codex/hooks.json", "codex.hooks.json"),
    "gemini-cli": (".gemini/settings.json", "gemini-cli.settings.json"),
}


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``wiki-memory ARGS...`` with HOME at ``home``, in this process (the files it writes
    are the point; the installed hooks run as processes elsewhere)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CODEX_HOME",)}
    env["HOME"] = str(home)
    return run_in_process(list(args), env)


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".wiki-memory-backup-*"))


@pytest.mark.process
@pytest.mark.parametrize("agent", list(AGENTS))
def test_install_matches_golden_and_is_idempotent(tmp_path: Path, agent: str) -> None:
    home = tmp_path / "home"
    rel, golden = FILES[agent]
    path = home / rel
    args = ["--data-dir", "/srv/wm-team", "install-hooks", "--agent", agent, "--python", PY]
    args += ["--hook-script", SCRIPT]
    dry = cli(home, *args)
    assert dry.returncode == 0, dry.stderr
    assert str(path) in dry.stdout and "--apply" in dry.stdout
    for event in AGENTS[agent].events:
        assert event in dry.stdout
    assert not path.exists()  # a plan only

    first = cli(home, *args, "--apply")
    assert first.returncode == 0, first.stderr
    assert path.read_text() == (GOLDEN / golden).read_text()
    stamp = path.stat().st_mtime_ns

    second = cli(home, *args, "--apply")
    assert second.returncode == 0
    assert "nothing to change" in second.stdout
    assert path.stat().st_mtime_ns == stamp
    assert path.read_text() == (GOLDEN / golden).read_text()
    assert backups(path) == []


def _user_settings(agent: str) -> dict[str, Any]:
    """A configuration the user already had: other keys and a hook of their own."""
    event = {"claude-code": "PreToolUse", "codex": "PreToolUse", "gemini-cli": "BeforeTool"}[agent]
    handler: dict[str, Any] = {"type": "command", "command": "~/bin/guard.sh", "timeout": 3}
    if agent == "gemini-cli":
        handler = {"name": "guard", "type": "command", "command": "~/bin/guard.sh", "timeout": 3000}
    cfg: dict[str, Any] = {"hooks": {event: [{"matcher": "Bash", "hooks": [handler]}]}}
    if agent != "codex":
        cfg = {"model": "some-model", "permissions": {"allow": ["Bash(ls:*)"]}, **cfg}
    return cfg


@pytest.mark.process
@pytest.mark.parametrize("agent", list(AGENTS))
def test_uninstall_removes_only_ours_and_keeps_the_users_edit(tmp_path: Path, agent: str) -> None:
    home = tmp_path / "home"
    path = home / FILES[agent][0]
    path.parent.mkdir(parents=True)
    original = _user_settings(agent)
    path.write_text(json.dumps(original, indent=4) + "\n")

    r = cli(
        home, "install-hooks", "--agent", agent, "--apply", "--python", PY, "--hook-script", SCRIPT
    )
    assert r.returncode == 0, r.stderr
    (backup,) = backups(path)
    assert json.loads(backup.read_text()) == original
    installed = json.loads(path.read_text())
    assert installed["hooks"] != original["hooks"]
    for key in original:
        if key != "hooks":
            assert installed[key] == original[key]
    user_event = next(iter(original["hooks"]))
    assert installed["hooks"][user_event][0] == original["hooks"][user_event][0]
    ours = [
        h
        for groups in installed["hooks"].values()
        for g in groups
        for h in g["hooks"]
        if "wiki_memory_hook" in h["command"]
    ]
    assert len(ours) == len(AGENTS[agent].events)

    # The user edits their own entry and adds another one after ours.
    edited = json.loads(path.read_text())
    edited["hooks"][user_event][0]["hooks"][0]["timeout"] = 7 if agent != "gemini-cli" else 7000
    stop = {"claude-code": "Stop", "codex": "Stop", "gemini-cli": "AfterAgent"}[agent]
    mine = {"type": "command", "command": "notify-send done"}
    edited["hooks"][stop].append({"hooks": [mine]})
    path.write_text(json.dumps(edited, indent=2) + "\n")

    again = cli(
        home, "install-hooks", "--agent", agent, "--apply", "--python", PY, "--hook-script", SCRIPT
    )
    assert "nothing to change" in again.stdout  # the user's edit is no reason to rewrite

    dry = cli(home, "uninstall-hooks", "--agent", agent)
    assert dry.returncode == 0 and "--apply" in dry.stdout
    assert json.loads(path.read_text()) == edited
    r = cli(home, "uninstall-hooks", "--agent", agent, "--apply")
    assert r.returncode == 0, r.stderr
    expected = json.loads(json.dumps(original))
    expected["hooks"][user_event][0]["hooks"][0]["timeout"] = 7 if agent != "gemini-cli" else 7000
    expected["hooks"][stop] = [{"hooks": [mine]}]
    assert json.loads(path.read_text()) == expected
    assert len(backups(path)) >= 2
    # Uninstalling again changes nothing.
    r = cli(home, "uninstall-hooks", "--agent", agent, "--apply")
    assert "nothing to change" in r.stdout
    assert json.loads(path.read_text()) == expected


def test_uninstall_of_a_file_we_created_leaves_an_empty_object(tmp_path: Path) -> None:
    home = tmp_path / "home"
    plan = plan_install("claude-code", home=home, python=PY, script=SCRIPT)
    from wiki_memory.harness.hooks_install import apply

    apply(plan)
    apply(plan_uninstall("claude-code", home=home))
    assert json.loads((home / ".claude" / "settings.json").read_text()) == {}


def test_reinstall_updates_our_entry_in_place(tmp_path: Path) -> None:
    from wiki_memory.harness.hooks_install import apply

    home = tmp_path / "home"
    apply(plan_install("codex", home=home, python="/old/python3", script=SCRIPT))
    before = json.loads((home / ".codex" / "hooks.json").read_text())
    plan = plan_install("codex", home=home, python=PY, script=SCRIPT)
    assert plan.changed
    apply(plan)
    after = json.loads((home / ".codex" / "hooks.json").read_text())
    assert list(after["hooks"]) == list(before["hooks"])
    cmds = {h["command"] for gs in after["hooks"].values() for g in gs for h in g["hooks"]}
    assert cmds == {hook_command("codex", PY, SCRIPT)}


@pytest.mark.process
def test_codex_home_and_explicit_settings_path(tmp_path: Path) -> None:
    spec = AGENTS["codex"]
    assert (
        spec.default_path(tmp_path, {"CODEX_HOME": str(tmp_path / "ch")})
        == tmp_path / "ch" / "hooks.json"
    )
    assert spec.default_path(tmp_path, {}) == tmp_path / ".codex" / "hooks.json"
    proj = tmp_path / "repo" / ".claude" / "settings.json"
    r = cli(
        tmp_path / "home",
        "install-hooks",
        "--agent",
        "claude-code",
        "--apply",
        "--settings",
        str(proj),
    )
    assert r.returncode == 0, r.stderr
    assert "SessionStart" in json.loads(proj.read_text())["hooks"]
    assert not (tmp_path / "home" / ".claude").exists()


@pytest.mark.process
def test_data_dir_is_baked_into_the_command(tmp_path: Path) -> None:
    r = cli(
        tmp_path / "home",
        "--data-dir",
        str(tmp_path / "team data"),
        "install-hooks",
        "--agent",
        "gemini-cli",
        "--apply",
    )
    assert r.returncode == 0, r.stderr
    cfg = json.loads((tmp_path / "home" / ".gemini" / "settings.json").read_text())
    cmd = cfg["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert f"--data-dir '{tmp_path / 'team data'}'" in cmd


@pytest.mark.process
def test_a_file_that_is_not_json_is_left_alone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = home / ".gemini" / "settings.json"
    path.parent.mkdir(parents=True)
    text = '{\n  // my comment\n  "theme": "dark"\n}\n'
    path.write_text(text)
    r = cli(home, "install-hooks", "--agent", "gemini-cli", "--apply")
    assert r.returncode == 1
    assert "not plain JSON" in r.stderr
    assert path.read_text() == text and backups(path) == []
    path.write_text('{"hooks": []}')
    with pytest.raises(InstallError):
        plan_install("gemini-cli", home=home)


@pytest.mark.process
def test_interpreter_is_an_absolute_real_binary() -> None:
    py = interpreter_path()
    assert os.path.isabs(py)
    with open(os.path.realpath(py), "rb") as f:
        assert f.read(2) != b"#!"  # not a version manager's shim script
    if sys.prefix != sys.base_prefix:
        assert py == os.path.abspath(sys.executable)
    out = subprocess.run(
        [py, "-S", "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
    )
    assert out.stdout.strip() == str(sys.version_info[:2])


def test_shim_is_resolved_to_the_base_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shim = tmp_path / "shims" / "python3"
    shim.parent.mkdir()
    shim.write_text('#!/usr/bin/env bash\nexec pyenv exec python3 "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(shim))
    monkeypatch.setattr(sys, "prefix", sys.base_prefix)
    py = interpreter_path()
    assert py != str(shim)
    assert py == os.path.realpath(getattr(sys, "_base_executable", sys.executable))
