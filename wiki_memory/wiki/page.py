"""Page model: tolerant parsing of markdown pages with YAML frontmatter.

(Over 600 lines on purpose: one pass of the parser over a page's lines classifies
code, comments, headings, links and tags together, and its helpers share that pass.)

A page is any ``*.md`` file under ``wiki/``. Reading is tolerant (a page whose
frontmatter cannot be read is still a page, indexed as plain text, with a
diagnostic naming the line) and never changes the file.

Everything here works on the decoded text with the BOM removed and CRLF/CR turned into
LF; line numbers are 1-based lines of the file. The rules are written down in
``docs/pages.md``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from wiki_memory.wiki.frontmatter_read import (
    find_closing_fence,
    is_opening_fence,
    load_yaml,
)

__all__ = [
    "BLOCK_ID_CHARS",
    "BLOCK_ID_RE",
    "CALLOUT",
    "Diagnostic",
    "Link",
    "ParsedPage",
    "WIKILINK_INNER",
    "WIKILINK_RE",
    "Section",
    "code_mask",
    "extract_links",
    "page_links",
    "parse_page",
    "parse_metadata",
    "unique_folded",
]


@dataclass(frozen=True)
class Diagnostic:
    """Something wrong with a page. ``line`` is 1-based in the file, or None.

    ``kind`` is one of ``invalid_utf8``, ``frontmatter_invalid``, ``frontmatter_not_mapping``,
    ``frontmatter_unclosed``, ``duplicate_key`` (``key`` names it) and ``duplicate_block_id``
    (``key`` is the ``^id``).
    """

    kind: str
    line: int | None
    message: str
    key: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON form: ``{"kind", "line", "message"}`` plus ``"key"`` when set."""
        d: dict[str, Any] = {"kind": self.kind, "line": self.line, "message": self.message}
        if self.key is not None:
            d["key"] = self.key
        return d


@dataclass(frozen=True)
class Link:
    """One outgoing wikilink or embed, as written.

    ``target`` is the page part (empty for a same-page reference), ``fragment`` the part
    after ``#`` (``"Rollback"`` or ``"^warn-1"``), ``alias`` the text after ``|``.
    ``line`` is the 1-based file line. ``in_frontmatter`` marks a link found in a
    frontmatter value (``related: "[[Other page]]"``), as Obsidian counts those too.
    """

    target: str
    fragment: str | None = None
    alias: str | None = None
    embed: bool = False
    line: int = 0
    in_frontmatter: bool = False


@dataclass(frozen=True)
class Section:
    """One addressable part of a page: a heading's section or a block with a block id.

    ``anchor`` is the heading text (``"Timeline"``), a block id (``"^t12"``) or ``""`` for
    the text before the first heading. ``line`` is the 1-based line in the file.
    ``heading`` is the heading's text; for a block, the text of the heading it sits under.
    ``level`` is 1-6 for headings, 0 for the preamble and blocks. ``text`` excludes the
    heading line itself, the ``^id`` marker, and (for a heading) its blocks with ids.
    """

    anchor: str
    heading: str
    level: int
    text: str
    line: int


@dataclass
class ParsedPage:
    """The result of :func:`parse_page`. ``metadata`` is JSON-safe (string keys, ISO dates).

    ``body`` is the text after the frontmatter (the whole text when there is none or it is
    not a mapping), without leading blank lines or trailing whitespace; ``body_line`` is
    the 1-based file line where it starts. ``frontmatter_end`` is the 1-based line of the
    closing fence when a block was split off (valid or invalid YAML), else None.
    ``frontmatter_text`` is the raw YAML between the fences (None when not split off).
    """

    metadata: dict[str, Any]
    body: str
    body_line: int
    title: str
    aliases: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    frontmatter_end: int | None = None
    frontmatter_text: str | None = None

    @property
    def page_links(self) -> list[Link]:
        """Links that name another page (non-empty target); same-page references left out."""
        return [lk for lk in self.links if lk.target]


def page_links(parsed: ParsedPage) -> list[Link]:
    """Links of ``parsed`` with a non-empty target (see :attr:`ParsedPage.page_links`)."""
    return parsed.page_links


