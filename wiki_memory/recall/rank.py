"""Recall ranking: which sections and running-session observations come back, in order.

(Over 600 lines on purpose: one fusion pipeline whose signals share the candidate
table and the page ranks; split, each part would reach into the others' state.)

Each candidate is a recall item ``{id, path, anchor, title, kind, snippet, why, score,
expand_tokens, updated}`` (see ``Memory.recall``); packing under the budget happens after.
docs/ranking.md explains the design and how the weights were chosen.

Signals, each a ranked list (section lists rank sections; page lists rank pages and
every section of a page inherits its page's rank):

============  =======  ================================================================
name          level    what ranks first
============  =======  ================================================================
text          section  FTS5 bm25 of the query's words (OR, stemmed) in the section's
                       own heading and body, plus a share of the bm25 of the timeline
                       entries just before and after it (``context``)
all-words     section  sections matching every query word (AND), weighted bm25 over all
                       columns (title 10, aliases 8, tags 4, heading 3, body 1)
spool         section  uncompiled observations of running sessions (bm25, OR)
dense         section  with the ``vectors`` extra and setting: the sections of the
                       strongest pages whose dense vector is nearest the query's, and of
                       any page a near paraphrase (cosine ≥ :data:`DENSE_ALONE`) with no
                       shared word (:mod:`wiki_memory.index.vectors`)
page          page     pages whose best sections match best (sum of the top section
                       scores, halved each step: 1, 1/2, 1/4)
fields        page     weighted bm25 over all columns: title and aliases above tags above
                       body (``why``: ``title``, ``alias``, ``tags`` when those matched)
entity        page     a page title, alias or file name found whole in the query (across
                       scripts and diacritics, through the index's folding)
link          page     pages linked to or from the strongest pages (the wikilink graph)
recent        page     the most recently updated of the candidate pages
============  =======  ================================================================

They are fused by weighted reciprocal rank fusion: score = Σ w_s / (k + rank_s), k = 60
(Cormack, Clarke, Büttcher: "Reciprocal rank fusion outperforms Condorcet and
individual rank learning methods", SIGIR 2009), weights in :data:`WEIGHTS`. Then
near-duplicates are grouped (:func:`near_duplicate`; when every match is asked for, the
grouped ones follow the ranked items: :data:`COLLAPSED_NAMED`), and the first :data:`HEADS` items are
the best section of that many distinct pages (breadth first: a small budget sees several
sources), the rest follow in fused order. Each item's ``why`` lists the signals that
ranked it (see :func:`_why`); its ``anchor`` is the section itself: ``path#Heading``,
``path#^t12`` (a timeline entry), or ``path`` (the text before the first heading).
"""

from __future__ import annotations

import functools
import itertools
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, tzinfo
from pathlib import Path
from typing import Any

from wiki_memory import zones
from wiki_memory.capture.spool import Spool
from wiki_memory.identity import Identity
from wiki_memory.index import dates, nearest, signals, supersede, vocab
from wiki_memory.index import tail as tail_rows
from wiki_memory.index.schema import BM25_WEIGHTS
from wiki_memory.index.signals import Hit
from wiki_memory.index.store import Index
from wiki_memory.recall import asof
from wiki_memory.recall.filters import Filters, parse_time
from wiki_memory.recall.terms import Query, analyze, words
from wiki_memory.recall.tokens import count_tokens
from wiki_memory.recall.when import Window, covered, overlaps, windows
from wiki_memory.wiki import compiler
from wiki_memory.wiki.git import GitStore

__all__ = [
    "NO_LIMIT",
    "Ranked",
    "candidates",
    "ranked",
    "make_snippet",
    "near_duplicate",
    "WEIGHTS",
    "RRF_K",
    "HEADS",
]

RRF_K = 60
"""The k of reciprocal rank fusion (Cormack et al. 2009)."""

WEIGHTS: dict[str, float] = {
    "text": 1.0,
    "all-words": 2.0,
    "spool": 1.0,
    "page": 3.0,
    "fields": 1.0,
    "entity": 1.0,
    "link": 0.5,
    "recent": 0.1,
    "when": 1.0,
    "dense": 0.1,
}
"""Weight of each signal in the fusion. Set once for every wiki (docs/ranking.md)."""

TUNABLE: tuple[str, ...] = (
    *WEIGHTS,
    "stems",
    "dates",
    "context",
    "cap",
    "page_depth",
    "page_ratio",
)
"""Names a benchmark may set through ``candidates(tuning=...)``: the fusion weights, the
bm25 weights of the ``stems`` and ``dates`` columns (``stems`` 0 also stops stemming the
query), ``context`` (0 turns timeline context off), ``cap`` (the per-page cap of the
first slots, :data:`PAGE_CAP`; 0 turns it off), ``page_depth`` and ``page_ratio`` (how
many of a page's best sections the ``page`` signal sums, and how each weighs against the
one before: :data:`PAGE_DEPTH`, :data:`PAGE_RATIO`)."""

CONTEXT_BEFORE = 0.3
"""Share of the previous timeline entry's bm25 added to an entry (an answer follows its
question; a tool result follows the prompt that asked for it)."""
CONTEXT_AFTER = 0.12
"""Share of the next timeline entry's bm25 added to an entry."""
PAGE_DEPTH = 6
"""The ``page`` signal of a page sums its best this many section scores, ..."""
PAGE_RATIO = 0.7
"""... each weighted this much of the one before (best + 0.7 second + 0.49 third ...):
nearer a whole-page score than best + ½ second + ¼ third (docs/ranking.md)."""
HEADS = 5
"""The first this many items come from distinct pages."""
TOP_SLOTS = 10
"""The first this many items hold at most :data:`PAGE_CAP` sections of any one page."""
PAGE_CAP = 3
HEAD_POOL = 50
"""The breadth-first heads are chosen among this many candidates, whatever the limit."""
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
TAIL_CHUNK = 32
"""Sections after the pool read from SQLite at a time by the optimized path."""
COMMON_SHARE = 1 / 3
"""A word in more sections than this share of all is left out of the OR lists (only in
indexes of at least :data:`COMMON_MIN_ROWS` sections: a small index is fast anyway)."""
COMMON_MIN_ROWS = 2000
DEDUP_SCAN = 200
"""A match is compared for near-duplicates with at most this many earlier kept matches
that carry the same numbers (more than ``limit`` + :data:`HEADS` of the old 50-item
ceiling, so the first pages rank as before; linear when every match is ranked)."""
COLLAPSED_NAMED = 5
"""A kept item names at most this many of the pages grouped under it (``collapsed_paths``;
``collapsed`` counts them all). When every match is asked for, the grouped ones follow the
ranked pool, each marked ``collapsed_into`` (docs/knowledge.md, "Collapsed is not lost")."""
DENSE_LIMIT = 30
"""Sections in the ``dense`` list (whatever the limit: a dense neighbour is no match of
the query's words, so asking for every match does not ask for every neighbour)."""
DENSE_PAGES = 10
"""The ``dense`` list ranks the sections of this many of the strongest pages ..."""
DENSE_MIN = 0.0
"""... those at least this similar (cosine) to the query ..."""
DENSE_ALONE = 0.4
"""... and, from every page, sections at least this similar (a paraphrase that shares
no word with its section has no strong page to come from; above 1: none)."""
CONTEXT_HITS = 60
"""Timeline entries among the best text hits whose neighbours are scored."""
LINK_SOURCES = 3
"""How many of the strongest pages have their links followed."""
WHY_TOP = 10
"""A page-level signal is named in ``why`` when the page ranks within this many there."""
RECENT_HALF_LIFE_DAYS = 30.0
"""The ``recent`` signal halves for every this many days a page is older than the newest
candidate. ``why`` names it for pages of the newest day when the candidates span more."""

