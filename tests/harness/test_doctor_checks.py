"""``wiki-memory doctor`` tells the truth (docs/operations.md, "Status and doctor"): one
test per thing it must find, each on a data directory doctor first calls healthy, each
exiting non-zero with a finding that names its check, its severity and the command that
fixes it; and the registry other features add their checks to."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clikit import run_in_process
from support import cli_as, home_env, make_memory

from wiki_memory.cli import doctor
from wiki_memory.config import load_settings
from wiki_memory.harness import userservice
from wiki_memory.harness.hooks_install import hook_command, interpreter_path

pytestmark = pytest.mark.process


def prepared(data: Path) -> Path:
    """A data directory a server has run on once: wiki, git, index, owner-only modes."""
    m = make_memory(data, files={"notes/a.md": "# a\n"})
    m.stop()
    (data / "auth" / "owner.token").write_text("wm_" + "x" * 40 + "\n")
    os.chmod(data / "auth" / "owner.token", 0o600)
    return data


def cli_here(env: dict[str, str], *args: str) -> Any:
    """``wiki-memory ARGS...`` in ``env``, in this process (what it reports and writes is
    the point; one text doctor below runs as a process)."""
    return run_in_process(list(args), env)


def run_doctor(home: Path, data: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    r = cli_here(home_env(home), "--data-dir", str(data), "doctor", "--json", *extra)
    assert r.stdout, r.stderr
    return r.returncode, json.loads(r.stdout)


def finding(rep: dict[str, Any], check: str) -> dict[str, Any]:
    found = [f for f in rep["findings"] if f["check"] == check and f["severity"] == "error"]
    assert len(found) == 1, rep["findings"]
    return found[0]


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path]:
    """A healthy data directory and an empty HOME; doctor says so (exit 0)."""
    data = prepared(tmp_path / "data")
    home = tmp_path / "home"
    rc, rep = run_doctor(home, data)
    assert rc == 0 and rep["ok"], rep["errors"]
    return home, data


def test_hooks_pointing_at_another_data_directory(world: tuple[Path, Path], tmp_path: Path) -> None:
    home, data = world
    other = tmp_path / "other"
    r = cli_here(
        home_env(home),
        *("--data-dir", str(other), "install-hooks", "--agent", "claude-code", "--apply"),
    )
    assert r.returncode == 0, r.stderr
    rc, rep = run_doctor(home, data)
    assert rc == 1 and not rep["ok"]
    f = finding(rep, "hooks")
    assert f"points to another store: {other}" in f["message"]
    assert f["fix"] == f"wiki-memory --data-dir {data} install-hooks --agent claude-code --apply"
    assert not f["safe"]
    # the fix it names works
    r = cli_here(home_env(home), *f["fix"].split()[1:])
    assert r.returncode == 0, r.stderr
    assert run_doctor(home, data)[0] == 0


def test_an_mcp_face_that_cannot_be_loaded(
    world: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server loads the MCP SDK at the first /mcp request, not at start, so a broken
    install would show only as a 500 there: doctor names it."""
    home, data = world
    monkeypatch.setitem(sys.modules, "wiki_memory.mcp.tools", None)  # import raises
    rc, rep = run_doctor(home, data)
    assert rc == 1 and not rep["ok"]
    f = finding(rep, "mcp")
    assert "the MCP face cannot be loaded" in f["message"] and "/mcp" in f["message"]
    assert f["fix"] == "pip install --force-reinstall 'mcp>=2.3,<3'"


def test_an_outbox_backlog(world: tuple[Path, Path]) -> None:
    home, data = world
    # the installed hook, with no server on its data directory, keeps the event
    cmd = hook_command("claude-code", data_dir=data)
    event = {"session_id": "s-1", "cwd": str(data), "hook_event_name": "UserPromptSubmit"}
    r = subprocess.run(
        ["sh", "-c", cmd],
        input=json.dumps(event | {"prompt": "kept for later"}).encode(),
        env=home_env(home),
        capture_output=True,
        timeout=60,
    )
    assert r.returncode == 0
    rc, rep = run_doctor(home, data)
    assert rc == 1
    f = finding(rep, "hooks")
    assert "1 hook event(s) queued" in f["message"] and f["fix"] == "wiki-memory recover"
    assert rep["hooks"]["outbox"]["queued"] == 1


