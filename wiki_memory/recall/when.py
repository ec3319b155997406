"""Dates in a query: the time window a question asks about.

"What did Caroline do in June 2023?", "Where did we deploy last week?", "the bug from
May 8th": :func:`windows` finds such phrases and turns each into a range of days of the
caller's time zone, and so a range of instants (:attr:`Window.start` to
:attr:`Window.end`), which recall compares with each section's time range
(``sections.t0``/``t1``, :mod:`wiki_memory.index.dates`) to lift the sections inside (the
``when`` signal, docs/ranking.md). Nothing is filtered out: a window only boosts.

Understood (English, case-insensitive unless noted):

- ISO dates ``2023-05-08``; ``8 May 2023``, ``8th of May``, ``May 8``, ``May 8th, 2023``;
- ``May 2023``, ``June of 2023``, a month alone (``in June``); ``May``, ``March`` and
  ``August`` count as months only when capitalised mid-sentence, or next to a year, or
  after ``in``/``of``/``during``/``since``/``early``/``late``/``mid``/``last``/``this``;
- seasons (meteorological, northern hemisphere: :data:`wiki_memory.index.dates.SEASONS`)
  with an optional year or ``last``/``this``; ``fall`` only after ``the``/``last``/``this``/
  ``in``/``during`` or before a year;
- years ``1900``-``2099`` on their own;
- relative phrases, counted back from ``now`` (the reference time: the caller's, else the
  present): ``today``, ``yesterday``, ``the day before yesterday``, ``last night``,
  ``this``/``last`` ``week``/``weekend``/``month``/``year``, ``N days|weeks|months|years
  ago`` (``a``, ``one`` ... ``ten``, ``a few``, ``a couple of``), ``last``/``on`` a weekday.

A date without a year is the latest such date on or before ``now``. Days are the
caller's: ``now`` is an aware datetime in the caller's zone (a plain date: UTC), so for a
caller in Tokyo at 08:00 on 15 March "yesterday" is 14 March from 00:00+09:00, which is
15:00Z on 13 March.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, tzinfo
from typing import Any

from wiki_memory.index.dates import MONTHS, SEASONS, month_end, relative_ranges

__all__ = ["Window", "windows", "within", "overlaps", "covered"]


@dataclass(frozen=True)
class Window:
    """Days ``first`` to ``last`` (both included) of ``zone`` and the query text that
    named them; ``start``/``end``: the instants (epoch seconds) the days run from and
    up to (excluded)."""

    first: date
    last: date
    phrase: str
    zone: tzinfo = UTC
    start: float = field(init=False, compare=False)
    end: float = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "start", _midnight(self.first, self.zone, float("-inf")))
        nxt = None if self.last == date.max else date.fromordinal(self.last.toordinal() + 1)
        end = _midnight(nxt, self.zone, float("inf")) if nxt else float("inf")
        object.__setattr__(self, "end", end)

    def holds(self, day: date) -> bool:
        """True when ``day`` lies inside the window."""
        return self.first <= day <= self.last

    def covers(self, t0: float, t1: float) -> bool:
        """True when the time range ``t0``-``t1`` (epoch seconds) shares an instant with
        the window."""
        return t0 < self.end and t1 >= self.start


def _midnight(d: date, zone: tzinfo, beyond: float) -> float:
    """The first instant of ``d`` in ``zone``; ``beyond`` past the calendar's ends."""
    try:
        return datetime(d.year, d.month, d.day, tzinfo=zone).timestamp()
    except (ValueError, OverflowError):
        return beyond


_MONTH_RE = "|".join(MONTHS) + "|" + "|".join(m[:3] for m in MONTHS if len(m) > 3) + "|sept"
_MONTH_NUM = {m: i + 1 for i, m in enumerate(MONTHS)} | {m[:3]: i + 1 for i, m in enumerate(MONTHS)}
_MONTH_NUM["sept"] = 9
_AMBIGUOUS = {"may", "march", "august", "mar", "aug"}
_MONTH_CUES = {"in", "of", "during", "since", "early", "late", "mid", "last", "this", "until"}
_ORD = r"(?:st|nd|rd|th)?"

_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_DAY_MONTH = re.compile(
    rf"\b(\d{{1,2}}){_ORD}\s+(?:of\s+)?({_MONTH_RE})\.?\b(?:,?\s+(\d{{4}})\b)?", re.I
)
_MONTH_DAY = re.compile(
    rf"\b({_MONTH_RE})\.?\s+(\d{{1,2}}){_ORD}\b(?!:)(?:,?\s+(\d{{4}})\b)?", re.I
)
_MONTH = re.compile(rf"\b({_MONTH_RE})\b(?:\s+(?:of\s+)?(\d{{4}})\b)?", re.I)
_SEASON = re.compile(
    r"\b(?:(last|this|next)\s+)?(spring|summer|autumn|fall|winter)\b(?:\s+(?:of\s+)?(\d{4})\b)?",
    re.I,
)
_YEAR = re.compile(r"\b(19\d\d|20\d\d)\b")


def _latest_year(month: int, day: int, now: date) -> int:
    """The year of the latest (month, day) on or before ``now``."""
    return now.year if (month, day) <= (now.month, now.day) else now.year - 1


def _safe_date(y: int, m: int, d: int) -> date | None:
    try:
        return date(y, m, d)
    except ValueError:
        return None


