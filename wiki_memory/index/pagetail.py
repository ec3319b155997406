"""A long page that grew at its end, parsed by its new part: what a session page is at
each ``Stop`` (its frontmatter and summary changed, a few timeline entries appended,
thousands of entries as they were).

The page is read as three parts. The *head*, from the top to the end of a first lone
block id (``^t1`` on a line of its own between blank lines) under the page's last
heading, holds the frontmatter, summary and the sections that change; the *middle*, the
entries the last indexing of the page already turned, is remembered (its text, sections,
links, inline tags, block ids and index rows); the *tail* is what follows. The head and
the tail are parsed (:func:`wiki_memory.wiki.page.parse_page`, the tail under a copy of
the heading it sits under), the middle is taken from memory once its text is found
unchanged right after the head's block id, and the three are put together.

Why that equals a parse of the whole page: the parser's state after a lone block id
line that it recognised (so not inside a fence), preceded and followed by a blank line,
is the state at the start of a body (no fence open, no list, the previous line blank),
and the parser reads a line by what is above it only. Code spans end at a blank line.
An HTML comment is read within its part (one that a part leaves open, outside code,
could end in a later one: then the page is parsed whole). The rest is checked each
time, and anything else (
a heading in the middle or tail, a block id used twice, text outside the entries under
the last heading, a ``\\r`` or BOM, invalid UTF-8, a page under :data:`MIN_BYTES`) makes
:func:`parse` return None: the caller parses the whole page. The parsed result's
``body`` is not filled (the index does not read it when a page has sections).

The memory is per process, at most :data:`MAX_PAGES` pages (the most recently used),
guarded by a lock, and :func:`clear` empties it (a purge: no copy of purged text stays).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from wiki_memory.index.dates import Fold, fold_start
from wiki_memory.index.sectionrows import Row, rows_from
from wiki_memory.wiki.page import (
    Link,
    ParsedPage,
    Section,
    code_mask,
    parse_page,
    unique_folded,
)

#: pages shorter than this are parsed whole (that is fast, and nothing is remembered)
MIN_BYTES = 32_768
#: at most this many pages remembered
MAX_PAGES = 4

#: a lone block id line between blank lines; the head ends after the blank line
_CUT = re.compile(r"\n\n(\^[A-Za-z0-9-]+)\n\n")
#: a heading whose line cannot hold a link, tag, code span or block id
_PLAIN_HEADING = re.compile(r"#{1,6} [A-Za-z0-9][A-Za-z0-9 ]*")
#: a tail the next middle can take in: it ends with a lone block id line
_ENDS_CUT = re.compile(r"\n\n\^[A-Za-z0-9-]+\n\Z")
#: a block with an id put after a part before it is parsed: it is read as a section only
#: where the part ends outside any fence (then removed from the result)
_PROBE_ID = "^wm-part-end"
_PROBE = f"\n\nend {_PROBE_ID}\n"


@dataclass(frozen=True)
class _Middle:
    """The remembered middle of one page, its lines as they were at ``start``."""

    anchor: str  # the block id that ends the head
    start: int  # 0-based line where the middle began
    heading_line: str
    text: str
    lines: int  # newlines in ``text``
    secs: list[Section]
    links: list[Link]
    tags: list[str]
    ids: frozenset[str]
    rows: list[Row]
    stem_langs: tuple[str, ...]
    fold_in: Fold | None
    fold_out: Fold | None
    #: the digest of the page whose rows were made last, the number of its head's rows
    digest: str = ""
    head_rows: int = 0
    #: its rows ``first`` to ``end - 1`` are those of the page with digest ``since`` at
    #: the same places: ``(since, first, end)``
    kept: tuple[str, int, int] | None = None


_memory: OrderedDict[str, _Middle] = OrderedDict()
_lock = threading.Lock()


def clear() -> None:
    """Forget every remembered page (a purge)."""
    with _lock:
        _memory.clear()


def _forget(path: str) -> None:
    with _lock:
        _memory.pop(path, None)


def _ids(secs: Sequence[Section]) -> list[str]:
    return [s.anchor for s in secs if s.anchor.startswith("^")]


def _shift_row(r: Row, by: int) -> Row:
    return (*r[:2], r[2] + by, *r[3:])


@dataclass
class Grown:
    """A page parsed by its parts (:func:`parse`): ``parsed`` is what a parse of the
    whole page gives (its ``body`` aside); :meth:`rows` gives its index rows."""

    path: str
    parsed: ParsedPage
    head: list[Section]
    middle: _Middle | None  # the remembered middle, its lines moved to this page's
    tail: list[Section]
    tail_links: list[Link]
    tail_tags: list[str]
    tail_text: str
    start: int  # 0-based line where the middle begins
    anchor: str
    heading_line: str
    absorb: bool  # the tail ends with a lone block id: the next middle takes it in
    moved: bool  # the middle's lines moved (the head has more or fewer lines)

    def rows(
        self, meta: Mapping[str, Any], stem_langs: tuple[str, ...], digest: str
    ) -> list[Row] | None:
        """Every section's index row (:func:`wiki_memory.index.sectionrows.rows`), turning
        only the head and the tail when the middle's are remembered; remembers the page
        (its bytes' ``digest``) for its next change. None when a date leaves the calendar
        (the caller turns the page whole, as it does then)."""
        mid = self.middle
        kept: tuple[str, int, int] | None = None
        try:
            head_rows, fold_head = rows_from(fold_start(meta), self.head, stem_langs)
            fold = fold_head
            if mid is None:
                mid_rows: list[Row] = []
            elif mid.stem_langs == stem_langs and mid.fold_in == fold:
                mid_rows, fold = mid.rows, mid.fold_out
                if not self.moved and mid.digest and mid.head_rows == len(head_rows):
                    kept = (mid.digest, len(head_rows), len(head_rows) + len(mid_rows))
            else:
                mid_rows, fold = rows_from(fold, mid.secs, stem_langs)
            tail_rows, fold_end = rows_from(fold, self.tail, stem_langs)
        except (ValueError, OverflowError):
            _forget(self.path)
            return None
        if self.absorb:
            mid = _Middle(
                anchor=self.anchor,
                start=self.start,
                heading_line=self.heading_line,
                text=(mid.text if mid else "") + self.tail_text,
                lines=(mid.lines if mid else 0) + self.tail_text.count("\n"),
                secs=(mid.secs if mid else []) + self.tail,
                links=(mid.links if mid else []) + self.tail_links,
                tags=unique_folded((mid.tags if mid else []) + self.tail_tags),
                ids=(mid.ids if mid else frozenset()) | frozenset(_ids(self.tail)),
                rows=mid_rows + tail_rows,
                stem_langs=stem_langs,
                fold_in=fold_head,
                fold_out=fold_end,
            )
        elif mid is not None:
            mid = replace(
                mid, rows=mid_rows, stem_langs=stem_langs, fold_in=fold_head, fold_out=fold
            )
        if mid is not None:
            mid = replace(mid, digest=digest, head_rows=len(head_rows), kept=kept)
            with _lock:
                _memory[self.path] = mid
                _memory.move_to_end(self.path)
                while len(_memory) > MAX_PAGES:
                    _memory.popitem(last=False)
        return head_rows + mid_rows + tail_rows


def unchanged(path: str, digest: str, indexed: str) -> tuple[int, int] | None:
    """``(first, end)`` when the rows just made for the page at ``path`` with bytes of
    ``digest`` hold, from ``first`` to ``end - 1``, the very rows made for the bytes of
    ``indexed`` (the digest the index holds for the page now) at the same places: those
    the index need not compare (:func:`wiki_memory.index.pagediff.update_changed`)."""
    with _lock:
        mid = _memory.get(path)
    if mid is None or mid.digest != digest or mid.kept is None or mid.kept[0] != indexed:
        return None
    return mid.kept[1], mid.kept[2]


def _moved(mid: _Middle, start: int) -> _Middle:
    """``mid`` with its lines moved to a middle that begins at line ``start``."""
    by = start - mid.start
    if by == 0:
        return mid
    return replace(
        mid,
        start=start,
        secs=[replace(s, line=s.line + by) for s in mid.secs],
        links=[replace(lk, line=lk.line + by) for lk in mid.links],
        rows=[_shift_row(r, by) for r in mid.rows],
    )


def parse(path: str, raw: bytes) -> Grown | None:
    """The page ``raw`` at ``path`` parsed by its parts (see the module), or None where
    that does not apply: the caller then parses the whole page. Never raises on bad
    content."""
    if len(raw) < MIN_BYTES:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if "\r" in text or "\ufeff" in text:
        return None
    with _lock:
        mid = _memory.get(path)
    s_pos = -1
    if mid is not None:
        at = text.find(f"\n\n{mid.anchor}\n\n")
        s_pos = at + len(mid.anchor) + 4 if at >= 0 else -1
        end = s_pos + len(mid.text)
        if (
            s_pos < 0
            or not text.startswith(mid.text, s_pos)
            or (end < len(text) and text[end] != "\n")
        ):
            mid = None
    if mid is None:
        _forget(path)
        m = _CUT.search(text)
        if m is None:
            return None
        anchor, s_pos = m.group(1), m.end()
    else:
        anchor = mid.anchor
    return _assemble(path, text, s_pos, anchor, mid)


def _parse_part(text: str, path: str) -> ParsedPage | None:
    """``text`` parsed with the probe after it, the probe removed; None when the probe
    was not read as a section (the text ends inside a fence) or an id repeats."""
    if "<!--" in text and "<!--" in code_mask(text):
        return None  # a comment that may close in a later part
    parsed = parse_page(text + _PROBE, path)
    if not parsed.sections or parsed.sections[-1].anchor != _PROBE_ID:
        return None
    if any(d.kind == "duplicate_block_id" for d in parsed.diagnostics):
        return None
    parsed.sections.pop()
    return parsed


def _assemble(path: str, text: str, s_pos: int, anchor: str, mid: _Middle | None) -> Grown | None:
    head_text = text[: s_pos - 1]
    head = _parse_part(head_text, path)
    if head is None or not head.sections:
        return None
    if any(d.kind == "frontmatter_unclosed" for d in head.diagnostics):
        return None  # the cut fell inside the frontmatter
    last = head.sections[-1]
    under = [s for s in head.sections if s.level > 0]
    if last.anchor != anchor or last.level != 0 or not under:
        return None
    heading = under[-1]
    head_lines = head_text.split("\n")
    heading_line = head_lines[heading.line - 1]
    if (
        heading.text
        or last.heading != heading.heading
        or not _PLAIN_HEADING.fullmatch(heading_line)
    ):
        return None
    start = len(head_lines)  # the head's lines end with the blank line after its id
    moved = mid is not None and mid.start != start
    if mid is not None:
        if mid.heading_line != heading_line:
            return None
        mid = _moved(mid, start)
    t_pos = s_pos + (len(mid.text) if mid else 0)
    t_line = start + (mid.lines if mid else 0)
    tail_text = text[t_pos:]
    piece = _parse_part(f"{heading_line}\n\n{tail_text}", path)
    if piece is None:
        return None
    secs = piece.sections
    if (
        piece.diagnostics
        or piece.metadata
        or not secs
        or (secs[0].line, secs[0].level, secs[0].heading) != (1, heading.level, heading.heading)
        or secs[0].text
        or any(s.level != 0 or s.heading != heading.heading for s in secs[1:])
        or any(lk.line <= 2 for lk in piece.links)
    ):
        return None
    off = t_line - 2
    tail = [replace(s, line=s.line + off) for s in secs[1:]]
    head_ids, tail_ids = _ids(head.sections), _ids(tail)
    seen = set(head_ids) | (mid.ids if mid else frozenset())
    if len(seen) != len(head_ids) + (len(mid.ids) if mid else 0) or seen & set(tail_ids):
        return None
    tail_links = [replace(lk, line=lk.line + off) for lk in piece.links]
    mid_secs = mid.secs if mid else []
    mid_links = mid.links if mid else []
    parsed = ParsedPage(
        metadata=head.metadata,
        body="",
        body_line=head.body_line,
        title=head.title,
        aliases=head.aliases,
        tags=unique_folded(head.tags + (mid.tags if mid else []) + piece.tags),
        links=head.links + mid_links + tail_links,
        sections=head.sections + mid_secs + tail,
        diagnostics=head.diagnostics,
        frontmatter_end=head.frontmatter_end,
        frontmatter_text=head.frontmatter_text,
    )
    absorb = bool(tail) and _ENDS_CUT.search(tail_text) is not None
    return Grown(
        path=path,
        parsed=parsed,
        head=head.sections,
        middle=mid,
        tail=tail,
        tail_links=tail_links,
        tail_tags=piece.tags,
        tail_text=tail_text,
        start=start,
        anchor=anchor,
        heading_line=heading_line,
        absorb=absorb,
        moved=moved,
    )
