"""The door against slow and half-open clients (docs/team-server.md, "Slow and half-open
clients").

uvicorn (0.54) arms no timer before a connection's first request and has no cap per
client address; its ``limit_concurrency`` counts half-open sockets too and answers the
legitimate requests with 503. :func:`protocol_class` returns uvicorn's h11 protocol with
these additions, all decided when a connection is accepted, data arrives or a timer
fires:

- **Header timeout.** A connection that has not sent a complete request head within
  ``header_timeout_seconds`` of being accepted (or of its previous response ending) is
  closed. A request whose head arrived is never cut by this timer.
- **Per-address cap.** At most ``max_connections_per_address`` connections per client
  address that are between requests (half-open or idle keep-alive) or slow (below).
  A new connection over the cap evicts that address's oldest connection between
  requests, else its slowest body; connections whose requests are being answered are
  not counted, so the newcomer is never refused for them.
- **Total cap, shed near the file-descriptor limit.** At most :attr:`Guard.total_cap`
  connections in all: ``max_connections`` when set, never more than the soft
  ``RLIMIT_NOFILE`` minus a reserve of a quarter of it (at least 64) for the index, the
  git objects and the logs, so ``accept`` never meets ``EMFILE``. Over the cap, the
  oldest between-requests connection of the address holding the most is evicted, else
  the slowest body anywhere, else the new one is refused. asyncio accepts as many sockets in one go as the backlog it
  was given before the first of them is admitted, so that number is kept to half the
  reserve; the kernel's own queue of finished handshakes is then raised to
  :data:`KERNEL_BACKLOG` (:class:`GuardedServer`) so a flood of connects does not crowd
  a legitimate client's out of it.

- **Slow bodies.** A request whose head arrived but whose body arrives below
  ``min_body_bytes_per_second`` (averaged since the head, judged from
  ``body_grace_seconds`` on) or is not complete within ``body_timeout_seconds`` is
  closed. Until then it may be evicted over either cap like a waiting connection, once it
  is slow (below the rate for at least :data:`SLOW_AFTER` seconds), slowest first: the
  per-address cap counts only the connections that are waiting or slow, so a client whose
  requests are being answered gets through on a busy address.
- **Slow readers.** The transport's write buffer is kept small (``write_buffer_bytes``),
  so uvicorn's flow control holds a response's next chunk back until the client reads,
  and a connection whose reader took less than that much of what waits for it in
  ``write_timeout_seconds`` is closed (the reply's bytes are freed with it).

A newly accepted connection is the one whose head is expected now; evicting the oldest
waiting one instead of the newcomer is what keeps a legitimate client served while an
attacker holds the same address's slots.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import resource
import socket
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("wiki_memory.server")

__all__ = [
    "Guard",
    "GuardedServer",
    "protocol_class",
    "fd_soft_limit",
    "return_big_blocks",
    "small_reads",
    "KERNEL_BACKLOG",
]

#: the kernel's accept queue asked for (``listen(2)``; Linux caps it at somaxconn)
KERNEL_BACKLOG = 4096
#: seconds below the minimum rate after which a body counts as slow for eviction (a
#: legitimate body follows its head within milliseconds)
SLOW_AFTER = 0.5
#: seconds between two looks at a body in progress after its grace
CHECK_EVERY = 1.0
#: seconds a listing of eviction candidates over the total cap is reused, and the least
#: between two listings
VICTIMS_TTL = 0.2
VICTIMS_MIN = 0.05


def _networks(spec: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    out = []
    for part in spec.split(","):
        if part.strip():
            out.append(ipaddress.ip_network(part.strip(), strict=False))
    return out


#: requests of at least this many bytes get memory of their own from the kernel
#: (glibc's ``M_MMAP_THRESHOLD``), given back the moment it is freed
MMAP_THRESHOLD = 128 * 1024
#: bytes a connection's transport asks the socket (or the TLS layer) for at once: below
#: :data:`MMAP_THRESHOLD`. asyncio asks for 256 KiB, and the buffer of each read is
#: allocated at that size before it is cut to what came: over the threshold that was a
#: ``mmap``, an ``mremap`` and a ``munmap`` (and a fresh page) for every request
READ_CHUNK = MMAP_THRESHOLD // 2


def small_reads(transport: Any) -> None:
    """Make ``transport`` (an asyncio socket transport, or the TLS transport over one)
    read at most :data:`READ_CHUNK` bytes at a time; a transport without asyncio's
    ``max_size`` (another event loop's) is left as it is."""
    readers: list[Any] = [transport, getattr(transport, "_ssl_protocol", None)]
    for reader in readers:
        size = getattr(reader, "max_size", None)
        if isinstance(size, int):
            reader.max_size = min(size, READ_CHUNK)


def return_big_blocks() -> bool:
    """Make glibc give large freed blocks back to the kernel at once (a fixed
    ``M_MMAP_THRESHOLD``); False where that is not glibc.

    glibc raises its threshold to the largest block freed so far (up to 32 MiB), after
    which page-sized replies come from heaps that keep their pages when freed: fifty
    replies of a 2 MiB page built at once left the server 150 MB larger for good."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if not name:  # pragma: no cover - every Linux has a libc
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # pragma: no cover - musl, macOS
        return False
    return bool(mallopt(-3, MMAP_THRESHOLD))  # -3: M_MMAP_THRESHOLD


def fd_soft_limit() -> int:
    """The process's soft ``RLIMIT_NOFILE`` (file descriptors); 1024 where unknown."""
    try:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):  # pragma: no cover - every POSIX has it
        return 1024
    return soft if soft > 0 else 1024


