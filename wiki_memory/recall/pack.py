"""Packing whole items under a token budget (invariant 5: never over, never half an item)."""

from __future__ import annotations

from collections.abc import Iterable
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
