"""Harness gates that switch a hook off silently: install-hooks says them, the hook
records that it ran, and doctor finds a hook that never ran, one whose command changed
since install, and a project-scope hook file, and names the last event per harness."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest
from support import REPO

from wiki_memory.cli.checks_gates import check_hook_runs
from wiki_memory.cli.doctor import Context
from wiki_memory.config import load_settings
from wiki_memory.harness import hooks_install as hi

pytestmark = pytest.mark.fast


def _hooklib() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "hooklib_gates", REPO / "hooks" / "wiki_memory_hooklib.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _install(tmp_path: Path, agent: str) -> tuple[Path, Path]:
    data = (tmp_path / "data").resolve()
    (data / "outbox").mkdir(parents=True, exist_ok=True)
    settings = tmp_path / f"{agent}.json"
    plan = hi.plan_install(agent, settings, python="/usr/bin/python3", data_dir=data)
    hi.apply(plan)
    return data, settings


def _doctor(data: Path) -> Context:
    ctx = Context(load_settings(data), 0)
    check_hook_runs(ctx)
    return ctx


def test_install_hooks_says_codex_needs_trust_and_gemini_lists_hooks(tmp_path: Path) -> None:
    data = (tmp_path / "data").resolve()
    codex = hi.describe(hi.plan_install("codex", tmp_path / "c.json", data_dir=data))
    assert "trust" in codex and ".codex/hooks.json" in codex
    gemini = hi.describe(hi.plan_install("gemini-cli", tmp_path / "g.json", data_dir=data))
    assert "/hooks" in gemini


def test_doctor_finds_a_hook_that_never_ran_then_names_its_last_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    data, _ = _install(tmp_path, "codex")
    ctx = _doctor(data)
    never = [f for f in ctx.findings if "has not run since its install" in f.message]
    assert never and "trust" in never[0].message
    _hooklib().note_ran(str(data / "outbox"), "codex", "SessionStart")
    ctx = _doctor(data)
    assert not [f for f in ctx.findings if "has not run" in f.message]
    assert ctx.rep["hook_runs"]["codex"]["event"] == "SessionStart"


def test_doctor_finds_a_hook_command_changed_since_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    data, settings = _install(tmp_path, "codex")
    text = settings.read_text().replace("/usr/bin/python3", "/opt/python3")
    settings.write_text(text)
    changed = [f for f in _doctor(data).findings if "changed since install-hooks" in f.message]
    assert changed and "trust" in changed[0].message


def test_doctor_names_a_project_scope_hook_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".codex").mkdir()
    (repo / ".codex" / "hooks.json").write_text(json.dumps({"hooks": {}}))
    (repo / "src").mkdir()
    monkeypatch.chdir(repo / "src")
    data = (tmp_path / "data").resolve()
    data.mkdir()
    found = [f for f in _doctor(data).findings if "project-scope hook file" in f.message]
    assert found and str(repo / ".codex" / "hooks.json") in found[0].message