# --------------------------------------------------------------------------- patterns

_FENCE_RE = re.compile(r"([ \t]*)(`{3,}|~{3,})(.*)")
_QUOTE_RE = re.compile(r"(?:[ \t]{0,3}>[ \t]?)+")
_HEADING_RE = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*))?")
_LIST_RE = re.compile(r"([ \t]*)([-*+]|\d{1,9}[.)])(?:[ \t]+|$)")
_HR_RE = re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*")
#: what a block id (Obsidian's ``^id``) is made of; every pattern of one here and in the
#: web view is built with it
BLOCK_ID_CHARS = r"[A-Za-z0-9-]+"
#: a block id ending a line (``text ^id``), Obsidian's way to address one block; the web
#: view strips it with the same pattern
BLOCK_ID_RE = re.compile(rf"(?:^|[ \t])\^({BLOCK_ID_CHARS})[ \t]*$")
_ANY_BLOCK_ID_RE = re.compile(rf"\^{BLOCK_ID_CHARS}[ \t]*$", re.M)
#: a callout's marker (``[!note]``, ``[!tip]-``): group 1 its kind (1 to 40 characters, no
#: space or ``]``), group 2 its fold sign (``+``, ``-`` or ""); the web view renders a quote
#: that opens with one as a callout, and its search snippets show it as a label
CALLOUT = r"\[!([^\]\s]{1,40})\]([+-]?)"
#: what a wikilink holds between ``[[`` and ``]]``: no bracket, no line break
WIKILINK_INNER = r"[^\[\]\n]+"
#: a wikilink or an embed, for the code that rewrites, renders or strips them: group 1
#: the ``!`` of an embed ("" for a link), group 2 what it holds
WIKILINK_RE = re.compile(rf"(!?)\[\[({WIKILINK_INNER})\]\]")
# The parser's own: a "!" right before it makes it an embed (checked in code: a pattern
# that starts with the literal "[[" is searched for far faster than one starting with "!?").
_WIKILINK_RE = re.compile(rf"\[\[({WIKILINK_INNER})\]\]")
# A code span: a backtick run (not preceded by a backtick) closed by a run of the same
# length, within one paragraph; bounded so that unclosed runs cost little.
_CODE_SPAN_RE = re.compile(r"`(?<!``)(`*)(?!`)(?:[^\n]|\n(?![ \t]*\n)){1,2000}?(?<!`)`\1(?!`)")
# A tag: '#' then letters, digits, '_', '-', '/' and other non-punctuation characters; the
# '#' must start the text or follow whitespace or '>' (checked in code: faster than a
# lookbehind).
_TAG_RE = re.compile(
    r"#([^\s!-,.:-@\[-^`{-~"
    r"\u3000-\u303f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65\u2018-\u201f\u2026]+)"
)
_SPLIT_TAGS_RE = re.compile(r"[,\s]+")

_SPECIAL_START = frozenset(" \t#>-*+~`0123456789")

# Line kinds.
_BLANK, _TEXT, _LIST, _HEADING, _FENCE, _CODE = range(6)


# --------------------------------------------------------------------------- decoding


def _decode(raw: bytes) -> tuple[str, list[Diagnostic]]:
    """UTF-8 with replacement; one ``invalid_utf8`` diagnostic per affected line."""
    try:
        return raw.decode("utf-8"), []
    except UnicodeDecodeError:
        pass
    diags: list[Diagnostic] = []
    pos = 0
    seen: set[int] = set()
    for _ in range(1000):  # bounded: a binary file must not cost quadratic time
        try:
            raw[pos:].decode("utf-8")
            break
        except UnicodeDecodeError as e:
            at = pos + e.start
            prefix = raw[:at]
            line = prefix.count(b"\n") + prefix.count(b"\r") - prefix.count(b"\r\n") + 1
            if line not in seen and len(diags) < 100:
                seen.add(line)
                diags.append(
                    Diagnostic("invalid_utf8", line, "bytes that are not UTF-8 were replaced")
                )
            pos += e.end
    return raw.decode("utf-8", errors="replace"), diags


