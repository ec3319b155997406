"""The ``text`` signal (section level): FTS5 bm25 of the query's words (OR, stemmed) in
the section's own heading and body, plus a share of the bm25 of the timeline entries
just before and after it (``context``). ``why``: ``text``, and ``context`` when the
neighbours counted more than its own text."""

from __future__ import annotations

from wiki_memory.index import signals
from wiki_memory.index.signals import Hit
from wiki_memory.recall.candidate import Cand, head_only
from wiki_memory.recall.pool import Pool

NAME = "text"
WEIGHT = 1.0
"""Its weight in the fusion (docs/ranking.md)."""
CONTEXT_BEFORE = 0.3
"""Share of the previous timeline entry's bm25 added to an entry (an answer follows its
question; a tool result follows the prompt that asked for it)."""
CONTEXT_AFTER = 0.12
"""Share of the next timeline entry's bm25 added to an entry."""
CONTEXT_HITS = 60
"""Timeline entries among the best text hits whose neighbours are scored."""


def collect(pool: Pool, hits: list[Hit], context: float) -> None:
    """Rank ``hits`` (by heading+body bm25, from
    :func:`wiki_memory.index.signals.search_sections_both`) re-scored with their timeline
    neighbours (``context`` scales the neighbours' shares; 0 turns them off)."""
    pool.section_list(NAME, rescored(pool, hits, context))


def rescored(pool: Pool, hits: list[Hit], context: float) -> list[Hit]:
    """``hits`` (by heading+body bm25) re-scored with their timeline neighbours.

    A timeline entry that is only its head line (``**09:01:39** · session end``) is
    left out: its words are the compiler's, on every page of its kind."""
    hits = [h for h in hits if not head_only(h)]
    raw = {(h.path, h.ord): h for h in hits}
    for h in hits:
        c = pool.cand(h)
        c.raw = h.score
    want = set()
    before_share = CONTEXT_BEFORE * context
    after_share = CONTEXT_AFTER * context
    for h in hits[:CONTEXT_HITS] if context > 0 else []:
        if h.anchor.startswith("^"):
            want.update({(h.path, h.ord - 1), (h.path, h.ord + 1)})
    known = {k for k in want if k in raw}
    extra = {
        (n.path, n.ord): n
        for n in signals.neighbours(pool.index, want - known)
        if n.anchor.startswith("^") and not head_only(n)
    }
    both = {**extra, **raw}
    blocks = {k: h for k, h in both.items() if h.anchor.startswith("^")}
    scored: list[tuple[float, Hit]] = []
    for (path, o), h in both.items():
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
        c = pool.cand(h)
        c.context = ctx
        scored.append((own + ctx, h))
    scored.sort(key=lambda t: (-t[0], t[1].path, t[1].ord))
    return [h for _, h in scored]


def why(pool: Pool, c: Cand) -> list[str]:
    """``text`` when the section's own text matched, ``context`` when its neighbours
    counted more."""
    out = ["text"] if c.raw > 0 else []
    if c.context > c.raw:
        out.append("context")
    return out
