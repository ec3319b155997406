"""The ``recent`` signal (page level): the most recently updated of the candidate pages,
a factor that halves every :data:`RECENT_HALF_LIFE_DAYS` before the newest candidate.
``why``: ``recent``, for pages of the newest day when the candidates span more."""

from __future__ import annotations

import functools
from typing import Any

from wiki_memory.index import signals
from wiki_memory.recall.filters import parse_time
from wiki_memory.recall.pool import Pool

NAME = "recent"
WEIGHT = 0.1
"""Its weight in the fusion (docs/ranking.md)."""
RECENT_HALF_LIFE_DAYS = 30.0
"""The ``recent`` signal halves for every this many days a page is older than the newest
candidate. ``why`` names it for pages of the newest day when the candidates span more."""


def collect(pool: Pool) -> None:
    """Recency of candidate pages and running sessions (a page by the end of the time
    it covers, a running session by its newest matching observation) into
    ``pool.recency``. Pages of the same day weigh the same, so recency only counts where
    dates differ."""
    paths = sorted({c.path for c in pool.cands.values()})
    need = [p for p in paths if p not in pool.rows and p not in pool.spool_ts]
    ends = signals.page_ends(pool.index, need) if need else {}
    when: dict[str, float] = {}
    for p in paths:
        raw: Any
        if p in pool.spool_ts:
            raw = pool.spool_ts[p]
        else:
            raw = pool.rows[p].get("end") if p in pool.rows else ends.get(p)
        t = end_time(raw)
        if t is not None:
            when[p] = t
    if not when:
        return
    newest = max(when.values())
    spread = newest - min(when.values()) > 86400 * RECENT_HALF_LIFE_DAYS
    for p, t in when.items():
        age_days = (newest - t) / 86400
        pool.recency[p] = 0.5 ** (age_days / RECENT_HALF_LIFE_DAYS)
        if spread and age_days <= 1:
            pool.recent_why.add(p)


@functools.lru_cache(maxsize=16_384, typed=True)
def end_time(raw: Any) -> float | None:
    """A page's end as stored (an ISO-8601 string, a day; a running session's newest
    observation time), or None, in UTC epoch seconds: None when it does not parse. The
    same strings come back recall after recall: kept (about 16,000, a few MB)."""
    try:
        return parse_time(raw, "updated")
    except ValueError:
        return None
