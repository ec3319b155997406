"""Budgeted recall, one page at a time: the core operation behind HTTP ``/v1/recall``,
MCP ``memory_recall``, the CLI's ``recall`` and the web view's search.

:class:`Recaller` orders every match with :func:`wiki_memory.recall.rank.ranked` over the
:class:`~wiki_memory.recall.rank.Sources` the core gives it (never the whole ``Memory``),
filtered by the scope rule before ranking, and packs the longest run of matches that fits
the budget (tokens counted by :func:`wiki_memory.recall.tokens.count_item`). The paging
contract is in ``docs/api.md`` ("Recall").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wiki_memory import zones
from wiki_memory.config import Settings
from wiki_memory.core.scope import ScopeRule
from wiki_memory.core.userecord import UseRecord
from wiki_memory.errors import BadRequest
from wiki_memory.identity import Identity
from wiki_memory.recall import rank
from wiki_memory.recall.pack import compact, compact_floor
from wiki_memory.recall.tokens import count_item

#: the largest ``budget_tokens`` recall accepts
MAX_BUDGET_TOKENS = 2_000_000_000


@dataclass
class RecallResult:
    """One page of recall: ``{items, used_tokens, budget_tokens, omitted, total, cursor,
    next_cursor, needs_tokens}``.

    ``total``: every match; ``cursor``: the rank (0 = best) of the first item;
    ``omitted``: the matches after this page, none of them returned yet (``total`` -
    ``cursor`` - ``len(items)``); ``next_cursor``: where the next page starts, None when
    every match is returned or the next match alone is over the budget; then
    ``needs_tokens`` is what that match costs (else None)."""

    items: list[dict[str, Any]]
    used_tokens: int
    budget_tokens: int
    omitted: int
    total: int = 0
    cursor: int = 0
    next_cursor: int | None = None
    needs_tokens: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "used_tokens": self.used_tokens,
            "budget_tokens": self.budget_tokens,
            "omitted": self.omitted,
            "total": self.total,
            "cursor": self.cursor,
            "next_cursor": self.next_cursor,
            "needs_tokens": self.needs_tokens,
        }


#: the largest ``budget_tokens`` recall accepts
MAX_BUDGET_TOKENS = 2_000_000_000


class Recaller:
    """Recall for one memory: ``sources`` (what ranking reads), ``scope`` (the one access
    rule), ``settings`` (``default_budget_tokens``) and ``audit_read(user, op, target)``,
    called once per recall."""

    def __init__(
        self,
        sources: rank.Sources,
        scope: ScopeRule,
        settings: Settings,
        audit_read: Callable[[Identity | str | None, str, str], None],
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

    def recall(
        self,
        query: str,
        *,
        project: str | None = None,
        budget_tokens: int | None = None,
        kinds: list[str] | None = None,
        cursor: int = 0,
        user: Identity | str | None = None,
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
        then) are described in ``wiki_memory.recall.rank.candidates``; ``now`` (ISO-8601 or
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
        budget = self.default_budget if budget_tokens is None else budget_tokens
        if budget < 0 or budget > MAX_BUDGET_TOKENS:
            raise BadRequest(
                f"budget_tokens must be an integer from 0 to {MAX_BUDGET_TOKENS:,}",
                field="budget_tokens",
            )
        if cursor < 0:
            raise BadRequest("cursor must be 0 or a next_cursor recall returned", field="cursor")
        who = self.scope.identity(user)
        found = rank.ranked(
            self.sources,
            query,
            project=project,
            kinds=kinds,
            tags=tags,
            since=since,
            until=until,
            as_of=as_of,
            who=who,
            now=now,
            plain=self.plain,
            tz=zones.zone(tz, who.tz if who is not None else None),
        )
        total = len(found)
        items: list[dict[str, Any]] = []
        served: list[str] = []  # the pages of the items returned, for the use record
        used = 0
        needs: int | None = None
        pos = min(cursor, total)
        small = False  # compact handles: the budget cannot hold the first item in full
        while pos < total:
            try:
                item = found.item(pos)
            except IndexError:  # the index lost matches since they were counted
                total = pos
                break
            cost = count_item(item)
            if not items and cost > budget > 0:
                small = True
            if small and (handle := compact(item, budget - used)) is not None:
                item, cost = handle, count_item(handle)
            if used + cost > budget or (fits is not None and not fits([*items, item])):
                if not items:
                    # a budget too small for any handle: what the shortest handle needs
                    floor = compact_floor(item) if small else None
                    needs = floor if floor is not None and floor < cost else cost
                break
            items.append(item)
            if not str(found.item(pos).get("id", "")).startswith(("spool:", "asof:")):
                served.append(str(found.item(pos).get("path") or ""))
            used += cost
            pos += 1
        nxt = pos if pos < total and items else None
        self.audit_read(user, "recall", (project or "") + ":" + query[:200])
        if self.use is not None:
            self.use.note("recalled", served, who.user or None)
        return RecallResult(
            items,
            used,
            budget,
            total - pos,
            total=total,
            cursor=min(cursor, total),
            next_cursor=nxt,
            needs_tokens=needs,
        )
