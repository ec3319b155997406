"""Recall ranking: which sections and running-session observations come back, in order.

Each candidate is a recall item ``{id, path, anchor, title, kind, snippet, why, score,
expand_tokens, updated}`` (see ``Memory.recall``); packing under the budget happens after.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wiki_memory.recall.tokens import count_tokens
from wiki_memory.wiki import compiler

if TYPE_CHECKING:
    from wiki_memory.core import Memory


def candidates(
    memory: Memory,
    query: str,
    *,
    project: str | None,
    kinds: list[str] | None,
    limit: int,
    exclude_dirs: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Ranked recall items. Two tiers: sections and spooled observations matching every
    query word come before those matching only some (the OR fallback); within a tier
    the page list and the spool list are fused by reciprocal rank (k = 60, Cormack et
    al. 2009). Pages under ``exclude_dirs`` (folders the caller may not see) are
    filtered out in the index query, before ranking."""
    want_spool = kinds is None or "session" in kinds
    tiers: list[tuple[list[Any], list[Any]]] = []
    seen_sec: set[tuple[str, str]] = set()
    seen_obs: set[str] = set()
    for mode in ("and", "or"):
        pages = [
            h
            for h in memory.index.query(
                query,
                project=project,
                kinds=kinds,
                exclude_dirs=exclude_dirs or (),
                limit=limit,
                mode=mode,
            )
            if (h.path, h.anchor) not in seen_sec
        ]
        spool = (
            [
                h
                for h in memory.index.query_spool(query, project=project, limit=limit, mode=mode)
                if h.obs_id not in seen_obs
            ]
            if want_spool
            else []
        )
        seen_sec.update((h.path, h.anchor) for h in pages)
        seen_obs.update(h.obs_id for h in spool)
        tiers.append((pages, spool))
        if mode == "and" and len(pages) + len(spool) >= max(1, limit // 5):
            break
    items: list[dict[str, Any]] = []
    per_page: dict[str, int] = {}
    for t, (pages, spool) in enumerate(tiers):
        tier_bonus = 1.0 if t == 0 else 0.0
        fused: list[tuple[float, int, Any, str]] = []
        for rank, h in enumerate(pages):
            fused.append((tier_bonus + 1.0 / (60 + rank + 1), len(fused), h, "page"))
        for rank, sh in enumerate(spool):
            fused.append((tier_bonus + 1.0 / (60 + rank + 1), len(fused), sh, "spool"))
        fused.sort(key=lambda f: (-f[0], f[1]))
        for score, _, h, src in fused:
            item = (
                _page_item(memory, h, query, score)
                if src == "page"
                else _spool_item(memory, h, query, score)
            )
            if item is None:
                continue
            n = per_page.get(item["path"], 0)
            if n >= 3:
                continue
            per_page[item["path"]] = n + 1
            items.append(item)
    return items


def _page_item(memory: Memory, h: Any, query: str, score: float) -> dict[str, Any]:
    anchor = f"{h.path}#{h.anchor}" if h.anchor else h.path
    why = ["text"]
    words = [w.lower() for w in query.split() if len(w) > 2]
    if h.title and any(w in h.title.lower() for w in words):
        why.append("title")
    return {
        "id": memory._handle(anchor),
        "path": h.path,
        "anchor": anchor,
        "title": h.title,
        "kind": h.kind,
        "snippet": make_snippet(h.text, query),
        "why": why,
        "score": round(score, 4),
        "expand_tokens": count_tokens(h.text),
        "updated": h.updated,
    }


def _spool_item(memory: Memory, s: Any, query: str, score: float) -> dict[str, Any] | None:
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
    memory._handles[f"spool:{s.obs_id}"] = f"spool:{s.obs_id}"
    return {
        "id": f"spool:{s.obs_id}",
        "path": path,
        "anchor": anchor,
        "title": f"Running session {info.session_id[:24]} ({info.harness})",
        "kind": "session",
        "snippet": make_snippet(s.text, query),
        "why": ["spool", "text"],
        "score": round(score, 4),
        "expand_tokens": count_tokens(s.text),
        "updated": s.ts,
    }


def make_snippet(text: str, query: str, width: int = 220) -> str:
    """One line of ``text`` around the first query word found (fence lines dropped)."""
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("~~~")]
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
