"""Budgeted recall, one page at a time: the core operation behind HTTP ``/v1/recall``,
MCP ``memory_recall``, the CLI's ``recall`` and the web view's search.

:class:`Recaller` takes the :class:`~wiki_memory.recall.query.RecallQuery` a face built,
orders every match with :func:`wiki_memory.recall.rank.ranked` over the
:class:`~wiki_memory.recall.pool.Sources` the core gives it (never the whole ``Memory``),
filtered by the scope rule before ranking, and packs the longest run of matches that fits
the budget (tokens counted by :func:`wiki_memory.recall.tokens.count_item`). The paging
contract is in ``docs/api.md`` ("Recall").
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import Any

from wiki_memory import zones
from wiki_memory.config import Settings
from wiki_memory.core.contradictions import find_contradictions, flags_by_page
from wiki_memory.core.fieldsjson import fields_json
from wiki_memory.core.scanrecall import scan_recall
from wiki_memory.core.scope import ScopeRule
from wiki_memory.core.userecord import UseRecord
from wiki_memory.errors import BadRequest
from wiki_memory.identity import Identity
from wiki_memory.index.search import SearchError
from wiki_memory.index.subjects import NOTE_KINDS
from wiki_memory.recall import rank
from wiki_memory.recall.pack import offer
from wiki_memory.recall.pool import Sources
from wiki_memory.recall.query import RecallQuery

#: the largest ``budget_tokens`` recall accepts
MAX_BUDGET_TOKENS = 2_000_000_000

#: recalls ranked at once (the others wait their turn, holding no CPU): ranking is mostly
#: Python, so more at once only share the interpreter's lock, and each thread that holds
#: it makes the event loop wait its turn at every hand-over (captures and every other
#: request are answered there); one per core keeps SQLite's own work side by side
RECALL_THREADS = max(2, os.cpu_count() or 2)


@dataclass
class RecallResult:
    """One page of recall: ``{items, used_tokens, budget_tokens, omitted, total, cursor,
    next_cursor, needs_tokens}``.

    ``total``: every match; ``cursor``: the rank (0 = best) of the first item;
    ``omitted``: the matches after this page (``total`` - ``cursor`` - ``len(items)``
    while the wiki does not change); ``next_cursor``: where the next page starts (a walk
    cursor: :func:`walk_cursor`), None when every match is returned or the next match
    alone is over the budget; then ``needs_tokens`` is what that match costs (else None).
    ``changed``: the number of matches changed since the walk's first page (matches added
    since may be left out; none is returned twice). ``complete``: False while the index
    is being rebuilt (the answer comes from a scan of the page files,
    :mod:`wiki_memory.core.scanrecall`, and may miss matches), else True."""

    items: list[dict[str, Any]]
    used_tokens: int
    budget_tokens: int
    omitted: int
    total: int = 0
    cursor: int = 0
    next_cursor: int | None = None
    needs_tokens: int | None = None
    changed: bool = False
    complete: bool = True

    def to_json(self) -> dict[str, Any]:
        """Every field under its own name (:func:`~wiki_memory.core.fieldsjson.fields_json`)."""
        return fields_json(self)


POS_BITS = 24
"""A walk cursor holds the rank of its next match in its low 24 bits, the walk's number
(:data:`WALKS`) in the next 8 and the fingerprint of its query and filters in 20 above
(at most 2^52: exact in every JSON reader). A cursor under 2^24 is a plain rank."""
WALKS = 256
"""Walks (their returned matches) kept per server; an older walk's cursor still pages by
rank, without the guarantee against repeats."""
BACKSCAN = 200
"""A walk's next page looks back this many ranks (plus the change in the number of
matches) for matches that moved up while the wiki changed, skipping those returned."""


def fingerprint(query: str, filters: dict[str, Any]) -> int:
    """The 20-bit fingerprint (1 … 2^20 - 1) of a query and its filters, held by its
    walk cursors."""
    raw = json.dumps([query, filters], sort_keys=True, default=str).encode("utf-8")
    return int(hashlib.sha1(raw).hexdigest()[:8], 16) % ((1 << 20) - 1) + 1


def walk_cursor(fp: int, walk: int, pos: int) -> int:
    """The cursor of rank ``pos`` in walk ``walk`` of the query of fingerprint ``fp``
    (``pos`` itself when it does not fit in :data:`POS_BITS`)."""
    if pos >= 1 << POS_BITS:
        return pos
    return (fp << (POS_BITS + 8)) | (walk << POS_BITS) | pos


def read_cursor(cursor: int) -> tuple[int | None, int, int]:
    """``(fingerprint or None for a plain rank, walk, rank)`` of a cursor."""
    if cursor < 1 << POS_BITS:
        return None, 0, cursor
    return cursor >> (POS_BITS + 8), (cursor >> POS_BITS) & 0xFF, cursor & ((1 << POS_BITS) - 1)


@dataclass
class _Walk:
    """What one walk returned (match keys) and how many matches it began with."""

    total: int
    start: int = 0  # the rank it began at
    seen: set[str] = field(default_factory=set)
    #: cursor given -> the keys its page returned (a page asked for again: a retry, or
    #: a browser going back)
    pages: dict[int, list[str]] = field(default_factory=dict)


class Recaller:
    """Recall for one memory: ``sources`` (what ranking reads), ``scope`` (the one access
    rule), ``settings`` (``default_budget_tokens``) and ``audit_read(user, op, target)``,
    called once per recall."""

    def __init__(
        self,
        sources: Sources,
        scope: ScopeRule,
        settings: Settings,
        audit_read: Callable[[Identity | None, str, str], None],
        use: UseRecord | None = None,
    ) -> None:
        self.sources = sources
        self.scope = scope
        self.default_budget = settings.default_budget_tokens
        #: ``recall_plain``: every match read into Python (the path the optimized one is
        #: checked against; docs/ranking.md)
        self.plain = settings.recall_plain
        self.audit_read = audit_read
        #: where the pages a recall returns are counted (never the query)
        self.use = use
        #: (user, fingerprint, walk number) -> walk, the newest last
        self._walks: OrderedDict[tuple[str, int, int], _Walk] = OrderedDict()
        self._walk_no = 0
        self._walks_lock = threading.Lock()
        #: :data:`RECALL_THREADS` turns for the ranking (or the scan) of a recall
        self.turns = threading.BoundedSemaphore(RECALL_THREADS)

    def recall(
        self,
        query: str | RecallQuery,
        *,
        project: str | None = None,
        budget_tokens: int | None = None,
        kinds: list[str] | None = None,
        cursor: int = 0,
        user: Identity | None = None,
        tags: list[str] | str | None = None,
        since: str | float | None = None,
        until: str | float | None = None,
        as_of: str | float | None = None,
        now: str | float | None = None,
        fits: Callable[[list[dict[str, Any]]], bool] | None = None,
        tz: str | None = None,
    ) -> RecallResult:
        """Budgeted recall, one page: handles for the best sections and running-session
        observations, from the match ranked ``cursor`` on (0 = best).

        ``query`` is the :class:`~wiki_memory.recall.query.RecallQuery` a face built (its
        fields are described there), or its text with the same fields as keywords (then
        ``cursor`` 0 and ``budget_tokens`` None are the defaults); not both (TypeError).
        ``user`` is the caller and ``fits`` a face's own cap, below.

        Each item is ``{id, path, anchor, title, kind, snippet, why, score, expand_tokens,
        updated}``. Every match is reachable (no ceiling on their number: the fusion ranks a
        pool, the other matches follow by bm25, :data:`wiki_memory.recall.rank.POOL`;
        ``recall_plain`` reads them all into Python, the default counts them in SQL and
        reads those it returns); a page is the
        longest run of matches from ``cursor``, in rank order, whose items (counted as
        serialized: compact JSON, cl100k) fit ``budget_tokens`` whole, and, when given,
        for which ``fits(items)`` holds (a face's own cap). So following ``next_cursor``
        returns every match exactly once while the wiki does not change (a change in
        between may shift ranks). ``user`` is the caller (a name or an
        :class:`~wiki_memory.identity.Identity`; None is an anonymous caller, who sees shared pages only): pages it may
        not see (:mod:`wiki_memory.identity`) are filtered out in the SQL before ranking
        (invariant 9). Filters ``tags``,
        ``since``/``until`` (ISO-8601 or epoch seconds) and ``as_of`` (the wiki as committed
        then) are described in :class:`~wiki_memory.recall.query.RecallQuery`; ``now`` (ISO-8601 or
        epoch seconds, default the present) is the reference time for relative dates in
        the query ("last week"); ``tz`` the caller's time zone (default the user's stored
        one, else UTC: :mod:`wiki_memory.zones`), whose days those are.

        When the budget cannot hold the page's first item in full, the whole page is
        compact handles (``{id, title, snippet, compact: true}``,
        :func:`~wiki_memory.recall.pack.compact`): a reply is all full items or all
        compact ones, and a small budget still gets its best matches.

        Raises BadRequest (a ValueError naming the field) for a budget outside
        0 … :data:`MAX_BUDGET_TOKENS`, a negative cursor or a bad filter.
        """
        q = (
            _query(query, project, budget_tokens, kinds, cursor, tags, since, until, as_of, now, tz)
            if isinstance(query, RecallQuery)
            else RecallQuery(
                query,
                project=project,
                kinds=kinds,
                tags=tags,
                since=since,
                until=until,
                as_of=as_of,
                now=now,
                tz=tz,
                budget_tokens=budget_tokens,
                cursor=cursor,
            )
        )
        budget = self.default_budget if q.budget_tokens is None else q.budget_tokens
        if budget < 0 or budget > MAX_BUDGET_TOKENS:
            raise BadRequest(
                f"budget_tokens must be an integer from 0 to {MAX_BUDGET_TOKENS:,}",
                field="budget_tokens",
            )
        cursor = q.cursor
        if cursor < 0 or cursor >= 1 << 53:
            raise BadRequest("cursor must be 0 or a next_cursor recall returned", field="cursor")
        who = self.scope.identity(user)
        tz_name = zones.zone(q.tz, who.tz if who is not None else None)
        fp = fingerprint(q.text, q.fingerprint_fields(tz_name))
        given = cursor
        given_fp, walk_no, cursor = read_cursor(cursor)
        if given_fp is not None and given_fp != fp:
            raise BadRequest(
                "this cursor belongs to another query (or other filters): start again from 0",
                field="cursor",
            )
        index = self.sources.index
        if index.damaged is None:
            try:
                with self.turns:
                    return self._ranked(
                        q, who, tz_name, fp, given, given_fp, walk_no, cursor, budget, user, fits
                    )
            except SearchError:
                if index.damaged is None:
                    raise  # the engine failed: never "no results"
        # the index is being rebuilt (found damaged, or missing on a large wiki): a scan
        # of the page files, marked incomplete
        with self.turns:
            got = scan_recall(self.scope, who, q, budget, cursor, fits, self.sources.handle)
        self.audit_read(user, "recall", (q.project or "") + ":" + q.text[:200])
        if self.use is not None:
            self.use.note("recalled", [str(i["path"]) for i in got.items], who.user or None)
        first = min(cursor, got.total)
        return RecallResult(
            got.items,
            got.used_tokens,
            budget,
            got.total - got.pos,
            total=got.total,
            cursor=first,
            next_cursor=got.pos if got.pos < got.total and got.items else None,
            needs_tokens=got.needs_tokens,
            complete=False,
        )

    def _ranked(
        self,
        q: RecallQuery,
        who: Identity,
        tz_name: tzinfo,
        fp: int,
        given: int,
        given_fp: int | None,
        walk_no: int,
        cursor: int,
        budget: int,
        user: Identity | None,
        fits: Callable[[list[dict[str, Any]]], bool] | None,
    ) -> RecallResult:
        """One page of recall from the index (:meth:`recall`'s arguments, read)."""
        found = rank.ranked(self.sources, q, who=who, plain=self.plain, zone=tz_name)
        total = len(found)
        walk, walk_no = self._walk(who.user, fp, walk_no if given_fp is not None else None, total)
        if not walk.seen:
            walk.start = min(cursor, total)
        changed = walk.total != total
        items: list[dict[str, Any]] = []
        served: list[str] = []  # the pages of the items returned, for the use record
        keys: list[str] = []
        used = 0
        needs: int | None = None
        pos = min(cursor, total)
        again = walk.pages.get(given) if given_fp is not None else None
        if again is not None and not changed:
            skip: set[str] = set()  # a page asked for again, nothing changed: the same page
        else:
            # the matches earlier pages returned (a page asked for again: but its own)
            skip = walk.seen - set(again or ())
        if given_fp is not None and skip:
            # matches that moved up past the cursor while the wiki changed are looked for
            pos = max(walk.start, pos - BACKSCAN - abs(walk.total - total))
        first: int | None = None  # the rank of the first item returned
        memo: dict[str, Any] = {}  # each project's subjects, read once for the flags
        small = False  # compact handles: the budget cannot hold the first item in full
        while pos < total:
            try:
                key = found.key(pos)
                if key in skip:  # returned by an earlier page of this walk
                    pos += 1
                    continue
                item = found.item(pos)
            except IndexError:  # the index lost matches since they were counted
                total = pos
                break
            got = offer(self._flagged(item, who, memo), items, used, budget, small, fits)
            small = got.small
            if got.item is None:
                needs = got.needs
                break
            items.append(got.item)
            keys.append(key)
            first = pos if first is None else first
            if not str(found.item(pos).get("id", "")).startswith(("spool:", "asof:")):
                served.append(str(found.item(pos).get("path") or ""))
            used += got.cost
            pos += 1
        with self._walks_lock:
            walk.seen.update(keys)
            if given_fp is not None:
                walk.pages[given] = keys
        nxt = walk_cursor(fp, walk_no, pos) if pos < total and items else None
        self.audit_read(user, "recall", (q.project or "") + ":" + q.text[:200])
        if self.use is not None:
            self.use.note("recalled", served, who.user or None)
        return RecallResult(
            items,
            used,
            budget,
            total - pos,
            total=total,
            cursor=first if first is not None else min(cursor, total),
            next_cursor=nxt,
            needs_tokens=needs,
            changed=changed,
        )

    def _flagged(self, item: dict[str, Any], who: Identity, memo: dict[str, Any]) -> dict[str, Any]:
        """``item`` with ``contradicts`` (the pages it disagrees with that ``who`` may
        read; :mod:`wiki_memory.core.contradictions`) when there are any. Both sides stay
        in the results: a flag hides nothing."""
        path = item.get("path")
        if item.get("kind") not in NOTE_KINDS or not isinstance(path, str):
            return item
        flags = find_contradictions(
            self.sources.index, self.scope, who, None, only=[path], cache=memo
        )
        others = flags_by_page(flags).get(path)
        return {**item, "contradicts": others} if others else item

    def _walk(self, user: str, fp: int, number: int | None, total: int) -> tuple[_Walk, int]:
        """The walk ``number`` of ``user``'s query ``fp`` (a new one when None, or when
        this server no longer holds it: then it pages by rank, as from the start)."""
        with self._walks_lock:
            if number is not None:
                got = self._walks.get((user, fp, number))
                if got is not None:
                    self._walks.move_to_end((user, fp, number))
                    return got, number
                # held no more (a restart, or :data:`WALKS` newer ones): a fresh record
                walk = _Walk(total)
                self._walks[(user, fp, number)] = walk
            else:
                self._walk_no = number = (self._walk_no + 1) % WALKS
                walk = _Walk(total)
                self._walks[(user, fp, number)] = walk
                self._walks.move_to_end((user, fp, number))
            while len(self._walks) > WALKS:
                self._walks.popitem(last=False)
            return walk, number


def _query(query: RecallQuery, *given: Any) -> RecallQuery:
    """``query``, when no other field is ``given`` beside it (``project, budget_tokens,
    kinds, cursor, tags, since, until, as_of, now, tz``: their defaults). Raises
    TypeError otherwise: a recall's fields are written once, in its RecallQuery."""
    if any(v not in (None, 0) for v in given):
        raise TypeError("the fields of a recall are given in its RecallQuery, not beside it")
    return query
