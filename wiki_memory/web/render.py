"""Markdown → HTML for the web view: markdown-it-py with ``html=False`` plus Obsidian syntax.

Safe by construction: raw HTML in a page is shown as text (``html=False``), every value
this module writes into HTML goes through :func:`escape`, links are kept only for
``http``, ``https``, ``mailto`` and scheme-less URLs (``javascript:``, ``data:``,
``vbscript:``, ``file:`` … are dropped and shown as text), images are never loaded (they
become links or labels), and table alignment becomes a class instead of a ``style``
attribute (the Content-Security-Policy allows no inline style).

Obsidian syntax handled here:

- wikilinks ``[[page]]``, ``[[page|alias]]``, ``[[page#Heading]]``, ``[[page#^block]]``,
  ``[[#Heading]]``, ``[[^block]]`` and embeds ``![[page]]`` / ``![[image.png|400]]``:
  resolved through the index (see :class:`Resolver`) and rendered as links; an
  unresolved or ambiguous target keeps its literal text in a ``<span>`` that says so;
- block ids: a paragraph or list item ending in `` ^id`` gets ``id="^id"``; a lone
  ``^id`` line names the blocks since the previous block id or heading (one timeline
  entry of a session page), wrapped in ``<div class="block" id="^id">`` so that a link to
  ``#^t12`` lands on the entry (the same rule as the index's sections, docs/pages.md);
- callouts ``> [!warning] Title`` → ``<blockquote class="callout callout-warning">``;
- a paragraph that is only a comment (``<!-- … -->``, ``%% … %%``) is not shown;
- headings get ids from :func:`heading_id` (unique per page), the same function that
  turns recall's ``path#Heading`` anchors into URL fragments.

Rendering a 76 KB page costs ~65 ms of markdown-it on this machine, so rendered bodies
are kept in a small LRU cache keyed by the page's bytes and the resolution of every link
on it (:class:`RenderCache`): a page re-renders when its text or any link target changes.
"""

from __future__ import annotations

import json
import posixpath
import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.rules_core import StateCore
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from mdit_py_plugins.footnote import footnote_plugin
from mdit_py_plugins.tasklists import tasklists_plugin

from wiki_memory.identity import Identity

__all__ = [
    "RenderCache",
    "Rendered",
    "Resolver",
    "Target",
    "crumbs",
    "escape",
    "folder_url",
    "heading_id",
    "link_key",
    "page_url",
    "render_markdown",
    "render_value",
    "sanitize_body",
    "tag_url",
]

#: markdown bodies larger than this are shown as escaped text, not parsed (bytes)
MAX_MARKDOWN_BYTES = 2 * 1024 * 1024

_SCHEME_RE = re.compile(r"^([a-z][a-z0-9+.\-]*):")
_ALLOWED_SCHEMES = frozenset({"http", "https", "mailto"})
_CTRL_RE = re.compile(r"[\x00-\x20\x7f]+")
_BLOCK_ID_CHARS = re.compile(r"[A-Za-z0-9-]+")
_LONE_ID_RE = re.compile(r"\^([A-Za-z0-9-]+)")
_TRAILING_ID_RE = re.compile(r"(?:^|[ \t])\^([A-Za-z0-9-]+)[ \t]*$")
_COMMENT_RE = re.compile(r"<!--(?:(?!-->).)*-->|%%(?:(?!%%).)*%%", re.S)
_CALLOUT_RE = re.compile(r"\[!([^\]\s]{1,40})\]([+-]?)[ \t]*(.*)")
_WIKILINK_INNER = re.compile(r"[^\[\]\n]+")
_SLUG_DROP = re.compile(r"[^\w\- ]+")
_SLUG_SPACE = re.compile(r"[\s_]+")
_ATTACHMENT_RE = re.compile(r"\.(?!md$)[A-Za-z0-9]{1,8}$")


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
    """Where a wikilink target leads: ``path`` (None when unresolved or ambiguous) and,
    when ambiguous, the visible ``candidates`` (sorted paths)."""

    path: str | None
    candidates: tuple[str, ...] = ()

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
        for t in wanted:
            res = wl.resolve(t, current, names, None)
            if res.status == getattr(wl, "RESOLVED", "resolved") and res.path:
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


# --------------------------------------------------------------------------- markdown