_TIMELINE_HEAD = re.compile(r"^\*\*\d\d:\d\d:\d\d\*\*(?: \([^)\n]{1,24}\))? · [^\n]*\n?")
_FENCE_LINE = re.compile(r"^[ \t]*(?:~{3,}|`{3,})[^\n]*$", re.M)


@dataclass(frozen=True)
class Sources:
    """What ranking reads, handed over by the core: the live ``index``, the ``spool``
    of running sessions, the ``git`` store and the folder of as-of indexes
    (``asof_dir``) for ``as_of`` queries, ``handle(anchor) -> id`` (a short id that
    expand resolves later) and ``session_visible(session_key, who) -> bool`` (the
    scope rule for a running session's observations)."""

    index: Index
    spool: Spool
    git: GitStore
    asof_dir: Path
    handle: Callable[[str], str]
    session_visible: Callable[[str, Identity], bool]


def candidates(
    memory: Sources,
    query: str,
    *,
    project: str | None = None,
    kinds: list[str] | None = None,
    limit: int = 50,
    tags: Any = None,
    since: Any = None,
    until: Any = None,
    as_of: Any = None,
    exclude_dirs: Iterable[str] = (),
    who: Identity | None = None,
    now: Any = None,
    tuning: Mapping[str, float] | None = None,
    tz: Any = None,
) -> list[dict[str, Any]]:
    """Ranked recall items for ``query``, at most ``limit``, best first.

    Filters: ``project``; ``kinds`` (page kinds, e.g. ``["session", "note"]``; ``[]``
    allows none); ``tags`` (a string or list: the page must carry every one, ``a``
    also matching the nested ``a/b``); ``since``/``until`` (ISO-8601 or epoch seconds:
    the time the page covers, frontmatter ``started``/``created`` to ``ended``/
    ``updated``, must overlap the range; a bare date covers its whole day); ``as_of``
    (ISO-8601 or epoch seconds: search the wiki as committed then, from git; no spool);
    ``exclude_dirs`` (folders whose pages are never seen); ``who`` (the caller: only the
    pages :mod:`wiki_memory.identity` lets it see; None is the server). All filters act before
    ranking, in every signal (a hidden page never lends its links or name). Raises ``FilterError`` (a ValueError naming the field) for a bad filter
    value and ``SearchError`` when the index fails. Text with nothing searchable gives
    ``[]``.

    ``now`` (ISO-8601 or epoch seconds; default the present) is the reference time for
    relative dates in the query ("last week", "in May": :mod:`wiki_memory.recall.when`);
    ``tz`` the caller's zone (:mod:`wiki_memory.zones`; default UTC), whose days
    those dates and the periods of ``since``/``until`` are.
    ``tuning`` overrides weights (names in :data:`TUNABLE`); for benchmarks, not faces.
    """
    f = Filters.build(
        project=project,
        kinds=kinds,
        tags=tags,
        since=since,
        until=until,
        as_of=as_of,
        exclude_dirs=exclude_dirs,
        who=who,
        zone=zones.zone(tz),
    )
    if limit <= 0:
        return []
    found = _rank(memory, query, f, limit, now, tuning, zone=zones.zone(tz))
    return [found.item(i) for i in range(len(found))]


NO_LIMIT = 1 << 40
"""The ``limit`` of :func:`ranked`: every match (SQLite takes it as a plain integer)."""


class _ListTail:
    """The matches after the pool, every one read (the plain path, and ``as_of``)."""

    def __init__(self, hits: list[Hit]) -> None:
        self.hits = hits

    def __len__(self) -> int:
        return len(self.hits)

    def hit(self, j: int) -> Hit:
        return self.hits[j]


class _SqlTail:
    """The matches after the pool, counted in SQL and read from the ``j``-th on when
    asked for (the optimized path): the same sections in the same order as
    :class:`_ListTail`. Each read takes :data:`TAIL_CHUNK` rows or as many as were read
    before, whichever is more, so a reply that walks the whole tail sorts the matches a
    logarithmic number of times, not once per chunk."""

    def __init__(
        self,
        index: Index,
        match: str,
        scope: signals.Scope,
        cols: dict[str, float],
        pool: set[tuple[str, str]],
        last: set[str] | None = None,
    ) -> None:
        self.index, self.match, self.scope, self.cols, self.pool = index, match, scope, cols, pool
        self.last = last or set()
        self.n = tail_rows.count_own(index, match, scope, cols, pool)
        self.rows: dict[int, Hit] = {}

    def __len__(self) -> int:
        return self.n

    def hit(self, j: int) -> Hit:
        """The ``j``-th section after the pool; IndexError when the index changed since
        the count and has fewer now."""
        got = self.rows.get(j)
        if got is None:
            found = tail_rows.own_sections(
                self.index,
                self.match,
                self.scope,
                max(TAIL_CHUNK, len(self.rows)),
                self.cols,
                offset=j,
                exclude=self.pool,
                last=self.last,
            )
            for k, h in enumerate(found):
                self.rows[j + k] = h
            if j not in self.rows:
                raise IndexError(j)
            got = self.rows[j]
        return got


class Ranked:
    """Every match of a query, best first: ``len()`` of them, each recall item built when
    first asked for (:meth:`item`), so that counting all matches costs no snippets. The
    ranked pool (``cands``) comes first, then the ``tail`` (see :data:`POOL`)."""

    def __init__(
        self, ranker: _Ranker | None, cands: list[_Cand], tail: _ListTail | _SqlTail | None = None
    ) -> None:
        self._ranker = ranker
        self._cands = cands
        self._tail = tail
        self._items: dict[int, dict[str, Any]] = {}

    def __len__(self) -> int:
        return len(self._cands) + (len(self._tail) if self._tail is not None else 0)

    def key(self, i: int) -> str:
        """The ``i``-th match's key (``path#anchor``, or a running session's observation
        id), without building its item. IndexError past the end."""
        if i < len(self._cands):
            c = self._cands[i]
            return f"spool:{c.spool.obs_id}" if c.spool is not None else f"{c.key[0]}#{c.key[1]}"
        if self._tail is None:
            raise IndexError(i)
        h = self._tail.hit(i - len(self._cands))
        return f"{h.path}#{h.anchor}"

    def item(self, i: int) -> dict[str, Any]:
        """The ``i``-th match (0 = best) as a recall item (see ``Memory.recall``). Raises
        IndexError past the end (also when the index shrank since the count)."""
        got = self._items.get(i)
        if got is None:
            assert self._ranker is not None
            if i < len(self._cands):
                c = self._cands[i]
            else:
                if self._tail is None:
                    raise IndexError(i)
                h = self._tail.hit(i - len(self._cands))
                c = _Cand((h.path, h.anchor), h.path, hit=h)
            got = self._items[i] = self._ranker.item(c)
        return got


