"""A page's sections by heading, and the text splices of the precise edits
(:mod:`wiki_memory.core.edits`, docs/api.md "Precise edits").

A section is an ATX heading (``#`` to ``######``, outside code, comments and the
frontmatter) and every line below it up to the next heading of the same or a higher level
(its subsections belong to it). Setext headings (a line underlined with ``===``) are not
sections here. A section is named by its heading text, matched as link fragments match
headings (:func:`wiki_memory.wiki.links.heading_key`); ``Plan#Risks`` names the ``Risks``
directly under ``Plan`` when ``Risks`` alone is ambiguous.

Pure functions over ``str``; offsets are character offsets into the page text.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from wiki_memory.errors import BadRequest
from wiki_memory.wiki.frontmatter_read import find_closing_fence, is_opening_fence
from wiki_memory.wiki.links import heading_key
from wiki_memory.wiki.page import code_mask

__all__ = [
    "Section",
    "append_text",
    "find_section",
    "insert_item",
    "replace_body",
    "section_hash",
    "sections",
]

_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_ITEM = re.compile(r"^[ \t]*[-*+] \[[ xX]\]")


@dataclass(frozen=True)
class Section:
    """One heading's section: ``level`` (1-6), ``title`` (the heading's text),
    ``start`` (offset of the heading line), ``body`` (offset after the heading line),
    ``end`` (offset of the next heading of the same or a higher level, or the text's
    end), ``parents`` (titles of the enclosing sections, outermost first)."""

    level: int
    title: str
    start: int
    body: int
    end: int
    parents: tuple[str, ...]


def _body_start(lines: list[str]) -> int:
    """Index of the first line after the frontmatter (0 when there is none)."""
    if lines and is_opening_fence(lines[0]):
        close = find_closing_fence(lines)
        if close is not None:
            return close + 1
    return 0


def sections(text: str) -> list[Section]:
    """Every ATX section of ``text`` in page order (see the module)."""
    masked = code_mask(text)
    lines = masked.split("\n")
    first = _body_start(text.split("\n"))
    heads: list[tuple[int, str, int, int]] = []  # level, title, start, body
    pos = 0
    for i, line in enumerate(lines):
        nxt = pos + len(line) + 1
        if i >= first:
            m = _HEADING.match(line)
            if m is not None:
                title = text[pos : pos + len(line)]
                tm = _HEADING.match(title)
                heads.append(
                    (len(m.group(1)), (tm.group(2) if tm else "") or "", pos, min(nxt, len(text)))
                )
        pos = nxt
    out: list[Section] = []
    for k, (level, title, start, body) in enumerate(heads):
        end = len(text)
        for lv, _t, st, _b in heads[k + 1 :]:
            if lv <= level:
                end = st
                break
        parents: list[tuple[int, str]] = []
        for lv, t, _st, _b in heads[:k]:
            while parents and parents[-1][0] >= lv:
                parents.pop()
            parents.append((lv, t))
        while parents and parents[-1][0] >= level:
            parents.pop()
        out.append(Section(level, title.strip(), start, body, end, tuple(t for _l, t in parents)))
    return out


def _matches(name: str, title: str) -> bool:
    name = name.strip().lstrip("#").strip()
    return heading_key(name) == heading_key(title)


def find_section(text: str, name: str) -> Section:
    """The one section ``name`` names (see the module). Raises BadRequest (field
    ``section``) when none or several match, naming the page's headings."""
    parts = [p for p in name.split("#") if p.strip()] if not name.lstrip().startswith("#") else []
    if not parts:
        parts = [name]
    all_secs = sections(text)
    found = [s for s in all_secs if _matches(parts[-1], s.title)]
    if len(found) > 1 and len(parts) > 1:
        want = parts[:-1]
        found = [
            s
            for s in found
            if len(s.parents) >= len(want)
            and all(_matches(p, t) for p, t in zip(want, s.parents[-len(want) :], strict=True))
        ]
    if len(found) == 1:
        return found[0]
    names = ", ".join(s.title for s in all_secs[:30]) or "none"
    if not found:
        raise BadRequest(
            f"no section {name!r} in this page; its headings: {names}", field="section"
        )
    raise BadRequest(
        f"{len(found)} sections are named {name!r}; name the parent too (Parent#{name})",
        field="section",
    )


def section_hash(text: str, sec: Section) -> str:
    """sha256 hex of the section's UTF-8 text, heading line included."""
    return hashlib.sha256(text[sec.start : sec.end].encode("utf-8")).hexdigest()


def _line(addition: str) -> str:
    return addition if addition.endswith("\n") else addition + "\n"


def _insert_at(text: str, at: int, addition: str) -> str:
    """``addition`` as whole lines at ``at`` (the start of a line, or the end)."""
    head = text[:at]
    if head and not head.endswith("\n"):
        head += "\n"
    return head + _line(addition) + text[at:]


def _content_end(text: str, start: int, end: int) -> int:
    """Offset after the last non-blank line in ``text[start:end]`` (``start`` if none)."""
    chunk = text[start:end]
    stripped = chunk.rstrip(" \t\r\n")
    if not stripped:
        return start
    nl = chunk.find("\n", len(stripped))
    return start + (nl + 1 if nl >= 0 else len(chunk))


def append_text(text: str, addition: str, section: str | None = None) -> str:
    """``text`` with ``addition`` added as whole lines: at the end of the page, or at the
    end of ``section`` (after its last non-blank line, before the blank lines and the next
    heading). Raises BadRequest for an unknown or ambiguous section."""
    if section is None:
        return _insert_at(text, len(text), addition)
    sec = find_section(text, section)
    return _insert_at(text, _content_end(text, sec.body, sec.end), addition)


def insert_item(text: str, item: str, section: str | None = None) -> str:
    """``text`` with a checklist item ``- [ ] item`` (kept as it is when it already is a
    list item) after the last checklist item of the page or ``section``, else where
    :func:`append_text` puts text."""
    line = item.strip("\n")
    if not _ITEM.match(line):
        line = f"- [ ] {line.strip()}"
    lo, hi = 0, len(text)
    if section is not None:
        sec = find_section(text, section)
        lo, hi = sec.body, sec.end
    masked = code_mask(text)
    last = -1
    pos = lo
    for ln in masked[lo:hi].split("\n"):
        if _ITEM.match(ln):
            last = pos + len(ln) + 1
        pos += len(ln) + 1
    if last < 0:
        return append_text(text, line, section)
    return _insert_at(text, min(last, len(text)), line)


def replace_body(text: str, section: str, new_body: str, expected: str) -> tuple[str, str]:
    """``text`` with the body of ``section`` (everything under its heading line) replaced
    by ``new_body``, and the section's hash before. Returns ``(new text, hash before)``;
    the caller compares ``expected`` with the hash before (the caller raises the 412)."""
    sec = find_section(text, section)
    before = section_hash(text, sec)
    if before != expected:
        return text, before
    body = new_body if not new_body or new_body.endswith("\n") else new_body + "\n"
    if sec.end < len(text) and not body.endswith("\n\n"):
        body += "\n"
    head = text[: sec.body]
    if not head.endswith("\n"):
        head += "\n"
    return head + body + text[sec.end :], before
