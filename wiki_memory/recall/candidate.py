"""A recall candidate and what ranking reads of it: its time, its day, its order key and
the text compared for near-duplicates (:mod:`wiki_memory.recall.rank`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wiki_memory.index.sectionwords import TIMELINE_HEAD, content_text
from wiki_memory.index.signals import Hit
from wiki_memory.recall.filters import parse_time


@dataclass
class Cand:
    """A candidate section (``hit``) or spooled observation (``spool``)."""

    key: tuple[str, str]
    path: str
    hit: Hit | None = None
    spool: Any = None
    score: float = 0.0
    signals: dict[str, int] = field(default_factory=dict)  # section-level: name -> rank
    raw: float = 0.0  # own bm25 in the text signal
    context: float = 0.0  # bm25 share from neighbouring entries
    also: list[Cand] = field(default_factory=list)  # entries of its page carried in its slot
    #: near-duplicates of other pages grouped under this kept candidate
    group: list[Cand] = field(default_factory=list)
    into: Cand | None = None  # the kept candidate this one was grouped under


def head_only(h: Hit) -> bool:
    """``h`` is a timeline entry that is only its head line (``**09:01:39** · session end``)."""
    return h.anchor.startswith("^") and not TIMELINE_HEAD.sub("", h.text, count=1).strip()


def span(c: Cand) -> tuple[float, float] | None:
    """When ``c`` happened: its section's time range, or a spooled event's instant."""
    if c.hit is not None:
        return c.hit.span
    try:
        t = parse_time(getattr(c.spool, "ts", None), "ts")
    except ValueError:
        return None
    return (t, t) if t is not None else None


def day(c: Cand) -> str | None:
    """The day (``YYYY-MM-DD``) ``c`` happened on, or None."""
    if c.hit is not None:
        return c.hit.day
    ts = getattr(c.spool, "ts", None)
    return str(ts)[:10] if ts else None


def order_key(c: Cand) -> tuple[float, str, int, str]:
    """The fused order: score down, then path, page order, anchor."""
    return (-c.score, c.path, c.hit.ord if c.hit is not None else 0, c.key[1])


def content(c: Cand) -> str:
    """The text compared for near-duplicates: without a timeline entry's head line
    (time, kind, speaker) and fence lines."""
    if c.spool is not None:
        return str(c.spool.text)
    assert c.hit is not None
    return content_text(c.hit.text, c.hit.heading)


def decayed(scores: list[float], depth: int, ratio: float) -> float:
    """The sum of the best ``depth`` of ``scores``, each weighted ``ratio`` times the one
    before (the first weighs 1)."""
    return sum(s * ratio**i for i, s in enumerate(sorted(scores, reverse=True)[:depth]))