def ranked(
    memory: Sources,
    query: str,
    *,
    project: str | None = None,
    kinds: list[str] | None = None,
    tags: Any = None,
    since: Any = None,
    until: Any = None,
    as_of: Any = None,
    exclude_dirs: Iterable[str] = (),
    who: Identity | None = None,
    now: Any = None,
    tuning: Mapping[str, float] | None = None,
    plain: bool = False,
    tz: Any = None,
) -> Ranked:
    """Every match of ``query`` in rank order, with no ceiling on their number (the
    filters, ``now``, ``tuning`` and errors of :func:`candidates`): the ranked pool
    (:data:`POOL`), then every other section holding the query's words in its own text,
    by bm25. ``plain`` reads every match into Python; otherwise the matches after the pool
    are counted in SQL and read when asked for (the same list either way, checked by
    ``tests/recall/test_recall_fast.py``)."""
    f = Filters.build(
        project=project,
        kinds=kinds,
        tags=tags,
        since=since,
        until=until,
        as_of=as_of,
        exclude_dirs=exclude_dirs,
        who=who,
        zone=zones.zone(tz),
    )
    tail = "plain" if plain else "sql"
    return _rank(memory, query, f, NO_LIMIT, now, tuning, tail=tail, zone=zones.zone(tz))


def _rank(
    memory: Sources,
    query: str,
    f: Filters,
    limit: int,
    now: Any = None,
    tuning: Mapping[str, float] | None = None,
    tail: str | None = None,
    zone: tzinfo = UTC,
) -> Ranked:
    """The ranking; with ``tail`` (``"plain"`` or ``"sql"``) the fusion ranks the pool
    (:data:`POOL`) and every other match follows as that kind of tail."""
    reference = parse_time(now, "now", zone=zone) if now is not None else None
    # the caller's present, in the caller's zone: its days are the query's days
    day = datetime.fromtimestamp(reference if reference is not None else time.time(), zone)
    w = {
        **WEIGHTS,
        "stems": BM25_WEIGHTS["stems"],
        "dates": BM25_WEIGHTS["dates"],
        "context": 1.0,
        "cap": float(PAGE_CAP),
        "page_depth": float(PAGE_DEPTH),
        "page_ratio": PAGE_RATIO,
    }
    for name, value in (tuning or {}).items():
        if name not in w:
            raise ValueError(f"unknown tuning name: {name!r}")
        w[name] = float(value)
    langs = memory.index.query_languages() if w["stems"] > 0 else ()
    q = analyze(query, langs)
    if q.empty:
        return Ranked(None, [])
    wins = windows(query, day) if w["when"] > 0 else []
    if f.as_of is not None:
        with asof.index_at(memory.git, memory.asof_dir, f.as_of) as (idx, sha):
            if idx is None:
                return Ranked(None, [])
            r = _Ranker(memory, idx, q, f, limit, w, wins, live=False, as_of_sha=sha, tail=tail)
            # the as-of index closes when this block ends: its tail is read now
            return Ranked(r, r.run(), r.tail("plain") if tail else None)
    r = _Ranker(memory, memory.index, q, f, limit, w, wins, live=True, tail=tail)
    return Ranked(r, r.run(), r.tail(tail) if tail else None)


@dataclass
class _Cand:
    """A candidate section (``hit``) or spooled observation (``spool``)."""

    key: tuple[str, str]
    path: str
    hit: Hit | None = None
    spool: Any = None
    score: float = 0.0
    signals: dict[str, int] = field(default_factory=dict)  # section-level: name -> rank
    raw: float = 0.0  # own bm25 in the text signal
    context: float = 0.0  # bm25 share from neighbouring entries
    also: list[_Cand] = field(default_factory=list)  # entries of its page carried in its slot
    #: near-duplicates of other pages grouped under this kept candidate (:data:`COLLAPSED`)
    group: list[_Cand] = field(default_factory=list)
    into: _Cand | None = None  # the kept candidate this one was grouped under


