"""Recall while the index is being rebuilt: a scan of the page files, marked incomplete.

The index is rebuilt in the background when it was found damaged (at start, or a
``CorruptError`` at run time) or was missing on a large wiki (``core/indexcheck.py``).
Meanwhile :meth:`wiki_memory.core.recaller.Recaller.recall` answers from
:func:`scan_recall` instead of refusing: every page file is read (never through a
symbolic link or a hard-linked file, ignored folders left out, as the index walks
them), each page that holds at least one of the query's words and that the caller may
read under the one scope rule (:meth:`wiki_memory.core.scope.ScopeRule.read`) is a
match, ranked by how many of the query's distinct words it holds, then how often they
occur, then path; superseded pages after current ones, forgotten pages never. The scan
stops after :data:`SCAN_SECONDS`. Every such answer says ``complete: false``: ranking
signals, running sessions' observations, stemming and other word forms need the index,
so an answer may miss matches a complete one would hold (docs/operations.md, "Storage at
the edges"). Filters the scan cannot apply exactly (``tags``, ``since``, ``until``,
``as_of``) answer 503 with ``Retry-After`` as before, never a wrong list.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wiki_memory.core.scope import ScopeRule
from wiki_memory.errors import BadPath, NotFound
from wiki_memory.identity import Identity, people_owner, project_of
from wiki_memory.index.files import read_file, walk
from wiki_memory.index.pages import as_text
from wiki_memory.index.query import STOP_WORDS
from wiki_memory.index.search import SearchError
from wiki_memory.recall.dedup import cached_count
from wiki_memory.recall.items import make_snippet
from wiki_memory.recall.pack import offer
from wiki_memory.recall.query import RecallQuery
from wiki_memory.recall.terms import words
from wiki_memory.states import page_state

__all__ = ["INCOMPLETE", "SCAN_SECONDS", "ScanPage", "scan_recall"]

#: what every face says of an answer with ``complete: false``
INCOMPLETE = (
    "Incomplete: the search index is being rebuilt, so this answer comes from a scan of "
    "the page files and may miss matches; ask again shortly for a complete one."
)

#: a scan stops reading files after this many seconds (its answer is incomplete anyway)
SCAN_SECONDS = 2.0

_TITLE = re.compile(r"^#\s+(.+?)\s*#*\s*$", re.MULTILINE)


@dataclass(frozen=True)
class ScanPage:
    """What one recall from a scan returns: ``items`` (the page's items, as a recall's),
    ``used_tokens``, ``total`` (matches found), ``pos`` (the rank after the last item),
    ``needs_tokens`` (what the match at the cursor costs when it alone is over the
    budget, else None)."""

    items: list[dict[str, Any]]
    used_tokens: int
    total: int
    pos: int
    needs_tokens: int | None


def scan_recall(
    scope: ScopeRule,
    who: Identity,
    q: RecallQuery,
    budget: int,
    cursor: int,
    fits: Callable[[list[dict[str, Any]]], bool] | None,
    handle: Callable[[str], str],
    seconds: float = SCAN_SECONDS,
) -> ScanPage:
    """One page of recall for ``who`` from a scan of ``scope``'s wiki folder (see the
    module): the longest run of matches from rank ``cursor`` whose items fit ``budget``
    tokens whole and, when given, ``fits(items)``; compact handles when the first match
    alone is over the budget, as :class:`~wiki_memory.core.recaller.Recaller` packs
    them. ``handle(anchor)`` is the item's id (what expand takes). Raises
    :class:`~wiki_memory.index.search.SearchError` (503, ``Retry-After``) for a filter
    the scan cannot apply."""
    if q.tags or q.since is not None or q.until is not None or q.as_of is not None:
        raise SearchError(
            "the search index is being rebuilt from the files; the tags, since, until "
            "and as_of filters need it: retry",
            headers={"Retry-After": "5"},
        )
    terms = _terms(q.text)
    found = _matches(scope, who, q, terms, time.monotonic() + seconds) if terms else []
    found.sort(key=lambda m: (m[0], -m[1], -m[2], m[3]))
    items: list[dict[str, Any]] = []
    used = 0
    needs: int | None = None
    small = False
    pos = min(cursor, len(found))
    while pos < len(found):
        got = offer(_item(found[pos], q.text, handle), items, used, budget, small, fits)
        small = got.small
        if got.item is None:
            needs = got.needs
            break
        items.append(got.item)
        used += got.cost
        pos += 1
    return ScanPage(items, used, len(found), pos, needs)


def _terms(text: str) -> set[str]:
    toks = words(text)
    content = {t for t in toks if t not in STOP_WORDS}
    return content or set(toks)


_Match = tuple[int, int, int, str, str, dict[str, Any], str]
"""(0 current / 1 superseded, distinct words held, occurrences, path, text, meta, kind)"""


def _matches(
    scope: ScopeRule, who: Identity, q: RecallQuery, terms: set[str], deadline: float
) -> list[_Match]:
    root = scope.wiki_dir
    kinds = None if q.kinds is None else set(q.kinds)
    excluded = tuple(d.strip("/") + "/" for d in q.exclude_dirs if d.strip("/"))
    out: list[_Match] = []
    for rel, _st, is_page in walk(root, os.path.realpath(root), ""):
        if time.monotonic() > deadline:
            break
        if not is_page or rel.startswith(excluded):
            continue
        owner = people_owner(rel)
        if owner is not None and not who.owns(owner):
            continue  # another user's folder: not even read
        raw = read_file(Path(root, rel))
        if raw is None or not _count(raw.decode("utf-8", "replace"), terms):
            continue  # (a quick look at the whole file first: most pages hold no word)
        try:  # the one scope rule, on the file actually read
            page = scope.read(who, rel)
        except (NotFound, BadPath):
            continue
        meta = dict(page.meta)
        state = page_state(meta)
        if state == "forgotten":
            continue
        kind = as_text(meta.get("type")) or "page"
        if kinds is not None and kind not in kinds:
            continue
        project = as_text(meta.get("project")) or project_of(page.rel)
        if q.project is not None and project != q.project:
            continue
        text = page.data.decode("utf-8", "replace")
        # the words of its body, title, aliases and tags: not of other frontmatter keys
        named = [meta.get(k) for k in ("title", "aliases", "tags")]
        held = _count(" ".join([_body(text), *map(str, filter(None, named))]), terms)
        if not held:
            continue
        out.append(
            (int(state == "superseded"), len(held), sum(held.values()), page.rel, text, meta, kind)
        )
    return out


def _count(text: str, terms: set[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for w in words(text):
        if w in terms:
            counts[w] = counts.get(w, 0) + 1
    return counts


def _body(text: str) -> str:
    """``text`` without its frontmatter block, if it has one."""
    if text.startswith("---"):
        end = text.find("\n---", 3)
        if end >= 0:
            return text[end + 4 :].lstrip("-\n")
    return text


def _item(m: _Match, query: str, handle: Callable[[str], str]) -> dict[str, Any]:
    _state, held, occurrences, path, text, meta, kind = m
    body = _body(text)
    heading = _TITLE.search(body)
    title = (
        as_text(meta.get("title"))
        or (heading.group(1) if heading else None)
        or path.rsplit("/", 1)[-1].removesuffix(".md")
    )
    updated = meta.get("updated") or meta.get("created")
    when = getattr(updated, "isoformat", lambda: updated)()
    mark = (
        {"superseded_by": str(meta["superseded_by"])}
        if _state and meta.get("superseded_by")
        else {}
    )
    return {
        "id": handle(path),
        "path": path,
        "anchor": path,
        "title": title,
        "kind": kind,
        "snippet": make_snippet(body, query),
        "why": ["scan"],
        "score": float(held),
        "expand_tokens": cached_count(body),
        "updated": None if when is None else str(when),
        **mark,
    }