def test_a_stopped_service(world: tuple[Path, Path], tmp_path: Path) -> None:
    home, data = world
    env = home_env(home)
    unit = userservice.unit_path("user", env)
    unit.parent.mkdir(parents=True)
    # a unit for another data directory is not this one's business
    other = tmp_path / "other"
    unit.write_text(
        userservice.render("user", userservice.serve_argv(interpreter_path(), other), other)
    )
    rc, rep = run_doctor(home, data)
    assert rc == 0 and rep["service"]["installed"] and not rep["service"]["for_this_data_dir"]
    # a unit for this one, and no server running
    unit.write_text(
        userservice.render("user", userservice.serve_argv(interpreter_path(), data), data)
    )
    rc, rep = run_doctor(home, data)
    assert rc == 1
    f = finding(rep, "service")
    assert "installed but no server runs" in f["message"]
    # the fix names the service manager's start only where a manager answered
    reachable = rep["service"]["manager"] is not None and rep["service"]["active"] is not None
    want = (
        "systemctl --user start wiki-memory.service"
        if reachable
        else "start `wiki-memory serve` by other means (no service manager answers here: "
        "a login script, or your container's supervisor)"
    )
    assert f["fix"] == want
    text = cli_as(env, "--data-dir", str(data), "doctor").stdout  # as a process, once
    assert f"fix: {want}" in text
    # said once: no separate service line repeats the finding
    assert text.count(str(unit)) == 1, text


@pytest.fixture
def open_parent() -> Iterator[Path]:
    """A folder every account can pass through (pytest's temp folders are 0700, which
    hide everything below them whatever its modes)."""
    d = Path(tempfile.mkdtemp(prefix="wm-doctor-"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_a_world_readable_data_directory(open_parent: Path, tmp_path: Path) -> None:
    data = prepared(open_parent / "data")
    home = tmp_path / "home"
    assert run_doctor(home, data)[0] == 0
    os.chmod(data, 0o755)
    rc, rep = run_doctor(home, data)
    assert rc == 1
    f = finding(rep, "modes")
    assert f["fix"] == f"chmod 700 {data}" and f["safe"]
    assert str(data) in rep["reachable_by_others"]
    # --fix applies it
    r = cli_here(home_env(home), "--data-dir", str(data), "doctor", "--fix")
    assert f"fixed: chmod 700 {data}" in r.stdout, r.stdout
    assert r.returncode == 0, r.stdout
    assert (data.stat().st_mode & 0o777) == 0o700


def test_a_stale_lock(world: tuple[Path, Path]) -> None:
    home, data = world
    lock = data / "wiki" / ".git" / "index.lock"
    lock.write_bytes(b"")
    t = time.time() - 3600
    os.utime(lock, (t, t))
    rc, rep = run_doctor(home, data)
    assert rc == 1
    f = finding(rep, "git")
    assert "index.lock" in f["message"] and f["fix"] == "wiki-memory doctor --fix" and f["safe"]
    r = cli_here(home_env(home), "--data-dir", str(data), "doctor", "--fix")
    assert "fixed: removed .git/index.lock" in r.stdout and r.returncode == 0, r.stdout
    assert not lock.exists()


def test_a_check_registers_with_one_line(tmp_path: Path) -> None:
    """What a check such as sync's does: one ``register`` call; its findings are in
    the report, an error fails it, and a check that raises is named, not fatal."""
    data = prepared(tmp_path / "data")
    settings = load_settings(data)

    def sync_check(ctx: doctor.Context) -> None:
        ctx.rep["sync"] = {"remotes": 0}
        ctx.error("2 pages conflict with the remote", "wiki-memory sync")

    def broken(ctx: doctor.Context) -> None:
        raise RuntimeError("boom")

    before = list(doctor.CHECKS)
    try:
        doctor.register(doctor.Check("sync", sync_check))
        doctor.register(doctor.Check("broken", broken))
        rep, findings = doctor.run_checks(settings, wait_seconds=0)
    finally:
        doctor.CHECKS[:] = before
    assert rep["sync"] == {"remotes": 0} and not rep["ok"]
    assert {
        "check": "sync",
        "severity": "error",
        "message": "2 pages conflict with the remote",
        "fix": "wiki-memory sync",
        "safe": False,
    } in rep["findings"]
    assert any(f.check == "broken" and "boom" in f.message for f in findings)
    assert doctor.run_checks(settings, wait_seconds=0)[0]["ok"]
