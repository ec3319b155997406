"""The guard's judges of one connection, on uvicorn's own protocol with a stand-in
transport (wiki_memory/server/guard.py): a body below the minimum rate is cut at the end
of its grace, a body that arrived whole or fast enough is not, a body the server stopped
reading is not judged, and a reply whose reader took nothing in the write timeout is
dropped while one whose reader keeps taking it is not."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from uvicorn.server import ServerState

from wiki_memory.server.guard import Guard, protocol_class

pytestmark = pytest.mark.fast


async def app(scope: Any, receive: Any, send: Any) -> None:
    """Reads the whole body, then answers 200."""
    more = True
    while more:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            return
        more = msg.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


class Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.aborted = False
        self.buffered = 0
        self.proto: Any = None

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("10.0.0.1", 4321), "sockname": ("10.0.0.9", 80)}.get(name, default)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def write(self, data: Any) -> None:
        pass

    def is_closing(self) -> bool:
        return self.aborted

    def abort(self) -> None:
        if not self.aborted:
            self.aborted = True
            self.proto.connection_lost(None)

    close = abort

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop on a clock of its own that only :func:`settle` moves, so the
    guard's timers (``loop.time()``, ``call_later``) fire by the clock the test tells,
    however slow the machine is (a busy machine once let 30 ms of wall time pass between
    two steps meant to be 20 ms apart)."""
    lp = asyncio.new_event_loop()
    clock = [0.0]
    lp.time = lambda: clock[0]  # type: ignore[method-assign]
    lp.clock = clock  # type: ignore[attr-defined]
    yield lp
    lp.close()


async def busy_app(scope: Any, receive: Any, send: Any) -> None:
    """Takes no body for a while (as a route busy before it reads)."""
    await asyncio.sleep(10)


def connect(
    loop: asyncio.AbstractEventLoop, guard: Guard, asgi: Any = app
) -> tuple[Any, Transport]:
    config = uvicorn.Config(asgi, log_level="critical", lifespan="off")
    config.load()
    proto = protocol_class(guard)(
        config=config, server_state=ServerState(), app_state={}, _loop=loop
    )
    t = Transport()
    t.proto = proto
    proto.connection_made(t)
    return proto, t


def head(length: int) -> bytes:
    return f"PUT /x HTTP/1.1\r\nHost: a\r\nContent-Length: {length}\r\n\r\n".encode()


def settle(loop: asyncio.AbstractEventLoop, seconds: float) -> None:
    """Move the loop's own clock on by ``seconds`` in steps of 1 ms, running what falls
    due at each step, in order."""
    clock = loop.clock  # type: ignore[attr-defined]
    end = clock[0] + seconds
    while True:
        loop.run_until_complete(asyncio.sleep(0))
        if clock[0] >= end:
            break
        clock[0] = min(end, clock[0] + 0.001)
    loop.run_until_complete(asyncio.sleep(0))


def guard(**kw: Any) -> Guard:
    kw.setdefault("min_body_rate", 4096)
    return Guard(10, 128, body_grace=0.03, body_timeout=5, **kw)


def test_a_slow_body_is_cut_at_the_end_of_its_grace(loop: asyncio.AbstractEventLoop) -> None:
    g = guard()
    proto, t = connect(loop, g)
    proto.data_received(head(100_000))
    proto.data_received(b"x")
    settle(loop, 0.01)
    assert not t.aborted and proto.slow_rate(loop.time()) is None  # too soon to say
    settle(loop, 0.06)
    assert t.aborted and g.slow_bodies == 1 and g.count == 0


def test_a_whole_or_fast_body_is_not_cut(loop: asyncio.AbstractEventLoop) -> None:
    g = guard()
    proto, t = connect(loop, g)
    proto.data_received(head(10) + b"0123456789")
    settle(loop, 0.06)
    assert not t.aborted and g.slow_bodies == 0
    proto2, t2 = connect(loop, g)
    proto2.data_received(head(100_000))
    for _ in range(6):
        proto2.data_received(b"x" * 4096)  # ~4 KiB every 10 ms: well over 4 KiB/s
        settle(loop, 0.01)
    assert not t2.aborted and g.slow_bodies == 0


def test_a_body_the_server_stopped_reading_is_not_judged(
    loop: asyncio.AbstractEventLoop,
) -> None:
    g = guard(min_body_rate=10_000_000)  # 70 KiB in 30 ms would be too slow
    proto, t = connect(loop, g, busy_app)
    proto.data_received(head(1_000_000))
    proto.data_received(b"x" * 70_000)  # over uvicorn's 64 KiB: it stops reading
    assert proto.flow.read_paused
    settle(loop, 0.06)
    assert not t.aborted and g.slow_bodies == 0
    for task in asyncio.all_tasks(loop):
        task.cancel()
    settle(loop, 0)


def test_a_reader_that_takes_nothing_is_dropped(loop: asyncio.AbstractEventLoop) -> None:
    g = guard(write_timeout=0.03)
    proto, t = connect(loop, g)
    t.buffered = 1_000_000
    proto.pause_writing()
    settle(loop, 0.05)
    assert t.aborted and g.slow_readers == 1
    proto2, t2 = connect(loop, g)
    t2.buffered = 1_000_000
    proto2.pause_writing()
    for _ in range(4):  # 64 KiB taken every 20 ms
        settle(loop, 0.02)
        t2.buffered -= 64 * 1024
    assert not t2.aborted and g.slow_readers == 1