def _indent_width(line: str) -> int:
    n = 0
    for ch in line:
        if ch == " ":
            n += 1
        elif ch == "\t":
            n += 4 - n % 4
        else:
            break
    return n


# --------------------------------------------------------------------------- line scan


def _classify(lines: list[str], start: int) -> list[int]:
    """Kind of every line from ``start`` on (earlier lines are ``_BLANK``).

    Fenced code (``` and ~~~, also inside quotes and list items) and indented code are
    ``_CODE`` (fence lines ``_FENCE``); ATX headings outside code ``_HEADING``; list item
    starts ``_LIST``; other non-blank lines ``_TEXT``.
    """
    n = len(lines)
    kinds = [_BLANK] * n
    fence_ch = ""
    fence_len = 0
    fence_quoted = False
    in_list = False
    prev = _BLANK
    fm = _FENCE_RE.match
    for i in range(start, n):
        line = lines[i]
        if fence_ch:
            content = line
            if fence_quoted:
                q = _QUOTE_RE.match(line)
                if q is None:
                    fence_ch = ""  # the quote ended, and the fence with it
                else:
                    content = line[q.end() :]
            if fence_ch:
                s = content.strip()
                if len(s) >= fence_len and s[0] == fence_ch and s == fence_ch * len(s):
                    kinds[i] = _FENCE
                    fence_ch = ""
                    prev = _FENCE
                else:
                    kinds[i] = _CODE
                continue
        if not line:
            prev = _BLANK
            continue
        c = line[0]
        if c not in _SPECIAL_START:  # most prose lines: nothing to look at
            if in_list and prev == _BLANK:
                in_list = False
            kinds[i] = _TEXT
            prev = _TEXT
            continue
        stripped = line.strip()
        if not stripped:
            prev = _BLANK
            continue
        indent = 0 if c not in " \t" else _indent_width(line)
        if indent >= 4 and not in_list and prev in (_BLANK, _HEADING, _FENCE, _CODE):
            kinds[i] = _CODE
            prev = _CODE
            continue
        content = line
        quoted = False
        s0 = stripped[0]
        if s0 == ">":
            q = _QUOTE_RE.match(line)
            if q is not None:
                content = line[q.end() :]
                quoted = True
        elif s0 == "#" and indent <= 3:
            h = _HEADING_RE.fullmatch(line)
            if h is not None:
                kinds[i] = _HEADING
                in_list = False
                prev = _HEADING
                continue
        cs = content.lstrip(" \t")
        if cs[:3] in ("```", "~~~") and (indent <= 3 or in_list or quoted):
            m = fm(content)
            if m is not None and not (m.group(2)[0] == "`" and "`" in m.group(3)):
                fence_ch, fence_len, fence_quoted = m.group(2)[0], len(m.group(2)), quoted
                if indent == 0 and not quoted:
                    in_list = False
                kinds[i] = _FENCE
                prev = _FENCE
                continue
        if not quoted and (s0 in "-*+" or s0.isdigit()):
            m = _LIST_RE.match(line)
            if m is not None and (stripped.strip("-*_ \t") or _HR_RE.fullmatch(line) is None):
                kinds[i] = _LIST
                in_list = True
                prev = _LIST
                rest = line[m.end() :]
                if rest[:3] in ("```", "~~~"):
                    f = fm(rest)
                    if f is not None and not (f.group(2)[0] == "`" and "`" in f.group(3)):
                        fence_ch, fence_len, fence_quoted = f.group(2)[0], len(f.group(2)), False
                continue
        if in_list and indent == 0 and prev == _BLANK:
            in_list = False
        kinds[i] = _TEXT
        prev = _TEXT
    return kinds


def _heading_text(line: str) -> tuple[int, str]:
    m = _HEADING_RE.fullmatch(line)
    assert m is not None
    text = (m.group(2) or "").strip()
    if text.endswith("#"):  # an optional closing sequence: " ##"
        t = text.rstrip("#")
        if not t or t[-1] in " \t":
            text = t.rstrip()
    return len(m.group(1)), text


# --------------------------------------------------------------------------- links, tags


