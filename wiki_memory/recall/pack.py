"""Packing whole items under a token budget (invariant 5: never over, never half an item)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from wiki_memory.recall.tokens import count_item


@dataclass
class Packed:
    """Items that fit, their total tokens, and how many candidates were left out."""

    items: list[dict[str, Any]] = field(default_factory=list)
    used_tokens: int = 0
    omitted: int = 0
    omitted_ids: list[str] = field(default_factory=list)


COMPACT_TITLE_WORDS = 8
"""A compact handle's title keeps at most this many words."""
COMPACT_MIN_WORDS = 10
"""A compact handle's snippet keeps at least this many words (fewer only when the
snippet has fewer), and at most :data:`COMPACT_MAX_WORDS`."""
COMPACT_MAX_WORDS = 40


_TIME_HEAD = re.compile(r"^\*\*\d\d:\d\d:\d\d\*\*(?: \([^)\n]{1,24}\))? · ")


def _cut(text: str, n: int) -> str:
    words = text.split()
    return " ".join(words[:n]) + ("…" if len(words) > n else "")


def compact(item: dict[str, Any], room: int) -> dict[str, Any] | None:
    """The compact handle of a recall item: ``{id, title, snippet, compact: true}`` (plus
    ``superseded_by`` for a superseded page's, ``conflict_of`` for a conflict copy's,
    ``contradicts`` for a flagged note's,
    ``collapsed`` and ``collapsed_into`` for a near-duplicate group's) with
    the title cut to :data:`COMPACT_TITLE_WORDS` words and the snippet to the most words
    (between :data:`COMPACT_MIN_WORDS` and :data:`COMPACT_MAX_WORDS`) that keep it within
    ``room`` tokens as serialized; None when even the shortest does not fit, or the item
    has no ``id``. ``expand(id)`` gives the whole section."""
    if "id" not in item or room <= 0:
        return None
    snippet = _TIME_HEAD.sub("", str(item.get("snippet") or ""), count=1)
    title = _cut(str(item.get("title") or ""), COMPACT_TITLE_WORDS)
    n_words = len(snippet.split())
    hi = min(n_words, COMPACT_MAX_WORDS)
    lo = min(n_words, COMPACT_MIN_WORDS)
    best: dict[str, Any] | None = None
    while lo <= hi:  # the longest snippet that fits (token cost grows with the words)
        mid = (lo + hi) // 2
        cand = {"id": item["id"], "title": title, "snippet": _cut(snippet, mid), "compact": True}
        if item.get("superseded_by"):  # a superseded page stays marked (invariant 14)
            cand["superseded_by"] = item["superseded_by"]
        if item.get("conflict_of"):  # and so does a conflict copy
            cand["conflict_of"] = item["conflict_of"]
        if item.get("contradicts"):  # and a flag never falls off
            cand["contradicts"] = item["contradicts"]
        for key in ("collapsed", "collapsed_into"):  # a group stays a group
            if item.get(key):
                cand[key] = item[key]
        if count_item(cand) <= room:
            best, lo = cand, mid + 1
        else:
            hi = mid - 1
    return best


def compact_floor(item: dict[str, Any]) -> int | None:
    """The tokens the shortest compact handle of ``item`` costs (the smallest budget
    :func:`compact` can fill with it); None when the item has no ``id``."""
    if "id" not in item:
        return None
    snippet = _TIME_HEAD.sub("", str(item.get("snippet") or ""), count=1)
    title = _cut(str(item.get("title") or ""), COMPACT_TITLE_WORDS)
    words = min(len(snippet.split()), COMPACT_MIN_WORDS)
    return count_item(
        {"id": item["id"], "title": title, "snippet": _cut(snippet, words), "compact": True}
    )


def pack(candidates: Iterable[dict[str, Any]], budget_tokens: int, greedy: bool = True) -> Packed:
    """Take candidates in order while each whole item fits in what is left of the budget.

    Each item is counted as serialized (compact JSON, see ``tokens.serialize``), and
    ``used_tokens`` is the sum of those counts. With ``greedy`` a later, smaller item may
    still fit after a larger one was skipped. A budget of 0 returns no items.
    """
    out = Packed()
    budget = max(0, int(budget_tokens))
    for item in candidates:
        cost = count_item(item)
        if out.used_tokens + cost <= budget:
            out.items.append(item)
            out.used_tokens += cost
        else:
            out.omitted += 1
            if "id" in item:
                out.omitted_ids.append(str(item["id"]))
            if not greedy:
                continue
    return out


@dataclass
class Offer:
    """What :func:`offer` decided for one item: ``item`` (as placed: the item or its
    compact handle; None when it did not fit), ``cost`` (its tokens), ``small`` (compact
    handles from here on) and ``needs`` (when nothing was placed yet and this item does
    not fit: the tokens its shortest form needs)."""

    item: dict[str, Any] | None
    cost: int
    small: bool
    needs: int | None = None


def offer(
    item: dict[str, Any],
    placed: list[dict[str, Any]],
    used: int,
    budget: int,
    small: bool,
    fits: Callable[[list[dict[str, Any]]], bool] | None = None,
) -> Offer:
    """Offer the next ranked ``item`` to a reply that holds ``placed`` (``used`` tokens
    of ``budget``): whole or not at all (invariant 5). When the first item alone is over
    the budget the reply turns to compact handles (``small``, kept for the items after
    it); ``fits(items)`` may refuse a reply a face cannot send. The one packing step of
    recall from the index and of the scan while it is rebuilt."""
    cost = count_item(item)
    if not placed and cost > budget > 0:
        small = True
    if small and (handle := compact(item, budget - used)) is not None:
        item, cost = handle, count_item(handle)
    if used + cost > budget or (fits is not None and not fits([*placed, item])):
        needs = None
        if not placed:  # a budget too small for any handle: what the shortest one needs
            floor = compact_floor(item) if small else None
            needs = floor if floor is not None and floor < cost else cost
        return Offer(None, cost, small, needs)
    return Offer(item, cost, small)
