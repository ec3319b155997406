"""The ``strength`` signal (page level): pages their users used (read, fed back as
helpful, cited by a handoff, remembered again), by the strength the core computes from
the use record (:mod:`wiki_memory.core.strength`), as a factor in [0, 1) that saturates:
``strength / (strength + SATURATION)``. A page with no use has factor 0 and gains
nothing, so with an empty use record recall ranks exactly as without the signal.
``why``: ``strength``, for pages of strength at least :data:`WHY_MIN`.

Only a live ranking reads it (an ``as_of`` ranking ranks the past, the use is now's)."""

from __future__ import annotations

from wiki_memory.index import signals
from wiki_memory.recall.pool import Pool

NAME = "strength"
WEIGHT = 0.5
"""Its weight in the fusion (docs/ranking.md): the factor times WEIGHT / (k + 1), so a
strong page gains at most what a rank-0 page of a signal of weight 0.5 gains."""
SATURATION = 4.0
"""The strength at which the factor is one half (two users' ``helped`` on one day)."""
WHY_MIN = 1.0
"""``why`` names ``strength`` from this strength on (one user's read of today)."""


def collect(pool: Pool) -> None:
    """The strength factor of every candidate page into ``pool.strength``; pages of
    strength at least :data:`WHY_MIN` into ``pool.strength_why``."""
    strength = pool.sources.strength
    if strength is None or not pool.live:
        return
    paths = {c.path for c in pool.cands.values() if c.hit is not None}
    if not paths:
        return
    got = strength(paths, lambda used: signals.page_decay(pool.index, used))
    for p, s in got.items():
        if s > 0:
            pool.strength[p] = s / (s + SATURATION)
            if s >= WHY_MIN:
                pool.strength_why.add(p)
