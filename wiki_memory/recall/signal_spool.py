"""The ``spool`` signal (section level): uncompiled observations of running sessions
(bm25, OR), and their AND list counted as ``all-words``. A running session is a page in
the making: its observations share the page-level signals ``page`` (the session's best
observations) and ``recent``. ``why``: ``spool``."""

from __future__ import annotations

from collections import defaultdict

from wiki_memory.recall.candidate import Cand, decayed
from wiki_memory.recall.pool import Pool
from wiki_memory.recall.signal_allwords import NAME as ALL_WORDS

NAME = "spool"
WEIGHT = 1.0
"""Its weight in the fusion (docs/ranking.md)."""


def collect(pool: Pool, limit: int, depth: int, ratio: float) -> None:
    """Rank the first ``limit`` matching observations the caller may see (sessions only:
    none when tags are asked for or the kinds leave sessions out), then rank the running
    sessions by their best observations (``depth``, ``ratio``: as the ``page`` signal)."""
    f = pool.f
    if f.tags or (f.kinds is not None and "session" not in f.kinds):
        return
    sources = pool.sources
    for name, match in (
        (NAME, pool.q_plain.any_match),
        (ALL_WORDS, pool.q_plain.all_match),
    ):
        if not match:
            continue
        hits = sources.index.search_spool(match, project=f.project, limit=limit)
        rank = 0
        for sh in hits:
            if not f.spool_ok(sh.ts):
                continue
            if f.who is not None and not sources.session_visible(sh.session_key, f.who):
                continue  # a running session whose page the caller may not see
            key = ("spool", sh.obs_id)
            c = pool.cands.get(key)
            if c is None:
                c = pool.cands[key] = Cand(key, f"spool:{sh.session_key}", spool=sh)
            c.signals.setdefault(name, rank)
            rank += 1
    per: dict[str, list[float]] = defaultdict(list)
    for c in pool.cands.values():
        if c.spool is not None and NAME in c.signals:
            per[c.path].append(c.spool.score)
            pool.spool_ts[c.path] = max(pool.spool_ts.get(c.path, ""), c.spool.ts or "")
    score = {p: decayed(v, depth, ratio) for p, v in per.items()}
    pool.spool_rank = {p: i for i, p in enumerate(sorted(score, key=lambda p: (-score[p], p)))}
