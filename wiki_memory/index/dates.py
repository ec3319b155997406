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

Seasons are the meteorological ones of the northern hemisphere (spring March-May,
summer June-August, autumn ("fall") September-November, winter December-February), the
convention of the UK Met Office and NOAA.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any

__all__ = ["page_day", "section_days", "date_words", "season", "MONTHS", "SEASONS"]

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
            return dt.astimezone(UTC)
    return None


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
            if secs < last:
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
