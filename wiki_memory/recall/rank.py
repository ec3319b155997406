"""Recall ranking: which sections and running-session observations come back, in order.

Each candidate is a recall item ``{id, path, anchor, title, kind, snippet, why, score,
expand_tokens, updated}`` (see ``Memory.recall``, :mod:`wiki_memory.recall.items`);
packing under the budget happens after. docs/ranking.md explains the design and how the
weights were chosen.

Signals, each a ranked list in its own module (section lists rank sections; page lists
rank pages and every section of a page inherits its page's rank); each module states its
weight and the name ``why`` gives it, and reads the index through the read-only SQL of
:mod:`wiki_memory.index.signals` with the query's scope, so the scope filters in SQL
before ranking:

============  =======  ========================  ======================================
name          level    module                    what ranks first
============  =======  ========================  ======================================
text          section  ``signal_text``           bm25 of the query's words (OR) in the
                                                 section, plus its timeline neighbours'
all-words     section  ``signal_allwords``       sections matching every query word
spool         section  ``signal_spool``          running sessions' observations
dense         section  ``signal_dense``          nearest vectors (the ``vectors`` extra)
when          section  ``signal_when``           inside a time the query names
page          page     ``signal_page``           pages whose best sections match best
fields        page     ``signal_fields``         bm25 over title, aliases, tags, body
entity        page     ``signal_entity``         a page the query names
link          page     ``signal_link``           pages linked with the strongest pages
recent        page     ``signal_recent``         the most recently updated pages
strength      page     ``signal_strength``       pages their users used (the use record)
============  =======  ========================  ======================================

:mod:`wiki_memory.recall.fusion` fuses them by weighted reciprocal rank fusion (weights:
:class:`~wiki_memory.recall.weights.Weights`) and orders the reply (near-duplicates
grouped, :mod:`wiki_memory.recall.dedup`; breadth first; a per-page cap; a superseded
page after its successor). This module runs one ranking over a
:class:`~wiki_memory.recall.query.RecallQuery`: the pool of candidates, then every other
match as a tail (:mod:`wiki_memory.recall.matches`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime, tzinfo
from typing import Any

from wiki_memory import zones
from wiki_memory.identity import Identity
from wiki_memory.index import signals, vocab
from wiki_memory.index import tail as tail_rows
from wiki_memory.index.keptchains import kept_chains
from wiki_memory.index.store import Index
from wiki_memory.recall import asof, fusion, items, weights
from wiki_memory.recall.candidate import Cand
from wiki_memory.recall.dedup import DEDUP_SCAN, TEXT_CACHE, clear_caches, near_duplicate
from wiki_memory.recall.filters import Filters, parse_time
from wiki_memory.recall.fusion import HEADS, RRF_K
from wiki_memory.recall.items import make_snippet
from wiki_memory.recall.matches import NO_LIMIT, TAIL_CHUNK, ListTail, Ranked, SqlTail
from wiki_memory.recall.pool import Pool, Sources
from wiki_memory.recall.query import RecallQuery
from wiki_memory.recall.terms import Query, analyze
from wiki_memory.recall.weights import TUNABLE, WEIGHTS, Weights
from wiki_memory.recall.when import Window, windows

__all__ = [
    "DEDUP_SCAN",
    "HEADS",
    "NO_LIMIT",
    "RRF_K",
    "TAIL_CHUNK",
    "TEXT_CACHE",
    "TUNABLE",
    "WEIGHTS",
    "Filters",
    "Ranked",
    "RecallQuery",
    "Sources",
    "Weights",
    "candidates",
    "clear_caches",
    "make_snippet",
    "near_duplicate",
    "ranked",
]

TEXT_LIMIT = 100
"""Sections fetched for the ``text`` and ``fields`` signals (and the ``page`` aggregate);
more when the caller asks for more items (``limit``)."""
OTHER_LIMIT = 100
"""Sections fetched for the ``all-words`` signal, and spool rows (or ``limit``)."""
POOL = 100
"""When every match is asked for (:func:`ranked`), the fusion ranks the pool of the best
this many sections of each section list (``text``, ``all-words``, ``fields``) with every
running-session observation that matches, their timeline neighbours and the pages named
or linked; every other section of the ``text`` list (the query's words in its own text)
follows the pool, by that bm25, score 0 (docs/ranking.md, "Every match")."""
FULL_RANK = 1000
"""When the sections holding the query's words in their own text (what the caller may
read) are at most this many, the fusion ranks every match, as if there were no pool: the
order is then the whole ranking's, and a pool only starts where ranking everything would
cost more than a pool (docs/ranking.md, "Every match")."""
COMMON_SHARE = 1 / 3
"""A word in more sections than this share of all is left out of the OR lists (only in
indexes of at least :data:`COMMON_MIN_ROWS` sections: a small index is fast anyway)."""
COMMON_MIN_ROWS = 2000


def candidates(
    sources: Sources,
    query: str | RecallQuery,
    *,
    limit: int = 50,
    who: Identity | None = None,
    tuning: Mapping[str, float] | None = None,
) -> list[dict[str, Any]]:
    """Ranked recall items for ``query``, at most ``limit``, best first.

    ``query`` is a :class:`~wiki_memory.recall.query.RecallQuery` (its filters, ``now``
    and ``tz`` are described there), or only its text. ``who``: the caller (only the
    pages :mod:`wiki_memory.identity` lets it see; None is the server). All filters act
    before ranking, in every signal (a hidden page never lends its links or name). Raises
    ``FilterError`` (a ValueError naming the field) for a bad filter value and
    ``SearchError`` when the index fails. Text with nothing searchable gives ``[]``.
    ``tuning`` overrides weights (names in :data:`TUNABLE`); for benchmarks, not faces.
    """
    q = RecallQuery(query) if isinstance(query, str) else query
    zone = zones.zone(q.tz)
    f = q.filters(who, zone)
    if limit <= 0:
        return []
    found = _rank(sources, q, f, limit, tuning, zone=zone)
    return [found.item(i) for i in range(len(found))]


def ranked(
    sources: Sources,
    query: str | RecallQuery,
    *,
    who: Identity | None = None,
    tuning: Mapping[str, float] | None = None,
    plain: bool = False,
    zone: tzinfo | None = None,
) -> Ranked:
    """Every match of ``query`` in rank order, with no ceiling on their number (the
    query, ``who``, ``tuning`` and errors of :func:`candidates`): the ranked pool
    (:data:`POOL`), then every other section holding the query's words in its own text,
    by bm25. ``plain`` reads every match into Python; otherwise the matches after the pool
    are counted in SQL and read when asked for (the same list either way, checked by
    ``tests/recall/test_recall_fast.py``). ``zone``: the caller's zone, resolved (default:
    the one the query's ``tz`` names)."""
    q = RecallQuery(query) if isinstance(query, str) else query
    zone = zones.zone(q.tz) if zone is None else zone
    f = q.filters(who, zone)
    return _rank(sources, q, f, NO_LIMIT, tuning, tail="plain" if plain else "sql", zone=zone)


