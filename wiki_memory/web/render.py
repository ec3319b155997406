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
from collections import OrderedDict
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from mdit_py_plugins.footnote import footnote_plugin
from mdit_py_plugins.tasklists import tasklists_plugin

from wiki_memory.web.conversation import conversation_plugin
from wiki_memory.web.htmlallow import render_html_block, render_html_inline, sanitize_body
from wiki_memory.web.links import (
    Target,
    escape,
    forgotten_span,
    fragment_for,
    heading_id,
    link_key,
    page_url,
    tag_url,
)
from wiki_memory.wiki.page import BLOCK_ID_CHARS, BLOCK_ID_RE, CALLOUT, WIKILINK_INNER, WIKILINK_RE

__all__ = [
    "RenderCache",
    "Rendered",
    "render_markdown",
    "render_value",
    "targets_fingerprint",
]

#: markdown bodies larger than this are shown as escaped text, not parsed (bytes)
MAX_MARKDOWN_BYTES = 2 * 1024 * 1024

_SCHEME_RE = re.compile(r"^([a-z][a-z0-9+.\-]*):")
_ALLOWED_SCHEMES = frozenset({"http", "https", "mailto"})
_CTRL_RE = re.compile(r"[\x00-\x20\x7f]+")
_LONE_ID_RE = re.compile(rf"\^({BLOCK_ID_CHARS})")
_COMMENT_RE = re.compile(r"<!--(?:(?!-->).)*-->|%%(?:(?!%%).)*%%", re.S)
_CALLOUT_RE = re.compile(rf"{CALLOUT}[ \t]*(.*)")
_WIKILINK_INNER = re.compile(WIKILINK_INNER)
_ATTACHMENT_RE = re.compile(r"\.(?!md$)[A-Za-z0-9]{1,8}$")


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
    budget = env.get("max_links")
    if budget is not None:
        env["links_shown"] = shown = env.get("links_shown", 0) + 1
        if shown > budget:
            # past the page's link budget: the label alone (the reply stays bounded)
            env["links_cut"] = True
            return escape(label)
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
    if res is not None and res.forgotten:
        return forgotten_span(cls, label)
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
            trailing = None if lone else BLOCK_ID_RE.search(inline.content)
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
    inline.content = BLOCK_ID_RE.sub("", inline.content).rstrip()
    children = inline.children or []
    while children:
        last = children[-1]
        if last.type == "text":
            stripped = BLOCK_ID_RE.sub("", last.content)
            if _LONE_ID_RE.fullmatch(last.content.strip()):
                stripped = ""
            last.content = stripped.rstrip()
            if not last.content:
                children.pop()
                while children and children[-1].type in ("softbreak", "hardbreak"):
                    children.pop()
        break


def _render_block_close(self: Any, tokens: Sequence[Token], idx: int, *_: Any) -> str:
    return _block_link(tokens[idx].meta.get("id", "")) + "\n</div>\n"


def _render_block_ref(self: Any, tokens: Sequence[Token], idx: int, *_: Any) -> str:
    return " " + _block_link(tokens[idx].meta.get("id", ""))


def _block_link(bid: str) -> str:
    """A link to a block: a pilcrow, the raw ``^tN`` id only in its tooltip (an id on
    every entry is noise to a reader; the link still copies as ``#^tN``)."""
    return (
        f'<a class="block-ref" href="#{escape(bid)}" title="link to this entry ({escape(bid)})"'
        ' aria-label="link to this entry">¶</a>'
    )


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


# --------------------------------------------------------------------------- tags

_TAG_RE = re.compile(r"#([^\s#!\"$%&'()*+,.:;<=>?@\[\\\]^`{|}~]+)")


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
    md.add_render_rule("html_inline", render_html_inline)
    md.add_render_rule("html_block", render_html_block)
    md.inline.ruler.push("tag", _tag_rule)
    md.add_render_rule("tag", _render_tag)
    conversation_plugin(md)
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
    #: the body was cut (bytes or wikilinks over the limits); ``html`` ends with a notice
    truncated: bool = False


