"""The caller's time zone: one reading for HTTP, MCP and the CLI.

A caller names its zone as an IANA name (``Asia/Tokyo``, read with :mod:`zoneinfo`;
``tzdata`` supplies the database where the system has none), ``UTC``/``Z``, or a fixed
offset (``+09:00``, ``-0700``, ``+9``). The zone decides which instants a day is: the
``when`` window of a query ("yesterday") and a bare date in ``since``/``until`` are days
of the caller (docs/ranking.md, "Dates"). No zone is UTC.
"""

from __future__ import annotations

import re
from datetime import UTC, timedelta, timezone, tzinfo
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from wiki_memory.errors import BadRequest

__all__ = ["ZoneError", "zone", "zone_name"]

_OFFSET = re.compile(r"^(?:UTC|GMT)?([+-])(\d{1,2})(?::?(\d{2}))?$", re.I)
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_+\-]*(?:/[A-Za-z0-9_+\-]+){0,2}$")


class ZoneError(BadRequest):
    """400: ``tz`` is not a time zone."""

    def __init__(self, value: Any) -> None:
        super().__init__(
            f"tz: not an IANA time zone name or a UTC offset like +09:00: {value!r}",
            field="tz",
        )


@lru_cache(maxsize=256)
def _named(text: str) -> tzinfo:
    if text.upper() in ("UTC", "Z", "GMT", "ETC/UTC"):
        return UTC
    m = _OFFSET.match(text)
    if m:
        hours, minutes = int(m[2]), int(m[3] or 0)
        if hours > 23 or minutes > 59:
            raise ZoneError(text)
        delta = timedelta(hours=hours, minutes=minutes)
        return timezone(-delta if m[1] == "-" else delta)
    if not _NAME.match(text) or ".." in text:
        raise ZoneError(text)
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ZoneError(text) from None


def zone(value: Any, default: Any = None) -> tzinfo:
    """The zone ``value`` names (see the module); ``default`` (a stored per-user zone)
    when ``value`` is empty, else UTC. Raises :class:`ZoneError` (400, field ``tz``)."""
    for v in (value, default):
        if v is None or v == "":
            continue
        if isinstance(v, tzinfo):
            return v
        if not isinstance(v, str) or len(v) > 64:
            raise ZoneError(v)
        return _named(v.strip())
    return UTC


def zone_name(z: tzinfo) -> str:
    """A name for ``z`` that :func:`zone` reads back."""
    if isinstance(z, ZoneInfo):
        return z.key
    if z is UTC:
        return "UTC"
    off = z.utcoffset(None) or timedelta(0)
    sign = "-" if off < timedelta(0) else "+"
    minutes = abs(int(off.total_seconds())) // 60
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def local_zone_name() -> str:
    """This machine's zone, as a client sends it: the IANA name in ``TZ`` (a leading
    ``:`` dropped), else the one ``/etc/localtime`` links to (``.../zoneinfo/Asia/Tokyo``),
    else the current UTC offset (``+09:00``). Never raises."""
    import os
    import time

    env = (os.environ.get("TZ") or "").lstrip(":").strip()
    if env.upper() in ("UTC", "GMT", "UTC0", "GMT0"):
        return "UTC"
    if env and _NAME.match(env) and "/" in env:
        return env
    if not env:  # a POSIX rule in TZ ("JST-9") is read as its current offset
        try:
            link = os.path.realpath("/etc/localtime")
            if "zoneinfo/" in link:
                return link.rsplit("zoneinfo/", 1)[1]
        except OSError:
            pass
    off = -(time.altzone if time.localtime().tm_isdst > 0 else time.timezone)
    sign = "-" if off < 0 else "+"
    return f"{sign}{abs(off) // 3600:02d}:{abs(off) % 3600 // 60:02d}"
