"""``status`` and ``doctor`` say when no service manager runs the installed unit (a
reboot stops memory), describe the data directory they were asked about, and do not
talk about hooks spooling once no hook is installed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from wiki_memory.cli.main import main
from wiki_memory.harness import userservice
from wiki_memory.harness.userservice import ServiceState

pytestmark = pytest.mark.fast


def _unit(tmp_path: Path, data_dir: Path) -> Path:
    unit = tmp_path / "units" / "wiki-memory.service"
    unit.parent.mkdir(parents=True)
    unit.write_text(
        "[Service]\nExecStart=/usr/bin/python3 -m wiki_memory --data-dir "
        f"{data_dir} serve --host 127.0.0.1 --port 8765\n"
    )
    return unit


def _fake_state(monkeypatch: pytest.MonkeyPatch, unit: Path, **kw: Any) -> None:
    st = ServiceState("user", unit, True, True, kw.get("active"), kw.get("manager"))
    monkeypatch.setattr(userservice, "state", lambda *a, **k: st)
    monkeypatch.setattr(userservice, "kind_for_platform", lambda: "user")


def test_status_says_a_reboot_stops_memory_without_a_manager(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = (tmp_path / "data").resolve()
    data.mkdir()
    _fake_state(monkeypatch, _unit(tmp_path, data), active=None, manager=None)
    main(["--data-dir", str(data), "status"])
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("service:"))
    assert "not run by a service manager" in line and "a reboot stops memory" in line
    assert "installed, enabled" not in out


def test_an_inactive_unit_is_said_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = (tmp_path / "data").resolve()
    unit = _unit(tmp_path, data)
    _fake_state(monkeypatch, unit, active=False, manager="systemd")
    svc = {**userservice.state("user").as_dict(), "data_dir": str(data), "for_this_data_dir": True}
    assert "the unit is inactive" in userservice.describe(svc)


def test_status_on_a_second_data_directory_does_not_claim_the_default_unit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    default = (tmp_path / "default").resolve()
    second = (tmp_path / "second").resolve()
    second.mkdir()
    _fake_state(monkeypatch, _unit(tmp_path, default), active=True, manager="systemd")
    main(["--data-dir", str(second), "status"])
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("service:"))
    assert "another data directory" in line and str(default) in line, line


def test_status_without_hooks_does_not_talk_about_the_outbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = (tmp_path / "data").resolve()
    data.mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    none = ServiceState("user", tmp_path / "n.service", False, False, None, None)
    monkeypatch.setattr(userservice, "state", lambda *a, **k: none)
    main(["--data-dir", str(data), "status"])
    out = capsys.readouterr().out
    assert "server:    NOT running" in out and "outbox;" not in out, out
