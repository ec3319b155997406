"""``wiki-memory handoff claim`` says how to finish or give back what it claimed."""

from __future__ import annotations

from typing import Any

import pytest

from wiki_memory.cli import handoffs as cli_handoffs
from wiki_memory.cli.main import build_parser

pytestmark = pytest.mark.fast


def test_claim_prints_how_to_complete_or_release(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def reply(*_a: Any, **_k: Any) -> dict[str, Any]:
        return {"handoff": {"id": "H-0001", "status": "claimed", "title": "Fix the test"}}

    monkeypatch.setattr(cli_handoffs, "_request", reply)
    args = build_parser().parse_args(["--data-dir", "/srv/wm", "handoff", "claim", "H-0001"])
    assert cli_handoffs.cmd_handoff(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("H-0001 claimed: Fix the test\n")
    assert "wiki-memory --data-dir /srv/wm handoff complete H-0001" in out
    assert "wiki-memory --data-dir /srv/wm handoff release H-0001" in out
