"""Cold session pages for the condensing tests and ``bench/condense.py``: sessions built
from the shared hook payload shapes (../shared/data/hooks/claude-code), each with its own
made-up words, so the five facts chosen from its timeline (goal, a decision, a file, a
command that worked, an error) name that session alone."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SYL = ["kor", "vex", "mira", "tund", "plo", "zan", "quib", "hest", "rulo", "dax", "fen", "oma"]
LIBS = ["sqlalchemy", "httpx", "pydantic", "celery", "redis", "alembic", "click", "attrs"]


def word(i: int, salt: int = 0) -> str:
    """A made-up word, one per ``i`` (and ``salt``): ``korvexmira``."""
    n = i * 7 + salt * 1009 + 13
    return "".join(_SYL[(n // 12**k) % 12] for k in range(3)) + _SYL[salt % 12]


@dataclass
class Plan:
    """What session ``i`` holds: its id and the five facts a test looks for."""

    sid: str
    goal: str
    decision: str
    file: str
    command: str
    error: str


def plan(i: int) -> Plan:
    """The facts of session ``i`` (their words are this session's alone)."""
    w = [word(i, s) for s in range(5)]
    lib, other = LIBS[i % len(LIBS)], LIBS[(i + 3) % len(LIBS)]
    return Plan(
        sid=f"sess-{i:04d}",
        goal=f"Fix the {w[0]} export job that drops rows",
        decision=f"We decided to use {lib} instead of {other} for the {w[1]} queue.",
        file=f"src/{w[2]}/worker.py",
        command=f"pytest -q tests/test_{w[3]}.py",
        error=f"FAILED tests/test_{w[3]}.py::test_rows - KeyError: '{w[4]}'",
    )


def _shape(shared: Path, event: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((shared / "claude-code" / f"{event}.json").read_text())
    return data


def events(shared: Path, i: int, project: str = "atlas", filler: int = 8) -> list[dict[str, Any]]:
    """Session ``i`` as a Claude Code hook posts it (``shared``: the hooks folder), ended:
    the goal, reads with long outputs (``filler`` of them), a failed test run, an edit, the
    same test run passing, a reply with the decision and an open question."""
    p = plan(i)
    cwd = "/home/user/atlas"

    def ev(event: str, **fields: Any) -> dict[str, Any]:
        payload = _shape(shared, event)
        payload.update(session_id=p.sid, cwd=cwd, **fields)
        return {"harness": "claude-code", "project": project, "payload": payload}

    out = [ev("UserPromptSubmit", prompt=p.goal + ". Keep the public API.")]
    for k in range(filler):
        body = "\n".join(
            f"    row_{k}_{n} = load({n}, batch={k})  # {word(i, 9 + n % 3)}" for n in range(40)
        )
        out.append(
            ev(
                "PostToolUse",
                tool_name="Read",
                tool_use_id=f"toolu_{i}_r{k}",
                tool_input={"file_path": f"{cwd}/src/mod_{k}.py"},
                tool_response={"type": "text", "file": {"content": body}},
            )
        )
    out.append(
        ev(
            "PostToolUseFailure",
            tool_name="Bash",
            tool_use_id=f"toolu_{i}_t1",
            tool_input={"command": p.command},
            error=f"Exit code 1\n..F.\n{p.error}\n1 failed, 3 passed in 0.41s",
        )
    )
    out.append(
        ev(
            "PostToolUse",
            tool_name="Edit",
            tool_use_id=f"toolu_{i}_e1",
            tool_input={"file_path": f"{cwd}/{p.file}", "old_string": "a", "new_string": "b"},
            tool_response={"filePath": f"{cwd}/{p.file}", "success": True},
        )
    )
    out.append(
        ev(
            "PostToolUse",
            tool_name="Bash",
            tool_use_id=f"toolu_{i}_t2",
            tool_input={"command": p.command},
            tool_response={"stdout": "....\n4 passed in 0.39s", "stderr": "", "exit_code": 0},
        )
    )
    out.append(
        ev(
            "Stop",
            last_assistant_message=f"The rows were dropped by a missing key. {p.decision} "
            "The tests pass now. Should I also backfill the rows lost last week?",
        )
    )
    out.append(ev("SessionEnd"))
    return out
