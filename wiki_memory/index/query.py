"""Safe FTS5 query building: user text never reaches ``MATCH`` raw.

The query is split on whitespace into chunks. Each chunk is normalised exactly like
indexed text (:func:`wiki_memory.index.text.normalize`: folding and CJK bigrams)
and quoted as one FTS5 string (``"`` doubled), so FTS5 syntax in it (``AND``,
``OR``, ``NOT``, ``NEAR(``, ``*``, ``^``, ``:``, ``-``, ``+``, parentheses, quotes)
is plain text: ``title:secret`` is the phrase *title secret*, not a column
filter, and ``read-only`` is the phrase *read only*, not ``read NOT only``.
Inside a string FTS5's tokenizer drops punctuation, so ``C++`` searches ``c``
and ``x=y`` the phrase *x y*.

A chunk becomes one *term*:

- ``"chunk"`` — the phrase of its tokens;
- ``("getusername" OR "get user name")`` — when the chunk has case humps or
  letter/digit boundaries, the split form is an alternative (it matches the
  parts group the indexer appends for identifiers, see
  :func:`wiki_memory.index.text.identifier_expansions`); a chunk joined by
  ``_ . -`` (``read-only``) also gets its joined form (``readonly``);
- ``"孤" *`` — a lone CJK character is a prefix query, since the index stores
  CJK as bigrams.

Chunks with nothing searchable (``*``, ``(``, ``"`` alone) are dropped; English
stop words (``what``, ``did``, ``the``, ...) are dropped when some other chunk is
left, so ``AND`` or ``the`` alone still search. Terms are joined with ``AND``
(every term must match) or ``OR`` (any). When nothing is left,
:func:`build_match` returns ``None`` and the caller answers with an empty success.
At most :data:`MAX_TERMS` chunks are used.
"""

from __future__ import annotations

import re
from typing import Literal

from wiki_memory.index.text import CJK_CHARS, normalize, split_identifiers

__all__ = ["build_match", "query_terms", "quote", "STOP_WORDS", "MAX_TERMS", "Mode"]

Mode = Literal["and", "or"]

MAX_TERMS = 32
"""Chunks beyond this many are ignored (a pasted page is not a query)."""

STOP_WORDS: frozenset[str] = frozenset(
    """
    a about after all also am an and any are as at be been before being but by can could
    did do does doing done for from had has have having he her here hers him his how i if
    in into is it its just me my no nor not of on or our ours she should so some such than
    that the their theirs them then there these they this those to too up us very was we
    were what when where which while who whom why will with would you your yours
    s t d ll re ve m
    """.split()
)
"""Dropped from a query when some other word is left. Small on purpose."""

# Characters that can never be part of a token (FTS5 syntax and control chars).
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_WORD = re.compile(r"[^\W_]+")
_LONE_CJK = re.compile(f"[{CJK_CHARS}]")
_JOINED = re.compile(r"[A-Za-z0-9]+(?:[_.\-]+[A-Za-z0-9]+)+")
_EDGE_PUNCT = "\"'()[]{}<>,;:!?*^+#@=/\\|`~$%&"


def quote(text: str) -> str:
    """``text`` as an FTS5 string literal: wrapped in ``"``, inner ``"`` doubled."""
    return '"' + text.replace('"', '""') + '"'


def _words(text: str) -> list[str]:
    """Roughly the tokens unicode61 makes of ``text`` (letters and digits, lowercased)."""
    return [w.lower() for w in _WORD.findall(text)]


def fts_term(chunk: str) -> str | None:
    """The FTS5 expression for one whitespace-free chunk, or None if nothing is searchable."""
    norm = normalize(chunk).replace('"', " ")
    words = _words(norm)
    if not words:
        return None
    if len(words) == 1 and len(words[0]) == 1 and _LONE_CJK.fullmatch(words[0]):
        return f"{quote(words[0])} *"
    phrase = " ".join(words)
    alternatives = [phrase]
    split = " ".join(_words(split_identifiers(norm)))
    if split and split != phrase:
        alternatives.append(split)
    core = norm.strip(_EDGE_PUNCT + ".-_")
    if _JOINED.fullmatch(core):
        joined = "".join(_words(core))
        if joined not in alternatives:
            alternatives.append(joined)
    if len(alternatives) == 1:
        return quote(phrase)
    return "(" + " OR ".join(quote(a) for a in alternatives) + ")"


def query_terms(query: str) -> list[str]:
    """The FTS5 terms for ``query`` (before joining), stop words already removed.

    ``"what did getUserName do"`` → ``['("getusername" OR "get user name")']``.
    """
    chunks = _CONTROL.sub(" ", query or "").split()[:MAX_TERMS]
    terms: list[tuple[str, bool]] = []
    seen: set[str] = set()
    for chunk in chunks:
        term = fts_term(chunk)
        if term is None or term in seen:
            continue
        seen.add(term)
        words = _words(normalize(chunk))
        terms.append((term, all(w in STOP_WORDS for w in words)))
    if any(not stop for _, stop in terms):
        return [t for t, stop in terms if not stop]
    return [t for t, _ in terms]


def build_match(query: str, mode: Mode = "and") -> str | None:
    """Build a safe FTS5 ``MATCH`` expression from free text, or None when nothing is left.

    ``mode`` is ``"and"`` (all terms must match) or ``"or"`` (any term). The result
    only contains quoted strings, ``AND``/``OR``, parentheses and ``*`` after a
    quoted lone CJK character, so it cannot be a syntax error whatever ``query``
    holds. Raises ValueError for an unknown mode.
    """
    if mode not in ("and", "or"):
        raise ValueError(f"mode must be 'and' or 'or', not {mode!r}")
    terms = query_terms(query)
    if not terms:
        return None
    return (" AND " if mode == "and" else " OR ").join(terms)
