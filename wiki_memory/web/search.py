"""The search page's results for people: recall's items grouped per page, snippets as
plain text with the matched words marked, and the filter links (docs/web.md, "Search").

Recall (:meth:`wiki_memory.core.memory.Memory.recall`, the reader's scope applied before
ranking) decides what matches and in which order; this module only shapes it:

- :func:`group` folds the items into one row per page, in the rank of the page's best
  item, with up to :data:`ANCHORS_PER_PAGE` of its entries under it;
- :func:`plain` turns a markdown snippet into text (no ``**``, ``[[``, heading marks,
  fences or block ids; a wikilink shows its alias or its target);
- :func:`mark` escapes the text first and then wraps each word that matches one of the
  query's forms (:func:`wiki_memory.recall.terms.match_forms`: the exact words and the
  stems recall matched with; a shown word matches by its own stem too:
  :func:`~wiki_memory.recall.terms.matches_form`) in ``<mark>``, the only element it ever
  writes (case C52).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from markupsafe import Markup

from wiki_memory.recall.terms import matches_form
from wiki_memory.web.links import escape, fragment_for, page_url
from wiki_memory.web.render import parse_wikilink
from wiki_memory.wiki.page import BLOCK_ID_CHARS, CALLOUT, WIKILINK_RE

__all__ = ["ANCHORS_PER_PAGE", "Group", "group", "mark", "mark_html", "plain"]

#: how many entries of one page the results show under it
ANCHORS_PER_PAGE = 3

_WORD = re.compile(r"[^\W_]+")
_LINE_MARKS = re.compile(
    r"(?:(?<=\s)|^)(?:#{1,6}(?=\s)|>(?=\s)|[-*+](?=\s)(?:\s+\[[ xX]\])?|\d{1,3}[.)](?=\s))"
)
_FENCE = re.compile(r"[~`]{3,}[\w-]*")
_BLOCK_ID = re.compile(rf"(?:(?<=\s)|^)\^{BLOCK_ID_CHARS}(?=\s|$)")
_CALLOUT = re.compile(CALLOUT)
_MD_LINK = re.compile(r"!?\[([^\[\]\n]*)\]\([^()\s]*(?:\([^()\s]*\))?[^()\s]*\)")
_EMPH = re.compile(r"(\*{1,3}|_{2,3}|~~|==)(?=\S)(.+?)(?<=\S)\1")
_LEFTOVER = re.compile(r"\*{2,}|_{2,}|~~|==|\[\[|\]\]|(?<!\w)-{3,}|^\s*tags:|`")
_HRULE = re.compile(r"(?:(?<=\s)|^)(?:-{3,}|\*{3,}|_{3,})(?=\s|$)")
_SPACES = re.compile(r"\s+")


def plain(snippet: str) -> str:
    """A markdown snippet as plain text (one line): headings', quotes' and lists' marks,
    fences, callout markers, block ids, rules, emphasis marks and code backticks dropped;
    ``[[page|alias]]`` as ``alias`` (else the page's name), ``[text](url)`` as ``text``.
    A snippet cut in the middle of a mark loses the leftover half too."""
    text = _SPACES.sub(" ", snippet)
    text = _FENCE.sub(" ", text)
    text = WIKILINK_RE.sub(lambda m: _link_label(m.group(2)), text)
    text = _MD_LINK.sub(lambda m: m.group(1), text)
    text = _CALLOUT.sub(lambda m: m.group(1).capitalize() + ":", text)
    text = _HRULE.sub(" ", text)
    text = _LINE_MARKS.sub(" ", text)
    text = _BLOCK_ID.sub(" ", text)
    for _ in range(3):
        new = _EMPH.sub(lambda m: m.group(2), text)
        if new == text:
            break
        text = new
    text = _LEFTOVER.sub("", text)
    return _SPACES.sub(" ", text).strip()


def _link_label(inner: str) -> str:
    target, frag, alias = parse_wikilink(inner)
    if alias:
        return alias
    name = target.rsplit("/", 1)[-1].removesuffix(".md")
    return name or (frag or "").lstrip("^")


def _matches(word: str, forms: Sequence[tuple[str, bool]]) -> bool:
    return matches_form(word, forms)


def mark(text: str, forms: Sequence[tuple[str, bool]]) -> Markup:
    """``text`` HTML-escaped, with every word matching one of ``forms`` (``(form,
    is_prefix)`` over :func:`~wiki_memory.recall.terms.words`, from
    :func:`~wiki_memory.recall.terms.match_forms`) wrapped in ``<mark>``: escaping comes
    first, and ``<mark>`` is the only element in the result."""
    if not forms:
        return Markup(escape(text))
    out: list[str] = []
    last = 0
    for m in _WORD.finditer(text):
        if _matches(m.group(0), forms):
            out.append(escape(text[last : m.start()]))
            out.append(f"<mark>{escape(m.group(0))}</mark>")
            last = m.end()
    out.append(escape(text[last:]))
    return Markup("".join(out))


_HTML_PARTS = re.compile(r"(<[^>]*>|&[#A-Za-z0-9]+;)")
#: elements whose text is never marked (their text is not prose, or is a control)
_NO_MARK = {"a", "code", "pre", "summary", "mark", "kbd"}


def mark_html(html: str, forms: Sequence[tuple[str, bool]]) -> str:
    """Rendered, trusted page HTML with the words matching ``forms`` in its text wrapped in
    ``<mark>`` (the page view's ``?hl=``). Only text between tags changes, entities are
    kept whole, and text inside links, code, ``<summary>`` and existing marks is left as
    it is. The HTML is this view's own output (:func:`~wiki_memory.web.render.render_markdown`),
    so a tag never holds a raw ``>``."""
    if not forms:
        return html
    out: list[str] = []
    depth = 0
    for part in _HTML_PARTS.split(html):
        if not part:
            continue
        if part.startswith("<"):
            name = (
                part[1:].split(None, 1)[0].rstrip(">/").lstrip("/").lower() if len(part) > 2 else ""
            )
            if name in _NO_MARK and not part.endswith("/>"):
                depth += -1 if part.startswith("</") else 1
                depth = max(depth, 0)
            out.append(part)
        elif part.startswith("&") or depth:
            out.append(part)
        else:
            last = 0
            for m in _WORD.finditer(part):
                if _matches(m.group(0), forms):
                    out.append(part[last : m.start()])
                    out.append(f"<mark>{m.group(0)}</mark>")
                    last = m.end()
            out.append(part[last:])
    return "".join(out)


@dataclass
class Group:
    """One page in the results: its best item's rank decides its place."""

    path: str
    title: Markup
    kind: str
    project: str | None
    updated: Any
    url: str
    more_url: str = ""
    anchors: list[dict[str, Any]] = field(default_factory=list)
    more: int = 0
    #: the head of its chain when the page is superseded (recall ranks it after that)
    superseded_by: str | None = None
    #: the page a conflict copy copies (recall ranks it after that)
    conflict_of: str | None = None


def _project_of(path: str) -> str | None:
    parts = path.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "projects" else None


def _anchor_label(anchor: str) -> str:
    _, _, frag = anchor.partition("#")
    if not frag:
        return "page"
    if frag.startswith("^t") and frag[2:].isdigit():
        return f"entry {frag[2:]}"
    return frag.lstrip("^")


def group(
    items: Iterable[dict[str, Any]], forms: Sequence[tuple[str, bool]], query: str = ""
) -> list[Group]:
    """Recall's items (best first) as one :class:`Group` per page, in the order of each
    page's best item, each with its best :data:`ANCHORS_PER_PAGE` items as ``{url,
    label, snippet}`` (snippet: :func:`plain`, then :func:`mark`; items whose snippet
    shows a matched word first, then in rank order) and the number left
    over in ``more`` and ``more_url``: the page with ``query``'s words marked (``?hl=``).
    Items of running sessions (no page yet) are a group of their own."""
    out: dict[str, Group] = {}
    for it in items:
        path = str(it.get("path") or "")
        g = out.get(path)
        if g is None:
            title = str(it.get("title") or path.rsplit("/", 1)[-1].removesuffix(".md"))
            g = out[path] = Group(
                path=path,
                title=mark(title, forms),
                kind=str(it.get("kind") or "page"),
                project=_project_of(path),
                updated=it.get("updated"),
                url=page_url(path),
                more_url=page_url(path) + "?" + urlencode({"hl": query}) if query else "",
                superseded_by=it.get("superseded_by") or None,
                conflict_of=it.get("conflict_of") or None,
            )
        for part in [it, *it.get("also", [])]:  # and its page's entries carried in its slot
            anchor = str(part.get("anchor") or path)
            frag = anchor.partition("#")[2]
            g.anchors.append(
                {
                    "url": page_url(path, fragment_for(frag) if frag else None),
                    "label": _anchor_label(anchor),
                    "snippet": mark(plain(str(part.get("snippet") or "")), forms),
                }
            )
    for g in out.values():
        # the page's best entries: those whose text shows a matched word first (an entry
        # recall ranked for its page's title alone says nothing), then in rank order
        ranked = sorted(g.anchors, key=lambda a: "<mark>" not in a["snippet"])
        g.more = max(0, len(ranked) - ANCHORS_PER_PAGE)
        g.anchors = ranked[:ANCHORS_PER_PAGE]
    return list(out.values())
