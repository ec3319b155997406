"""The ``when`` signal (section level): candidates whose time lies in a window the query
names ("last week", "in May": :mod:`wiki_memory.recall.when`), ranked by their own text
(``text``, then ``all-words``) rank. ``why``: ``when``."""

from __future__ import annotations

from datetime import date

from wiki_memory.index import dates
from wiki_memory.recall.candidate import Cand, day, order_key, span
from wiki_memory.recall.pool import Pool
from wiki_memory.recall.when import Window, covered, overlaps

NAME = "when"
WEIGHT = 1.0
"""Its weight in the fusion (docs/ranking.md)."""


def collect(pool: Pool, wins: list[Window]) -> None:
    """Rank the candidates inside one of ``wins`` (none when the query names no time)."""
    if not wins:
        return
    inside = [c for c in pool.cands.values() if is_inside(c, wins)]
    big = 1 << 30
    inside.sort(
        key=lambda c: (
            c.signals.get("text", big),
            c.signals.get("all-words", big),
            order_key(c)[1:],
        )
    )
    for rank, c in enumerate(inside):
        c.signals[NAME] = rank


def is_inside(c: Cand, wins: list[Window]) -> bool:
    """``c`` happened inside one of ``wins``, or is a timeline entry whose relative
    phrases ("last night") name a day inside one."""
    d = day(c)
    if covered(span(c), wins):
        return True
    if c.hit is None or not d or not dates.is_timeline_entry(c.hit.text):
        return False
    return overlaps(dates.referred_ranges(c.hit.text, date.fromisoformat(d)), wins)