class _Ranker:
    def __init__(
        self,
        memory: Sources,
        index: Index,
        q: Query,
        f: Filters,
        limit: int,
        w: dict[str, float],
        wins: list[Window],
        *,
        live: bool,
        as_of_sha: str | None = None,
        tail: str | None = None,
    ) -> None:
        self.memory = memory
        self.index = index
        self.w = w
        self.cols = {"stems": w["stems"], "dates": w["dates"]}
        self.wins = wins
        self.q_plain = q  # for the spool's index, which has no tags column
        self.q = self._without_universal_tags(q)
        self.f = f
        self.scope = f.scope()
        self.limit = limit
        #: every match is asked for (:func:`ranked`): near-duplicates are grouped and follow
        #: the ranked pool, else (:func:`candidates`) they are left out
        self.every = limit >= NO_LIMIT
        #: sections fetched per section list: the pool when a tail follows, else as many
        #: as the caller asks for
        self.fetch = POOL if tail else limit
        #: the plain path: every query over all matches with the scope joined in SQL
        self.plain = tail == "plain"
        #: the OR expression of the text and fields lists (what the tail matches)
        self.or_match = ""
        #: a tail follows the ranked candidates (a pool was ranked, :data:`FULL_RANK`)
        self.pooled = tail is not None
        self.live = live
        self.as_of_sha = as_of_sha
        self.cands: dict[tuple[str, str], _Cand] = {}
        #: page-level signals: name -> {path: rank}
        self.page_ranks: dict[str, dict[str, int]] = {}
        self.entity_how: dict[str, str] = {}
        self.rows: dict[str, dict[str, Any]] = {}
        #: running sessions (``spool:<key>``): rank by their best observations, newest ts
        self.spool_rank: dict[str, int] = {}
        self.spool_ts: dict[str, str] = {}
        #: path -> recency factor in (0, 1]; paths named ``recent`` in ``why``
        self.recency: dict[str, float] = {}
        self.recent_why: set[str] = set()
        self.best_field: dict[str, Hit] = {}
        #: which pages replaced which (wiki_memory.index.supersede), read from this index
        #: (an ``as_of`` index gives the supersessions committed then)
        self.chains = supersede.Chains()
        #: successors brought in for a superseded candidate whose successor was not one
        self.successors: set[tuple[str, str]] = set()

    def tail(self, kind: str) -> _ListTail | _SqlTail | None:
        """The sections of the ``text`` list (:attr:`or_match` in their own text, not a
        timeline entry's bare head line) that are not candidates of the pool (ranked or
        left out by it), by the bm25 of their own text, path, page order: ``"plain"``
        reads them all and leaves the pool out in Python, ``"sql"`` counts them in SQL and
        reads them when asked for. None when every match was ranked (:data:`FULL_RANK`)."""
        if not self.pooled:
            return None
        pool = {(c.hit.path, c.hit.anchor) for c in self.cands.values() if c.hit is not None}
        late = set(self.chains.head)  # superseded pages: after every other match
        if kind == "sql":
            return _SqlTail(self.index, self.or_match, self.scope, self.cols, pool, late)
        every = tail_rows.own_sections(
            self.index, self.or_match, self.scope, NO_LIMIT, self.cols, last=late
        )
        return _ListTail([h for h in every if (h.path, h.anchor) not in pool])

    # -- signals ------------------------------------------------------------------------
    def _cand(self, h: Hit) -> _Cand:
        key = (h.path, h.anchor)
        c = self.cands.get(key)
        if c is None:
            c = self.cands[key] = _Cand(key, h.path, hit=h)
        return c

    def run(self) -> list[_Cand]:
        """The matches in rank order (recall items come from :meth:`item`)."""
        if self.scope.empty:
            return []
        self.chains = self.index.chains(self.f.who)
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
        text = self._text(body)
        self._section_list("text", text)
        if self.q.all_match:
            allw = signals.search_sections(
                self.index,
                self.q.all_match,
                self.scope,
                max(OTHER_LIMIT, self.fetch),
                self.cols,
                plain=self.plain,
            )
            self._section_list("all-words", allw)
        best_field = self.best_field
        for h in fields:
            best_field.setdefault(h.path, h)
        self.page_ranks["fields"] = {p: i for i, p in enumerate(best_field)}
        self.page_ranks["page"] = self._page_aggregate()
        self.page_ranks["entity"] = self._entities(list(best_field)[:20])
        if self.live:
            self._spool()
        # pages found only by page-level signals get a section: their best fields hit,
        # else their first section with text
        self._represent(best_field, list(self.page_ranks["entity"]))
        self.page_ranks["link"] = self._links()
        self._represent(best_field, list(self.page_ranks["link"]))
        if self.w["dense"] > 0 and self.index.vectors_on:
            self._dense()
        self._recent()
        self._when()
        return self._order()

    def _few_matches(self) -> bool:
        """At most :data:`FULL_RANK` sections hold :attr:`or_match` in their own text
        (counting stops after one more)."""
        n = tail_rows.count_own(
            self.index, self.or_match, self.scope, self.cols, upto=FULL_RANK + 1, plain=self.plain
        )
        return n <= FULL_RANK

    def _without_universal_tags(self, q: Query) -> Query:
        """``q`` with the tags column left out for words that are a tag every page of
        some kind carries (``session``): such a tag matches every page of the kind."""
        if not q.terms:
            return q
        tags = vocab.universal_tags(self.index)
        if not tags:
            return q
        drop = {i for i, probe in enumerate(q.probes) if probe and probe[0][0] in tags}
        return q.untagged(drop) if drop else q

    def _when(self) -> None:
        """The ``when`` signal: candidates whose day lies in a window the query names,
        ranked by their own text (``text``, then ``all-words``) rank."""
        if not self.wins:
            return
        inside = [c for c in self.cands.values() if self._inside(c)]
        big = 1 << 30
        inside.sort(
            key=lambda c: (
                c.signals.get("text", big),
                c.signals.get("all-words", big),
                _order_key(c)[1:],
            )
        )
        for rank, c in enumerate(inside):
            c.signals["when"] = rank

    def _inside(self, c: _Cand) -> bool:
        """``c`` happened inside a window of the query, or is a timeline entry whose
        relative phrases ("last night") name a day inside one."""
        day = _day(c)
        if covered(_span(c), self.wins):
            return True
        if c.hit is None or not day or not dates.is_timeline_entry(c.hit.text):
            return False
        return overlaps(dates.referred_ranges(c.hit.text, date.fromisoformat(day)), self.wins)

    def _without_common(self) -> Query:
        """The query without words found in more than :data:`COMMON_SHARE` of all sections
        (their bm25 weight is near zero, their cost the highest): for the OR lists only;
        the rarest word always stays, and so does the rarest of them when the words left
        match no section at all."""
        if len(self.q.terms) < 2:
            return self.q
        rows = vocab.row_estimate(self.index)
        if rows < COMMON_MIN_ROWS:
            return self.q
        counts = vocab.doc_counts(self.index, self.q.probes)
        limit = COMMON_SHARE * rows
        common = {i for i, n in enumerate(counts) if n is not None and n > limit}
        kept_found = any(
            counts[i] is None or (counts[i] or 0) > 0 for i in range(len(counts)) if i not in common
        )
        if common and not kept_found:
            # what is left would find nothing (a frequent name beside a word the index
            # lacks): the rarest common word stays, so the name's pages come back
            common.discard(min(common, key=lambda i: (counts[i] or 0, i)))
        return self.q.without(common) if common else self.q

    def _text(self, hits: list[Hit]) -> list[Hit]:
        """``hits`` (by heading+body bm25) re-scored with their timeline neighbours.

        A timeline entry that is only its head line (``**09:01:39** · session end``) is
        left out: its words are the compiler's, on every page of its kind."""
        hits = [h for h in hits if not _head_only(h)]
        raw = {(h.path, h.ord): h for h in hits}
        for h in hits:
            c = self._cand(h)
            c.raw = h.score
        want = set()
        before_share = CONTEXT_BEFORE * self.w["context"]
        after_share = CONTEXT_AFTER * self.w["context"]
        for h in hits[:CONTEXT_HITS] if self.w["context"] > 0 else []:
            if h.anchor.startswith("^"):
                want.update({(h.path, h.ord - 1), (h.path, h.ord + 1)})
        known = {k for k in want if k in raw}
        extra = {
            (n.path, n.ord): n
            for n in signals.neighbours(self.index, want - known)
            if n.anchor.startswith("^") and not _head_only(n)
        }
        pool = {**extra, **raw}
        blocks = {k: h for k, h in pool.items() if h.anchor.startswith("^")}
        scored: list[tuple[float, Hit]] = []
        for (path, o), h in pool.items():
            own = h.score if (path, o) in raw else 0.0
            ctx = 0.0
            if h.anchor.startswith("^"):
                before = blocks.get((path, o - 1))
                after = blocks.get((path, o + 1))
                if before is not None and (path, o - 1) in raw:
                    ctx += before_share * before.score
                if after is not None and (path, o + 1) in raw:
                    ctx += after_share * after.score
            if own <= 0 and ctx <= 0:
                continue
            c = self._cand(h)
            c.context = ctx
            scored.append((own + ctx, h))
        scored.sort(key=lambda t: (-t[0], t[1].path, t[1].ord))
        return [h for _, h in scored]

    def _section_list(self, name: str, hits: list[Hit]) -> None:
        for rank, h in enumerate(hits):
            c = self._cand(h)
            c.signals.setdefault(name, rank)

    def _page_aggregate(self) -> dict[str, int]:
        per: dict[str, list[float]] = defaultdict(list)
        for c in self.cands.values():
            if c.raw > 0:
                per[c.path].append(c.raw)
        score = {
            p: _decayed(v, int(self.w["page_depth"]), self.w["page_ratio"]) for p, v in per.items()
        }
        order = sorted(score, key=lambda p: (-score[p], p))
        return {p: i for i, p in enumerate(order)}

    def _entities(self, field_pages: list[str]) -> dict[str, int]:
        """Pages named in the query: exact names (title, alias, file name) through the
        ``names`` table, and titles/aliases of the best ``fields`` pages compared after
        folding (``lodz`` finds ``Łódź``). Longer names rank first."""
        found: dict[str, tuple[int, str]] = {}
        for key, path, source in signals.pages_named(self.index, self.q.name_keys(), self.scope):
            n = len(words(key))
            how = "alias" if source == "alias" else "title"
            if n and (path not in found or n > found[path][0]):
                found[path] = (n, how)
        self.rows.update(signals.page_rows(self.index, [*field_pages, *found]))
        for path in field_pages:
            row = self.rows.get(path)
            if row is None:
                continue
            for name, how in [(row["title"], "title")] + [(a, "alias") for a in row["aliases"]]:
                if name and self.q.contains(name):
                    n = len(words(name))
                    if path not in found or n > found[path][0]:
                        found[path] = (n, how)
        order = sorted(found, key=lambda p: (-found[p][0], p))
        self.entity_how = {p: found[p][1] for p in order}
        return {p: i for i, p in enumerate(order)}

    def _spool(self) -> None:
        """Uncompiled observations (sessions only: no tags, no ``as_of``)."""
        if self.f.tags or (self.f.kinds is not None and "session" not in self.f.kinds):
            return
        for name, match in (
            ("spool", self.q_plain.any_match),
            ("all-words", self.q_plain.all_match),
        ):
            if not match:
                continue
            hits = self.memory.index.search_spool(
                match, project=self.f.project, limit=max(OTHER_LIMIT, self.limit)
            )
            rank = 0
            for sh in hits:
                if not self.f.spool_ok(sh.ts):
                    continue
                if self.f.who is not None and not self.memory.session_visible(
                    sh.session_key, self.f.who
                ):
                    continue  # a running session whose page the caller may not see
                key = ("spool", sh.obs_id)
                c = self.cands.get(key)
                if c is None:
                    c = self.cands[key] = _Cand(key, f"spool:{sh.session_key}", spool=sh)
                c.signals.setdefault(name, rank)
                rank += 1
        # a running session is a page in the making: its observations share the page-level
        # signals ``page`` (the session's best observations, as for pages) and ``recent``
        per: dict[str, list[float]] = defaultdict(list)
        for c in self.cands.values():
            if c.spool is not None and "spool" in c.signals:
                per[c.path].append(c.spool.score)
                self.spool_ts[c.path] = max(self.spool_ts.get(c.path, ""), c.spool.ts or "")
        score = {
            p: _decayed(v, int(self.w["page_depth"]), self.w["page_ratio"]) for p, v in per.items()
        }
        self.spool_rank = {p: i for i, p in enumerate(sorted(score, key=lambda p: (-score[p], p)))}

    def _represent(self, best_field: dict[str, Hit], paths: list[str]) -> None:
        have = {c.path for c in self.cands.values()}
        missing = [p for p in paths if p not in have]
        for p in missing:
            if p in best_field:
                self._cand(best_field[p])
        rest = [p for p in missing if p not in best_field]
        for _p, h in signals.first_sections(self.index, rest).items():
            self._cand(h)

    def _strongest_pages(self, n: int) -> list[str]:
        """The first ``n`` distinct pages of a preliminary fusion of the word signals
        (``text``, ``all-words``, ``page``, ``fields``, ``entity``), best first: the pages
        whose links (``link``) and vectors (``dense``) are followed."""
        pages: list[str] = []
        for c in self._fuse(["text", "all-words"], ["page", "fields", "entity"]):
            if c.hit is not None and c.path not in pages:
                pages.append(c.path)
            if len(pages) >= n:
                break
        return pages

    def _links(self) -> dict[str, int]:
        sources = self._strongest_pages(LINK_SOURCES)
        # a neighbour joins only when it shares query words (found by the text, all-words
        # or fields lists) or the query names it: links alone bring no unrelated page
        related = {c.path for c in self.cands.values()} | set(self.best_field)
        related |= set(self.page_ranks.get("entity", {}))
        order: list[str] = []
        for src in sources:
            for other, _direction in signals.linked_pages(self.index, src, self.scope):
                if other not in order and other in related:
                    order.append(other)
        return {p: i for i, p in enumerate(order)}

    def _dense(self) -> None:
        """The ``dense`` list: the sections of the strongest :data:`DENSE_PAGES` pages so
        far, by the similarity of their vectors with the query's, and sections of any
        page at least :data:`DENSE_ALONE` similar (a paraphrase that shares no word)."""
        pages = self._strongest_pages(DENSE_PAGES)
        scored = self.index.dense(self.q.text)
        if scored is None:
            return
        found = nearest.dense_sections(
            self.index, scored, self.scope, DENSE_LIMIT, DENSE_MIN, paths=pages
        )
        if DENSE_ALONE <= 1:
            seen = {(h.path, h.anchor) for h in found}
            alone = nearest.dense_sections(self.index, scored, self.scope, DENSE_LIMIT, DENSE_ALONE)
            found += [h for h in alone if (h.path, h.anchor) not in seen]
        self._section_list("dense", found)

    def _recent(self) -> None:
        """Recency of candidate pages and running sessions (a page by the end of the time
        it covers, a running session by its newest matching observation): a factor that
        halves every :data:`RECENT_HALF_LIFE_DAYS` before the newest candidate. Pages of the
        same day weigh the same, so recency only counts where dates differ."""
        paths = sorted({c.path for c in self.cands.values()})
        need = [p for p in paths if p not in self.rows and p not in self.spool_ts]
        if need:
            self.rows.update(signals.page_rows(self.index, need))
        when: dict[str, float] = {}
        for p in paths:
            raw = self.spool_ts[p] if p in self.spool_ts else self.rows.get(p, {}).get("end")
            try:
                t = parse_time(raw, "updated")
            except ValueError:
                t = None
            if t is not None:
                when[p] = t
        if not when:
            return
        newest = max(when.values())
        spread = newest - min(when.values()) > 86400 * RECENT_HALF_LIFE_DAYS
        for p, t in when.items():
            age_days = (newest - t) / 86400
            self.recency[p] = 0.5 ** (age_days / RECENT_HALF_LIFE_DAYS)
            if spread and age_days <= 1:
                self.recent_why.add(p)

    # -- fusion -------------------------------------------------------------------------
    def _fuse(self, section_sigs: list[str], page_sigs: list[str]) -> list[_Cand]:
        for c in self.cands.values():
            s = 0.0
            for name in section_sigs:
                r = c.signals.get(name)
                if r is not None:
                    s += self.w[name] / (RRF_K + r + 1)
            if "recent" in page_sigs:
                s += self.w["recent"] / (RRF_K + 1) * self.recency.get(c.path, 0.0)
            for name in page_sigs:
                if name == "recent":
                    continue
                if c.spool is not None and name == "page":
                    r = self.spool_rank.get(c.path)
                elif c.spool is not None:
                    continue
                else:
                    r = self.page_ranks.get(name, {}).get(c.path)
                if r is not None:
                    s += self.w[name] / (RRF_K + r + 1)
            c.score = s
        return sorted(self.cands.values(), key=_order_key)

    def _order(self) -> list[_Cand]:
        fused = self._fuse(
            ["text", "all-words", "spool", "when", "dense"],
            ["page", "fields", "entity", "link", "recent"],
        )
        fused = [c for c in fused if c.score > 0]
        # a section with no text of its own (a bare heading, its content in blocks with
        # ids) stays when its heading holds a query word and is not the page's title;
        # otherwise it only stands for its page when nothing else of the page is there
        pages_with_text = {c.path for c in fused if c.hit is not None and c.hit.text.strip()}
        kept: list[_Cand] = []
        groups: dict[int, list[_Cand]] = defaultdict(list)
        # near-duplicates share their numbers: compare within those groups only, with the
        # first DEDUP_SCAN of each (every match is ranked now: keep this linear)
        dedup = _Dedup(_tokens(_content(c)) for c in fused[:DEDUP_SAMPLE])
        for c in fused:
            if (
                c.hit is not None
                and not c.hit.text.strip()
                and c.path in pages_with_text
                and (
                    c.hit.heading.strip() == c.hit.title.strip()
                    or not (self.q.content_tokens & _tokens(c.hit.heading))
                )
            ):
                continue
            toks = _tokens(_content(c))
            dup = dedup.find(toks)
            if dup is not None:
                # within one page, the entry itself (a block: ``^t3``) takes the place of a
                # section repeating it (a session page's summary repeats the first prompt)
                k = kept[dup]
                if (
                    k.path == c.path
                    and c.hit is not None
                    and k.hit is not None
                    and c.hit.anchor.startswith("^")
                    and not k.hit.anchor.startswith("^")
                ):
                    c.score = k.score
                    kept[dup] = c
                elif k.path != c.path:  # grouped, not dropped: it follows the ranked pool
                    groups[dup].append(c)
                continue
            dedup.add(len(kept), toks)
            kept.append(c)
            if len(kept) >= max(self.limit, HEAD_POOL) + HEADS:
                break
        # the heads come from the first HEAD_POOL candidates whatever the limit, so the
        # first items do not depend on how many the caller asked for
        heads: list[_Cand] = []
        rest: list[_Cand] = []
        head_pages: set[str] = set()
        for i, c in enumerate(kept):
            if len(heads) < HEADS and c.path not in head_pages and i < HEAD_POOL:
                heads.append(c)
                head_pages.add(c.path)
            else:
                rest.append(c)
        # a running session that ended meanwhile has no item: it is no match
        sessions = self.memory.spool.sessions
        live = [c for c in heads + rest if c.spool is None or c.spool.session_key in sessions]
        cap = int(self.w["cap"])
        out = self._current_first(_cap_pages(live, cap) if cap > 0 else live)[: self.limit]
        return self._with_groups(out, kept, groups) if self.every and groups else out

    def _with_groups(
        self, out: list[_Cand], kept: list[_Cand], groups: dict[int, list[_Cand]]
    ) -> list[_Cand]:
        """``out`` followed by the near-duplicates grouped under its candidates (each group
        under its kept candidate's place, in rank order), each marked with the candidate it
        was grouped under; a duplicate whose page already has an item is not repeated
        (its page is reachable), nor is one of a running session."""
        for at, members in groups.items():
            k = kept[at]
            k.group = members
            for m in members:
                m.into = k
        shown = {c.path for c in out}
        seen: set[tuple[str, str]] = set()
        later: list[_Cand] = []
        for c in out:
            for m in c.group:
                if m.path in shown or m.key in seen or m.spool is not None:
                    continue
                seen.add(m.key)
                shown.add(m.path)
                later.append(m)
        return out + later

    def _current_first(self, ordered: list[_Cand]) -> list[_Cand]:
        """``ordered`` with every candidate of a superseded page after the head of its
        chain (invariant 14): the head takes the place of the first superseded page that
        ranked above it, brought in from the index when it was no candidate (and the
        query's filters keep it); the superseded ones follow in their own order."""
        head_of = self.chains.head
        if not head_of or not any(c.path in head_of for c in ordered):
            return ordered
        first: dict[str, int] = {}
        for i, c in enumerate(ordered):
            if c.spool is None:
                first.setdefault(c.path, i)
        wanted = {head_of[c.path] for c in ordered if c.path in head_of} - set(first)
        extra: dict[str, _Cand] = {}
        if wanted:
            shown = signals.in_scope(self.index, wanted, self.scope)
            for p, h in signals.first_sections(self.index, sorted(shown)).items():
                c = _Cand((h.path, h.anchor), h.path, hit=h)
                self.successors.add(c.key)
                self.cands.setdefault(c.key, c)  # so the tail does not repeat it
                extra[p] = c
        out: list[_Cand] = []
        done: set[int] = set()
        placed: set[str] = set()
        for i, c in enumerate(ordered):
            if i in done:
                continue
            head = head_of.get(c.path) if c.spool is None else None
            if head is not None and head not in placed:
                j = first.get(head)
                if j is not None and j > i:
                    moved = ordered[j]
                    moved.score = max(moved.score, c.score)
                    out.append(moved)
                    done.add(j)
                    placed.add(head)
                elif head in extra:
                    extra[head].score = c.score
                    out.append(extra.pop(head))
                    placed.add(head)
            out.append(c)
            if c.spool is None:
                placed.add(c.path)
        return out

    # -- items --------------------------------------------------------------------------
    def _why(self, c: _Cand) -> list[str]:
        why: list[str] = []
        if c.spool is not None:
            why.append("spool")
            if "spool" in c.signals:
                why.append("text")
            if "all-words" in c.signals:
                why.append("all-words")
            if self.spool_rank.get(c.path, WHY_TOP) < WHY_TOP:
                why.append("page")
            if c.path in self.recent_why:
                why.append("recent")
            return why
        if c.raw > 0:
            why.append("text")
        if c.context > c.raw:
            why.append("context")
        if "all-words" in c.signals:
            why.append("all-words")
        if c.signals.get("dense", WHY_TOP) < WHY_TOP:
            why.append("dense")
        pr = self.page_ranks
        if pr.get("entity", {}).get(c.path) is not None:
            why.append("entity")
            how = self.entity_how.get(c.path)
            if how and how not in why:
                why.append(how)
        if pr.get("fields", {}).get(c.path, WHY_TOP) < WHY_TOP:
            why.extend(w for w in self._field_matches(c.path) if w not in why)
        if pr.get("page", {}).get(c.path, WHY_TOP) < WHY_TOP:
            why.append("page")
        if c.path in pr.get("link", {}):
            why.append("link")
        if c.path in self.recent_why:
            why.append("recent")
        if "when" in c.signals:
            why.append("when")
        if c.key in self.successors:
            why.append("successor")
        if not self.live:
            why.append("as_of")
        return why or ["text"]

    def _field_matches(self, path: str) -> list[str]:
        row = self.rows.get(path)
        if row is None:
            return []
        qt = self.q.content_tokens
        out = []
        if qt & set(words(row["title"])):
            out.append("title")
        if any(qt & set(words(a)) for a in row["aliases"]):
            out.append("alias")
        if any(qt & set(words(t)) for t in row["tags"]):
            out.append("tags")
        return out

    def item(self, c: _Cand) -> dict[str, Any]:
        """The recall item of a ranked candidate."""
        if c.spool is not None:
            it = _spool_item(self.memory, c.spool, self.q.text, c.score, self._why(c))
            if it is None:  # the session ended between ranking and now
                it = {
                    "id": f"spool:{c.spool.obs_id}",
                    "path": c.path,
                    "anchor": c.path,
                    "title": "Ended session",
                    "kind": "session",
                    "snippet": make_snippet(str(c.spool.text), self.q.text),
                    "why": self._why(c),
                    "score": round(c.score, 4),
                    "expand_tokens": _count(str(c.spool.text)),
                    "updated": c.spool.ts,
                }
            return {**it, **self._also(c)}
        h = c.hit
        assert h is not None
        anchor = f"{h.path}#{h.anchor}" if h.anchor else h.path
        item_id = (
            f"asof:{self.as_of_sha[:12]}:{anchor}" if self.as_of_sha else self.memory.handle(anchor)
        )
        return {
            "id": item_id,
            "path": h.path,
            "anchor": anchor,
            "title": h.title,
            "kind": h.kind,
            "snippet": make_snippet(h.text or h.heading, self.q.text),
            "why": self._why(c),
            "score": round(c.score, 4),
            "expand_tokens": _count(h.text),
            "updated": h.updated,
            **self.chains.mark(h.path),
            **self._also(c),
            **self._collapsed(c),
        }

    def _collapsed(self, c: _Cand) -> dict[str, Any]:
        """``{"collapsed": n, "collapsed_paths": [...]}`` on a kept candidate that has
        near-duplicates of other pages grouped under it (the first :data:`COLLAPSED_NAMED`
        paths), ``{"collapsed_into": anchor}`` on a grouped one, else ``{}``."""
        if c.into is not None and c.into.hit is not None:
            h = c.into.hit
            return {"collapsed_into": f"{h.path}#{h.anchor}" if h.anchor else h.path}
        paths = list(dict.fromkeys(m.path for m in c.group))
        if not paths:
            return {}
        return {"collapsed": len(paths), "collapsed_paths": paths[:COLLAPSED_NAMED]}

    def _also(self, c: _Cand) -> dict[str, Any]:
        """``{"also": [{id, anchor, snippet}, ...]}`` for the entries of its page carried
        in this item's slot by the per-page cap (:func:`_cap_pages`), else ``{}``."""
        if not c.also:
            return {}
        out = []
        for sub in c.also:
            it = self.item(sub)
            out.append({"id": it["id"], "anchor": it["anchor"], "snippet": it["snippet"]})
        return {"also": out}


