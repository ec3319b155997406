"""Recall filters: project, kinds, tags, a date range and ``as_of``, checked and parsed.

Times are given as a JSON number (epoch seconds) or a string: ISO 8601
(``2024-05-01T10:30:00Z``, ``2024-05-01T10:30:00+02:00``; no offset means the caller's
zone), or a calendar period ``YYYY``, ``YYYY-MM`` or ``YYYY-MM-DD`` in the caller's zone
(:mod:`wiki_memory.zones`; none given: UTC); they become UTC epoch seconds. A
period means all of it: ``since: "2023"`` starts at the first instant of 2023,
``until: "2023-05"`` ends at the last of May. A string of digits other than a year is
epoch seconds too (a query string cannot carry a JSON number). Anything else raises
:class:`FilterError` (a ``ValueError``, a 400) naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any

from wiki_memory.errors import BadRequest
from wiki_memory.identity import Identity
from wiki_memory.index.signals import Scope

__all__ = ["FilterError", "Filters", "parse_time"]

_PERIOD = re.compile(r"^(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?$")
_EPOCH_TEXT = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")


class FilterError(BadRequest):
    """400: a filter value is not valid; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}", field=field)
        self.message = message


def parse_time(
    value: Any, field: str, end_of_day: bool = False, zone: tzinfo = UTC
) -> float | None:
    """A time (see the module) → UTC epoch seconds (None stays None).

    ``end_of_day``: a period (``YYYY``, ``YYYY-MM``, ``YYYY-MM-DD``) gives its last
    instant, else its first; ``zone``: the caller's, for periods and ISO times without an
    offset. Raises :class:`FilterError` for anything else.
    """
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise FilterError(field, "expected an ISO-8601 time or epoch seconds")
    if isinstance(value, int | float):
        return _epoch(float(value), field)
    if not isinstance(value, str):
        raise FilterError(field, "expected an ISO-8601 time or epoch seconds")
    text = value.strip()
    bad = f"not an ISO-8601 time, YYYY, YYYY-MM, YYYY-MM-DD or epoch seconds: {value!r}"
    period = _PERIOD.match(text)
    if period:
        return _period(period, field, end_of_day, zone, value)
    if _EPOCH_TEXT.match(text):
        return _epoch(float(text), field)
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise FilterError(field, bad) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=zone)
    try:
        return _epoch(dt.timestamp(), field)
    except (ValueError, OverflowError):
        raise FilterError(field, f"outside the years 1-9999 (UTC): {value!r}") from None


def _period(m: re.Match[str], field: str, end: bool, zone: tzinfo, value: str) -> float:
    """The first (or, with ``end``, the last) instant of the year, month or day ``m``
    names, in ``zone``."""
    y, mo, d = int(m[1]), int(m[2] or 1), int(m[3] or 1)
    try:
        first = date(y, mo, d)
        if not end:
            nxt = first
        elif m[3]:
            nxt = first + timedelta(days=1)
        elif m[2]:
            nxt = date(y + (mo == 12), mo % 12 + 1, 1)
        else:
            nxt = date(y + 1, 1, 1)
    except (ValueError, OverflowError):
        if end and y == 9999 and 1 <= mo <= 12:  # the calendar's last period has no next
            return _epoch(datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp(), field)
        raise FilterError(field, f"not a calendar date: {value!r}") from None
    try:
        t = datetime(nxt.year, nxt.month, nxt.day, tzinfo=zone).timestamp()
    except (ValueError, OverflowError):
        raise FilterError(field, f"outside the years 1-9999 (UTC): {value!r}") from None
    return t - 1e-6 if end else t


def _epoch(seconds: float, field: str) -> float:
    """``seconds`` when it is a UTC time of the years 1-9999; :class:`FilterError` else
    (NaN, infinities, 1e20)."""
    try:
        datetime.fromtimestamp(seconds, UTC)
    except (ValueError, OverflowError, OSError):
        raise FilterError(field, f"epoch seconds outside the years 1-9999: {seconds!r}") from None
    return seconds


def _str_list(value: Any, field: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    # a list or tuple only: a JSON object is iterable too (its keys), but not a list
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise FilterError(field, "expected a string or a list of strings")
    return tuple(v for v in value)


@dataclass(frozen=True)
class Filters:
    """What a recall may return. ``kinds``: page kinds (``session``, ``note``,
    ``handoff``, ...; None = all; an empty list is refused); ``tags``: every one must be on the page;
    ``since``/``until``: UTC epoch seconds bounding the time a page covers (overlap);
    ``as_of``: UTC epoch seconds: search the wiki as it was committed then (git);
    ``exclude_dirs``: folders left out; ``who``: the caller (the pages
    :mod:`wiki_memory.identity` says it may see; None: the server itself)."""

    project: str | None = None
    kinds: tuple[str, ...] | None = None
    tags: tuple[str, ...] = ()
    since: float | None = None
    until: float | None = None
    as_of: float | None = None
    exclude_dirs: tuple[str, ...] = ()
    who: Identity | None = None

    @classmethod
    def build(
        cls,
        *,
        project: str | None = None,
        kinds: Any = None,
        tags: Any = None,
        since: Any = None,
        until: Any = None,
        as_of: Any = None,
        exclude_dirs: Iterable[str] = (),
        who: Identity | None = None,
        zone: tzinfo = UTC,
    ) -> Filters:
        """Check and parse raw values (as they come from JSON or keyword arguments);
        ``zone``: the caller's (:func:`parse_time`)."""
        if project is not None and not isinstance(project, str):
            raise FilterError("project", "expected a string")
        k = _str_list(kinds, "kinds")
        if k == ():
            # an empty list would allow no kind, so match nothing: refused, never a silent []
            raise FilterError("kinds", "names no kind: name at least one, or leave it out for all")
        t = tuple(x.lstrip("#") for x in (_str_list(tags, "tags") or ()) if x.lstrip("#"))
        s = parse_time(since, "since", zone=zone)
        u = parse_time(until, "until", end_of_day=True, zone=zone)
        if s is not None and u is not None and s > u:
            raise FilterError("until", "is before since")
        a = parse_time(as_of, "as_of", end_of_day=True, zone=zone)
        return cls(project or None, k, t, s, u, a, tuple(exclude_dirs), who)

    def scope(self) -> Scope:
        """The SQL scope of these filters (``as_of`` picks the index, not rows)."""
        return Scope(
            project=self.project,
            kinds=self.kinds,
            tags=self.tags,
            since=self.since,
            until=self.until,
            exclude_dirs=self.exclude_dirs,
            who=self.who,
        )

    def spool_ok(self, ts: str | None) -> bool:
        """Whether a spooled observation with ISO time ``ts`` passes the date range.
        (Spooled observations are sessions: tag filters and ``as_of`` exclude them.)"""
        if self.tags or self.as_of is not None:
            return False
        if self.kinds is not None and "session" not in self.kinds:
            return False
        if self.since is None and self.until is None:
            return True
        try:
            t = parse_time(ts, "ts")
        except FilterError:
            return False
        if t is None:
            return False
        return (self.since is None or t >= self.since) and (self.until is None or t <= self.until)
