"""The signal set of recall's ranking, named once, and its weights, typed: the
``signal_*`` modules (:data:`SIGNALS`), each one's weight in the fusion (stated by its
module), the other numbers a benchmark may tune (docs/ranking.md explains how they were
chosen), and :func:`collect`, which runs every signal over one pool in the order their
inputs need."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace

from wiki_memory.index.schema import BM25_WEIGHTS
from wiki_memory.index.signals import Hit
from wiki_memory.recall import (
    signal_allwords,
    signal_dense,
    signal_entity,
    signal_fields,
    signal_link,
    signal_page,
    signal_recent,
    signal_spool,
    signal_strength,
    signal_text,
    signal_when,
)
from wiki_memory.recall.fusion import PAGE_CAP
from wiki_memory.recall.pool import Pool
from wiki_memory.recall.when import Window

TOPIC_SHARE = 0.5
"""A topic page's candidates' fused score is multiplied by this (docs/ranking.md, "Topic
pages"): the share of a page that links entries rather than holding them."""

SIGNALS = (
    signal_text,
    signal_allwords,
    signal_spool,
    signal_page,
    signal_fields,
    signal_entity,
    signal_link,
    signal_recent,
    signal_when,
    signal_dense,
    signal_strength,
)
"""The signal modules, in the order of :data:`WEIGHTS`."""


@dataclass(frozen=True)
class Weights:
    """The weights of one ranking. One field per signal (the fusion's weight: its name
    with ``-`` as ``_``), then ``stems`` and ``dates`` (the bm25 weights of those index
    columns; ``stems`` 0 also stops stemming the query), ``context`` (the share of a
    timeline entry's neighbours, 0 turns it off), ``cap`` (the per-page cap of the first
    slots, :data:`~wiki_memory.recall.fusion.PAGE_CAP`; 0 turns it off), ``page_depth`` and
    ``page_ratio`` (how many of a page's best sections the ``page`` signal sums, and how
    each weighs against the one before), ``topic`` (the factor of a topic page's
    candidates' fused score). A signal of weight 0 is not computed where that
    saves work (``when``, ``dense``)."""

    text: float = signal_text.WEIGHT
    all_words: float = signal_allwords.WEIGHT
    spool: float = signal_spool.WEIGHT
    page: float = signal_page.WEIGHT
    fields: float = signal_fields.WEIGHT
    entity: float = signal_entity.WEIGHT
    link: float = signal_link.WEIGHT
    recent: float = signal_recent.WEIGHT
    when: float = signal_when.WEIGHT
    dense: float = signal_dense.WEIGHT
    strength: float = signal_strength.WEIGHT
    stems: float = BM25_WEIGHTS["stems"]
    dates: float = BM25_WEIGHTS["dates"]
    context: float = 1.0
    cap: float = float(PAGE_CAP)
    page_depth: float = float(signal_page.PAGE_DEPTH)
    page_ratio: float = signal_page.PAGE_RATIO
    topic: float = TOPIC_SHARE

    @classmethod
    def tuned(cls, tuning: Mapping[str, float] | None) -> Weights:
        """The default weights with ``tuning`` (names in :data:`TUNABLE`) set. Raises
        ValueError naming an unknown name."""
        if not tuning:
            return cls()
        known = {f.name for f in fields(cls)}
        change: dict[str, float] = {}
        for name, value in tuning.items():
            attr = name.replace("-", "_") if name in WEIGHTS else name
            if attr not in known or (name not in WEIGHTS and name not in TUNABLE):
                raise ValueError(f"unknown tuning name: {name!r}")
            change[attr] = float(value)
        return replace(cls(), **change)

    def fusion(self) -> dict[str, float]:
        """Each signal's weight in the fusion, by signal name, and ``topic`` (the factor
        of a topic page's candidates)."""
        out = {m.NAME: getattr(self, m.NAME.replace("-", "_")) for m in SIGNALS}
        return {**out, "topic": self.topic}


WEIGHTS: dict[str, float] = {m.NAME: m.WEIGHT for m in SIGNALS}
"""Weight of each signal in the fusion, by name. Set once for every wiki (docs/ranking.md)."""

TUNABLE: tuple[str, ...] = (
    *WEIGHTS,
    "stems",
    "dates",
    "context",
    "cap",
    "page_depth",
    "page_ratio",
    "topic",
)
"""Names a benchmark may set through ``candidates(tuning=...)``: the fusion weights and
the other fields of :class:`Weights`."""


def collect(
    pool: Pool,
    w: Weights,
    text: list[Hit],
    field_hits: list[Hit],
    words: int,
    spool_rows: int,
    strongest: Callable[[int], list[str]],
    wins: list[Window],
) -> None:
    """Run every signal of :data:`SIGNALS` over ``pool`` with the weights ``w``: ``text``
    and ``field_hits`` are the two lists of
    :func:`wiki_memory.index.signals.search_sections_both`; ``words`` the sections the
    ``all-words`` signal ranks, ``spool_rows`` the observations of running sessions (read
    only from a live index); ``strongest(n)`` the strongest pages so far (for ``link``
    and ``dense``); ``wins`` the time windows the query names. A page found only by a
    page-level signal gets a section (:meth:`Pool.represent`) before the signals that
    rank sections of candidate pages. ``dense`` runs only with weight and vectors,
    ``strength`` only with weight. Raises what the index's reads raise."""
    signal_text.collect(pool, text, w.context)
    signal_allwords.collect(pool, words)
    signal_fields.collect(pool, field_hits)
    depth, ratio = int(w.page_depth), w.page_ratio
    signal_page.collect(pool, depth, ratio)
    signal_entity.collect(pool)
    if pool.live:
        signal_spool.collect(pool, spool_rows, depth, ratio)
    # pages found only by page-level signals get a section: their best fields hit,
    # else their first section with text
    pool.represent(list(pool.page_ranks[signal_entity.NAME]))
    signal_link.collect(pool, strongest)
    pool.represent(list(pool.page_ranks[signal_link.NAME]))
    if w.dense > 0 and pool.index.vectors_on:
        signal_dense.collect(pool, strongest)
    signal_recent.collect(pool)
    if w.strength > 0:
        signal_strength.collect(pool)
    signal_when.collect(pool, wins)