def _head_only(h: Hit) -> bool:
    return h.anchor.startswith("^") and not _TIMELINE_HEAD.sub("", h.text, count=1).strip()


def _span(c: _Cand) -> tuple[float, float] | None:
    """When ``c`` happened: its section's time range, or a spooled event's instant."""
    if c.hit is not None:
        return c.hit.span
    try:
        t = parse_time(getattr(c.spool, "ts", None), "ts")
    except ValueError:
        return None
    return (t, t) if t is not None else None


def _day(c: _Cand) -> str | None:
    if c.hit is not None:
        return c.hit.day
    ts = getattr(c.spool, "ts", None)
    return str(ts)[:10] if ts else None


def _cap_pages(ordered: list[_Cand], cap: int = PAGE_CAP) -> list[_Cand]:
    """``ordered`` candidates with at most ``cap`` slots of one page (a running
    session's observations count for its page) among the first :data:`TOP_SLOTS`.

    A page's further entries that rank within the first :data:`TOP_SLOTS` matches are
    carried in its last capped slot (``also`` of that candidate, in rank order): they
    take no slot of their own, and the first slots show other pages. Entries moved out
    from further down follow, in their order, after those slots. So the first slots'
    items, read with what they carry, hold every one of the first :data:`TOP_SLOTS`
    matches (docs/ranking.md, "Diversity and order")."""
    top: list[_Cand] = []
    later: list[_Cand] = []
    per: dict[str, int] = defaultdict(int)
    last: dict[str, _Cand] = {}
    for i, c in enumerate(ordered):
        if len(top) < TOP_SLOTS and per[c.path] < cap:
            top.append(c)
            per[c.path] += 1
            last[c.path] = c
        elif len(top) < TOP_SLOTS and i < TOP_SLOTS and c.path in last:
            last[c.path].also.append(c)
        else:
            later.append(c)
    return top + later


