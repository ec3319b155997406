"""A section as recall's signals read it from the index: :class:`Hit` (a
:class:`~wiki_memory.index.search.SectionHit` with its place in its page, its day and
time range, its rowid and its stored near-duplicate words), the columns it is read from
(:data:`HIT_COLUMNS`) and the builders of one from a row. :mod:`wiki_memory.index.signals`
reads them (and gives these names to its callers)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from wiki_memory.index.search import SectionHit, section_fields

__all__ = ["HIT_COLUMNS", "SCORE", "UPDATED", "Hit", "hit_from_row", "with_score"]

UPDATED = "COALESCE(p.updated, p.created, strftime('%Y-%m-%dT%H:%M:%SZ', p.mtime, 'unixepoch'))"
"""SQL for a page's ``updated`` as a hit shows it: frontmatter ``updated``, else
``created``, else the file's mtime."""


@dataclass(frozen=True)
class Hit(SectionHit):
    """One section: a :class:`SectionHit` (``score`` 0 when the section was not found by
    text) plus ``ord``, its 0-based position in its page."""

    ord: int
    day: str | None = None  # the day the section happened (YYYY-MM-DD) or None
    rid: int = 0  # the section's rowid in this index (0: not from the index)
    span: tuple[float, float] | None = None  # its time range (epoch seconds) or None
    #: its near-duplicate words and numbers as stored (``sections.words``/``nums``;
    #: None when the hit was not read from the index)
    words: str | None = field(default=None, compare=False, repr=False)
    nums: str | None = field(default=None, compare=False, repr=False)


HIT_COLUMNS = (
    f"s.path, s.anchor, s.heading, p.title, p.kind, p.project, {UPDATED}, s.text, s.line, "
    "s.ord, s.day, s.rowid, s.t0, s.t1, s.words, s.nums"
)
SCORE = 16  # the column after HIT_COLUMNS


_new = object.__new__
_set = object.__setattr__


def hit_from_row(row: Sequence[Any], score: float) -> Hit:
    """The :class:`Hit` of a row read as :data:`HIT_COLUMNS` (NULLs as the empty text,
    ``page`` and 0, as :func:`~wiki_memory.index.search.section_fields`), with ``score``.

    Built without the frozen dataclass's ``__init__`` (one ``object.__setattr__`` per
    field; a recall builds some 400 of these): its attributes are set at once, in field
    order, so it equals, hashes and prints as ``Hit(...)`` with the same values does."""
    h = _new(Hit)
    t0 = row[12]
    fields = section_fields(row, score)  # path ... line, in field order
    fields["ord"] = int(row[9] or 0)
    fields["day"] = row[10]
    fields["rid"] = int(row[11])
    fields["span"] = (float(t0), float(row[13])) if t0 is not None else None
    fields["words"] = row[14]
    fields["nums"] = row[15]
    _set(h, "__dict__", fields)
    return h


def with_score(h: Hit, score: float) -> Hit:
    """``h`` with ``score`` (built as :func:`hit_from_row` builds one, from its fields)."""
    c = _new(Hit)
    _set(c, "__dict__", {**h.__dict__, "score": score})
    return c
