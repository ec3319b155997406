"""Query analysis for recall: safe FTS5 expressions, light stemming, name n-grams.

Built on :mod:`wiki_memory.index.query` (each whitespace chunk becomes one quoted FTS5
term; FTS5 syntax in user text is always plain text) and adds, for natural-language
questions:

- **Stop words** are dropped when another word is left (``what did Caroline research``
  searches ``caroline research``), as in ``query_terms``.
- **Light stemming**: an English word (ASCII letters after folding, not a stop word) of
  4+ letters also matches as a prefix of its stem: ``married`` → ``("married" OR
  "marr" *)``, ``paint`` → ``"paint" *`` (finds ``painted``, ``painting``). The exact
  form stays an alternative, so a section with the very word scores higher. Other
  scripts and identifiers are matched as written (after the index's folding).
- Three expressions: ``any_match`` (OR of the terms), ``all_match`` (AND; ``None`` for a
  single term) and ``body_match`` (the OR limited to the ``heading`` and ``body`` columns,
  so a section is found by its own text, not by its page's title).
- :meth:`Query.name_keys`: the query's runs of 1-6 words as ``names.key`` values (NFC,
  casefolded, also folded: ``Łódź`` → ``łódź`` and ``lodz``) for finding pages named in
  the query; :attr:`Query.tokens`: its normalised words (CJK as bigrams) for checking
  that a whole title or alias occurs in it.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from functools import cached_property

from wiki_memory.index.query import MAX_TERMS, STOP_WORDS, _term, quote
from wiki_memory.index.text import fold, normalize

__all__ = ["Query", "analyze", "match_forms", "stem_prefix", "words"]

_WORD = re.compile(r"[^\W_]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ASCII_WORD = re.compile(r"[a-z]+")
_EDGE = "\"'()[]{}<>,;:!?*^+#@=/\\|`~$%&.-_"
_VOWELS = set("aeiou")
#: suffixes removed to find a stem prefix, longest first
_SUFFIXES = (
    "ations",
    "ation",
    "ments",
    "ment",
    "ness",
    "ings",
    "ing",
    "edly",
    "ied",
    "ies",
    "ers",
    "ed",
    "er",
    "es",
    "ly",
    "s",
)
MIN_STEM = 4
"""Shortest prefix used for stemming (shorter prefixes match too many words)."""
MAX_NGRAM = 6
"""Longest run of query words looked up as a page name."""


def words(text: str) -> list[str]:
    """The normalised, lowercased words of ``text`` as the index sees them (folded; CJK
    runs as bigrams)."""
    return [w.lower() for w in _WORD.findall(normalize(text))]


def stem_prefix(word: str) -> str | None:
    """A prefix that the word's inflections share, or None (too short, not English).

    ``married`` → ``marr``, ``agency`` and ``agencies`` → ``agenc``, ``running`` →
    ``runn``, ``dance`` → ``danc``, ``paint`` → ``paint``. Only for lowercase ASCII words of at
    least :data:`MIN_STEM` letters that are not stop words.
    """
    if len(word) < MIN_STEM or word in STOP_WORDS or not _ASCII_WORD.fullmatch(word):
        return None
    stem = word
    for suf in _SUFFIXES:
        if word.endswith(suf) and len(word) - len(suf) >= MIN_STEM:
            base = word[: -len(suf)]
            if suf == "s" and base.endswith(("s", "u", "i")):  # class, status, analysis
                continue
            stem = base
            break
    if stem == word:
        if word.endswith("y") and len(word) > MIN_STEM and word[-2] not in _VOWELS:
            stem = word[:-1]  # agency → agenc (agencies), as -ies/-ied strip to
        elif word.endswith("e") and len(word) > MIN_STEM:
            stem = word[:-1]  # dance → danc (dancing, danced)
    return stem


@dataclass
class Query:
    """One analysed query. ``terms`` are FTS5 expressions (quoted strings only);
    ``probes[i]`` lists the ``(token, is_prefix)`` alternatives of a one-word term (for
    counting the rows it matches), or is empty for phrases and identifiers."""

    text: str
    terms: list[str] = field(default_factory=list)
    chunks: list[str] = field(default_factory=list)
    probes: list[list[tuple[str, bool]]] = field(default_factory=list)

    def without(self, drop: set[int]) -> Query:
        """This query without the terms at the indexes in ``drop``."""
        keep = [i for i in range(len(self.terms)) if i not in drop]
        return Query(
            self.text,
            [self.terms[i] for i in keep],
            self.chunks,
            [self.probes[i] for i in keep],
        )

    @property
    def empty(self) -> bool:
        """True when nothing is searchable (``""``, ``*``, punctuation)."""
        return not self.terms

    @property
    def any_match(self) -> str | None:
        return " OR ".join(self.terms) if self.terms else None

    @property
    def all_match(self) -> str | None:
        return " AND ".join(self.terms) if len(self.terms) > 1 else None

    @property
    def body_match(self) -> str | None:
        return "{heading body} : (" + " OR ".join(self.terms) + ")" if self.terms else None

    @cached_property
    def tokens(self) -> list[str]:
        """Every normalised word of the query, stop words included."""
        return words(self.text)

    @cached_property
    def content_tokens(self) -> set[str]:
        """The normalised words that are not stop words (all of them if only stop words)."""
        toks = [t for t in self.tokens if t not in STOP_WORDS]
        return set(toks or self.tokens)

    def name_keys(self) -> list[str]:
        """Runs of 1-:data:`MAX_NGRAM` whitespace chunks, edge punctuation stripped,
        as ``names.key`` values (NFC casefolded, inner whitespace single), raw and folded."""
        chunks = [c.strip(_EDGE) for c in self.chunks]
        chunks = [c for c in chunks if c]
        keys: dict[str, None] = {}
        for i in range(len(chunks)):
            for n in range(1, MAX_NGRAM + 1):
                if i + n > len(chunks):
                    break
                run = " ".join(chunks[i : i + n])
                key = unicodedata.normalize("NFC", unicodedata.normalize("NFC", run).casefold())
                if n == 1 and key in STOP_WORDS:
                    continue
                keys.setdefault(key, None)
                keys.setdefault(fold(key).lower(), None)
        return list(keys)

    def contains(self, name: str) -> bool:
        """True when every word of ``name`` occurs in the query, in order and adjacent
        (folded both ways; CJK compared by bigrams). Names of only stop words never do."""
        toks = words(name)
        if not toks or all(t in STOP_WORDS for t in toks):
            return False
        q = self.tokens
        n = len(toks)
        return any(q[i : i + n] == toks for i in range(len(q) - n + 1))


def analyze(text: str) -> Query:
    """Analyse free text into a :class:`Query` (never raises for any input)."""
    chunks = _CONTROL.sub(" ", text or "").split()[:MAX_TERMS]
    found: list[tuple[str, bool, list[tuple[str, bool]]]] = []
    seen: set[str] = set()
    for chunk in chunks:
        term = _term(chunk)
        if term is None:
            continue
        ws = words(chunk)
        stop = bool(ws) and all(w in STOP_WORDS for w in ws)
        probe: list[tuple[str, bool]] = []
        if len(ws) == 1 and term == quote(ws[0]):
            probe = [(ws[0], False)]
            prefix = stem_prefix(ws[0])
            if prefix is not None:
                term = (
                    f"{quote(prefix)} *"
                    if prefix == ws[0]
                    else f"({quote(ws[0])} OR {quote(prefix)} *)"
                )
                probe = [(prefix, True)] if prefix == ws[0] else [(ws[0], False), (prefix, True)]
        if term in seen:
            continue
        seen.add(term)
        found.append((term, stop, probe))
    if any(not stop for _, stop, _ in found):
        found = [f for f in found if not f[1]]
    return Query(
        text=text or "",
        terms=[t for t, _, _ in found],
        chunks=chunks,
        probes=[p for _, _, p in found],
    )


def match_forms(text: str) -> list[tuple[str, bool]]:
    """The word forms a query matches, as ``(form, is_prefix)`` pairs over normalised
    words (:func:`words`): each term's exact word and, for a stemmed one, its stem as a
    prefix (``retrying`` → ``[("retrying", False), ("retr", True)]``); the words of
    phrases and identifiers as written. What a face highlights: a word of shown text
    matches when its :func:`words` form equals a form, or starts with a prefix form.
    Follows :func:`analyze`, so a change to stemming there changes the highlights too."""
    q = analyze(text)
    forms: dict[tuple[str, bool], None] = {}
    for probe in q.probes:
        for form in probe:
            forms.setdefault(form, None)
    if len(q.probes) != len(q.terms) or any(not p for p in q.probes):
        for chunk in q.chunks:  # phrases and identifiers: their words as written
            for w in words(chunk):
                if w not in STOP_WORDS or not q.content_tokens - STOP_WORDS:
                    forms.setdefault((w, False), None)
    return list(forms)