def _decayed(scores: list[float], depth: int = PAGE_DEPTH, ratio: float = PAGE_RATIO) -> float:
    """The sum of the best ``depth`` of ``scores``, each weighted ``ratio`` times the one
    before (the first weighs 1)."""
    return sum(s * ratio**i for i, s in enumerate(sorted(scores, reverse=True)[:depth]))


def _order_key(c: _Cand) -> tuple[float, str, int, str]:
    return (-c.score, c.path, c.hit.ord if c.hit is not None else 0, c.key[1])


def _content(c: _Cand) -> str:
    """The text compared for near-duplicates: without a timeline entry's head line
    (time, kind, speaker) and fence lines."""
    if c.spool is not None:
        return str(c.spool.text)
    assert c.hit is not None
    text = _TIMELINE_HEAD.sub("", c.hit.text, count=1)
    return _FENCE_LINE.sub("", text) or c.hit.heading


TEXT_CACHE = 4096
"""Section texts whose words, numbers and token counts are kept between recalls (each
entry holds its text and its word set, a few KB): in process, 100 queries of the
20,000-page bench corpus grew the resident memory by 115 MB with 20,000 entries and by
64 MB with 4,096, at the same speed (bench/RESULTS.md, "Recall at 100,000 pages")."""


def clear_caches() -> None:
    """Empty the caches of section texts' words and counts (after a purge)."""
    for fn in (_tokens, _count, _numbers):
        fn.cache_clear()