def cut_text(text: str, max_bytes: int) -> str:
    """The longest start of ``text`` within ``max_bytes`` UTF-8 bytes, ended at a line
    break when there is one in its second half (never inside a character)."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= max_bytes:
        return text
    head = data[:max_bytes].decode("utf-8", "ignore")
    nl = head.rfind("\n")
    return head[: nl + 1] if nl > len(head) // 2 else head


def render_markdown(
    body: str,
    rel: str,
    targets: Mapping[str, Target],
    lazy: Callable[[str], Target] | None = None,
    session: Mapping[str, str] | None = None,
    *,
    max_links: int | None = None,
    max_bytes: int | None = None,
) -> Rendered:
    """Render a page body (frontmatter already removed) to HTML, bounded: at most
    ``max_links`` wikilinks become links (the rest show their text) and the HTML holds
    at most about ``max_bytes`` (the body is cut at a line, once more when its HTML
    came out larger, and a notice ends it). See :func:`_render_markdown` for the rest."""
    total = len(body.encode("utf-8", "surrogatepass"))
    if max_bytes is None or total <= max_bytes // 2:
        done = _render_markdown(body, rel, targets, lazy, session, max_links)
        if max_bytes is None or len(done.html) <= max_bytes:
            return done
    part = cut_text(body, max_bytes)
    done = _render_markdown(part, rel, targets, lazy, session, max_links)
    if len(done.html) > max_bytes:
        share = max_bytes / len(done.html) * 0.9
        part = cut_text(part, int(len(part.encode("utf-8", "surrogatepass")) * share))
        done = _render_markdown(part, rel, targets, lazy, session, max_links)
    if len(part) == len(body):
        return done
    shown = len(part.encode("utf-8", "surrogatepass"))
    notice = (
        f'<p class="note truncated">This page is longer than the web view shows: the first '
        f"{shown:,} of its {total:,} bytes are above. Read it whole in its file or "
        "through the API (<code>GET /v1/pages/…</code> with a cursor).</p>"
    )
    return Rendered(done.html + notice, done.cacheable, True)


def _render_markdown(
    body: str,
    rel: str,
    targets: Mapping[str, Target],
    lazy: Callable[[str], Target] | None,
    session: Mapping[str, str] | None,
    max_links: int | None,
) -> Rendered:
    """Render a page body (frontmatter already removed) to HTML.

    ``rel`` is the page's wiki path (relative markdown links resolve from its folder),
    ``targets`` the resolved wikilinks (``{link_key: Target}``); a target missing from
    it is resolved with ``lazy`` (and the result is then not cacheable). A body over
    :data:`MAX_MARKDOWN_BYTES` is shown as escaped text in a ``<pre>``. ``session``
    (``{"speaker": user, "agent": harness}`` of a session page) renders the timeline as
    a conversation (:mod:`wiki_memory.web.conversation`). A body holding allowlisted inline HTML
    (:data:`~wiki_memory.web.htmlallow.HTML_ALLOWED`) passes through :func:`sanitize_body` last.
    """
    if len(body.encode("utf-8", "surrogatepass")) > MAX_MARKDOWN_BYTES:
        return Rendered(
            '<p class="note">This page is too large to render; its text follows.</p>'
            f'<pre class="source">{escape(body)}</pre>'
        )
    env: dict[str, Any] = {"rel": rel, "targets": targets, "lazy": lazy, "ids": set()}
    if max_links is not None:
        env["max_links"] = max_links
    if session is not None:
        env["conversation"] = True
        env.update({k: v for k, v in session.items() if v})
    html = _md().render(body, env)
    if env.get("inline_html"):
        html = sanitize_body(html)
    if env.get("links_cut"):
        html += (
            f'<p class="note truncated">This page has more than {max_links:,} wikilinks: '
            "the first are links, the rest show their text.</p>"
        )
    return Rendered(html, not env.get("uncached"), bool(env.get("links_cut")))


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
    for m in WIKILINK_RE.finditer(text):
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


def targets_fingerprint(targets: Mapping[str, Target]) -> tuple[tuple[Any, ...], ...]:
    """A hashable summary of a resolution map, for cache keys."""
    return tuple(sorted((k, t.path, t.candidates, t.forgotten) for k, t in targets.items()))
