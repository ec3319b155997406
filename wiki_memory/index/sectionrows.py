"""A page's sections as the index stores them: for each parsed section its anchor,
heading, line, text digest, ``fts`` columns (heading words, body words, stems, date
words) and its day and time range (:mod:`wiki_memory.index.dates`).

:func:`rows` turns every section of a page; :func:`rows_from` continues the walk through
a page's sections from a known :class:`~wiki_memory.index.dates.Fold`, so that a page
that grew at its end (:mod:`wiki_memory.index.pagetail`) turns only its new sections.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from functools import partial
from typing import Any

from wiki_memory.index import sectionmemo, sectionwords
from wiki_memory.index.dates import (
    Fold,
    fold_step,
    page_day,
    section_date_words,
    section_days,
    section_spans,
)
from wiki_memory.index.stem import stems_of_words
from wiki_memory.index.text import index_text_words
from wiki_memory.plainfile import page_hash
from wiki_memory.wiki.page import Section

#: one section's row: anchor, heading, line, text digest, text, heading words, body
#: words, stems, date words, ISO day or None, t0, t1 (epoch seconds or None),
#: near-duplicate words and numbers (:func:`wiki_memory.index.sectionwords.columns`)
Row = tuple[Any, ...]


def _days(meta: Mapping[str, Any], texts: list[str]) -> list[date | None]:
    """Each section's day (:func:`section_days`); none for a page whose dates the
    calendar cannot hold: a page is indexed whatever its frontmatter says."""
    try:
        return section_days(page_day(meta), texts)
    except (ValueError, OverflowError):
        return [None] * len(texts)


def _spans(meta: Mapping[str, Any], texts: list[str]) -> list[tuple[float, float] | None]:
    """Each section's time range (:func:`section_spans`); none outside the calendar."""
    try:
        return section_spans(meta, texts)
    except (ValueError, OverflowError):
        return [None] * len(texts)


def _date_words(text: str, day: date | None) -> str:
    """The ``dates`` column (:func:`section_date_words`), or the day's own words when a
    phrase of ``text`` names a day outside the calendar."""
    try:
        return section_date_words(text, day)
    except (ValueError, OverflowError):
        return section_date_words("", day)


def _derive(
    heading: str, text: str, day: date | None, stem_langs: tuple[str, ...]
) -> sectionmemo.Derived:
    """A section's ``fts`` columns (heading words, body words, stems, date words) and
    its near-duplicate words and numbers."""
    hf, hwords = index_text_words(heading)
    bf, bwords = index_text_words(text)
    dw, dn = sectionwords.columns(text, heading)
    return hf, bf, stems_of_words(hwords + bwords, stem_langs), _date_words(text, day), dw, dn


def row(
    sec: Section,
    day: date | None,
    span: tuple[float, float] | None,
    stem_langs: tuple[str, ...],
) -> Row:
    """The row of one section whose day and time range are known."""
    text = sec.text or ""
    digest = page_hash(text.encode("utf-8", "surrogatepass"))
    heading = sec.heading or ""
    iso = day.isoformat() if day else None
    key = (digest, heading, iso, stem_langs)
    hf, bf, sf, df, dw, dn = sectionmemo.derived(
        key, partial(_derive, heading, text, day, stem_langs)
    )
    return (
        sec.anchor or "",
        heading,
        sec.line,
        digest,
        text,
        hf,
        bf,
        sf,
        df,
        iso,
        span[0] if span else None,
        span[1] if span else None,
        dw,
        dn,
    )


def rows(
    meta: Mapping[str, Any], secs: Sequence[Section], stem_langs: tuple[str, ...]
) -> list[Row]:
    """The rows of every section of a page whose frontmatter is ``meta``."""
    texts = [s.text or "" for s in secs]
    days = _days(meta, texts)
    spans = _spans(meta, texts)
    return [row(s, d, sp, stem_langs) for s, d, sp in zip(secs, days, spans, strict=True)]


def rows_from(
    fold: Fold | None, secs: Sequence[Section], stem_langs: tuple[str, ...]
) -> tuple[list[Row], Fold | None]:
    """The rows of ``secs``, consecutive sections of a page, the walk through its sections
    standing at ``fold`` before the first (None: a page without a date); and the walk's
    state after the last. Raises ValueError or OverflowError where a date leaves the
    calendar (:func:`rows` then gives the page no days at all)."""
    out: list[Row] = []
    for sec in secs:
        if fold is None:
            out.append(row(sec, None, None, stem_langs))
            continue
        fold = fold_step(fold, sec.text or "")
        out.append(row(sec, fold.day, fold.cur, stem_langs))
    return out, fold


def table_rows(
    rowid: int,
    path: str,
    ordinal: int,
    project: Any,
    kind: Any,
    page_fts: tuple[str, str, str],
    sec: Row,
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The ``sections`` row (``schema.INSERT_SECTION``) and the ``fts`` row
    (``schema.INSERT_FTS``) of the section ``sec`` at ``ordinal`` in the page ``path``,
    given its ``rowid`` and its page's ``fts`` columns (title, aliases, tags)."""
    anchor, heading, line, h, text, hf, bf, sf, df, day, t0, t1, dw, dn = sec
    tf, af, gf = page_fts
    return (
        (rowid, path, anchor, heading, ordinal, line, h, text, project, kind, day, t0, t1, dw, dn),
        (rowid, tf, af, gf, hf, bf, sf, df),
    )
