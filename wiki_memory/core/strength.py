"""A page's strength: how much its users used it, from the use record
(:mod:`wiki_memory.core.userecord`), decayed with a half-life per kind (docs/knowledge.md,
"Strength").

Each user counts once per page and day, whatever they did how often that day::

    user_day = READ    (expanded or read that day: memory_expand, page_read, a web view)
             + CITED   (a handoff of theirs linked it)
             + REPEAT  (they remembered an equal text again)
             ± VERDICT (their feedback that day: +helped, -not_helpful; one, the last)

    strength(page) = max(0, Σ over users and days  user_day · 0.5 ^ (age_days / half_life))

``age_days`` counts from the start of the row's UTC day to the record's clock;
``half_life`` is :data:`HALF_LIFE_DAYS` of the page's kind (else :data:`DEFAULT_HALF_LIFE`);
a pinned page does not decay. Rows of the server and of anonymous callers (user None)
never count, nor does ``recalled`` (the server's own reading: recall and the brief).
Strength is global (every user's use adds up) but no face shows whose use it is.
"""

from __future__ import annotations

import datetime as _dt
import functools
import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from wiki_memory.core.userecord import UseRecord

__all__ = [
    "CITED",
    "DEFAULT_HALF_LIFE",
    "HALF_LIFE_DAYS",
    "READ",
    "REPEAT",
    "VERDICT",
    "Strength",
    "user_day",
]

READ = 1.0
"""A user's read of the page on one day (any number of expands, reads and views)."""
CITED = 1.0
"""A user's handoff that links the page, on one day."""
REPEAT = 1.0
"""A user's remember of a text equal to the page's, on one day."""
VERDICT = 2.0
"""A user's feedback on one day: ``+`` helped, ``-`` not helpful."""
HALF_LIFE_DAYS: dict[str, float] = {"session": 30.0}
"""Half-life in days by page kind (frontmatter ``type``): session logs age fastest."""
DEFAULT_HALF_LIFE = 180.0
"""Half-life in days of every other kind (notes, decisions, pages)."""


def _n(row: Mapping[str, Any], key: str) -> int:
    v = row.get(key)
    return v if type(v) is int and v > 0 else 0


def user_day(row: Mapping[str, Any]) -> float:
    """What one row of the use record (one user, page and day) adds before decay: 0 for
    a row of no user."""
    if not row.get("user"):
        return 0.0
    value = READ if (_n(row, "expanded") or _n(row, "read")) else 0.0
    value += CITED if _n(row, "cited") else 0.0
    value += REPEAT if _n(row, "repeated") else 0.0
    value += VERDICT * ((_n(row, "helped") > 0) - (_n(row, "not_helpful") > 0))
    return value


@functools.lru_cache(maxsize=1024)
def _day_start(day: str) -> float:
    """The start of the UTC day ``YYYY-MM-DD``, epoch seconds (ValueError for another
    shape)."""
    d = _dt.date.fromisoformat(day)
    return _dt.datetime(d.year, d.month, d.day, tzinfo=_dt.UTC).timestamp()


class Strength:
    """The strength of pages, read from ``use`` (its clock is the present). The days
    before today are summed once per page and day and kept until the record says they
    changed (:attr:`UseRecord.version`); today's rows are read on each call. Thread-safe."""

    def __init__(self, use: UseRecord) -> None:
        self.use = use
        self._lock = threading.Lock()
        self._key: tuple[int, str] | None = None
        #: path -> [(start of the day, epoch seconds; summed user_day)], days before today
        self._past: dict[str, list[tuple[float, float]]] = {}

    def of(
        self,
        pages: Mapping[str, tuple[str, bool]] | Collection[str],
        decay: Callable[[list[str]], Mapping[str, tuple[str, bool]]] | None = None,
    ) -> dict[str, float]:
        """Strength of each page of ``pages`` with any use; pages with none are left out
        (their strength is 0). ``pages``: path -> (kind, pinned); or, with ``decay``,
        paths, and ``decay(paths) -> {path: (kind, pinned)}`` is asked only for the
        pages that have use (recall's candidates are mostly unused: no query for them)."""
        if not pages:
            return {}
        today, rows = self.use.today(pages)
        past = self._past_days(today)
        now = self.use.clock()
        start = _day_start(today)
        todays: dict[str, float] = {}
        for r in rows:
            todays[str(r["path"])] = todays.get(str(r["path"]), 0.0) + user_day(r)
        used = sorted(p for p in pages if p in past or p in todays)
        if not used:
            return {}
        if decay is not None:
            meta = decay(used)
        else:
            assert isinstance(pages, Mapping), "pages is a mapping when no decay is given"
            meta = pages
        out: dict[str, float] = {}
        for path in used:
            if path not in meta:
                continue
            kind, pinned = meta[path]
            days = past.get(path, [])
            if path in todays:
                days = [*days, (start, todays[path])]
            half = HALF_LIFE_DAYS.get(kind, DEFAULT_HALF_LIFE)
            total = 0.0
            for t, v in days:
                age = max(0.0, now - t) / 86400
                total += v if pinned else v * 0.5 ** (age / half)
            if total > 0:
                out[path] = total
        return out

    def _past_days(self, today: str) -> dict[str, list[tuple[float, float]]]:
        """Every day before ``today``, summed per page and day (cached per version)."""
        with self._lock:
            key = (self.use.version, today)
            if key != self._key:
                self._past = _summed(r for r in self.use.every_row() if r.get("day") != today)
                self._key = key
            return self._past


def _summed(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    per: dict[tuple[str, str], float] = {}
    for r in rows:
        day, path = r.get("day"), r.get("path")
        if isinstance(day, str) and isinstance(path, str):
            per[(path, day)] = per.get((path, day), 0.0) + user_day(r)
    out: dict[str, list[tuple[float, float]]] = {}
    for (path, day), v in per.items():
        if v:
            try:
                out.setdefault(path, []).append((_day_start(day), v))
            except ValueError:
                continue
    return out
