"""Dates as words: when a page or a timeline entry happened, in the forms people ask in.

A session page's date lives in its frontmatter (``started``) and its timeline entries
carry only a time of day (``**13:56:05**``), so a question naming "June 2023" finds
nothing in the text a person wrote ("yesterday we ..."). The index therefore derives,
for each section, the day it belongs to (:func:`section_days`) and stores it twice:
``sections.day`` (ISO ``YYYY-MM-DD``, for recall's date window) and the FTS ``dates``
column (:func:`date_words`: weekday, day, ordinal, month, year, ISO date and season,
e.g. ``Monday 8 8th May 2023 2023-05-08 spring``). Page files never change.

Which day: frontmatter ``started`` (sessions), else ``date``, else ``created``, else
``updated`` (a page without frontmatter has none). A timeline entry's day is that day,
moved on by one each time an entry's time of day is earlier than the one before it (a
session running past midnight). Days are UTC, as the frontmatter's times are.

When, as instants: :func:`section_spans` gives each section a time range (epoch
seconds, ``sections.t0``/``t1``): a timeline entry its own instant, any other section
the instant of the page's start or of the entry before it; a page dated by a day
without a time (``date: 2023-05-08``) covers that whole day, in UTC. Recall compares
these with the caller's days (:mod:`wiki_memory.recall.when`), not the day numbers, so
a session at 15:20Z on 14 March is on 15 March for a caller in Tokyo. An offset written
in the frontmatter (``started: 2026-03-15T00:20:00+09:00``) is kept in the page and
read exactly.

Seasons are the meteorological ones of the northern hemisphere (spring March-May,
summer June-August, autumn ("fall") September-November, winter December-February), the
convention of the UK Met Office and NOAA.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

__all__ = [
    "page_day",
    "section_days",
    "section_spans",
    "date_words",
    "referred_words",
    "referred_ranges",
    "is_timeline_entry",
    "section_date_words",
    "relative_ranges",
    "season",
    "month_end",
    "MONTHS",
    "SEASONS",
    "WEEKDAYS",
]

MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
"""English month names, January first."""

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
"""English weekday names, Monday first (``date.weekday()`` order)."""

SEASONS: dict[str, tuple[int, int, int]] = {
    "spring": (3, 4, 5),
    "summer": (6, 7, 8),
    "autumn": (9, 10, 11),
    "fall": (9, 10, 11),
    "winter": (12, 1, 2),
}
"""Season name → its months (meteorological, northern hemisphere)."""

_DAY_KEYS = ("started", "date", "created", "updated")
_TIME = re.compile(r"\A\s*\*\*(\d\d):(\d\d):(\d\d)\*\*")


def _as_datetime(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, str) and value.strip():
        text = value.strip()
        try:
            dt = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            return None
        return dt if dt.tzinfo else dt.replace(tzinfo=UTC)
    return None


def page_day(meta: Mapping[str, Any]) -> datetime | None:
    """When a page happened (UTC): frontmatter ``started``, ``date``, ``created`` or
    ``updated``, the first that parses (ISO-8601 text or a YAML date/time); None if none."""
    for key in _DAY_KEYS:
        dt = _as_datetime(meta.get(key))
        if dt is not None:
            try:
                return dt.astimezone(UTC)
            except (ValueError, OverflowError):
                continue  # 9999-12-31T23:00-05:00 is past the calendar's end in UTC
    return None


def _whole_day(meta: Mapping[str, Any]) -> bool:
    """True when the key :func:`page_day` reads names a day without a time."""
    for key in _DAY_KEYS:
        value = meta.get(key)
        if _as_datetime(value) is None:
            continue
        if isinstance(value, datetime):
            return False
        if isinstance(value, date):
            return True
        return bool(_DATE_ONLY.match(str(value).strip()))
    return False


_DATE_ONLY = re.compile(r"\A\d{4}-\d{2}-\d{2}\Z")
_DAY_SECONDS = 86400.0


@dataclass(frozen=True)
class Fold:
    """Where a walk through a page's sections stands (see :func:`section_spans`): the
    current ``day``, the time of day of the last timeline entry (``last``, seconds since
    midnight UTC) and the current time range ``cur`` (epoch seconds, first and last)."""

    day: date
    last: int
    cur: tuple[float, float]


def fold_start(meta: Mapping[str, Any]) -> Fold | None:
    """The walk's state before a page's first section; None for a page without a date.
    Raises ValueError or OverflowError for a date outside the calendar."""
    start = page_day(meta)
    if start is None:
        return None
    t = start.timestamp()
    cur = (t, t + _DAY_SECONDS - 1e-6) if _whole_day(meta) else (t, t)
    return Fold(start.date(), start.hour * 3600 + start.minute * 60 + start.second, cur)


def fold_step(fold: Fold, text: str) -> Fold:
    """The state after a section of text ``text``: its day is the result's ``day`` and its
    time range the result's ``cur`` (a timeline entry, text starting with
    ``**HH:MM:SS**``, moves them; another section keeps them). Raises ValueError or
    OverflowError past the calendar's end."""
    m = _TIME.match(text or "")
    if not m:
        return fold
    secs = int(m[1]) * 3600 + int(m[2]) * 60 + int(m[3])
    day = fold.day
    if secs < fold.last and day < date.max:
        day = date.fromordinal(day.toordinal() + 1)
    at = datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() + secs
    return Fold(day, secs, (at, at))