@functools.lru_cache(maxsize=TEXT_CACHE)
def _tokens(text: str) -> frozenset[str]:
    """The words compared for near-duplicates."""
    return frozenset(words(text))


@functools.lru_cache(maxsize=TEXT_CACHE)
def _count(text: str) -> int:
    return count_tokens(text)


NAMING_WORDS = frozenset(
    "prod production staging stage preprod dev development test qa uat sandbox canary "
    "localhost".split()
)
"""Words that name an environment: like a number, one found on one side only keeps two
near-identical texts apart ("never push to prod" against "never push to staging")."""


@functools.lru_cache(maxsize=TEXT_CACHE)
def _numbers(toks: frozenset[str]) -> frozenset[str]:
    """What tells facts apart however alike their words: the words with a digit (dates,
    counts, versions, ids) and the :data:`NAMING_WORDS`."""
    # isalpha() (one C call) rules out most words: a letter is never a digit
    return frozenset(
        t for t in toks if (not t.isalpha() and any(ch.isdigit() for ch in t)) or t in NAMING_WORDS
    )


def _duplicate_of(toks: frozenset[str], seen: list[frozenset[str]]) -> int | None:
    """The index of the first word set in ``seen`` that ``toks`` nearly duplicates."""
    if not toks:
        return None
    n = len(toks)
    nums = _numbers(toks)
    for i, other in enumerate(seen):
        if not other or _numbers(other) != nums:
            continue
        inter = len(toks & other)
        if inter * 5 >= 4 * (n + len(other) - inter):
            return i
        small = min(n, len(other))
        if small >= 5 and inter * 10 >= 9 * small:
            return i
    return None


