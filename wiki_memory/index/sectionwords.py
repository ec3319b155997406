"""What recall's near-duplicate filter reads of a section, worked out once when the section
is indexed: its distinct words in one fixed order (the ``words`` column of ``sections``)
and the words that keep two alike texts apart (``nums``). A recall then splits two
stored strings per match instead of normalising and splitting its text again
(docs/index.md, "Near-duplicate words").

The rule of which words count lives here once: :func:`words` (the words of a text as the
index sees them), :func:`content_text` (the part of a section compared: no timeline head
line, no fence lines), :func:`numbers` (words with a digit and :data:`NAMING_WORDS`) and
:func:`word_order` (the fixed order of a set's words; any fixed order gives the prefix
filter of :class:`wiki_memory.recall.dedup.Dedup` the same answers)."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable
from typing import Any

import apsw

from wiki_memory.index.text import normalize

log = logging.getLogger(__name__)

_WORD = re.compile(r"[^\W_]+")
TIMELINE_HEAD = re.compile(r"^\*\*\d\d:\d\d:\d\d\*\*(?: \([^)\n]{1,24}\))? · [^\n]*\n?")
"""The head line of a timeline entry (time, kind, speaker)."""
FENCE_LINE = re.compile(r"^[ \t]*(?:~{3,}|`{3,})[^\n]*$", re.M)

NAMING_WORDS = frozenset(
    "prod production staging stage preprod dev development test qa uat sandbox canary "
    "localhost".split()
)
"""Words that name an environment: like a number, one found on one side only keeps two
near-identical texts apart ("never push to prod" against "never push to staging")."""


#: every ASCII character that is not a letter or a digit, to a space: on ASCII text,
#: :func:`words` splits on these (the runs ``_WORD`` finds), about 2.7 times faster than
#: the regex over a 1 MiB section
_ASCII_GAPS = str.maketrans({c: " " for c in map(chr, range(128)) if not c.isalnum()})


def words(text: str) -> list[str]:
    """The normalised, lowercased words of ``text`` as the index sees them (folded; CJK
    runs as bigrams), in their order. No word holds whitespace."""
    if text.isascii():  # normalize() returns ASCII text as it is
        return text.lower().translate(_ASCII_GAPS).split()
    return [w.lower() for w in _WORD.findall(normalize(text))]


def content_text(text: str, heading: str) -> str:
    """The text of a section compared for near-duplicates: ``text`` without a timeline
    entry's head line (time, kind, speaker) and fence lines; ``heading`` when nothing is
    left."""
    text = TIMELINE_HEAD.sub("", text, count=1)
    if "```" in text or "~~~" in text:  # a fence line holds one (the scan costs 5 ms a MiB)
        text = FENCE_LINE.sub("", text)
    return text or heading


def is_number(w: str) -> bool:
    """``w`` tells facts apart however alike their other words: it holds a digit (dates,
    counts, versions, ids) or is one of :data:`NAMING_WORDS`."""
    # isalpha() (one C call) rules out most words: a letter is never a digit
    return (not w.isalpha() and any(ch.isdigit() for ch in w)) or w in NAMING_WORDS


def numbers(toks: Iterable[str]) -> frozenset[str]:
    """The words of ``toks`` that :func:`is_number` holds for."""
    return frozenset(t for t in toks if is_number(t))


def numbers_key(nums: Iterable[str]) -> str:
    """One string per set of numbers (sorted, space-joined): equal sets, equal strings."""
    return " ".join(sorted(nums))


def order_key(w: str) -> tuple[bool, int, str]:
    """The fixed order of a word set (:func:`word_order`): numbers last (every set they
    are compared with holds the same ones), then longer words first (rarer, as a rule),
    then alphabetical."""
    return (is_number(w), -len(w), w)


def word_order(toks: Iterable[str]) -> list[str]:
    """The distinct words of ``toks`` in the fixed order of :func:`order_key`."""
    return sorted(set(toks), key=order_key)


def columns(text: str, heading: str) -> tuple[str, str]:
    """The ``words`` and ``nums`` columns of a section of ``text`` under ``heading``: its
    compared words (:func:`content_text`, :func:`words`) in :func:`word_order`, and
    :func:`numbers_key` of their numbers, each space-joined."""
    ordered = word_order(words(content_text(text, heading)))
    return " ".join(ordered), numbers_key(w for w in ordered if is_number(w))


FILL_BATCH = 2000
"""Sections read and written per statement while :func:`fill` runs."""


def fill(conn: apsw.Connection) -> None:
    """Add the ``words`` and ``nums`` columns to an index of schema 15 and fill them for
    every section (an in-place upgrade step, run inside the opener's transaction). At
    10,000 bench pages this took the time docs/index.md gives."""
    t0 = time.perf_counter()
    have = {str(r[1]) for r in conn.execute("PRAGMA table_info(sections)")}
    for col in ("words", "nums"):
        if col not in have:
            conn.execute(f"ALTER TABLE sections ADD COLUMN {col} TEXT")
    last = 0
    n = 0
    while True:
        rows: list[Any] = conn.execute(
            "SELECT rowid, text, heading FROM sections WHERE rowid > ? ORDER BY rowid LIMIT ?",
            (last, FILL_BATCH),
        ).fetchall()
        if not rows:
            break
        conn.executemany(
            "UPDATE sections SET words = ?, nums = ? WHERE rowid = ?",
            [(*columns(r[1] or "", r[2] or ""), r[0]) for r in rows],
        )
        last = int(rows[-1][0])
        n += len(rows)
    log.info(
        "index: near-duplicate words of %d sections filled in %.2f s",
        n,
        time.perf_counter() - t0,
    )
