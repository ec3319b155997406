"""The door against slow and half-open clients (docs/team-server.md, "Slow clients").

uvicorn (0.54) arms no timer before a connection's first request and has no cap per
client address; its ``limit_concurrency`` counts half-open sockets too and answers the
legitimate requests with 503. :func:`protocol_class` returns uvicorn's h11 protocol with
three additions, all decided when a connection is accepted or its timer fires:

- **Header timeout.** A connection that has not sent a complete request head within
  ``header_timeout_seconds`` of being accepted (or of its previous response ending) is
  closed. A request whose head arrived is never cut by this timer.
- **Per-address cap.** At most ``max_connections_per_address`` open connections per
  client address. A new connection over the cap evicts that address's oldest connection
  that is between requests (half-open or idle keep-alive); when every one of them is
  busy with a request, the new one is refused (reset at once).
- **Total cap, shed near the file-descriptor limit.** At most :attr:`Guard.total_cap`
  connections in all: ``max_connections`` when set, never more than the soft
  ``RLIMIT_NOFILE`` minus a reserve of a quarter of it (at least 64) for the index, the
  git objects and the logs, so ``accept`` never meets ``EMFILE``. Over the cap, the
  oldest between-requests connection of the address holding the most is evicted, else
  the new one is refused. asyncio accepts as many sockets in one go as the backlog it
  was given before the first of them is admitted, so that number is kept to half the
  reserve; the kernel's own queue of finished handshakes is then raised to
  :data:`KERNEL_BACKLOG` (:class:`GuardedServer`) so a flood of connects does not crowd
  a legitimate client's out of it.

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

__all__ = ["Guard", "GuardedServer", "protocol_class", "fd_soft_limit", "KERNEL_BACKLOG"]

#: the kernel's accept queue asked for (``listen(2)``; Linux caps it at somaxconn)
KERNEL_BACKLOG = 4096


def _networks(spec: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    out = []
    for part in spec.split(","):
        if part.strip():
            out.append(ipaddress.ip_network(part.strip(), strict=False))
    return out


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
    (``total`` 0 = derived from the file-descriptor limit alone). Counters ``evicted``,
    ``refused`` and ``timed_out`` count connections closed for each reason."""

    def __init__(
        self, header_timeout: float, per_address: int, total: int = 0, trusted: str = ""
    ) -> None:
        self.header_timeout = float(header_timeout)
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
        self.count = 0
        self.evicted = 0
        self.refused = 0
        self.timed_out = 0

    def admit(self, proto: GuardedProtocol) -> bool:
        """Register a just-accepted connection; False when it must be refused. May evict
        an older waiting connection to make room (see the module doc)."""
        addr = proto.address
        conns = self.by_address.get(addr) or OrderedDict()
        capped = not self.is_trusted(addr)
        if capped and len(conns) >= self.per_address and not self._evict_from(conns):
            self.refused += 1
            return False
        if self.count >= self.total_cap:
            fullest = sorted(self.by_address.values(), key=len, reverse=True)
            if not any(self._evict_from(c) for c in fullest if c):
                self.refused += 1
                return False
        conns[id(proto)] = proto
        self.by_address[addr] = conns
        self.count += 1
        return True

    def is_trusted(self, addr: str) -> bool:
        """True when ``addr`` is one of the trusted proxies."""
        try:
            ip = ipaddress.ip_address(addr)
        except ValueError:
            return False
        return any(ip in net for net in self.trusted)

    def _evict_from(self, conns: OrderedDict[int, GuardedProtocol]) -> bool:
        for old in list(conns.values()):
            if old.waiting():
                self.forget(old)
                old.transport.abort()
                self.evicted += 1
                return True
        return False

    def forget(self, proto: GuardedProtocol) -> None:
        """Unregister a connection (closed, evicted or lost); idempotent."""
        conns = self.by_address.get(proto.address)
        if conns is not None and conns.pop(id(proto), None) is not None:
            self.count -= 1
            if not conns:
                del self.by_address[proto.address]


class GuardedProtocol(H11Protocol):
    """uvicorn's h11 protocol under a :class:`Guard` (set by :func:`protocol_class`)."""

    guard: Guard
    address: str = ""
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.address = self.client[0] if self.client else "?"
        if not self.guard.admit(self):
            transport.abort()
            return
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.guard.forget(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if not self.waiting():
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def waiting(self) -> bool:
        """True between requests: no request head received, or the last response is done."""
        return self.cycle is None or self.cycle.response_complete

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
