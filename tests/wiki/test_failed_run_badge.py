"""A shell call whose output ends in a test run's or a build's failure is shown failed,
even when the harness reported no error for it."""

from __future__ import annotations

import pytest

from wiki_memory.capture.observation import parse_event
from wiki_memory.wiki.compiler import build_entries

pytestmark = pytest.mark.fast


def _bash(n: int, stdout: str) -> object:
    o = parse_event(
        {
            "harness": "claude-code",
            "event": "PostToolUse",
            "session_id": "s1",
            "cwd": "/home/u/proj",
            "ts": 10 + n,
            "payload": {
                "tool_name": "Bash",
                "tool_use_id": f"t{n}",
                "tool_input": {"command": "pytest -q"},
                "tool_response": {"stdout": stdout, "stderr": "", "interrupted": False},
            },
        },
        "u",
    )
    o.obs_id = f"abcdef012345-{n}"
    return o


@pytest.mark.parametrize(
    "tail",
    [
        "FAILED tests/test_x.py::test_round - assert 1 == 2\n1 failed, 12 passed in 0.40s",
        "==== 2 failed, 30 passed in 1.2s ====",
        "make: *** [Makefile:12: all] Error 2",
        "error[E0308]: mismatched types",
        "test result: FAILED. 3 passed; 1 failed; 0 ignored",
    ],
)
def test_output_ending_in_a_failure_is_failed(tail: str) -> None:
    entries = build_entries([_bash(1, "collecting...\n" + tail + "\n")], 2000)
    assert "· failed" in entries[0].head, entries[0].head


@pytest.mark.parametrize(
    "tail", ["12 passed in 0.40s", "==== 30 passed, 0 failed in 1.2s ====", "Found 0 errors."]
)
def test_output_ending_in_success_is_ok(tail: str) -> None:
    entries = build_entries([_bash(1, "collecting...\n" + tail + "\n")], 2000)
    assert "· ok" in entries[0].head, entries[0].head
