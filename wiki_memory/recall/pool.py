"""What one ranking shares between its signals: the sources it reads (:class:`Sources`,
handed over by the core) and the candidate table the signals fill (:class:`Pool`).

Each signal module (``signal_*.py``) reads the index through the read-only SQL of
:mod:`wiki_memory.index.signals` with the pool's ``scope`` (so the scope filters in SQL,
before ranking) and writes its ranks here: section-level ranks on the candidates
(:attr:`Cand.signals <wiki_memory.recall.candidate.Cand.signals>`), page-level ranks in
:attr:`Pool.page_ranks`. :mod:`wiki_memory.recall.fusion` fuses them."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

from wiki_memory.capture.spool import Spool
from wiki_memory.identity import Identity
from wiki_memory.index import signals, supersede
from wiki_memory.index.signals import Hit
from wiki_memory.index.store import Index
from wiki_memory.recall.candidate import Cand
from wiki_memory.recall.filters import Filters
from wiki_memory.recall.terms import Query
from wiki_memory.wiki.git import GitStore

StrengthOf = Callable[
    [Collection[str], Callable[[list[str]], Mapping[str, tuple[str, bool]]]], dict[str, float]
]
"""``strength(paths, decay)``: see :class:`Sources`."""


@dataclass(frozen=True)
class Sources:
    """What ranking reads, handed over by the core: the live ``index``, the ``spool``
    of running sessions, the ``git`` store and the folder of as-of indexes
    (``asof_dir``) for ``as_of`` queries, ``handle(anchor) -> id`` (a short id that
    expand resolves later), ``session_visible(session_key, who) -> bool`` (the
    scope rule for a running session's observations) and ``strength(paths, decay) ->
    {path: strength}`` (pages' use, :meth:`wiki_memory.core.strength.Strength.of`, which
    asks ``decay(paths) -> {path: (kind, pinned)}`` for the used ones only; None: the
    ``strength`` signal is off)."""

    index: Index
    spool: Spool
    git: GitStore
    asof_dir: Path
    handle: Callable[[str], str]
    session_visible: Callable[[str, Identity], bool]
    strength: StrengthOf | None = None


@dataclass(eq=False, repr=False)
class Pool:
    """The candidates of one ranking and what the signals found about them.

    ``sources``: what ranking reads; ``index``: the index searched (the live one, or an
    ``as_of`` index: then ``live`` is False and ``as_of_sha`` its commit); ``q`` the
    analyzed query (``q_plain`` with the tags column kept, for the spool's index);
    ``f`` the filters, whose ``scope`` every SQL signal joins; ``limit`` the items asked
    for; ``cols`` the bm25 weights of the ``stems`` and ``dates`` columns."""

    sources: Sources
    index: Index
    q: Query
    q_plain: Query
    f: Filters
    limit: int
    cols: dict[str, float]
    _: KW_ONLY
    live: bool
    as_of_sha: str | None = None
    #: the SQL scope every signal joins: ``f`` (its as_of picked the index, not rows)
    scope: Filters = field(init=False)
    #: the plain path: every query over all matches with the scope joined in SQL
    plain: bool = field(default=False, init=False)
    cands: dict[tuple[str, str], Cand] = field(default_factory=dict, init=False)
    #: page-level signals: name -> {path: rank}
    page_ranks: dict[str, dict[str, int]] = field(default_factory=dict, init=False)
    #: pages the query names -> how (``title`` or ``alias``)
    entity_how: dict[str, str] = field(default_factory=dict, init=False)
    #: page rows read (title, aliases, tags, end), by path
    rows: dict[str, dict[str, Any]] = field(default_factory=dict, init=False)
    #: running sessions (``spool:<key>``): rank by their best observations, newest ts
    spool_rank: dict[str, int] = field(default_factory=dict, init=False)
    spool_ts: dict[str, str] = field(default_factory=dict, init=False)
    #: path -> recency factor in (0, 1]; paths named ``recent`` in ``why``
    recency: dict[str, float] = field(default_factory=dict, init=False)
    recent_why: set[str] = field(default_factory=set, init=False)
    #: path -> strength factor in (0, 1) (signal_strength); paths named ``strength``
    strength: dict[str, float] = field(default_factory=dict, init=False)
    strength_why: set[str] = field(default_factory=set, init=False)
    #: the best ``fields`` hit of each page, best page first
    best_field: dict[str, Hit] = field(default_factory=dict, init=False)
    #: which pages replaced which (wiki_memory.index.supersede), read from this index
    #: (an ``as_of`` index gives the supersessions committed then)
    chains: supersede.Chains = field(default_factory=supersede.Chains, init=False)
    #: successors brought in for a superseded candidate whose successor was not one
    successors: set[tuple[str, str]] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        self.scope = self.f

    def cand(self, h: Hit) -> Cand:
        """The candidate of section ``h`` (added when new)."""
        key = (h.path, h.anchor)
        c = self.cands.get(key)
        if c is None:
            c = self.cands[key] = Cand(key, h.path, hit=h)
        return c

    def section_list(self, name: str, hits: list[Hit]) -> None:
        """Record the section-level signal ``name``: each hit's rank in ``hits``."""
        for rank, h in enumerate(hits):
            c = self.cand(h)
            c.signals.setdefault(name, rank)

    def represent(self, paths: list[str]) -> None:
        """Give each of ``paths`` with no candidate yet a section: its best ``fields``
        hit, else its first section with text."""
        have = {c.path for c in self.cands.values()}
        missing = [p for p in paths if p not in have]
        for p in missing:
            if p in self.best_field:
                self.cand(self.best_field[p])
        rest = [p for p in missing if p not in self.best_field]
        for _p, h in signals.first_sections(self.index, rest).items():
            self.cand(h)
