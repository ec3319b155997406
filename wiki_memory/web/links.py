"""URLs and wikilink resolution of the web view: :func:`escape` (every value written into
HTML goes through it), page, folder and tag URLs, heading ids and fragments, and
:class:`Resolver`, which resolves wikilink targets to page paths through the index for one
reader (split out of :mod:`wiki_memory.web.render`, which renders with them)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from markdown_it.common.utils import escapeHtml

from wiki_memory.identity import Identity
from wiki_memory.wiki.page import BLOCK_ID_CHARS

__all__ = [
    "Resolver",
    "Target",
    "crumbs",
    "escape",
    "forgotten_span",
    "folder_url",
    "fragment_for",
    "heading_id",
    "link_key",
    "page_url",
    "tag_url",
]

_BLOCK_ID_CHARS = re.compile(BLOCK_ID_CHARS)
_SLUG_DROP = re.compile(r"[^\w\- ]+")
_SLUG_SPACE = re.compile(r"[\s_]+")


def escape(text: Any) -> str:
    """HTML-escape ``text`` (``&``, ``<``, ``>``, ``"``) for text and attribute values."""
    return escapeHtml(str(text))


def heading_id(text: str) -> str:
    """The HTML id (and URL fragment) of a heading: NFC, casefolded, punctuation dropped,
    spaces and ``_`` runs turned into ``-`` (``"Rollback plan (v2)"`` → ``"rollback-plan-v2"``);
    ``"section"`` when nothing is left. Never starts with ``^`` (block ids do)."""
    s = unicodedata.normalize("NFC", text).strip().casefold()
    s = _SLUG_DROP.sub("", s.replace("`", ""))
    s = _SLUG_SPACE.sub("-", s).strip("-")
    return s or "section"


def fragment_for(anchor: str) -> str:
    """The URL fragment (without ``#``) for a recall anchor or a link fragment:
    ``"^t12"`` stays as it is, a heading becomes :func:`heading_id`."""
    a = anchor.strip()
    if a.startswith("^") and _BLOCK_ID_CHARS.fullmatch(a[1:]):
        return a
    return heading_id(a)


def page_url(path: str, fragment: str | None = None) -> str:
    """``/page/<path>`` with the path percent-encoded (``/`` kept) and an optional fragment
    (already safe: a block id or a :func:`heading_id`)."""
    url = "/page/" + quote(path, safe="/")
    return url + "#" + quote(fragment, safe="^-") if fragment else url


def folder_url(folder: str) -> str:
    """``/f/<folder>`` (percent-encoded, ``/`` kept); ``/f`` for the wiki's top."""
    return "/f/" + quote(folder, safe="/") if folder else "/f"


def crumbs(path: str, is_folder: bool = False) -> list[tuple[str, str]]:
    """``[(name, folder URL)]`` from the wiki's top to the folder holding ``path`` (to
    ``path`` itself when ``is_folder``): the linked breadcrumbs of a page or folder."""
    parts = [p for p in path.split("/") if p]
    if not is_folder:
        parts = parts[:-1]
    out = [("wiki", folder_url(""))]
    for i in range(len(parts)):
        out.append((parts[i], folder_url("/".join(parts[: i + 1]))))
    return out


def link_key(target: str) -> str:
    """How a wikilink target is looked up: NFC, casefolded, without a ``.md`` suffix."""
    key = unicodedata.normalize("NFC", target).strip().casefold()
    return key[:-3] if key.endswith(".md") else key


# --------------------------------------------------------------------------- resolution


@dataclass(frozen=True)
class Target:
    """Where a wikilink target leads: ``path`` (None when unresolved, ambiguous or
    forgotten) and, when ambiguous, the visible ``candidates`` (sorted paths);
    ``forgotten`` when its one page is forgotten (shown so, never linked)."""

    path: str | None
    candidates: tuple[str, ...] = ()
    forgotten: bool = False

    @property
    def ambiguous(self) -> bool:
        return self.path is None and len(self.candidates) > 1


class Resolver:
    """Resolves wikilink targets to page paths through the index's ``names`` table
    (title, file stem, aliases, path and path suffixes of every page), never fuzzily.

    When :mod:`wiki_memory.wiki.links` is present its rules decide (precedence of path,
    stem, title and alias; several pages: the one in the linking page's folder, else
    ambiguous), so the view agrees with the index and the API. Without it: case-folded,
    NFC names, a target with ``/`` matches a path suffix, and several matches go to the
    page sharing the longest folder prefix with the linking page, else ambiguous. Pages
    the reader ``who`` may not see (:mod:`wiki_memory.identity`, filtered by the index)
    are never candidates: a hidden page looks like a missing one.
    """

    def __init__(self, index: Any, who: Identity | None) -> None:
        self.index = index
        self.who = who

    def resolve_many(self, current: str, targets: Iterable[str]) -> dict[str, Target]:
        """``{link_key(target): Target}`` for every target, with one query to the index."""
        wanted = sorted({t for t in targets if t and t.strip()})
        if not wanted:
            return {}
        try:
            from wiki_memory.wiki import links as wl
        except ImportError:  # pragma: no cover - the links module is part of the package
            wl = None  # type: ignore[assignment]
        if wl is not None and hasattr(wl, "resolve") and hasattr(wl, "target_key"):
            return self._with_links_module(wl, current, wanted)
        return self._fallback(current, wanted)

    def _visible_rows(self, keys: Iterable[str]) -> list[tuple[str, str, str]]:
        """``(key, path, source)`` rows of the names table for ``keys``, visible pages only."""
        return list(self.index.names_for(keys, self.who))

    def _with_links_module(self, wl: Any, current: str, wanted: list[str]) -> dict[str, Target]:
        keys = {t: wl.target_key(t, current) for t in wanted}
        names: dict[str, list[tuple[str, str]]] = {}
        for k, path, source in self._visible_rows(keys.values()):
            if source in getattr(wl, "SOURCE_RANK", {source: 0}):
                names.setdefault(k, []).append((path, source))
        out: dict[str, Target] = {}
        gone = self.index.forgotten_paths({p for rows in names.values() for p, _s in rows})
        for t in wanted:
            res = wl.resolve(t, current, names, None)
            if res.status == getattr(wl, "RESOLVED", "resolved") and res.path in gone:
                out[link_key(t)] = Target(None, forgotten=True)
            elif res.status == getattr(wl, "RESOLVED", "resolved") and res.path:
                out[link_key(t)] = Target(res.path)
            else:
                out[link_key(t)] = Target(None, tuple(res.candidates or ()))
        return out

    def _fallback(self, current: str, wanted: list[str]) -> dict[str, Target]:
        keys = {link_key(t) for t in wanted}
        lookup: dict[str, set[str]] = {}
        for k in keys:
            last = k.rsplit("/", 1)[-1]
            for form in {k, last}:
                lookup.setdefault(form, set()).add(k)
                lookup.setdefault(unicodedata.normalize("NFD", form), set()).add(k)
        found: dict[str, set[str]] = {k: set() for k in keys}
        for name_key, path, _source in self._visible_rows(lookup):
            bare = path[:-3].casefold() if path.endswith(".md") else path.casefold()
            for k in lookup.get(name_key, ()):
                if "/" in k:
                    if bare == k or bare.endswith("/" + k):
                        found[k].add(path)
                elif unicodedata.normalize("NFC", name_key) == k:
                    found[k].add(path)
        return {k: _choose(current, sorted(paths)) for k, paths in found.items()}


def forgotten_span(cls: str, label: str) -> str:
    """The HTML of a wikilink whose page is forgotten: its label, marked, no link."""
    return (
        f'<span class="{cls} forgotten" title="forgotten page">{escape(label)} (forgotten)</span>'
    )


def _choose(current: str, paths: list[str]) -> Target:
    if not paths:
        return Target(None)
    if len(paths) == 1:
        return Target(paths[0])
    here = current.split("/")[:-1]

    def shared(p: str) -> int:
        n = 0
        for a, b in zip(here, p.split("/")[:-1], strict=False):
            if a != b:
                break
            n += 1
        return n

    best = max(shared(p) for p in paths)
    top = [p for p in paths if shared(p) == best]
    if len(top) == 1:
        return Target(top[0])
    return Target(None, tuple(paths))


def tag_url(tag: str) -> str:
    """``/tag/<tag>`` (percent-encoded, ``/`` of nested tags kept) for ``tag`` (``#`` or not)."""
    return "/tag/" + quote(tag.lstrip("#"), safe="/")