def _rank(
    sources: Sources,
    query: RecallQuery | str,
    f: Filters,
    limit: int,
    tuning: Mapping[str, float] | None = None,
    tail: str | None = None,
    zone: tzinfo = UTC,
) -> Ranked:
    """The ranking of ``query`` under the filters ``f`` (built from it); with ``tail``
    (``"plain"`` or ``"sql"``) the fusion ranks the pool (:data:`POOL`) and every other
    match follows as that kind of tail."""
    rq = query if isinstance(query, RecallQuery) else RecallQuery(query)
    reference = parse_time(rq.now, "now", zone=zone) if rq.now is not None else None
    # the caller's present, in the caller's zone: its days are the query's days
    day = datetime.fromtimestamp(reference if reference is not None else time.time(), zone)
    w = Weights.tuned(tuning)
    langs = sources.index.query_languages() if w.stems > 0 else ()
    q = analyze(rq.text, langs)
    if q.empty:
        return Ranked(None, [])
    wins = windows(rq.text, day) if w.when > 0 else []
    if f.as_of is not None:
        with asof.index_at(sources.git, sources.asof_dir, f.as_of) as (idx, sha):
            if idx is None:
                return Ranked(None, [])
            r = Ranker(sources, idx, q, f, limit, w, wins, live=False, as_of_sha=sha, tail=tail)
            # the as-of index closes when this block ends: its tail is read now
            return Ranked(r, r.run(), r.tail("plain") if tail else None)
    r = Ranker(sources, sources.index, q, f, limit, w, wins, live=True, tail=tail)
    return Ranked(r, r.run(), r.tail(tail) if tail else None)


