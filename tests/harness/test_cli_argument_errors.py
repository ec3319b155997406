"""A mistyped command line says what was wrong in words a new user can act on: a value
given to a switch (``remember --new-project demo "text"``, the form people try first)
names the switch and the form that works, and exits 2 like every usage error."""

from __future__ import annotations

import pytest

from wiki_memory.cli.main import main

pytestmark = pytest.mark.fast


def usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


def test_a_value_after_new_project_names_the_switch_and_the_form_that_works(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = usage_error(["remember", "--new-project", "demo", "the deploy uses blue/green"], capsys)
    assert "unrecognized arguments: the deploy uses blue/green" in err
    assert "--new-project takes no value" in err
    assert "--project demo --new-project" in err


def test_a_value_after_another_switch_names_it(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(["recall", "--json", "deploy", "extra words"], capsys)
    assert "unrecognized arguments: extra words" in err
    assert "--json takes no value" in err


def test_an_unknown_option_keeps_argparses_words(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(["remember", "a note", "--bogus"], capsys)
    assert "unrecognized arguments: --bogus" in err
    assert "takes no value" not in err