def _season_window(name: str, year: int | None, which: str | None, now: date) -> Window | None:
    months = SEASONS[name.lower()]
    first_m = months[0]
    # a season is named by the year it starts in (winter 2023 = Dec 2023 - Feb 2024)
    if year is None:
        year = now.year if (first_m, 1) <= (now.month, now.day) else now.year - 1
        start = date(year, first_m, 1)
        if which and which.lower() == "last" and start <= now <= _season_end(start, months):
            year -= 1  # "last summer", said in summer, is the one before
    start = date(year, first_m, 1)
    return Window(start, _season_end(start, months), "")


def _season_end(start: date, months: tuple[int, int, int]) -> date:
    last_m = months[-1]
    year = start.year + (last_m < months[0])
    return month_end(year, last_m)


QUERY_CHARS = 1000
"""Only the first this many characters of a query are read for dates (a question names
its dates early; reading a 1 MiB query would cost seconds for nothing)."""
MAX_WINDOWS = 12
"""At most this many windows per query."""


def windows(query: str, now: date | datetime) -> list[Window]:
    """The date windows named in ``query`` (its first :data:`QUERY_CHARS` characters, at
    most :data:`MAX_WINDOWS`), in the order found, relative to ``now`` (an aware datetime
    in the caller's zone, whose days the windows are; a plain date is a UTC day). Never
    raises: a phrase whose days fall outside the calendar (years 1-9999, "5000 years
    ago", "winter 9999") names no window. ``[]`` when the query names no time."""
    zone: tzinfo = UTC
    if isinstance(now, datetime):
        zone = now.tzinfo or UTC
        now = now.date()
    text = (query or "")[:QUERY_CHARS]
    taken: list[tuple[int, int]] = []
    out: list[Window] = []

    def span(start: int, end: int, phrase: str, first: date | None, last: date | None) -> None:
        if first is None or last is None or len(out) >= MAX_WINDOWS:
            return
        if any(start < b and end > a for a, b in taken):
            return
        taken.append((start, end))
        out.append(Window(first, last, phrase, zone))

    def add(
        m: re.Match[str], days: Callable[..., tuple[date | None, date | None]], *a: Any
    ) -> None:
        try:
            first, last = days(*a)
        except (ValueError, OverflowError):
            return  # outside the calendar
        span(m.start(), m.end(), m.group(0), first, last)

    for m in _ISO.finditer(text):
        add(m, _one_day, int(m[1]), int(m[2]), int(m[3]))
    for rx, day_i, mon_i in ((_DAY_MONTH, 1, 2), (_MONTH_DAY, 2, 1)):
        for m in rx.finditer(text):
            mon = _MONTH_NUM[m[mon_i].lower()]
            day = int(m[day_i])
            year = int(m[3]) if m[3] else _latest_year(mon, day, now)
            add(m, _one_day, year, mon, day)
    for m in _MONTH.finditer(text):
        word = m[1]
        if word.lower() in _AMBIGUOUS and not m[2]:
            before = text[: m.start()].split()
            cue = bool(before) and before[-1].lower().strip(",;") in _MONTH_CUES
            capital = word[0].isupper() and bool(before) and not before[-1].endswith((".", "?"))
            if not (cue or capital):
                continue
        mon = _MONTH_NUM[word.lower()]
        year = int(m[2]) if m[2] else (now.year if mon <= now.month else now.year - 1)
        add(m, _month_days, year, mon)
    for m in _SEASON.finditer(text):
        if m[2].lower() == "fall" and not (m[1] or m[3]):
            before = text[: m.start()].split()
            if not before or before[-1].lower() not in {"the", "in", "during", "this", "last"}:
                continue
        add(m, _season_days, m, now)
    for start, end, phrase, first, last in relative_ranges(text, now):
        span(start, end, phrase, first, last)
    for m in _YEAR.finditer(text):
        y = int(m[1])
        add(m, _year_days, y)
    return out


def _one_day(y: int, m: int, d: int) -> tuple[date | None, date | None]:
    day = _safe_date(y, m, d)
    return day, day


def _month_days(y: int, m: int) -> tuple[date | None, date | None]:
    return date(y, m, 1), month_end(y, m)


def _year_days(y: int) -> tuple[date | None, date | None]:
    return date(y, 1, 1), date(y, 12, 31)


def _season_days(m: re.Match[str], now: date) -> tuple[date | None, date | None]:
    w = _season_window(m[2], int(m[3]) if m[3] else None, m[1], now)
    return (w.first, w.last) if w is not None else (None, None)


def within(day: str | None, wins: list[Window]) -> bool:
    """True when the ISO day ``day`` (``YYYY-MM-DD``) lies in one of ``wins``."""
    if not day or not wins:
        return False
    try:
        d = date.fromisoformat(day[:10])
    except ValueError:
        return False
    return any(w.holds(d) for w in wins)


def overlaps(ranges: list[tuple[date, date]], wins: list[Window]) -> bool:
    """True when one of the day ranges ``ranges`` (first, last) shares a day with one of
    ``wins``."""
    return any(f <= w.last and w.first <= lst for f, lst in ranges for w in wins)


def covered(span: tuple[float, float] | None, wins: list[Window]) -> bool:
    """True when the time range ``span`` (epoch seconds, first and last instant) shares
    an instant with one of ``wins``."""
    return span is not None and any(w.covers(span[0], span[1]) for w in wins)