class Ranker:
    """One ranking: ``sources``, the ``index`` searched (``live``, or an ``as_of`` index
    at commit ``as_of_sha``), the analyzed query ``q``, the filters ``f``, ``limit``
    items asked for, the weights ``w`` and the time windows ``wins`` the query names;
    ``tail`` (``"plain"``, ``"sql"`` or None) when every match is asked for. :meth:`run`
    gives the ranked candidates, :meth:`tail` the matches after them, :meth:`item` an
    item."""

    def __init__(
        self,
        sources: Sources,
        index: Index,
        q: Query,
        f: Filters,
        limit: int,
        w: Weights,
        wins: list[Window],
        *,
        live: bool,
        as_of_sha: str | None = None,
        tail: str | None = None,
    ) -> None:
        self.w = w
        self.fusion = w.fusion()
        self.cols = {"stems": w.stems, "dates": w.dates}
        self.wins = wins
        self.index = index
        # the spool's index has no tags column: it reads the query as analyzed
        untagged = self._without_universal_tags(index, q)
        self.pool = Pool(
            sources, index, untagged, q, f, limit, self.cols, live=live, as_of_sha=as_of_sha
        )
        self.f = f
        self.scope = self.pool.scope
        self.limit = limit
        #: every match is asked for (:func:`ranked`): near-duplicates are grouped and follow
        #: the ranked pool, else (:func:`candidates`) they are left out
        self.every = limit >= NO_LIMIT
        #: sections fetched per list: the pool when a tail follows, else what is asked for
        self.fetch = POOL if tail else limit
        #: the plain path: every query over all matches with the scope joined in SQL
        self.plain = self.pool.plain = tail == "plain"
        #: the OR expression of the text and fields lists (what the tail matches)
        self.or_match = ""
        #: a tail follows the ranked candidates (a pool was ranked, :data:`FULL_RANK`)
        self.pooled = tail is not None

    @property
    def cands(self) -> dict[tuple[str, str], Cand]:
        """The candidates ranked, by key."""
        return self.pool.cands

    def item(self, c: Cand) -> dict[str, Any]:
        """The recall item of a ranked candidate."""
        return items.item(self.pool, c)

    def tail(self, kind: str) -> ListTail | SqlTail | None:
        """The sections of the ``text`` list (:attr:`or_match` in their own text, not a
        timeline entry's bare head line) that are not candidates of the pool (ranked or
        left out by it), by the bm25 of their own text, path, page order: ``"plain"``
        reads them all and leaves the pool out in Python, ``"sql"`` counts them in SQL and
        reads them when asked for. None when every match was ranked (:data:`FULL_RANK`)."""
        if not self.pooled:
            return None
        pool = {(c.hit.path, c.hit.anchor) for c in self.cands.values() if c.hit is not None}
        late = set(self.pool.chains.head)  # superseded pages: after every other match
        if kind == "sql":
            return SqlTail(self.index, self.or_match, self.scope, self.cols, pool, late)
        every = tail_rows.own_sections(
            self.index, self.or_match, self.scope, NO_LIMIT, self.cols, last=late
        )
        return ListTail([h for h in every if (h.path, h.anchor) not in pool])

    def run(self) -> list[Cand]:
        """The matches in rank order (recall items come from :meth:`item`)."""
        pool, w = self.pool, self.w
        if self.scope.empty:
            return []
        pool.chains = kept_chains(self.index, self.f.who)  # shared: read, never changed
        self.or_match = self._without_common().any_match or ""
        if self.pooled and self._few_matches():
            self.pooled, self.fetch = False, self.limit
        body, fields = signals.search_sections_both(
            self.index,
            self.or_match,
            self.scope,
            max(TEXT_LIMIT, self.fetch),
            self.cols,
            plain=self.plain,
        )
        weights.collect(
            pool,
            w,
            body,
            fields,
            max(OTHER_LIMIT, self.fetch),
            max(OTHER_LIMIT, self.limit),
            self._strongest,
            self.wins,
        )
        return fusion.order(pool, self.fusion, self.limit, int(w.cap), self.every)

    def _strongest(self, n: int) -> list[str]:
        return fusion.strongest_pages(self.pool, self.fusion, n)

    def _few_matches(self) -> bool:
        """At most :data:`FULL_RANK` sections hold :attr:`or_match` in their own text
        (counting stops after one more)."""
        n = tail_rows.count_own(
            self.index, self.or_match, self.scope, self.cols, upto=FULL_RANK + 1, plain=self.plain
        )
        return n <= FULL_RANK

    @staticmethod
    def _without_universal_tags(index: Index, q: Query) -> Query:
        """``q`` with the tags column left out for words that are a tag every page of
        some kind carries (``session``): such a tag matches every page of the kind."""
        if not q.terms:
            return q
        tags = vocab.universal_tags(index)
        if not tags:
            return q
        drop = {i for i, probe in enumerate(q.probes) if probe and probe[0][0] in tags}
        return q.untagged(drop) if drop else q

    def _without_common(self) -> Query:
        """The query without words found in more than :data:`COMMON_SHARE` of all sections
        (their bm25 weight is near zero, their cost the highest): for the OR lists only;
        the rarest word always stays, and so does the rarest of them when the words left
        match no section at all."""
        q = self.pool.q
        if len(q.terms) < 2:
            return q
        rows = vocab.row_estimate(self.index)
        if rows < COMMON_MIN_ROWS:
            return q
        counts = vocab.doc_counts(self.index, q.probes)
        limit = COMMON_SHARE * rows
        common = {i for i, n in enumerate(counts) if n is not None and n > limit}
        kept_found = any(
            counts[i] is None or (counts[i] or 0) > 0 for i in range(len(counts)) if i not in common
        )
        if common and not kept_found:
            # what is left would find nothing (a frequent name beside a word the index
            # lacks): the rarest common word stays, so the name's pages come back
            common.discard(min(common, key=lambda i: (counts[i] or 0, i)))
        return q.without(common) if common else q