def section_spans(
    meta: Mapping[str, Any], texts: Sequence[str]
) -> list[tuple[float, float] | None]:
    """Each section's time range, first and last instant as epoch seconds (see the
    module): a timeline entry its instant (its day from :func:`section_days`), another
    section the instant before it; a page dated by a bare day covers the day. All None
    for a page without a date."""
    fold = fold_start(meta)
    if fold is None:
        return [None] * len(texts)
    out: list[tuple[float, float] | None] = []
    for text in texts:
        fold = fold_step(fold, text)
        out.append(fold.cur)
    return out


def section_days(start: datetime | None, texts: Sequence[str]) -> list[date | None]:
    """The day of each section of a page that began at ``start`` (UTC): a timeline entry
    (text starting with ``**HH:MM:SS**``) moves to the next day when its time is earlier
    than the previous entry's; other sections get the current day. All None without
    ``start``."""
    if start is None:
        return [None] * len(texts)
    day = start.date()
    last = start.hour * 3600 + start.minute * 60 + start.second
    out: list[date | None] = []
    for text in texts:
        m = _TIME.match(text or "")
        if m:
            secs = int(m[1]) * 3600 + int(m[2]) * 60 + int(m[3])
            if secs < last and day < date.max:
                day = date.fromordinal(day.toordinal() + 1)
            last = secs
        out.append(day)
    return out


def season(month: int) -> str:
    """The season of a month (1-12): ``spring``, ``summer``, ``autumn`` or ``winter``."""
    for name, months in SEASONS.items():
        if month in months:
            return name
    raise ValueError(f"month out of range: {month}")


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def date_words(d: date | None) -> str:
    """The ``dates`` column value for a day: ``Monday 8 8th May 2023 2023-05-08 spring``
    (autumn also as ``fall``); ``""`` for None."""
    if d is None:
        return ""
    s = season(d.month)
    words = [
        WEEKDAYS[d.weekday()].title(),
        str(d.day),
        _ordinal(d.day),
        MONTHS[d.month - 1].title(),
        str(d.year),
        d.isoformat(),
        s,
    ]
    if s == "autumn":
        words.append("fall")
    return " ".join(words)


