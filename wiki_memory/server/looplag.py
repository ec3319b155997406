"""The event loop's longest stall, measured inside the server for benchmarks: opt-in, off
by default (docs/operations.md, "Event-loop stalls").

With ``WIKI_MEMORY_LOOP_LAG_FILE`` set to a file path, the server's lifespan runs a small
ticker on its event loop: it sleeps :data:`TICK` seconds at a time and notes how much later
than asked each wake-up came (a wake-up is late exactly while some callback holds the loop).
When the server stops it writes one JSON object to that file, replacing it:
``{"max_lag_ms": float, "mean_lag_ms": float, "ticks": int, "seconds": float}``. Unset
(the default), nothing runs and nothing is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

ENV = "WIKI_MEMORY_LOOP_LAG_FILE"
TICK = 0.01
"""Seconds the ticker sleeps between wake-ups (a stall shorter than this may go unseen)."""


class LagMeter:
    """Counts the lateness of the wake-ups of a ticker on the running loop: ``max_lag``
    and ``total_lag`` in seconds over ``ticks`` wake-ups, from ``started`` (loop time)."""

    def __init__(self, tick: float = TICK) -> None:
        self.tick = tick
        self.max_lag = 0.0
        self.total_lag = 0.0
        self.ticks = 0
        self.started = 0.0
        self.stopped = 0.0

    async def run(self) -> None:
        """Tick until cancelled."""
        loop = asyncio.get_running_loop()
        self.started = self.stopped = loop.time()
        while True:
            asked = loop.time() + self.tick
            await asyncio.sleep(self.tick)
            now = loop.time()
            lag = max(0.0, now - asked)
            self.ticks += 1
            self.total_lag += lag
            self.max_lag = max(self.max_lag, lag)
            self.stopped = now

    def report(self) -> dict[str, float | int]:
        """``{"max_lag_ms", "mean_lag_ms", "ticks", "seconds"}`` so far."""
        return {
            "max_lag_ms": round(self.max_lag * 1000, 3),
            "mean_lag_ms": round(self.total_lag * 1000 / max(self.ticks, 1), 3),
            "ticks": self.ticks,
            "seconds": round(self.stopped - self.started, 3),
        }


@contextlib.asynccontextmanager
async def watched(path: str | None = None) -> AsyncIterator[LagMeter | None]:
    """Run a :class:`LagMeter` on the running loop for the block when ``path`` (default:
    ``$WIKI_MEMORY_LOOP_LAG_FILE``) is set, and write its report there at the end (an
    ``OSError`` writing it is raised); yields the meter, or None when off."""
    target = os.environ.get(ENV) if path is None else path
    if not target:
        yield None
        return
    meter = LagMeter()
    task = asyncio.create_task(meter.run())
    try:
        yield meter
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        Path(target).write_text(json.dumps(meter.report()) + "\n", encoding="utf-8")
