"""Inline HTML in a page body, for the web view's renderer (:mod:`wiki_memory.web.render`):
the allowlist of tags Obsidian notes use (:data:`HTML_ALLOWED`), layout tags whose text
stays (:data:`HTML_UNWRAPPED`), every other tag shown as text, and :func:`sanitize_body`,
the nh3 pass a body holding such HTML goes through last (docs/web.md)."""

from __future__ import annotations

import re
from collections.abc import MutableMapping, Sequence
from typing import Any

from markdown_it.token import Token

from wiki_memory.web.links import escape

__all__ = ["HTML_ALLOWED", "HTML_UNWRAPPED", "sanitize_body"]

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


def render_html_inline(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    return _html_fragment(tokens[idx].content, env)


def render_html_block(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
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
