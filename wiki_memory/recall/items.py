"""Recall items from ranked candidates: ``{id, path, anchor, title, kind, snippet, why,
score, expand_tokens, updated}`` (see ``Memory.recall``), with ``why`` naming the signals
that ranked the candidate (each signal's ``why`` name, in one fixed order), the entries
its slot carries (``also``) and the near-duplicates grouped under it (``collapsed``)."""

from __future__ import annotations

from typing import Any

from wiki_memory.recall import signal_allwords, signal_fields, signal_text
from wiki_memory.recall.candidate import Cand
from wiki_memory.recall.dedup import cached_count
from wiki_memory.recall.pool import Pool, Sources
from wiki_memory.recall.topicitems import topic_entries
from wiki_memory.wiki import compiler

WHY_TOP = 10
"""A page-level signal is named in ``why`` when the page ranks within this many there."""
COLLAPSED_NAMED = 5
"""A kept item names at most this many of the pages grouped under it (``collapsed_paths``;
``collapsed`` counts them all). When every match is asked for, the grouped ones follow the
ranked pool, each marked ``collapsed_into`` (docs/knowledge.md, "Collapsed is not lost")."""


def why(pool: Pool, c: Cand) -> list[str]:
    """The signals that ranked ``c``, by their ``why`` names (docs/ranking.md)."""
    out: list[str] = []
    if c.spool is not None:
        out.append("spool")
        if "spool" in c.signals:
            out.append("text")
        out += signal_allwords.why(pool, c)
        if pool.spool_rank.get(c.path, WHY_TOP) < WHY_TOP:
            out.append("page")
        if c.path in pool.recent_why:
            out.append("recent")
        return out
    out += signal_text.why(pool, c)
    out += signal_allwords.why(pool, c)
    if c.signals.get("dense", WHY_TOP) < WHY_TOP:
        out.append("dense")
    pr = pool.page_ranks
    if pr.get("entity", {}).get(c.path) is not None:
        out.append("entity")
        how = pool.entity_how.get(c.path)
        if how and how not in out:
            out.append(how)
    if pr.get("fields", {}).get(c.path, WHY_TOP) < WHY_TOP:
        out.extend(w for w in signal_fields.matches(pool, c.path) if w not in out)
    if pr.get("page", {}).get(c.path, WHY_TOP) < WHY_TOP:
        out.append("page")
    if c.path in pr.get("link", {}):
        out.append("link")
    if c.path in pool.recent_why:
        out.append("recent")
    if c.path in pool.strength_why:
        out.append("strength")
    if "when" in c.signals:
        out.append("when")
    if c.key in pool.successors:
        out.append("successor")
    if not pool.live:
        out.append("as_of")
    return out or ["text"]


def item(pool: Pool, c: Cand) -> dict[str, Any]:
    """The recall item of a ranked candidate."""
    text = pool.q.text
    if c.spool is not None:
        it = spool_item(pool.sources, c.spool, text, c.score, why(pool, c))
        if it is None:  # the session ended between ranking and now
            it = {
                "id": f"spool:{c.spool.obs_id}",
                "path": c.path,
                "anchor": c.path,
                "title": "Ended session",
                "kind": "session",
                "snippet": make_snippet(str(c.spool.text), text),
                "why": why(pool, c),
                "score": round(c.score, 4),
                "expand_tokens": cached_count(str(c.spool.text)),
                "updated": c.spool.ts,
            }
        return {**it, **_also(pool, c)}
    h = c.hit
    assert h is not None
    anchor = f"{h.path}#{h.anchor}" if h.anchor else h.path
    item_id = (
        f"asof:{pool.as_of_sha[:12]}:{anchor}" if pool.as_of_sha else pool.sources.handle(anchor)
    )
    return {
        "id": item_id,
        "path": h.path,
        "anchor": anchor,
        "title": h.title,
        "kind": h.kind,
        "snippet": make_snippet(h.text or h.heading, text),
        "why": why(pool, c),
        "score": round(c.score, 4),
        "expand_tokens": cached_count(h.text),
        "updated": h.updated,
        **pool.chains.mark(h.path),
        **topic_entries(pool.index, h.path, h.kind),
        **_also(pool, c),
        **_collapsed(c),
    }


def _collapsed(c: Cand) -> dict[str, Any]:
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


def _also(pool: Pool, c: Cand) -> dict[str, Any]:
    """``{"also": [{id, anchor, snippet}, ...]}`` for the entries of its page carried
    in this item's slot by the per-page cap (``fusion.cap_pages``), else ``{}``."""
    if not c.also:
        return {}
    out = []
    for sub in c.also:
        it = item(pool, sub)
        out.append({"id": it["id"], "anchor": it["anchor"], "snippet": it["snippet"]})
    return {"also": out}


def spool_item(
    sources: Sources, s: Any, query: str, score: float, why: list[str]
) -> dict[str, Any] | None:
    """The recall item of running-session observation ``s``; None when its session
    ended."""
    info = sources.spool.sessions.get(s.session_key)
    if info is None:
        return None
    path = info.state.get("path") or compiler.page_path(
        info, sources.spool.observations(info.key)[:50]
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
        "expand_tokens": cached_count(s.text),
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