def _validate_link(url: str) -> bool:
    """Keep http(s), mailto and scheme-less URLs; drop every other scheme."""
    u = _CTRL_RE.sub("", url).lower()
    m = _SCHEME_RE.match(u)
    return m is None or m.group(1) in _ALLOWED_SCHEMES


def _wikilink_rule(state: StateInline, silent: bool) -> bool:
    src, pos = state.src, state.pos
    embed = src.startswith("![[", pos)
    start = pos + (3 if embed else 2)
    if not embed and not src.startswith("[[", pos):
        return False
    m = _WIKILINK_INNER.match(src, start)
    if m is None or not src.startswith("]]", m.end()):
        return False
    if not silent:
        tok = state.push("wikilink", "", 0)
        tok.content = m.group(0)
        tok.meta = {"embed": embed}
    state.pos = m.end() + 2
    return True


def parse_wikilink(inner: str) -> tuple[str, str | None, str | None]:
    """``(target, fragment, alias)`` of the text between ``[[`` and ``]]`` (the same rules
    as :mod:`wiki_memory.wiki.page`: ``\\|`` in tables, ``[[^id]]`` is same-page)."""
    target, sep, alias = inner.partition("|")
    target = target.rstrip().rstrip("\\")
    target, hsep, fragment = target.partition("#")
    target = target.strip()
    frag = fragment.strip() if hsep else None
    if not hsep and target.startswith("^"):
        target, frag = "", target
    return target, (frag or None), (alias.strip() or None) if sep else None