#: number words in "a few days ago" and the like
NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "a few": 3,
    "few": 3,
    "a couple of": 2,
    "couple of": 2,
    "several": 4,
}
#: ``N days|weeks|months|years ago``
AGO = re.compile(
    r"\b(\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|(?:a\s+)?few|"
    r"(?:a\s+)?couple\s+of|several)\s+(day|week|month|year)s?\s+ago\b",
    re.I,
)
#: ``yesterday``, ``last night``, ``this``/``last`` ``week``/``weekend``/``month``/``year`` ...
RELATIVE = re.compile(
    r"\b(the\s+day\s+before\s+yesterday|yesterday|today|tonight|last\s+night|"
    r"(?:this|last|past|previous)\s+(?:week|weekend|month|year))\b",
    re.I,
)
#: ``last``/``on``/``this``/``past`` + a weekday
WEEKDAY_REF = re.compile(r"\b(last|on|this|past)\s+(" + "|".join(WEEKDAYS) + r")\b", re.I)


def month_end(year: int, month: int) -> date:
    """The last day of ``month`` (1-12) of ``year``."""
    nxt = date(year + (month == 12), month % 12 + 1, 1)
    return nxt - timedelta(days=1)


def shift_months(d: date, months: int) -> date:
    """The first day of the month ``months`` before ``d``'s month."""
    total = d.year * 12 + d.month - 1 - months
    return date(total // 12, total % 12 + 1, 1)


def relative_range(phrase: str, now: date) -> tuple[date, date]:
    """The days (first, last) a :data:`RELATIVE` phrase names, said on the day ``now``:
    ``yesterday`` and ``last night`` the day before, ``last week`` Monday to Sunday of
    the week before, ``last weekend`` its Saturday and Sunday, ``last month`` and ``last
    year`` the whole calendar month or year before."""
    p = " ".join(phrase.lower().split())
    if p == "today" or p == "tonight":
        return now, now
    if p in ("yesterday", "last night"):
        d = now - timedelta(days=1)
        return d, d
    if p == "the day before yesterday":
        d = now - timedelta(days=2)
        return d, d
    which, unit = p.split()
    monday = now - timedelta(days=now.weekday())
    if unit == "week":
        if which == "this":
            return monday, now
        return monday - timedelta(days=7), monday - timedelta(days=1)
    if unit == "weekend":
        sat = monday - timedelta(days=2) if which != "this" else monday + timedelta(days=5)
        if which == "this" and sat > now:
            sat -= timedelta(days=7)
        return sat, sat + timedelta(days=1)
    if unit == "month":
        if which == "this":
            return now.replace(day=1), now
        first = shift_months(now, 1)
        return first, month_end(first.year, first.month)
    if which == "this":
        return date(now.year, 1, 1), now
    return date(now.year - 1, 1, 1), date(now.year - 1, 12, 31)


def ago_range(count: str, unit: str, now: date) -> tuple[date, date]:
    """The days (first, last) of an :data:`AGO` phrase (``count`` ``unit`` + ``s ago``) said on
    ``now``, with slack for loose counting: a day either side of ``N days``, three days
    either side of ``N weeks``, the whole month or year of ``N months``/``years``."""
    c = " ".join(count.lower().split())
    n = int(c) if c.isdigit() else NUMBER_WORDS.get(c, 1)
    u = unit.lower()
    if u == "day":
        d = now - timedelta(days=n)
        return d - timedelta(days=1), d + timedelta(days=1)
    if u == "week":
        d = now - timedelta(days=7 * n)
        return d - timedelta(days=3), d + timedelta(days=3)
    if u == "month":
        first = shift_months(now, n)
        return first, month_end(first.year, first.month)
    return date(now.year - n, 1, 1), date(now.year - n, 12, 31)


def weekday_day(which: str, name: str, now: date) -> date:
    """The day a :data:`WEEKDAY_REF` phrase (``which`` ``name``) names, said on ``now``:
    the latest such weekday on or before ``now``, before ``now`` when ``which`` is
    ``last``."""
    back = (now.weekday() - WEEKDAYS.index(name.lower())) % 7
    if which.lower() == "last" and back == 0:
        back = 7
    return now - timedelta(days=back)


def _weekday_days(which: str, name: str, now: date) -> tuple[date, date]:
    d = weekday_day(which, name, now)
    return d, d


def relative_ranges(text: str, now: date) -> list[tuple[int, int, str, date, date]]:
    """Relative time phrases in ``text`` said on the day ``now``: ``(start, end, phrase,
    first, last)`` per phrase (character offsets in ``text``, the days it names), the
    ``ago`` phrases first, then :data:`RELATIVE`, then weekdays. Overlaps are the
    caller's to settle. One rule for queries (:mod:`wiki_memory.recall.when`) and for the
    days an entry refers to (:func:`referred_words`)."""
    out: list[tuple[int, int, str, date, date]] = []

    def add(m: re.Match[str], days: Callable[..., tuple[date, date]], *a: str) -> None:
        try:
            first, last = days(*a, now)
        except (ValueError, OverflowError):
            return  # "5000 years ago", "a million days ago": outside the calendar
        out.append((m.start(), m.end(), m[0], first, last))

    for m in AGO.finditer(text):
        add(m, ago_range, m[1], m[2])
    for m in RELATIVE.finditer(text):
        add(m, relative_range, m[1])
    for m in WEEKDAY_REF.finditer(text):
        add(m, _weekday_days, m[1], m[2])
    return out


REFERRED_DAYS = 3
"""A relative phrase naming at most this many days adds their words to an entry's
``dates`` column; a longer one ("last month", "last year") adds none: a month's or a
year's worth of words would match every question that names any day of it."""
REFERRED_MAX = 20
"""At most this many distinct ranges per entry (a long tool output may hold many)."""
REFERRED_SPAN = 7
"""The longest span (days) a relative phrase may name and still be :func:`referred_ranges`
of an entry ("last week" is; "last month" is not)."""


def is_timeline_entry(text: str) -> bool:
    """True when ``text`` is a timeline entry (it starts with ``**HH:MM:SS**``): its day
    is exact, so the days its relative phrases name can be worked out."""
    return bool(_TIME.match(text or ""))


def referred_ranges(text: str, day: date) -> list[tuple[date, date]]:
    """The days (first, last) that relative phrases in ``text``, written on ``day``, name
    ("we watched it last night", "two weeks ago"), in :func:`relative_ranges` order;
    phrases naming ``day`` itself (``today``, ``this week`` ...) or more than
    :data:`REFERRED_SPAN` days are left out."""
    out: list[tuple[date, date]] = []
    for _, _, _, first, last in relative_ranges(text, day):
        span = (last - first).days + 1
        if span <= REFERRED_SPAN and not first <= day <= last and (first, last) not in out:
            out.append((first, last))
            if len(out) >= REFERRED_MAX:
                break
    return out


def referred_words(text: str, day: date | None) -> str:
    """Words for the days ``text``, written on ``day``, refers to (:func:`referred_ranges`):
    the :func:`date_words` of each named day of a span of at most :data:`REFERRED_DAYS`.
    ``""`` without a day. A question that names the
    date ("on 1 May 2022") then matches the entry that said "yesterday" on 2 May."""
    if day is None or not text:
        return ""
    words: list[str] = []
    for first, last in referred_ranges(text, day):
        n = (last - first).days + 1
        if n <= REFERRED_DAYS:
            for i in range(n):
                w = date_words(date.fromordinal(first.toordinal() + i))
                if w not in words:
                    words.append(w)
    return " ".join(words)


def section_date_words(text: str, day: date | None) -> str:
    """The ``dates`` column of a section on ``day``: its :func:`date_words`, and for a
    timeline entry (``**HH:MM:SS**`` first, its day exact) the :func:`referred_words` of
    its text as well."""
    own = date_words(day)
    if day is None or not is_timeline_entry(text):
        return own
    referred = referred_words(text, day)
    return f"{own} {referred}" if referred else own
