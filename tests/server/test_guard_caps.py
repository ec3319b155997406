"""The guard's choices without a socket (wiki_memory/server/guard.py): which connection a
newcomer evicts over the per-address and the total cap, now that slow bodies count like
waiting connections and connections being answered do not count at all."""

from __future__ import annotations

from typing import Any

import pytest

from wiki_memory.server.guard import Guard

pytestmark = pytest.mark.fast


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def time(self) -> float:
        return self.now


class Transport:
    def __init__(self) -> None:
        self.aborted = False

    def abort(self) -> None:
        self.aborted = True


class Conn:
    """What the guard reads of a connection: its address, whether it waits between
    requests, its body's rate when slow, and its transport."""

    def __init__(
        self,
        guard: Guard,
        clock: Clock,
        address: str,
        state: str = "waiting",
        rate: float | None = None,
    ) -> None:
        self.guard, self.loop, self.address = guard, clock, address
        self.state, self.rate = state, rate
        self.transport = Transport()
        self.busy = False

    def become(self, state: str) -> None:
        self.state = state
        self.guard.set_busy(self, state != "waiting")  # type: ignore[arg-type]

    def waiting(self) -> bool:
        return self.state == "waiting"

    def slow_rate(self, now: float) -> float | None:
        return self.rate if self.state == "slow" else None

    def registered(self) -> bool:
        conns = self.guard.by_address.get(self.address)
        return conns is not None and id(self) in conns


def admit(guard: Guard, clock: Clock, address: str, **kw: Any) -> Conn:
    c = Conn(guard, clock, address, **kw)
    assert guard.admit(c)  # type: ignore[arg-type]
    c.become(c.state)
    return c


def test_busy_connections_do_not_count_against_the_address() -> None:
    g, clock = Guard(10, per_address=3, total=100), Clock()
    busy = [admit(g, clock, "10.0.0.1", state="busy") for _ in range(10)]
    newcomer = admit(g, clock, "10.0.0.1")
    assert not any(c.transport.aborted for c in busy) and g.evicted == 0
    assert newcomer.registered() and g.refused == 0


def test_over_the_address_cap_the_oldest_waiting_goes_then_the_slowest_body() -> None:
    g, clock = Guard(10, per_address=3, total=100), Clock()
    fair = admit(g, clock, "10.0.0.1", state="slow", rate=900.0)
    slowest = admit(g, clock, "10.0.0.1", state="slow", rate=0.2)
    waiting = admit(g, clock, "10.0.0.1")
    admit(g, clock, "10.0.0.1", state="busy")
    first = admit(g, clock, "10.0.0.1")  # three counted: the waiting one goes
    assert waiting.transport.aborted and not slowest.transport.aborted
    first.become("busy")  # its head arrived
    admit(g, clock, "10.0.0.1", state="slow", rate=1.0)  # two counted: nobody goes
    assert g.evicted == 1
    admit(g, clock, "10.0.0.1")  # three counted, none waiting: the slowest body goes
    assert slowest.transport.aborted and not fair.transport.aborted and g.evicted == 2


def test_over_the_total_cap_waiting_then_slow_bodies_go_and_busy_ones_refuse() -> None:
    g, clock = Guard(10, per_address=100, total=4), Clock()
    slow = [admit(g, clock, f"10.0.0.{i}", state="slow", rate=float(i)) for i in (3, 1)]
    busy = [admit(g, clock, "10.0.0.9", state="busy") for _ in range(2)]
    admit(g, clock, "10.0.0.5", state="busy")
    assert slow[1].transport.aborted and not slow[0].transport.aborted
    clock.now += 1.0  # the listing of candidates is reused for a moment
    admit(g, clock, "10.0.0.6", state="busy")
    assert slow[0].transport.aborted
    clock.now += 1.0
    refused = Conn(g, clock, "10.0.0.7")
    assert not g.admit(refused)  # type: ignore[arg-type]
    assert g.refused == 1 and not any(c.transport.aborted for c in busy)