class Guard:
    """Book-keeping of open connections, shared by every protocol instance of one server.

    ``header_timeout`` is in seconds; ``per_address`` and ``total`` count connections
    (``total`` 0 = derived from the file-descriptor limit alone). ``body_grace``,
    ``min_body_rate`` (bytes a second) and ``body_timeout`` judge request bodies;
    ``write_timeout`` and ``write_buffer`` (bytes) bound what waits for a slow reader.
    Counters ``evicted``, ``refused``, ``timed_out``, ``slow_bodies`` and ``slow_readers``
    count connections closed for each reason."""

    def __init__(
        self,
        header_timeout: float,
        per_address: int,
        total: int = 0,
        trusted: str = "",
        *,
        body_grace: float = 5.0,
        min_body_rate: int = 4096,
        body_timeout: float = 60.0,
        write_timeout: float = 30.0,
        write_buffer: int = 64 * 1024,
    ) -> None:
        self.header_timeout = float(header_timeout)
        self.body_grace = max(0.0, float(body_grace))
        self.min_body_rate = max(0, int(min_body_rate))
        self.body_timeout = max(0.01, float(body_timeout))
        self.write_timeout = max(0.01, float(write_timeout))
        self.write_buffer = max(1024, int(write_buffer))
        #: trusted reverse proxies (``trusted_proxies``): one address carrying many
        #: clients, so the per-address cap does not apply to them (the total cap does)
        self.trusted = _networks(trusted)
        self.per_address = max(1, int(per_address))
        soft = fd_soft_limit()
        reserve = max(64, soft // 4)
        by_fds = max(16, soft - reserve)
        #: the listen backlog, which is also how many sockets asyncio accepts in one
        #: go before any of them reaches :meth:`admit`: kept within half the reserve
        self.backlog = max(16, min(2048, reserve // 2))
        self.total_cap = min(int(total), by_fds) if total and total > 0 else by_fds
        self.by_address: dict[str, OrderedDict[int, GuardedProtocol]] = {}
        #: connections per address with a request in progress (head in, answer not done)
        self.busy: dict[str, int] = {}
        self.count = 0
        self.evicted = 0
        self.refused = 0
        self.timed_out = 0
        self.slow_bodies = 0
        self.slow_readers = 0
        #: eviction candidates over the total cap, best last, and when they were listed:
        #: listing them walks every connection, so it is done at most every
        #: :data:`VICTIMS_MIN` seconds however fast connections arrive
        self._victims: list[GuardedProtocol] = []
        self._victims_at = -1e9

    def admit(self, proto: GuardedProtocol) -> bool:
        """Register a just-accepted connection; False when it must be refused. May evict
        an older waiting (or slow) connection to make room (see the module doc)."""
        addr = proto.address
        conns = self.by_address.get(addr) or OrderedDict()
        now = proto.loop.time()
        if not self.is_trusted(addr) and len(conns) >= self.per_address:
            victim = self._address_victim(conns, now)
            if victim is not None:
                self._evict(victim)
        if self.count >= self.total_cap and not self._evict_over_total(now):
            self.refused += 1
            return False
        conns[id(proto)] = proto
        self.by_address[addr] = conns
        self.count += 1
        return True

    def _address_victim(
        self, conns: OrderedDict[int, GuardedProtocol], now: float
    ) -> GuardedProtocol | None:
        """The connection of one address to close for a newcomer: None while fewer than
        the cap are waiting or slow; else its oldest waiting one, else its slowest body."""
        addr = next(iter(conns.values())).address
        if len(conns) - self.busy.get(addr, 0) >= self.per_address:
            # enough are between requests without looking at the bodies: the oldest
            # of them goes (a walk from the oldest that ends at the first one)
            first = next((c for c in conns.values() if c.waiting()), None)
            if first is not None:
                return first
        counted = 0
        oldest: GuardedProtocol | None = None
        slowest: GuardedProtocol | None = None
        slowest_rate = 0.0
        for c in conns.values():
            if c.waiting():
                counted += 1
                if oldest is None:
                    oldest = c
                continue
            rate = c.slow_rate(now)
            if rate is not None:
                counted += 1
                if slowest is None or rate < slowest_rate:
                    slowest, slowest_rate = c, rate
        if counted < self.per_address:
            return None
        return oldest or slowest

    def _evict_over_total(self, now: float) -> bool:
        """Close one connection to make room over the total cap: the oldest waiting one of
        the address holding the most, else the slowest body; False when none qualifies.
        The candidates are listed at most every :data:`VICTIMS_MIN` seconds and the
        listing is reused for up to :data:`VICTIMS_TTL` (each is checked again when used)."""
        if now - self._victims_at >= VICTIMS_TTL:
            self._list_victims(now)
        for again in (True, False):
            while self._victims:
                victim = self._victims.pop()
                if victim.registered() and (victim.waiting() or victim.slow_rate(now) is not None):
                    self._evict(victim)
                    return True
            if not again or now - self._victims_at < VICTIMS_MIN:
                return False
            self._list_victims(now)
        return False  # pragma: no cover - the loop returns

    def _list_victims(self, now: float) -> None:
        self._victims_at = now
        waiting: list[tuple[int, int, GuardedProtocol]] = []
        slow: list[tuple[float, GuardedProtocol]] = []
        for conns in self.by_address.values():
            for order, c in enumerate(conns.values()):
                if c.waiting():
                    waiting.append((len(conns), -order, c))
                else:
                    rate = c.slow_rate(now)
                    if rate is not None:
                        slow.append((rate, c))
        waiting.sort(key=lambda t: (t[0], t[1]))
        slow.sort(key=lambda t: t[0], reverse=True)
        # popped from the end: waiting ones first (busiest address, oldest), then bodies
        # (slowest first)
        self._victims = [c for _r, c in slow] + [c for _n, _o, c in waiting]

    def is_trusted(self, addr: str) -> bool:
        """True when ``addr`` is one of the trusted proxies."""
        try:
            ip = ipaddress.ip_address(addr)
        except ValueError:
            return False
        return any(ip in net for net in self.trusted)

    def set_busy(self, proto: GuardedProtocol, busy: bool) -> None:
        """Record that ``proto`` now has a request in progress (or not)."""
        if busy != proto.busy and proto.registered():
            proto.busy = busy
            self._busy_add(proto.address, 1 if busy else -1)

    def _busy_add(self, addr: str, n: int) -> None:
        left = self.busy.get(addr, 0) + n
        if left > 0:
            self.busy[addr] = left
        else:
            self.busy.pop(addr, None)

    def _evict(self, old: GuardedProtocol) -> None:
        self.forget(old)
        old.transport.abort()
        self.evicted += 1

    def forget(self, proto: GuardedProtocol) -> None:
        """Unregister a connection (closed, evicted or lost); idempotent."""
        conns = self.by_address.get(proto.address)
        if conns is not None and conns.pop(id(proto), None) is not None:
            self.count -= 1
            if proto.busy:
                proto.busy = False
                self._busy_add(proto.address, -1)
            if not conns:
                del self.by_address[proto.address]


class GuardedProtocol(H11Protocol):
    """uvicorn's h11 protocol under a :class:`Guard` (set by :func:`protocol_class`)."""

    guard: Guard
    address: str = ""
    #: counted in :attr:`Guard.busy` (a request in progress)
    busy = False
    _header_timer: asyncio.TimerHandle | None = None
    _body_timer: asyncio.TimerHandle | None = None
    _write_timer: asyncio.TimerHandle | None = None
    #: the write buffer's size when the write timer was armed
    _write_left = 0
    #: the request whose body is being received, when it began (loop time) and the
    #: bytes received for it since its head (the rate's window restarts whenever the
    #: server itself stopped reading: the app is behind, not the client)
    _body_cycle: object = None
    _body_began = 0.0
    _body_since = 0.0
    _body_bytes = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.address = self.client[0] if self.client else "?"
        if not self.guard.admit(self):
            transport.abort()
            return
        # a small write buffer: uvicorn's flow control then waits for the client to read
        # before the app sends more, and a reader that stops is seen (pause_writing)
        transport.set_write_buffer_limits(high=self.guard.write_buffer)
        small_reads(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._end_body()
        self._cancel_write_timer()
        self.guard.forget(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        tracked = self._body_cycle is not None and self._body_cycle is self.cycle
        super().data_received(data)
        if not self.waiting():
            self._disarm()
            self.guard.set_busy(self, True)
        if self._body_pending():
            if self._body_cycle is not self.cycle:
                self._begin_body()
            elif tracked:
                self._body_bytes += len(data)
        elif self._body_cycle is not None:
            self._end_body()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._end_body()
        # (a pipelined request may have begun already)
        self.guard.set_busy(self, not self.waiting())
        if not self.transport.is_closing():
            self._arm()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_timer is None:
            self._arm_write()

    def _arm_write(self) -> None:
        self._write_left = self.transport.get_write_buffer_size()
        self._write_timer = self.loop.call_later(self.guard.write_timeout, self._write_timeout)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._cancel_write_timer()

    def waiting(self) -> bool:
        """True between requests: no request head received, or the last response is done."""
        return self.cycle is None or self.cycle.response_complete

    def registered(self) -> bool:
        """True while the guard counts this connection."""
        conns = self.guard.by_address.get(self.address)
        return conns is not None and id(self) in conns

    def slow_rate(self, now: float) -> float | None:
        """The body's rate in bytes a second when it is slow: below the minimum for at
        least :data:`SLOW_AFTER` seconds (or the grace, when shorter); else None."""
        if self._body_cycle is None or not self._body_pending():
            return None
        span = now - self._body_since
        if span < min(SLOW_AFTER, self.guard.body_grace) or span <= 0:
            return None
        rate = self._body_bytes / span
        return rate if rate < self.guard.min_body_rate else None

    def _body_pending(self) -> bool:
        cycle = self.cycle
        return cycle is not None and not cycle.response_complete and cycle.more_body

    def _begin_body(self) -> None:
        self._body_cycle = self.cycle
        self._body_began = self._body_since = self.loop.time()
        self._body_bytes = 0
        self._arm_body(self.guard.body_grace)

    def _end_body(self) -> None:
        self._body_cycle = None
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _arm_body(self, delay: float) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
        limit = self._body_began + self.guard.body_timeout - self.loop.time()
        self._body_timer = self.loop.call_later(max(0.0, min(delay, limit)), self._check_body)

    def _check_body(self) -> None:
        """The body's judge, first at the end of the grace, then every second."""
        self._body_timer = None
        if self._body_cycle is not self.cycle or not self._body_pending():
            self._body_cycle = None
            return
        if self.transport.is_closing():
            return
        now = self.loop.time()
        if now - self._body_began >= self.guard.body_timeout:
            self._cut()
            return
        if self.flow.read_paused:
            # the server stopped reading (the app has not taken what came): not the
            # client's slowness; judge again from when reading resumes
            self._body_since, self._body_bytes = now, 0
            self._arm_body(max(self.guard.body_grace, CHECK_EVERY))
            return
        span = now - self._body_since
        if span >= self.guard.body_grace and self._body_bytes < self.guard.min_body_rate * span:
            self._cut()
            return
        wait = self.guard.body_grace - span if span < self.guard.body_grace else CHECK_EVERY
        self._arm_body(max(CHECK_EVERY / 4, min(wait, CHECK_EVERY)))

    def _cut(self) -> None:
        self.guard.slow_bodies += 1
        self.guard.forget(self)
        self._end_body()
        self.transport.abort()

    def _write_timeout(self) -> None:
        """A reply waiting for its reader: kept while the reader took at least the
        write buffer's size since the last look, else the connection is closed."""
        self._write_timer = None
        if not self.flow.write_paused or self.transport.is_closing():
            return
        left = self.transport.get_write_buffer_size()
        if self._write_left - left >= self.guard.write_buffer:
            self._arm_write()
            return
        self.guard.slow_readers += 1
        self.guard.forget(self)
        self.transport.abort()

    def _cancel_write_timer(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(self.guard.header_timeout, self._timeout)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _timeout(self) -> None:
        self._header_timer = None
        if self.waiting() and not self.transport.is_closing():
            self.guard.timed_out += 1
            self.guard.forget(self)
            self.transport.abort()


def protocol_class(guard: Guard) -> type[Any]:
    """A :class:`GuardedProtocol` subclass bound to ``guard``, for ``uvicorn.Config(http=...)``."""
    return type("WikiMemoryHTTPProtocol", (GuardedProtocol,), {"guard": guard})


class GuardedServer(uvicorn.Server):
    """uvicorn's server, with the listening sockets' kernel queue raised to
    :data:`KERNEL_BACKLOG` once they listen (asyncio keeps the smaller ``backlog`` of the
    config as its accept batch; see the module doc)."""

    #: seconds a TLS handshake may take (asyncio's default is 60); set by the caller to
    #: the header timeout, since a connection reaches the protocol (and its header
    #: timer) only once its handshake is done
    tls_handshake_timeout: float | None = None
    #: called once the listening sockets are bound (``serve`` marks ``server.json``
    #: listening then: clients send nothing to the address before)
    on_listening: Callable[[], None] | None = None
    #: called (in a worker thread) as soon as shutdown begins, before uvicorn waits for
    #: the requests under way: ``serve`` kills the network steps of a sync there, so a
    #: sync asked for over HTTP and hung on a remote ends at once instead of holding the
    #: shutdown until its own deadline (docs/operations.md, "A remote that never answers")
    on_shutdown: Callable[[], None] | None = None

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.on_shutdown is not None:
            await asyncio.to_thread(self.on_shutdown)
        await super().shutdown(sockets)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        loop = asyncio.get_running_loop()
        limit = self.tls_handshake_timeout
        if limit and self.config.is_ssl:
            plain = loop.create_server

            async def create_server(*args: Any, **kwargs: Any) -> Any:
                if kwargs.get("ssl") is not None:
                    kwargs.setdefault("ssl_handshake_timeout", limit)
                return await plain(*args, **kwargs)

            loop.create_server = create_server  # type: ignore[method-assign]
            try:
                await super().startup(sockets)
            finally:
                del loop.create_server
        else:
            await super().startup(sockets)
        for srv in getattr(self, "servers", []):
            for ts in srv.sockets:
                try:
                    dup = socket.socket(fileno=ts.fileno())
                except OSError:  # pragma: no cover - a socket asyncio holds is valid
                    continue
                try:
                    dup.listen(KERNEL_BACKLOG)
                finally:
                    dup.detach()
        if self.on_listening is not None and getattr(self, "servers", []) and not self.should_exit:
            self.on_listening()