def _make_link(embed: str, inner: str, line: int, in_frontmatter: bool = False) -> Link | None:
    target, sep, alias = inner.partition("|")
    target = target.rstrip()
    if target.endswith("\\"):  # [[Page\|alias]] inside a table
        target = target.rstrip("\\")
    target, hsep, fragment = target.partition("#")
    target = target.strip()
    frag: str | None = fragment.strip() if hsep else None
    if not hsep and target.startswith("^"):  # [[^block]]: same-page block reference
        target, frag = "", target
    if not target and not frag:
        return None
    al = alias.strip() if sep else None
    return Link(
        target=target,
        fragment=frag or None,
        alias=al or None,
        embed=bool(embed),
        line=line,
        in_frontmatter=in_frontmatter,
    )


def extract_links(text: str, first_line: int = 1) -> list[Link]:
    """Wikilinks and embeds in ``text`` (already freed of code), in order.

    ``first_line`` is the file line of ``text``'s first line.
    """
    out: list[Link] = []
    line = first_line
    last = 0
    for m in _WIKILINK_RE.finditer(text):
        at = m.start()
        line += text.count("\n", last, at)
        last = at
        embed = "!" if at and text[at - 1] == "!" else ""
        link = _make_link(embed, m.group(1), line)
        if link is not None:
            out.append(link)
    return out


def _valid_tag(tag: str) -> bool:
    return any(not (c.isdigit() or c == "/") for c in tag)