DEDUP_SAMPLE = 500
"""The first this many matches give the word counts that order :class:`_Dedup`'s prefixes."""


class _Dedup:
    """The near-duplicate rule of :func:`_duplicate_of` against the first
    :data:`DEDUP_SCAN` kept matches of each group of equal numbers, without comparing with
    each of them: a prefix filter (Chaudhuri et al. 2006, "A primitive operator for
    similarity joins"). Both of the rule's tests need the two word sets to share at least
    8/9 of the smaller one's words (Jaccard ≥ 0.8 gives 9·shared ≥ 4·(n+m) ≥ 8·min), so
    with every set's words in one fixed order (rarest in ``sample`` first), the smaller
    set's first ``s - ⌊8s/9⌋ + 1`` words hold a shared word. ``find`` looks only at kept
    sets found through those prefixes and answers exactly what comparing in turn would:
    the earliest kept match that is a near-duplicate."""

    def __init__(self, sample: Iterable[frozenset[str]]) -> None:
        #: how many sets of ``sample`` hold each word: the fixed order is by (count, word),
        #: so unseen words come first, among themselves alphabetical
        self._counts = Counter(itertools.chain.from_iterable(sample))
        self._prefixes: dict[frozenset[str], list[str]] = {}
        #: numbers -> (members [(kept index, words)], word -> members holding it,
        #: prefix word -> members whose prefix holds it); members as bits of an int
        #: (bit ``pos`` for ``members[pos]``): one OR per word, no list per word
        self._groups: dict[
            frozenset[str],
            tuple[list[tuple[int, frozenset[str]]], dict[str, int], dict[str, int]],
        ] = {}

    def _prefix(self, toks: frozenset[str]) -> list[str]:
        got = self._prefixes.get(toks)
        if got is None:
            k = len(toks) - (8 * len(toks)) // 9 + 1
            count = self._counts.get
            got = self._prefixes[toks] = sorted(toks, key=lambda w: (count(w, 0), w))[:k]
        return got

    def find(self, toks: frozenset[str]) -> int | None:
        """The kept index of the first kept set ``toks`` nearly duplicates, or None."""
        group = self._groups.get(_numbers(toks)) if toks else None
        if group is None:
            return None
        members, every, prefix = group
        near = 0
        get = every.get
        for w in self._prefix(toks):
            near |= get(w, 0)
        get = prefix.get
        for w in toks:
            near |= get(w, 0)
        while near:  # the members in kept order: lowest bit first
            low = near & -near
            kept_at, other = members[low.bit_length() - 1]
            if _duplicate_of(toks, [other]) is not None:
                return kept_at
            near ^= low
        return None

    def add(self, kept_at: int, toks: frozenset[str]) -> None:
        """Keep ``toks`` (kept index ``kept_at``) for later :meth:`find` calls."""
        group = self._groups.setdefault(_numbers(toks), ([], {}, {}))
        members, every, prefix = group
        if len(members) >= DEDUP_SCAN:
            return
        bit = 1 << len(members)
        members.append((kept_at, toks))
        if not toks:
            return  # an empty set never matches
        get = every.get
        for w in toks:
            every[w] = get(w, 0) | bit
        get = prefix.get
        for w in self._prefix(toks):
            prefix[w] = get(w, 0) | bit


def near_duplicate(a: Set[str], b: Set[str]) -> bool:
    """True when two word sets say the same thing: the same numbers (a word with a digit:
    dates, counts, versions and ids tell facts apart) and environment names
    (:data:`NAMING_WORDS`), and Jaccard similarity ≥ 0.8, or
    (both at least 5 words) the smaller 90% inside the larger. Empty sets never match."""
    return _duplicate_of(frozenset(a), [frozenset(b)]) is not None


def _spool_item(
    memory: Sources, s: Any, query: str, score: float, why: list[str]
) -> dict[str, Any] | None:
    info = memory.spool.sessions.get(s.session_key)
    if info is None:
        return None
    path = info.state.get("path") or compiler.page_path(
        compiler.SessionMeta(
            info.key,
            info.harness,
            info.session_id,
            info.project,
            info.user,
            info.cwd,
            info.started,
        ),
        memory.spool.observations(info.key)[:50],
    )
    anchor = f"{path}#^t{s.obs_id.rsplit('-', 1)[-1]}"
    return {
        "id": f"spool:{s.obs_id}",
        "path": path,
        "anchor": anchor,
        "title": f"Running session {info.session_id[:24]} ({info.harness})",
        "kind": "session",
        "snippet": make_snippet(s.text, query),
        "why": why,
        "score": round(score, 4),
        "expand_tokens": _count(s.text),
        "updated": s.ts,
    }


def make_snippet(text: str, query: str, width: int = 220) -> str:
    """One line of ``text`` around the first query word found (fence lines dropped)."""
    lines = [
        ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith(("~~~", "```"))
    ]
    flat = " ".join(" ".join(lines).split())
    if len(flat) <= width:
        return flat
    low = flat.lower()
    pos = -1
    for w in sorted(query.split(), key=len, reverse=True):
        w = w.strip("\"'()?!.,:;").lower()
        if len(w) > 2:
            pos = low.find(w)
            if pos >= 0:
                break
    start = max(0, pos - width // 3) if pos >= 0 else 0
    out = flat[start : start + width]
    return ("…" if start else "") + out + ("…" if start + width < len(flat) else "")
