"""The service files in packaging/, as setup generates them: systemd accepts both units
(``systemd-analyze verify``), and each unit's command, run as written, serves
``/v1/health`` (docs/operations.md, "Install and run")."""

from __future__ import annotations

import plistlib
import re
import shutil
import signal
import subprocess
from pathlib import Path

import httpx
import pytest
from serverproc import free_port
from support import home_env, wait_for

from wiki_memory.harness import userservice
from wiki_memory.harness.hooks_install import interpreter_path

ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(
    ANALYZE is None, reason="systemd-analyze is not installed on this machine"
)


def rendered(kind: str, data: Path, port: int) -> str:
    argv = userservice.serve_argv(interpreter_path(), data, "127.0.0.1", port)
    return userservice.render(kind, argv, data)


def test_quoting_round_trips_odd_paths() -> None:
    """A data directory with spaces, quotes, ``%`` and ``$`` reaches the server as it is."""
    odd = Path('/srv/my memory/it\'s "100%" $HOME\\x')
    text = userservice.render("user", userservice.serve_argv("/opt/py thon/bin/python", odd), odd)
    argv = userservice.exec_start_argv(text)
    assert argv[0] == "/opt/py thon/bin/python"
    assert argv[argv.index("--data-dir") + 1] == str(odd)
    assert not re.search(r"@[A-Z_]+@", text)  # every field filled in


@pytest.mark.process
@needs_analyze
@pytest.mark.parametrize("kind", ["user", "system"])
def test_units_pass_systemd_analyze_verify(tmp_path: Path, kind: str) -> None:
    unit = tmp_path / "units" / userservice.UNIT_NAME
    unit.parent.mkdir()
    unit.write_text(rendered(kind, tmp_path / "data", 8765))
    env = home_env(tmp_path / "home")
    args = [str(ANALYZE), *(["--user"] if kind == "user" else []), "verify", str(unit)]
    r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    # verify exits 0 on a line it ignores: a clean unit is one it says nothing about
    assert r.returncode == 0 and str(unit) not in r.stdout + r.stderr, r.stdout + r.stderr
    # a unit with a mistake in it is named (the check can fail)
    unit.write_text(unit.read_text().replace("Restart=on-failure", "Restart=sometimes"))
    r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    assert f"{unit}:" in r.stderr and "sometimes" in r.stderr, r.stderr


def _serves(argv: list[str], port: int, tmp: Path) -> None:
    """Run ``argv`` as the service manager would and reach its ``/v1/health``."""
    env = home_env(tmp / "home")
    p = subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:

        def up() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=2).json()["ok"]
            except (httpx.HTTPError, ValueError):
                assert p.poll() is None, p.stderr.read() if p.stderr else ""
                return False

        wait_for(up, 90, "the unit's command serves /v1/health")
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            assert p.wait(timeout=60) == 0  # a clean stop, as systemd's SIGTERM asks
        finally:
            if p.poll() is None:
                p.kill()


@pytest.mark.process
@pytest.mark.parametrize("kind", ["user", "system"])
def test_each_units_exec_start_serves_health(tmp_path: Path, kind: str) -> None:
    port = free_port()
    data = tmp_path / "data dir"  # a space: the quoting must hold
    argv = userservice.exec_start_argv(rendered(kind, data, port))
    assert argv[0] == interpreter_path()
    _serves(argv, port, tmp_path)
    assert (data / "wiki" / ".git").is_dir()


@pytest.mark.process
def test_launchd_program_arguments_serve_health(tmp_path: Path) -> None:
    port = free_port()
    data = tmp_path / "data"
    plist = plistlib.loads(rendered("launchd", data, port).encode())
    assert plist["Label"] == userservice.LAUNCHD_LABEL
    assert plist["StandardErrorPath"] == str(data / "logs" / "service.log")
    assert plist["ProgramArguments"] == userservice.serve_argv(
        interpreter_path(), data, "127.0.0.1", port
    )
    _serves(plist["ProgramArguments"], port, tmp_path)


def test_container_file_runs_as_non_root_with_one_volume_and_a_health_check() -> None:
    text = (userservice.PACKAGING_DIR / "Containerfile").read_text()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    users = [ln.split()[1] for ln in lines if ln.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    assert [ln for ln in lines if ln.startswith("VOLUME")] == ['VOLUME ["/data"]']
    assert any(ln.startswith("HEALTHCHECK") for ln in lines)
    assert "/v1/health" in text
    cmd = [ln for ln in lines if ln.startswith("CMD ")][-1]
    assert '"0.0.0.0"' in cmd and '"--insecure-http"' in cmd
