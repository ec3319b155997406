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
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any

from wiki_memory.errors import BadRequest
from wiki_memory.index.signals import Scope

__all__ = ["FilterError", "Filters", "parse_time", "str_list"]

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


def str_list(value: Any, field: str) -> tuple[str, ...] | None:
    """A string or a list of strings as a tuple (None stays None); anything else (a
    number, a JSON object, a list holding a non-string) raises :class:`FilterError`
    naming ``field``."""
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    # a list or tuple only: a JSON object is iterable too (its keys), but not a list
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise FilterError(field, "expected a string or a list of strings")
    return tuple(v for v in value)


@dataclass(frozen=True)
class Filters(Scope):
    """What a recall may return: its SQL :class:`~wiki_memory.index.signals.Scope`
    (``project``; ``kinds``: page kinds, ``session``, ``note``, ``handoff``, ...; None =
    all; ``tags``: every one must be on the page; ``since``/``until``: UTC epoch seconds
    bounding the time a page covers (overlap); ``exclude_dirs``: folders left out;
    ``who``: the caller, the pages :mod:`wiki_memory.identity` says it may see; None: the
    server itself), and ``as_of``: UTC epoch seconds: search the wiki as it was committed
    then (git), which picks the index searched, not rows. Built from a face's raw values,
    checked and parsed, by :meth:`wiki_memory.recall.query.RecallQuery.filters`."""

    as_of: float | None = None

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
