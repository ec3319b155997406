"""The opt-in event-loop stall meter (``WIKI_MEMORY_LOOP_LAG_FILE``): it sees a callback
that holds the loop, the server writes its report when it stops, and without the variable
nothing runs (docs/operations.md, "Event-loop stalls")."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from appkit import AppServer

from wiki_memory.server import looplag


def test_a_callback_holding_the_loop_is_the_longest_stall(tmp_path: Path) -> None:
    out = tmp_path / "lag.json"

    async def main() -> None:
        async with looplag.watched(str(out)) as meter:
            assert meter is not None
            await asyncio.sleep(0.03)
            time.sleep(0.06)  # a blocking call on the loop: the ticker wakes late
            await asyncio.sleep(0.03)

    asyncio.run(main())
    report = json.loads(out.read_text())
    assert report["max_lag_ms"] >= 45
    assert report["ticks"] >= 2
    assert set(report) == {"max_lag_ms", "mean_lag_ms", "ticks", "seconds"}


def test_off_by_default_nothing_runs(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv(looplag.ENV, raising=False)

    async def main() -> object:
        before = len(asyncio.all_tasks())
        async with looplag.watched() as meter:
            assert len(asyncio.all_tasks()) == before
            return meter

    assert asyncio.run(main()) is None
    assert list(tmp_path.iterdir()) == []


def test_the_server_writes_the_report_when_it_stops(tmp_path: Path) -> None:
    out = tmp_path / "server-lag.json"
    srv = AppServer(tmp_path / "data", env={looplag.ENV: str(out)}).start()
    try:
        assert srv.get("/v1/health").status_code == 200
        assert not out.exists()  # written at shutdown, not before
    finally:
        srv.stop()
    report = json.loads(out.read_text())
    # how many wake-ups fit between the start and the stop depends on the machine
    assert set(report) == {"max_lag_ms", "mean_lag_ms", "ticks", "seconds"}
    assert report["ticks"] >= 0 and report["max_lag_ms"] >= 0
