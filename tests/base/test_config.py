"""Settings from ``config.toml`` and the environment: a value that does not convert stops
the start with a message naming the setting (docs/settings.md), never a silent default."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from clikit import run_in_process

from wiki_memory.config import load_settings


@pytest.mark.parametrize("text", ['auth = "ture"', 'vectors = "yes please"', "auth = 2"])
def test_a_switch_that_is_not_true_or_false_stops_with_its_name(tmp_path, text):
    (tmp_path / "config.toml").write_text(text + "\n")
    with pytest.raises(ValueError, match=r"setting (auth|vectors): expected true or false"):
        load_settings(tmp_path)


@pytest.mark.parametrize(
    ("text", "want"),
    [("on", True), ("YES", True), ("1", True), ("off", False), ("No", False), ("", False)],
)
def test_switch_words_from_the_environment(tmp_path, monkeypatch, text, want):
    monkeypatch.setenv("WIKI_MEMORY_VECTORS", text)
    assert load_settings(tmp_path).vectors is want


def test_a_number_that_does_not_convert_names_its_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("WIKI_MEMORY_PORT", "eighty")
    with pytest.raises(ValueError, match="setting port"):
        load_settings(tmp_path)


@pytest.mark.process
def test_the_cli_says_bad_configuration_and_exits_1(tmp_path):
    import subprocess
    import sys

    (tmp_path / "config.toml").write_text('auth = "ture"\n')
    r = subprocess.run(
        [sys.executable, "-m", "wiki_memory.cli.main", "--data-dir", str(tmp_path), "status"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1, r
    assert "bad configuration: setting auth: expected true or false" in r.stderr


def test_an_unknown_vectors_model_is_a_configuration_error_naming_the_choices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mistyped model is refused where every setting is read, so the CLI says "bad
    configuration" instead of a traceback from the index; with vectors off it is unread."""
    monkeypatch.setenv("WIKI_MEMORY_VECTORS_MODEL", "bert")
    assert load_settings(tmp_path).vectors_model == "bert"
    monkeypatch.setenv("WIKI_MEMORY_VECTORS", "true")
    with pytest.raises(ValueError, match="vectors_model: 'bert' .* wordllama, minilm"):
        load_settings(tmp_path)
    env = {**os.environ, "WIKI_MEMORY_HOME": str(tmp_path)}
    r = run_in_process(["--data-dir", str(tmp_path), "status"], env)  # a traceback raises
    assert r.returncode != 0, r
    assert "vectors_model" in r.stderr + r.stdout
