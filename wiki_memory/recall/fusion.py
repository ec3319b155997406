"""Weighted reciprocal rank fusion of recall's signals, then the order a reply shows:
near-duplicates grouped, the first :data:`HEADS` items from distinct pages, at most
:data:`PAGE_CAP` slots of one page among the first :data:`TOP_SLOTS`, and a superseded
page after the head of its chain (docs/ranking.md, "Diversity and order").

score = Σ w_s / (k + rank_s), k = :data:`RRF_K` (Cormack, Clarke, Büttcher: "Reciprocal
rank fusion outperforms Condorcet and individual rank learning methods", SIGIR 2009)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from wiki_memory.index import signals
from wiki_memory.index.sectionwords import numbers_key, word_order
from wiki_memory.recall.candidate import Cand, content, order_key
from wiki_memory.recall.dedup import Dedup, numbers, tokens
from wiki_memory.recall.pool import Pool

RRF_K = 60
"""The k of reciprocal rank fusion (Cormack et al. 2009)."""
HEADS = 5
"""The first this many items come from distinct pages."""
TOP_SLOTS = 10
"""The first this many items hold at most :data:`PAGE_CAP` sections of any one page."""
PAGE_CAP = 3
HEAD_POOL = 50
"""The breadth-first heads are chosen among this many candidates, whatever the limit."""
SECTION_SIGNALS = ["text", "all-words", "spool", "when", "dense"]
PAGE_SIGNALS = ["page", "fields", "entity", "link", "recent", "strength"]
FACTOR_SIGNALS = ("recent", "strength")
"""Page signals that are a factor in [0, 1] of their weight / (k + 1), not a rank."""


def fuse(
    pool: Pool, w: Mapping[str, float], section_sigs: list[str], page_sigs: list[str]
) -> list[Cand]:
    """Score every candidate by the fusion of ``section_sigs`` and ``page_sigs``
    (weights ``w`` by signal name) and return them in fused order."""
    recency = pool.recency
    strength = pool.strength
    spool_rank = pool.spool_rank
    # looked up once per call, not per candidate; each term is still worked out as
    # w / (k + r + 1) and added in the same order, so scores stay bit-identical
    sections = [(name, w[name]) for name in section_sigs]
    recent = w["recent"] / (RRF_K + 1) if "recent" in page_sigs else None
    strong = w["strength"] / (RRF_K + 1) if "strength" in page_sigs else None
    ranks_of = pool.page_ranks
    pages = [(w[name], ranks_of.get(name, {})) for name in page_sigs if name not in FACTOR_SIGNALS]
    spool_page = w["page"] if "page" in page_sigs else None
    topic = w.get("topic", 1.0)
    for c in pool.cands.values():
        s = 0.0
        got = c.signals
        for name, wn in sections:
            r = got.get(name)
            if r is not None:
                s += wn / (RRF_K + r + 1)
        path = c.path
        if recent is not None:
            s += recent * recency.get(path, 0.0)
        if strong is not None and path in strength:
            s += strong * strength[path]
        if c.spool is None:
            for wn, ranks in pages:
                r = ranks.get(path)
                if r is not None:
                    s += wn / (RRF_K + r + 1)
        elif spool_page is not None:
            r = spool_rank.get(path)
            if r is not None:
                s += spool_page / (RRF_K + r + 1)
        if c.hit is not None and c.hit.kind == "topic":
            s *= topic  # a topic page's share (weights.Weights.topic)
        c.score = s
    return sorted(pool.cands.values(), key=order_key)


def strongest_pages(pool: Pool, w: Mapping[str, float], n: int) -> list[str]:
    """The first ``n`` distinct pages of a preliminary fusion of the word signals
    (``text``, ``all-words``, ``page``, ``fields``, ``entity``), best first: the pages
    whose links (``link``) and vectors (``dense``) are followed."""
    pages: list[str] = []
    for c in fuse(pool, w, ["text", "all-words"], ["page", "fields", "entity"]):
        if c.hit is not None and c.path not in pages:
            pages.append(c.path)
        if len(pages) >= n:
            break
    return pages


def order(pool: Pool, w: Mapping[str, float], limit: int, cap: int, every: bool) -> list[Cand]:
    """The candidates in the order a reply shows them, at most ``limit`` (then, when
    ``every`` match is asked for, the near-duplicates grouped under them); ``cap`` the
    per-page cap of the first slots (0: none)."""
    fused = fuse(pool, w, SECTION_SIGNALS, PAGE_SIGNALS)
    fused = [c for c in fused if c.score > 0]
    # a section with no text of its own (a bare heading, its content in blocks with
    # ids) stays when its heading holds a query word and is not the page's title;
    # otherwise it only stands for its page when nothing else of the page is there
    pages_with_text = {c.path for c in fused if c.hit is not None and c.hit.text.strip()}
    kept: list[Cand] = []
    groups: dict[int, list[Cand]] = defaultdict(list)
    # near-duplicates share their numbers: compare within those groups only, with the
    # first DEDUP_SCAN of each (every match is ranked now: keep this linear)
    dedup = Dedup()
    for c in fused:
        if (
            c.hit is not None
            and not c.hit.text.strip()
            and c.path in pages_with_text
            and (
                c.hit.heading.strip() == c.hit.title.strip()
                or not (pool.q.content_tokens & tokens(c.hit.heading))
            )
        ):
            continue
        h = c.hit
        if h is not None and h.words is not None and h.nums is not None and not dedup.known(h.nums):
            # the first of its numbers: no kept match to compare with, and its words are
            # split only when a later match with the same numbers is compared with it
            dedup.add_stored(len(kept), h.words, h.nums)
        else:
            toks, ordered, nums = compared(c)
            dup = dedup.find(toks, ordered, nums)
            if dup is not None:
                # within one page, the entry itself (a block: ``^t3``) takes the place of
                # a section repeating it (a session page's summary repeats the first prompt)
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
            dedup.add(len(kept), toks, ordered, nums)
        kept.append(c)
        if len(kept) >= max(limit, HEAD_POOL) + HEADS:
            break
    # the heads come from the first HEAD_POOL candidates whatever the limit, so the
    # first items do not depend on how many the caller asked for
    heads: list[Cand] = []
    rest: list[Cand] = []
    head_pages: set[str] = set()
    for i, c in enumerate(kept):
        if len(heads) < HEADS and c.path not in head_pages and i < HEAD_POOL:
            heads.append(c)
            head_pages.add(c.path)
        else:
            rest.append(c)
    # a running session that ended meanwhile has no item: it is no match
    sessions = pool.sources.spool.sessions
    live = [c for c in heads + rest if c.spool is None or c.spool.session_key in sessions]
    out = current_first(pool, cap_pages(live, cap) if cap > 0 else live)[:limit]
    return with_groups(out, kept, groups) if every and groups else out


def compared(c: Cand) -> tuple[frozenset[str], list[str], str]:
    """The words of ``c`` compared for near-duplicates, the same in the fixed order, and
    their numbers' key: as the index stored them for a section read from it
    (:mod:`wiki_memory.index.sectionwords`), else worked out from its text."""
    h = c.hit
    if h is not None and h.words is not None and h.nums is not None:
        ordered = h.words.split()
        return frozenset(ordered), ordered, h.nums
    toks = tokens(content(c))
    return toks, word_order(toks), numbers_key(numbers(toks))


def with_groups(out: list[Cand], kept: list[Cand], groups: dict[int, list[Cand]]) -> list[Cand]:
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
    later: list[Cand] = []
    for c in out:
        for m in c.group:
            if m.path in shown or m.key in seen or m.spool is not None:
                continue
            seen.add(m.key)
            shown.add(m.path)
            later.append(m)
    return out + later


def current_first(pool: Pool, ordered: list[Cand]) -> list[Cand]:
    """``ordered`` with every candidate of a superseded page after the head of its
    chain (invariant 14): the head takes the place of the first superseded page that
    ranked above it, brought in from the index when it was no candidate (and the
    query's filters keep it); the superseded ones follow in their own order."""
    head_of = pool.chains.head
    if not head_of or not any(c.path in head_of for c in ordered):
        return ordered
    first: dict[str, int] = {}
    for i, c in enumerate(ordered):
        if c.spool is None:
            first.setdefault(c.path, i)
    wanted = {head_of[c.path] for c in ordered if c.path in head_of} - set(first)
    extra: dict[str, Cand] = {}
    if wanted:
        shown = signals.in_scope(pool.index, wanted, pool.scope)
        for p, h in signals.first_sections(pool.index, sorted(shown)).items():
            c = Cand((h.path, h.anchor), h.path, hit=h)
            pool.successors.add(c.key)
            pool.cands.setdefault(c.key, c)  # so the tail does not repeat it
            extra[p] = c
    out: list[Cand] = []
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


def cap_pages(ordered: list[Cand], cap: int = PAGE_CAP) -> list[Cand]:
    """``ordered`` candidates with at most ``cap`` slots of one page (a running
    session's observations count for its page) among the first :data:`TOP_SLOTS`.

    A page's further entries that rank within the first :data:`TOP_SLOTS` matches are
    carried in its last capped slot (``also`` of that candidate, in rank order): they
    take no slot of their own, and the first slots show other pages. Entries moved out
    from further down follow, in their order, after those slots. So the first slots'
    items, read with what they carry, hold every one of the first :data:`TOP_SLOTS`
    matches (docs/ranking.md, "Diversity and order")."""
    top: list[Cand] = []
    later: list[Cand] = []
    per: dict[str, int] = defaultdict(int)
    last: dict[str, Cand] = {}
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
