"""``doctor`` reports the running server's ``vectors`` setting, which the server writes
into ``server.json``, not the one in doctor's own shell."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from wiki_memory.cli.checks_store import check_signals
from wiki_memory.cli.doctor import Context
from wiki_memory.config import load_settings
from wiki_memory.index import vectors
from wiki_memory.liveserver import server_record

pytestmark = pytest.mark.fast


def test_doctor_reports_the_running_servers_vectors_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vectors, "available", lambda name=None: True)
    data = tmp_path / "data"
    data.mkdir()
    rec = server_record(os.getpid(), "http://127.0.0.1:1", True, {"vectors": True})
    (data / "server.json").write_text(json.dumps(rec))
    ctx = Context(load_settings(data, vectors=False), 0)
    check_signals(ctx)
    assert "dense" in ctx.rep["signals"]["on"], ctx.rep
    assert "running server" in ctx.rep["vectors"]