def _meta_list(value: Any, split_spaces: bool) -> list[str]:
    """Frontmatter ``tags``/``aliases``: a list, or a comma (tags: or space) separated string."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for item in items:
        if item is None or isinstance(item, (dict, list)):
            continue
        if isinstance(item, bool):
            s = "true" if item else "false"
        else:
            s = str(item)
        if isinstance(value, list) and not split_spaces:
            parts = [s]
        elif split_spaces:
            parts = _SPLIT_TAGS_RE.split(s)
        else:
            parts = s.split(",")
        out.extend(p.strip() for p in parts if p.strip())
    return out


def unique_folded(items: Sequence[str]) -> list[str]:
    """``items`` without repeats compared casefolded (as tags and aliases are), the first
    spelling of each kept, in their order."""
    seen: set[str] = set()
    out: list[str] = []
    for it in items:
        k = it.casefold()
        if k not in seen:
            seen.add(k)
            out.append(it)
    return out


def _frontmatter_links(metadata: dict[str, Any], fm_lines: list[str]) -> list[Link]:
    """Wikilinks inside frontmatter string values, with the file line where each is written."""
    found: list[Link] = []
    next_from: dict[str, int] = {}  # needle -> first fm line index to search (repeats)

    def walk(v: Any) -> None:
        if isinstance(v, str):
            if "[[" in v:
                for m in _WIKILINK_RE.finditer(v):
                    at = m.start()
                    embed = "!" if at and v[at - 1] == "!" else ""
                    needle = embed + m.group(0)
                    start = next_from.get(needle, 0)
                    idx = next(
                        (i for i in range(start, len(fm_lines)) if needle in fm_lines[i]), None
                    )
                    if idx is None:  # written another way (escapes, folded): first mention
                        idx = next((i for i, ln in enumerate(fm_lines) if needle in ln), -1)
                    else:
                        next_from[needle] = idx + 1
                    line = idx + 2  # the opening fence is line 1
                    link = _make_link(embed, m.group(1), line, in_frontmatter=True)
                    if link is not None:
                        found.append(link)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)

    walk(metadata)
    return found


# --------------------------------------------------------------------------- sections


def _blocks(lines: list[str], kinds: list[int], a: int, b: int) -> list[tuple[int, int]]:
    """Blocks (paragraphs, list items, code blocks) in lines [a, b) as [start, end) pairs."""
    out: list[tuple[int, int]] = []
    i = a
    while i < b:
        k = kinds[i]
        if k == _BLANK:
            i += 1
            continue
        start = i
        if k == _LIST:
            m = _LIST_RE.match(lines[i])
            content_indent = len(m.group(0).expandtabs(4)) if m else 2
            content_indent = min(content_indent, _indent_width(lines[i]) + 5)
            i += 1
            end = i
            while i < b:
                k2 = kinds[i]
                if k2 in (_LIST, _HEADING):
                    break
                if k2 == _BLANK:
                    j = i
                    while j < b and kinds[j] == _BLANK:
                        j += 1
                    if (
                        j < b
                        and kinds[j] not in (_LIST, _HEADING)
                        and _indent_width(lines[j]) >= content_indent
                    ):
                        i = j
                        continue
                    break
                if (
                    k2 == _FENCE
                    and _indent_width(lines[i]) < content_indent
                    and kinds[i - 1] != _CODE
                ):
                    break
                i += 1
                end = i
            out.append((start, end))
            i = end
        elif k in (_FENCE, _CODE):
            if k == _FENCE:
                i += 1
                while i < b and kinds[i] == _CODE:
                    i += 1
                if i < b and kinds[i] == _FENCE:
                    i += 1
            else:
                end = i
                while i < b and kinds[i] in (_CODE, _BLANK):
                    if kinds[i] == _CODE:
                        end = i + 1
                    i += 1
                i = end
            out.append((start, i))
        else:
            i += 1
            while i < b and kinds[i] == _TEXT:
                i += 1
            out.append((start, i))
    return out


def _trim_blank(lines: list[str]) -> str:
    s, e = 0, len(lines)
    while s < e and not lines[s].strip():
        s += 1
    while e > s and not lines[e - 1].strip():
        e -= 1
    return "\n".join(lines[s:e])


def _sections(
    text: str,
    lines: list[str],
    kinds: list[int],
    start: int,
    prefix: list[str],
    diagnostics: list[Diagnostic],
) -> list[Section]:
    n = len(lines)
    headings: list[tuple[int, int, str]] = [
        (i, *_heading_text(lines[i])) for i in range(start, n) if kinds[i] == _HEADING
    ]
    # Ranges: (heading line index or -1 for the preamble, level, text, first, end).
    ranges: list[tuple[int, int, str, int, int]] = []
    first_h = headings[0][0] if headings else n
    ranges.append((-1, 0, "", start, first_h))
    for idx, (hi, level, htext) in enumerate(headings):
        end = headings[idx + 1][0] if idx + 1 < len(headings) else n
        ranges.append((hi, level, htext, hi + 1, end))

    has_ids = (
        "^" in text
        and _ANY_BLOCK_ID_RE.search(text) is not None
        and any(
            kinds[i] in (_TEXT, _LIST) and "^" in lines[i] and BLOCK_ID_RE.search(lines[i])
            for i in range(start, n)
        )
    )
    out: list[Section] = []
    seen_ids: set[str] = set()
    for hi, level, htext, a, b in ranges:
        taken: set[int] = set()
        if has_ids:
            run_start: int | None = None  # first block since the last block id
            for s, e in _blocks(lines, kinds, a, b):
                last = e - 1
                m = BLOCK_ID_RE.search(lines[last]) if kinds[last] in (_TEXT, _LIST) else None
                if m is None:
                    if run_start is None:
                        run_start = s
                    continue
                bid = "^" + m.group(1)
                body_lines = lines[s:last] + [lines[last][: m.start()].rstrip()]
                sec_line = s
                if e - s == 1 and not lines[last][: m.start()].strip():
                    # A lone "^id" line after a blank line names the blocks since the
                    # previous block id or heading (one timeline entry of a session page).
                    if run_start is None:
                        continue
                    body_lines = lines[run_start:s]
                    sec_line = run_start
                    taken.update(range(run_start, s))
                if bid in seen_ids:
                    diagnostics.append(
                        Diagnostic(
                            "duplicate_block_id", s + 1, f"block id {bid} is used twice", key=bid
                        )
                    )
                seen_ids.add(bid)
                taken.update(range(s, e))
                out.append(Section(bid, htext, 0, _trim_blank(body_lines), sec_line + 1))
                run_start = None
        own_idx = [i for i in range(a, b) if i not in taken] if taken else range(a, b)
        own = [lines[i] for i in own_idx]
        if hi < 0:
            ptext = _trim_blank(prefix + own)
            if ptext.strip():
                first = next((i for i in own_idx if lines[i].strip()), a)
                out.append(Section("", "", 0, ptext, 1 if prefix else first + 1))
        else:
            out.append(Section(htext, htext, level, _trim_blank(own), hi + 1))
    out.sort(key=lambda s: s.line)
    return out


# --------------------------------------------------------------------------- parse


def _mask_inline(text: str) -> str:
    """Blank out code spans and HTML comments, keeping the line count. Linear time.

    A code span is a backtick run closed by the next run of the same length within the
    same paragraph and 2,000 characters; an HTML comment runs from ``<!--`` to the next
    ``-->`` (an unclosed one is left as text).
    """
    if "`" in text:
        text = _CODE_SPAN_RE.sub(_blank_out, text)
    return _sub_comments(text, lambda c: " " + "\n" * c.count("\n"))


def _sub_comments(text: str, repl: Callable[[str], str]) -> str:
    """``text`` with each HTML comment (``<!--`` to the next ``-->``; an unclosed one is
    left as text) replaced by ``repl(comment)``. Linear time."""
    if "<!--" not in text:
        return text
    parts: list[str] = []
    last = 0
    while True:
        a = text.find("<!--", last)
        if a < 0:
            break
        e = text.find("-->", a + 4)
        if e < 0:
            break
        parts.append(text[last:a])
        parts.append(repl(text[a : e + 3]))
        last = e + 3
    parts.append(text[last:])
    return "".join(parts)


def _blank_out(m: re.Match[str]) -> str:
    return " " + "\n" * m.group(0).count("\n")


_MASK = "\x00"


def _mask_same_length(m: re.Match[str]) -> str:
    return "".join("\n" if c == "\n" else _MASK for c in m.group(0))


def code_mask(text: str) -> str:
    """``text`` with code and HTML comments replaced by NUL characters, same length.

    The same rules as :func:`parse_page` (fenced and indented code, code spans, ``<!-- -->``
    comments; frontmatter is not code), so that a position in ``text`` holds a link or tag
    exactly when ``code_mask(text)`` still has the original character there. Newlines are
    kept. For callers that edit a page's text in place (link renames).
    """
    bom = text.startswith("\ufeff")
    t = text[1:] if bom else text
    t_plain = t.replace("\r", " ")
    lines = t_plain.split("\n")
    body_start = 0
    if is_opening_fence(lines[0]):
        close = find_closing_fence(lines)
        if close is not None:
            body_start = close + 1
    kinds = _classify(lines, body_start)
    out_lines = [_MASK * len(ln) if k >= _FENCE else ln for ln, k in zip(lines, kinds, strict=True)]
    masked = "\n".join(out_lines)
    if "`" in masked:
        masked = _CODE_SPAN_RE.sub(_mask_same_length, masked)
    masked = _sub_comments(masked, lambda c: "".join("\n" if ch == "\n" else _MASK for ch in c))
    # CRs were spaces for the scan; give back the original characters where not masked
    if "\r" in t:
        masked = "".join(o if (m != _MASK) else m for o, m in zip(t, masked, strict=True))
    return ("\ufeff" if bom else "") + masked


def parse_metadata(raw: bytes) -> dict[str, Any]:
    """The frontmatter of a page's bytes as :func:`parse_page` reads it (its
    ``metadata``: the same decoding, fences and YAML loader), without parsing the body:
    for callers that only look at keys, such as the border and the shared projection.
    Empty when there is no readable mapping. Never raises on bad content."""
    text = _decode(raw)[0]
    if "\ufeff" in text:
        text = text.replace("\ufeff", "")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if not is_opening_fence(lines[0]):
        return {}
    close = find_closing_fence(lines)
    if close is None:
        return {}
    res = load_yaml("\n".join(lines[1:close]))
    if res.ok and isinstance(res.data, dict):
        return res.data
    return {}


def parse_page(raw: bytes | str, path: str) -> ParsedPage:
    """Parse a page's bytes (or text). Never raises on bad content and never writes.

    ``path`` is the page's path (``/``- or ``\\``-separated); its stem is the fallback
    title. Problems become :class:`Diagnostic` entries with 1-based file lines. No field
    of the result contains ``\\r`` or U+FEFF.
    """
    diagnostics: list[Diagnostic] = []
    if isinstance(raw, bytes):
        text, diagnostics = _decode(raw)
    else:
        text = raw
    if "\ufeff" in text:
        text = text.replace("\ufeff", "")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")

    metadata: dict[str, Any] = {}
    body_start = 0  # index of the first body line
    fm_end: int | None = None
    fm_text: str | None = None
    prefix: list[str] = []  # raw frontmatter lines kept searchable when unreadable
    fm_lines: list[str] = []
    if is_opening_fence(lines[0]):
        close = find_closing_fence(lines)
        if close is None:
            diagnostics.append(
                Diagnostic(
                    "frontmatter_unclosed",
                    1,
                    "the first line is --- but no closing --- follows; read as body text",
                )
            )
        else:
            fm_lines = lines[1:close]
            fm_text = "\n".join(fm_lines)
            res = load_yaml(fm_text)
            if not res.ok:
                line = res.error_line + 2 if res.error_line is not None else 2
                diagnostics.append(
                    Diagnostic(
                        "frontmatter_invalid", line, f"frontmatter is not valid YAML: {res.error}"
                    )
                )
                body_start, fm_end = close + 1, close + 1
                prefix = lines[: close + 1]
            elif res.data is None or isinstance(res.data, dict):
                metadata = res.data or {}
                body_start, fm_end = close + 1, close + 1
                for d in res.duplicates:
                    diagnostics.append(
                        Diagnostic(
                            "duplicate_key",
                            d.line + 2,
                            f"key {d.key!r} appears more than once; the last one wins",
                            key=d.key,
                        )
                    )
            else:
                fm_text = None
                diagnostics.append(
                    Diagnostic(
                        "frontmatter_not_mapping",
                        2,
                        "the --- block is not a mapping of keys to values; read as body text",
                    )
                )

    kinds = _classify(lines, body_start)

    # Body: from the first non-blank body line, trailing whitespace removed.
    first = body_start
    while first < len(lines) and not lines[first].strip():
        first += 1
    body = "\n".join(lines[first:]).rstrip()
    body_line = min(first, len(lines) - 1) + 1 if first < len(lines) else body_start + 1

    # Links and tags: the body with code blocks, code spans and HTML comments removed.
    body_lines = lines[body_start:]
    if _FENCE in kinds or _CODE in kinds:
        body_lines = [
            "" if k >= _FENCE else ln for ln, k in zip(body_lines, kinds[body_start:], strict=True)
        ]
    masked = "\n".join(body_lines)
    masked = _mask_inline(masked)
    links = _frontmatter_links(metadata, fm_lines) if metadata else []
    if "[[" in masked:
        links.extend(extract_links(masked, body_start + 1))

    tags = _meta_list(metadata.get("tags"), split_spaces=True)
    tags = [t.lstrip("#") for t in tags]
    if "#" in masked:  # inline tags
        for m in _TAG_RE.finditer(masked):
            at = m.start()
            if at == 0 or masked[at - 1].isspace() or masked[at - 1] == ">":
                tags.append(m.group(1).rstrip("/"))
    tags = unique_folded([t for t in tags if t and _valid_tag(t)])
    aliases = unique_folded(_meta_list(metadata.get("aliases"), split_spaces=False))

    sections = _sections(body, lines, kinds, body_start, prefix, diagnostics)

    title = ""
    mt = metadata.get("title")
    if isinstance(mt, str) and mt.strip():
        title = " ".join(mt.split())
    if not title:
        for sec in sections:
            if sec.level == 1 and sec.heading:
                title = sec.heading
                break
    if not title:
        name = path.replace("\\", "/").rsplit("/", 1)[-1]
        title = name[:-3] if name.lower().endswith(".md") else name
        title = title.replace("\ufeff", "").replace("\r", "")

    return ParsedPage(
        metadata=metadata,
        body=body,
        body_line=body_line,
        title=title,
        aliases=aliases,
        tags=tags,
        links=links,
        sections=sections,
        diagnostics=diagnostics,
        frontmatter_end=fm_end,
        frontmatter_text=fm_text,
    )
