"""Which ``Host`` header values reach this server: one rule for ``/v1``, ``/mcp`` and the
web view (docs/team-server.md, "Allowed hosts").

A request whose ``Host`` names none of them is answered 421 before anything else runs,
so a page in a browser that a hostile DNS name points at this server (DNS rebinding)
cannot read or write through it. The names allowed:

- always the loopback names (``127.0.0.1``, ``localhost``, ``[::1]``);
- for a non-loopback bind, the bind address itself (unless a wildcard) and this
  machine's own names and addresses (host name, FQDN, ``<name>.local``, the addresses
  its name resolves to and the ones it sends from), so a LAN bind works out of the box;
- whatever the ``allowed_hosts`` setting adds (comma-separated ``name`` or
  ``name:port``; ``mcp_allowed_hosts`` is read as an alias); ``*`` allows every Host.

Names compare case-insensitively; an entry without a port allows every port.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wiki_memory.config import Settings

__all__ = ["AllowedHosts", "allowed_hosts", "host_names", "is_loopback"]


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``[::1]`` brackets allowed)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def primary_addresses() -> list[str]:
    """The addresses this machine uses for outgoing traffic (no packet is sent)."""
    found = []
    for family, probe in ((socket.AF_INET, "192.0.2.1"), (socket.AF_INET6, "2001:db8::1")):
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as s:
                s.connect((probe, 9))
                found.append(str(s.getsockname()[0]))
        except OSError:
            continue
    return found


def host_names(settings: Settings) -> list[str]:
    """Host names (without ports; IPv6 in brackets) that reach this server by default."""
    names = ["127.0.0.1", "localhost", "[::1]"]
    bind = settings.host.strip()
    if not is_loopback(bind):
        if bind not in ("0.0.0.0", "::", ""):
            names.append(f"[{bind}]" if ":" in bind else bind)
        try:
            hostname = socket.gethostname()
            candidates = {hostname, socket.getfqdn(), f"{hostname.split('.')[0]}.local"}
            for info in socket.getaddrinfo(hostname, None):
                candidates.add(str(info[4][0]))
        except OSError:
            candidates = set()
        for ip in primary_addresses():
            candidates.add(ip)
        for c in sorted(candidates):
            if c:
                names.append(f"[{c}]" if ":" in c and not c.startswith("[") else c)
    out: list[str] = []
    for n in names:
        if n.lower() not in out:
            out.append(n.lower())
    return out


def _extra(settings: Settings) -> list[str]:
    raw = ",".join([str(getattr(settings, "allowed_hosts", "")), str(settings.mcp_allowed_hosts)])
    return [h.strip().lower() for h in raw.split(",") if h.strip()]


@dataclass(frozen=True)
class AllowedHosts:
    """The allowed ``Host`` values: ``names`` (any port), ``with_port`` (``name:port``
    exactly); ``any_host`` turns the check off (``*``)."""

    names: frozenset[str]
    with_port: frozenset[str]
    any_host: bool = False

    def allows(self, host: str) -> bool:
        """True when the ``Host`` header value ``host`` (``name``, ``name:port``,
        ``[v6]:port``) is allowed. An empty or missing Host is refused like an unknown
        one, on every face (with ``*`` every Host, none included, is allowed)."""
        if self.any_host:
            return True
        h = host.strip().lower()
        if not h:
            return False
        if h in self.with_port or h in self.names:
            return True
        name, sep, port = h.rpartition(":")
        if sep and port.isdigit() and not h.endswith("]"):
            return name in self.names
        return False

    def entries(self) -> list[str]:
        """Every entry, ``name`` ones first (for the MCP SDK's own check and messages)."""
        return sorted(self.names) + sorted(self.with_port)


def allowed_hosts(settings: Settings) -> AllowedHosts:
    """The :class:`AllowedHosts` of a server with ``settings`` (see the module doc)."""
    extra = _extra(settings)
    if "*" in extra:
        return AllowedHosts(frozenset(), frozenset(), any_host=True)
    names = set(host_names(settings))
    ported = set()
    for e in extra:
        tail = e.rsplit(":", 1)[-1]
        if ":" in e and tail.isdigit() and not e.endswith("]"):
            ported.add(e)
        else:
            names.add(e)
    return AllowedHosts(frozenset(names), frozenset(ported))
