"""``wiki-memory recall``'s table: one row per page, its matching entries under it.

Recall answers per section (a session page can match in its summary and in two turns);
a person reading the table wants each page once, at the rank of its best section, with
the sections that matched beneath it. Titles are cut at a word. A reply of compact
handles (a budget too small for full items) has its own columns: the handle's ``id``
(what ``expand`` takes) and its snippet; no kind, score or anchor is made up for it."""

from __future__ import annotations

from typing import Any

from wiki_memory.core.quoting import inline
from wiki_memory.wiki import verbatim

TITLE_WIDTH = 50


def cut_words(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut at a word with ``…`` when longer
    (a single word longer than ``width`` is cut inside it); invisible characters (bidi
    overrides, a terminal's escape) show escaped (:func:`wiki_memory.core.quoting.inline`)."""
    return verbatim.cut_words(inline(" ".join(text.split())), width)


def _anchor(item: dict[str, Any]) -> str:
    anchor = str(item.get("anchor") or "")
    path = str(item.get("path") or "")
    return anchor[len(path) :] if path and anchor.startswith(path) else anchor


def render(res: dict[str, Any]) -> str:
    """The table for a ``/v1/recall`` reply (with at least one item)."""
    items: list[dict[str, Any]] = res["items"]
    out: list[str] = []
    if all(it.get("compact") for it in items):
        wide = min(max([5, *(len(it.get("title") or "") for it in items)]), TITLE_WIDTH)
        out.append("compact handles (the budget holds no full item): `expand ID` opens one")
        out.append(f"{'#':>2}  {'title':<{wide}}  id")
        for n, it in enumerate(items, 1):
            title = cut_words(str(it.get("title") or ""), wide)
            out.append(f"{n:>2}  {title:<{wide}}  {it['id']}")
            out.append(f"    {cut_words(str(it.get('snippet') or ''), 160)}")
    else:
        pages: dict[str, list[dict[str, Any]]] = {}
        for it in items:
            pages.setdefault(str(it.get("path") or it.get("id")), []).append(it)
        wide = min(max([5, *(len(it.get("title") or "") for it in items)]), TITLE_WIDTH)
        kw = max([4, *(len(inline(str(it.get("kind") or ""))) for it in items)])
        out.append(f"{'#':>2}  {'title':<{wide}}  {'kind':<{kw}} {'score':>7}  page")
        for n, (path, group) in enumerate(pages.items(), 1):
            best = group[0]
            title = cut_words(str(best.get("title") or ""), wide)
            kind = str(best.get("kind") or "")
            score = best.get("score")
            sc = f"{score:>7.2f}" if isinstance(score, int | float) else f"{'':>7}"
            out.append(f"{n:>2}  {title:<{wide}}  {inline(kind):<{kw}} {sc}  {inline(path)}")
            others = sorted({str(p) for it in group for p in it.get("contradicts") or ()})
            if others:  # both sides are listed; the flag only says they disagree
                out.append(f"    ! contradicts {', '.join(inline(p) for p in others)}")
            for it in group:
                entries = [(_anchor(it), it.get("snippet"))]
                entries += [
                    (_anchor({**s, "path": path}), s.get("snippet")) for s in it.get("also", [])
                ]
                for anchor, snippet in entries:
                    where = f"{inline(anchor)}: " if anchor else ""
                    out.append(f"    {where}{cut_words(str(snippet or ''), 150)}")
                if it.get("collapsed"):  # near-duplicates grouped under this item
                    out.append(f"    + {it['collapsed']} near-duplicate page(s), listed last")
                if it.get("collapsed_into"):
                    out.append(f"    (near-duplicate of {inline(str(it['collapsed_into']))})")
    more = f", next page: --cursor {res['next_cursor']}" if res.get("next_cursor") else ""
    out.append(
        f"({res['used_tokens']}/{res['budget_tokens']} tokens, {res['omitted']} more left out"
        f"{more})"
    )
    return "\n".join(out)