def _render_wikilink(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    tok = tokens[idx]
    return wikilink_html(tok.content, bool(tok.meta.get("embed")), env)


def wikilink_html(inner: str, embed: bool, env: MutableMapping[str, Any]) -> str:
    """The HTML of one wikilink or embed, resolved with ``env["targets"]``."""
    target, frag, alias = parse_wikilink(inner)
    label = alias or (target + (f" › {frag.lstrip('^')}" if frag and target else "") or frag or "")
    if embed and target and _ATTACHMENT_RE.search(target):
        # attachments are not served by the view: name them, never load them
        return f'<span class="embed attachment" title="attachment">{escape(target)}</span>'
    cls = "wikilink embed" if embed else "wikilink"
    fragment = fragment_for(frag) if frag else None
    if not target:
        if not fragment:
            return escape(label)
        return f'<a class="{cls}" href="#{quote(fragment, safe="^-")}">{escape(label)}</a>'
    targets: Mapping[str, Target] = env.get("targets", {})
    key = link_key(target)
    res = targets.get(key)
    if res is None:
        lazy = env.get("lazy")
        if lazy is not None:
            res = lazy(target)
            env["uncached"] = True
    if res is not None and res.path is not None:
        prefix = "⧉ " if embed else ""
        return (
            f'<a class="{cls}" href="{escape(page_url(res.path, fragment))}">'
            f"{escape(prefix + label)}</a>"
        )
    if res is not None and res.ambiguous:
        names = ", ".join(res.candidates[:5])
        return (
            f'<span class="{cls} ambiguous" title="ambiguous: {escape(names)}">'
            f"{escape(label)}</span>"
        )
    return f'<span class="{cls} unresolved" title="no page named this yet">{escape(label)}</span>'


def _callouts(state: StateCore) -> None:
    """``> [!type] Title`` blockquotes → callouts (runs before inline parsing)."""
    tokens = state.tokens
    i = 0
    while i < len(tokens) - 2:
        t = tokens[i]
        if (
            t.type == "blockquote_open"
            and tokens[i + 1].type == "paragraph_open"
            and tokens[i + 2].type == "inline"
        ):
            inline = tokens[i + 2]
            first, _, rest = inline.content.partition("\n")
            m = _CALLOUT_RE.fullmatch(first.strip())
            if m:
                kind = re.sub(r"[^a-z0-9-]", "", m.group(1).lower()) or "note"
                t.attrs["class"] = f"callout callout-{kind}"
                title_text = m.group(3).strip() or kind.capitalize()
                p_open = Token("paragraph_open", "p", 1, level=t.level + 1, block=True)
                p_open.attrs["class"] = "callout-title"
                title = Token("inline", "", 0, level=t.level + 2, content=title_text, children=[])
                title.map = inline.map
                p_close = Token("paragraph_close", "p", -1, level=t.level + 1, block=True)
                if rest.strip():
                    inline.content = rest
                    tokens[i + 1 : i + 1] = [p_open, title, p_close]
                else:
                    tokens[i + 1 : i + 4] = [p_open, title, p_close]
                i += 3
        i += 1


def _new_id(env: MutableMapping[str, Any], wanted: str) -> str | None:
    ids: set[str] = env.setdefault("ids", set())
    if wanted in ids:
        return None
    ids.add(wanted)
    return wanted


def _structure(state: StateCore) -> None:
    """Heading ids, block ids (with entry wrappers), table alignment classes."""
    env = state.env
    out: list[Token] = []
    run_start = 0  # index in ``out`` where the current run of top-level blocks starts
    boundary = False  # a block with its own id ends the run once its top-level block closes
    tokens = state.tokens
    i = 0
    n = len(tokens)
    while i < n:
        t = tokens[i]
        if t.type in ("th_open", "td_open"):
            style = str(t.attrs.pop("style", ""))
            if style.startswith("text-align:"):
                t.attrs["class"] = "align-" + style.split(":", 1)[1].strip()
        if t.type == "heading_open" and i + 1 < n:
            hid = heading_id(tokens[i + 1].content)
            unique, k = hid, 1
            while _new_id(env, unique) is None:
                k += 1
                unique = f"{hid}-{k}"
            t.attrs["id"] = unique
        if t.type == "paragraph_open" and i + 2 < n and tokens[i + 1].type == "inline":
            inline = tokens[i + 1]
            text = inline.content.strip()
            if _COMMENT_RE.fullmatch(text):
                # a paragraph that is only a comment (<!-- … --> or Obsidian's %% … %%)
                # is hidden, as Obsidian hides it; the source view still shows it
                i += 3
                continue
            lone = _LONE_ID_RE.fullmatch(text)
            if lone and t.level == 0:
                bid = _new_id(env, "^" + lone.group(1))
                if bid is not None:
                    opener = Token("block_open", "div", 1, level=0, block=True)
                    opener.attrs["class"] = "block"
                    opener.attrs["id"] = bid
                    closer = Token("block_close", "div", -1, level=0, block=True)
                    closer.meta = {"id": bid}
                    out[run_start:run_start] = [opener]
                    out.append(closer)
                i += 3
                run_start = len(out)
                continue
            trailing = None if lone else _TRAILING_ID_RE.search(inline.content)
            if lone or trailing:
                m = lone or trailing
                assert m is not None
                bid = _new_id(env, "^" + m.group(1))
                _strip_marker(inline)
                if bid is not None:
                    holder = t
                    if t.hidden:  # tight list: the <p> is not rendered, use the <li>
                        for j in range(len(out) - 1, -1, -1):
                            if out[j].type == "list_item_open" and out[j].level == t.level - 1:
                                holder = out[j]
                                break
                    holder.attrs["id"] = bid
                    boundary = True
                    ref = Token("block_ref", "", 0)
                    ref.meta = {"id": bid}
                    (inline.children or []).append(ref)
        out.append(t)
        if t.level == 0 and (
            t.type in ("heading_close", "hr", "block_close") or (boundary and t.nesting <= 0)
        ):
            run_start = len(out)
            boundary = False
        i += 1
    state.tokens = out


def _strip_marker(inline: Token) -> None:
    """Remove the trailing `` ^id`` from an inline token's children (and content)."""
    inline.content = _TRAILING_ID_RE.sub("", inline.content).rstrip()
    children = inline.children or []
    while children:
        last = children[-1]
        if last.type == "text":
            stripped = _TRAILING_ID_RE.sub("", last.content)
            if _LONE_ID_RE.fullmatch(last.content.strip()):
                stripped = ""
            last.content = stripped.rstrip()
            if not last.content:
                children.pop()
                while children and children[-1].type in ("softbreak", "hardbreak"):
                    children.pop()
        break


def _render_block_close(
    self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any
) -> str:
    bid = tokens[idx].meta.get("id", "")
    return f'<a class="block-ref" href="#{escape(bid)}">{escape(bid)}</a>\n</div>\n'


def _render_block_ref(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    bid = tokens[idx].meta.get("id", "")
    return f' <a class="block-ref" href="#{escape(bid)}">{escape(bid)}</a>'


def _render_image(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    """Images are never loaded (no tracking pixels, nothing the CSP would block): an
    http(s) image becomes a link, anything else a label."""
    tok = tokens[idx]
    src = str(tok.attrs.get("src", ""))
    alt = "".join(c.content for c in (tok.children or [])) or tok.content or "image"
    if _SCHEME_RE.match(src.lower()) and src.lower().startswith(("http:", "https:")):
        return (
            f'<a class="image-link" href="{escape(src)}" rel="noopener noreferrer nofollow">'
            f"🖼 {escape(alt)}</a>"
        )
    return f'<span class="image-link" title="{escape(src)}">🖼 {escape(alt)}</span>'


def _link_open(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    tok = tokens[idx]
    href = str(tok.attrs.get("href", ""))
    low = href.lower()
    if _SCHEME_RE.match(low):
        tok.attrs["rel"] = "noopener noreferrer nofollow"
    elif low and not low.startswith(("#", "/", "?")):
        # a relative markdown link to another page: [x](other.md) from the page's folder
        path_part, _, frag = href.partition("#")
        if path_part.lower().endswith((".md", ".md/")) or path_part.lower().endswith("%2emd"):
            from urllib.parse import unquote

            here = posixpath.dirname(env.get("rel", ""))
            joined = posixpath.normpath(posixpath.join(here, unquote(path_part)))
            if not joined.startswith("../") and joined != "..":
                tok.attrs["href"] = page_url(joined, fragment_for(frag) if frag else None)
    return "<a" + _attrs(tok) + ">"


def _attrs(tok: Token) -> str:
    return "".join(f' {escape(k)}="{escape(v)}"' for k, v in tok.attrItems())


# --------------------------------------------------------------------------- inline HTML

#: the inline HTML Obsidian notes use that the view renders (docs/web.md); every other
#: tag is shown as text. ``open`` on ``details`` is the only attribute kept.
HTML_ALLOWED = frozenset({"br", "kbd", "sub", "sup", "details", "summary"})
#: layout-only tags whose markup is dropped while their text stays (a vault's
#: ``<span class="related-pages">#css</span>`` shows ``#css`` as a tag link)
HTML_UNWRAPPED = frozenset({"span", "div", "font", "center"})
_HTML_TAG_RE = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9]*)((?:[^<>\"']|\"[^\"]*\"|'[^']*')*)>")
_OPEN_ATTR_RE = re.compile(r"(?:^|\s)open(?:\s|=|/|$)", re.I)
_TEXT_NEWLINE_RE = re.compile(r"(?<=[^>\n])\n(?=[^<\n])")
_HTML_COMMENT_RE = re.compile(r"\s*<!--.*?-->\s*", re.S)

#: what nh3 keeps of a body that holds allowlisted inline HTML: the elements and
#: attributes this renderer writes itself, plus :data:`HTML_ALLOWED` (``open`` on details)
_NH3_TAGS = HTML_ALLOWED | {
    "a", "p", "div", "span", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li",
    "blockquote", "pre", "code", "table", "thead", "tbody", "tr", "th", "td", "em",
    "strong", "s", "del", "hr", "input", "section", "time", "mark",
}  # fmt: skip
_NH3_ATTRS = {
    "*": {"class", "id", "title"},
    "a": {"href", "rel"},
    "input": {"type", "disabled", "checked"},
    "ol": {"start"},
    "details": {"open"},
}


def _html_fragment(text: str, env: MutableMapping[str, Any]) -> str:
    """Raw HTML from a page: tags of :data:`HTML_ALLOWED` without their attributes (but
    ``open`` on ``details``), tags of :data:`HTML_UNWRAPPED` left out (their text
    stays), everything else escaped, so it shows as text."""
    out: list[str] = []
    last = 0
    for m in _HTML_TAG_RE.finditer(text):
        out.append(escape(text[last : m.start()]))
        last = m.end()
        closing, name, attrs = m.group(1), m.group(2).lower(), m.group(3)
        if name in HTML_UNWRAPPED:
            continue  # its markup is dropped, its text stays
        if name not in HTML_ALLOWED or (closing and attrs.strip()):
            out.append(escape(m.group(0)))
            continue
        env["inline_html"] = True
        if closing:
            out.append("" if name == "br" else f"</{name}>")
        elif name == "details" and _OPEN_ATTR_RE.search(attrs):
            out.append("<details open>")
        else:
            out.append(f"<{name}>")
    out.append(escape(text[last:]))
    return "".join(out)


def _render_html_inline(
    self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any
) -> str:
    return _html_fragment(tokens[idx].content, env)


def _render_html_block(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    content = tokens[idx].content
    if _HTML_COMMENT_RE.fullmatch(content):
        return ""  # a comment on its own lines is hidden, as Obsidian hides it
    html = _html_fragment(content.rstrip("\n"), env)
    if "<" not in html.replace("&lt;", ""):
        return f"<p>{html}</p>\n"  # no allowed tag in it: the block is text
    # a line break inside the block's text is kept (not after a tag: that is layout)
    return _TEXT_NEWLINE_RE.sub("<br>\n", html) + "\n"


def sanitize_body(html: str) -> str:
    """The rendered body through nh3 (the Rust ``ammonia`` allowlist sanitizer) with
    this renderer's own elements and attributes: it balances the inline HTML a page
    holds (an unclosed ``<kbd>``) and is the last guard on what reaches the browser."""
    import nh3

    return nh3.clean(
        html,
        tags=set(_NH3_TAGS),
        attributes={k: set(v) for k, v in _NH3_ATTRS.items()},
        link_rel=None,
        url_schemes={"http", "https", "mailto"},
        strip_comments=True,
    )


# --------------------------------------------------------------------------- tags

_TAG_RE = re.compile(r"#([^\s#!\"$%&'()*+,.:;<=>?@\[\\\]^`{|}~]+)")


def tag_url(tag: str) -> str:
    """``/tag/<tag>`` (percent-encoded, ``/`` of nested tags kept) for ``tag`` (``#`` or not)."""
    return "/tag/" + quote(tag.lstrip("#"), safe="/")


def _tag_rule(state: StateInline, silent: bool) -> bool:
    """``#tag`` (Obsidian: after a space or at the start, not only digits) → a link."""
    pos = state.pos
    src = state.src
    if src[pos] != "#":
        return False
    if pos > 0 and not src[pos - 1].isspace():
        after_tag = (
            src[pos - 1] == ">"
            and not state.pending
            and bool(state.tokens)
            and state.tokens[-1].type == "html_inline"
        )
        if not after_tag:
            return False
    m = _TAG_RE.match(src, pos)
    if m is None or m.group(1).replace("/", "").isdigit():
        return False
    if not silent:
        tok = state.push("tag", "", 0)
        tok.content = m.group(1).rstrip("/")
    state.pos = m.end()
    return True


def _render_tag(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    tag = tokens[idx].content
    return f'<a class="tag" href="{escape(tag_url(tag))}">#{escape(tag)}</a>'


# --------------------------------------------------------------------------- sessions

#: the first line of a timeline entry (wiki_memory.wiki.compiler): ``**10:01:02** · head``
_TURN_HEAD_RE = re.compile(r"\*\*(\d{1,2}:\d{2}(?::\d{2})?)\*\*\s*·\s*(.+)")
_TOOL_HEAD_RE = re.compile(r"tool \*\*(.+?)\*\*\s*·\s*(\w+)")


def _turn_kind(head: str) -> tuple[str, dict[str, str]]:
    """``(kind, facts)`` of an entry's head: prompt, reply, tool (name, status) or event."""
    if head.startswith("prompt"):
        who = head.split("·")[1].strip() if "·" in head else ""
        return "prompt", {"speaker": who}
    if head.startswith(("reply", "subagent reply")):
        return "reply", {"label": head.replace("·", "").strip()}
    m = _TOOL_HEAD_RE.match(head)
    if m:
        return "tool", {"tool": m.group(1), "status": m.group(2)}
    return "event", {"label": head.replace("`", "")}


def _conversation(state: StateCore) -> None:
    """A session page's timeline as a conversation (only when ``env["conversation"]``):
    each entry (``<div class="block">`` from :func:`_structure`) becomes a turn with who
    spoke and when; a prompt's and a reply's fenced text is shown as text, not code; a
    tool call's input and output fold into one ``<details>`` under a line naming the
    tool and whether it failed. The page file is not changed: this is rendering only."""
    env = state.env
    if not env.get("conversation"):
        return
    tokens = state.tokens
    out: list[Token] = []
    i = 0
    n = len(tokens)
    while i < n:
        t = tokens[i]
        out.append(t)
        i += 1
        if t.type != "block_open" or i + 2 >= n:
            continue
        if tokens[i].type != "paragraph_open" or tokens[i + 1].type != "inline":
            continue
        m = _TURN_HEAD_RE.fullmatch(tokens[i + 1].content.strip())
        if m is None:
            continue
        kind, facts = _turn_kind(m.group(2))
        failed = facts.get("status") == "failed"
        t.attrs["class"] = f"block turn turn-{kind}" + (" turn-failed" if failed else "")
        head = Token("turn_head", "", 0)
        head.meta = {"time": m.group(1), "kind": kind, **facts}
        out.append(head)
        i += 3
        # the entry's own blocks, up to its closing wrapper
        j = i
        while j < n and not (tokens[j].type == "block_close" and tokens[j].level == t.level):
            j += 1
        inner = tokens[i:j]
        if kind == "tool" and inner:
            opener = Token("turn_io_open", "", 0)
            opener.meta = {"failed": failed}
            out.append(opener)
            out.extend(inner)
            out.append(Token("turn_io_close", "", 0))
        else:
            for tok in inner:
                if tok.type == "fence" and kind in ("prompt", "reply"):
                    tok.type = "said"
                out.append(tok)
        i = j
    state.tokens = out


def _render_turn_head(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    m = tokens[idx].meta
    kind = m["kind"]
    when = f'<span class="when">{escape(m["time"])}</span>'
    if kind == "prompt":
        who = m.get("speaker") or env.get("speaker") or "user"
        return f'<p class="turn-head"><strong class="who">{escape(who)}</strong> {when}</p>\n'
    if kind == "reply":
        who = env.get("agent") or "agent"
        label = m.get("label", "reply")
        extra = f' <span class="muted">{escape(label)}</span>' if label != "reply" else ""
        return (
            f'<p class="turn-head"><strong class="who">{escape(who)}</strong>{extra} {when}</p>\n'
        )
    if kind == "tool":
        status = m.get("status", "")
        badge = (
            '<span class="badge failed">failed</span>'
            if status == "failed"
            else f'<span class="badge">{escape(status)}</span>'
        )
        return (
            f'<p class="turn-head"><span class="tool-name">{escape(m.get("tool", ""))}</span> '
            f"{badge} {when}</p>\n"
        )
    return f'<p class="turn-head event">{escape(m.get("label", ""))} {when}</p>\n'


def _render_turn_io_open(
    self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any
) -> str:
    failed = tokens[idx].meta.get("failed")
    label = "input, output and error" if failed else "input and output"
    return f'<details class="tool-io"><summary>{label}</summary>\n'


def _render_turn_io_close(
    self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any
) -> str:
    return "</details>\n"


def _render_said(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    return f'<div class="said">{escape(tokens[idx].content.rstrip())}</div>\n'


def _make_md() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": True, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.use(tasklists_plugin)
    md.use(footnote_plugin)
    md.validateLink = _validate_link  # type: ignore[method-assign]
    md.inline.ruler.before("link", "wikilink", _wikilink_rule)
    md.core.ruler.after("block", "callouts", _callouts)
    md.core.ruler.push("structure", _structure)
    md.add_render_rule("wikilink", _render_wikilink)
    md.add_render_rule("block_close", _render_block_close)
    md.add_render_rule("block_ref", _render_block_ref)
    md.add_render_rule("image", _render_image)
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("html_inline", _render_html_inline)
    md.add_render_rule("html_block", _render_html_block)
    md.inline.ruler.push("tag", _tag_rule)
    md.add_render_rule("tag", _render_tag)
    md.core.ruler.push("conversation", _conversation)
    md.add_render_rule("turn_head", _render_turn_head)
    md.add_render_rule("turn_io_open", _render_turn_io_open)
    md.add_render_rule("turn_io_close", _render_turn_io_close)
    md.add_render_rule("said", _render_said)
    return md


_MD_LOCAL = threading.local()


def _md() -> MarkdownIt:
    md = getattr(_MD_LOCAL, "md", None)
    if md is None:
        md = _MD_LOCAL.md = _make_md()
    return md


@dataclass(frozen=True)
class Rendered:
    """A rendered body: ``html`` (safe to insert as is) and whether it may be cached."""

    html: str
    cacheable: bool = True


def render_markdown(
    body: str,
    rel: str,
    targets: Mapping[str, Target],
    lazy: Callable[[str], Target] | None = None,
    session: Mapping[str, str] | None = None,
) -> Rendered:
    """Render a page body (frontmatter already removed) to HTML.

    ``rel`` is the page's wiki path (relative markdown links resolve from its folder),
    ``targets`` the resolved wikilinks (``{link_key: Target}``); a target missing from
    it is resolved with ``lazy`` (and the result is then not cacheable). A body over
    :data:`MAX_MARKDOWN_BYTES` is shown as escaped text in a ``<pre>``. ``session``
    (``{"speaker": user, "agent": harness}`` of a session page) renders the timeline as
    a conversation (:func:`_conversation`). A body holding allowlisted inline HTML
    (:data:`HTML_ALLOWED`) passes through :func:`sanitize_body` last.
    """
    if len(body.encode("utf-8", "surrogatepass")) > MAX_MARKDOWN_BYTES:
        return Rendered(
            '<p class="note">This page is too large to render; its text follows.</p>'
            f'<pre class="source">{escape(body)}</pre>'
        )
    env: dict[str, Any] = {"rel": rel, "targets": targets, "lazy": lazy, "ids": set()}
    if session is not None:
        env["conversation"] = True
        env.update({k: v for k, v in session.items() if v})
    html = _md().render(body, env)
    if env.get("inline_html"):
        html = sanitize_body(html)
    return Rendered(html, not env.get("uncached"))


def render_value(value: Any, rel: str, targets: Mapping[str, Target]) -> str:
    """HTML for one frontmatter value: text escaped, wikilinks in strings as links, lists
    joined with commas, mappings as JSON text, None as an em dash."""
    if value is None or value == "":
        return '<span class="muted">—</span>'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(render_value(v, rel, targets) for v in value) or (
            '<span class="muted">—</span>'
        )
    if isinstance(value, dict):
        return f"<code>{escape(json.dumps(value, ensure_ascii=False, default=str))}</code>"
    text = str(value)
    if "[[" not in text:
        return escape(text)
    env: dict[str, Any] = {"rel": rel, "targets": targets}
    parts: list[str] = []
    last = 0
    for m in re.finditer(r"(!?)\[\[([^\[\]\n]+)\]\]", text):
        parts.append(escape(text[last : m.start()]))
        parts.append(wikilink_html(m.group(2), bool(m.group(1)), env))
        last = m.end()
    parts.append(escape(text[last:]))
    return "".join(parts)


# --------------------------------------------------------------------------- cache


class RenderCache:
    """A thread-safe LRU bounded by the total size of its values (``size`` given on
    :meth:`put`, characters for rendered HTML). A value over a quarter of the bound is
    not kept."""

    def __init__(self, max_chars: int = 32 * 1024 * 1024) -> None:
        self.max_chars = max_chars
        self._items: OrderedDict[Any, tuple[Any, int]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Any) -> Any:
        """The value stored under ``key`` (now the most recently used), or None."""
        with self._lock:
            item = self._items.get(key)
            if item is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return item[0]

    def clear(self) -> None:
        """Forget every value (after a purge: no rendered copy of purged text stays)."""
        with self._lock:
            self._items.clear()
            self._size = 0

    def put(self, key: Any, value: Any, size: int | None = None) -> None:
        """Store ``value``; ``size`` defaults to ``len(value)``."""
        n = len(value) if size is None else size
        if n > self.max_chars // 4:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._size -= old[1]
            self._items[key] = (value, n)
            self._size += n
            while self._size > self.max_chars and self._items:
                _, (_, dropped) = self._items.popitem(last=False)
                self._size -= dropped


def targets_fingerprint(targets: Mapping[str, Target]) -> tuple[tuple[str, Any, Any], ...]:
    """A hashable summary of a resolution map, for cache keys."""
    return tuple(sorted((k, t.path, t.candidates) for k, t in targets.items()))
