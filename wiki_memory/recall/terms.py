"""Query analysis for recall: safe FTS5 expressions, light stemming, name n-grams.

Built on :mod:`wiki_memory.index.query` (each whitespace chunk becomes one quoted FTS5
term; FTS5 syntax in user text is always plain text) and adds, for natural-language
questions:

- **Stop words** are dropped when another word is left (``what did Caroline research``
  searches ``caroline research``), as in ``query_terms``.
- **Stop words written in capitals** stay when the query is not all capitals: ``SO``
  (significant other), ``US``, ``IT`` are names there, not filler.
- **Word forms**: a word also matches its Snowball stem (:mod:`wiki_memory.index.stem`,
  the index stores the stems of the words it holds in its ``stems`` column): ``married``
  → ``("married" OR "marri")``, ``biking`` → ``("biking" OR "bike")``. The exact form
  stays an alternative, so a section with the very word scores higher. Numbers,
  identifiers and CJK bigrams are matched as written (after the index's folding).
- Two expressions: ``any_match`` (OR of the terms) and ``all_match`` (AND; ``None`` for a
  single term).
- :meth:`Query.name_keys`: the query's runs of 1-6 words as ``names.key`` values (NFC,
  casefolded, also folded: ``Łódź`` → ``łódź`` and ``lodz``) for finding pages named in
  the query; :attr:`Query.tokens`: its normalised words (CJK as bigrams) for checking
  that a whole title or alias occurs in it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

from wiki_memory.index.query import MAX_TERMS, STOP_WORDS, fts_term, quote
from wiki_memory.index.sectionwords import words
from wiki_memory.index.stem import DEFAULT_LANGUAGES, stem_words
from wiki_memory.index.text import fold

__all__ = ["Query", "analyze", "match_forms", "matches_form", "words"]

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_EDGE = "\"'()[]{}<>,;:!?*^+#@=/\\|`~$%&.-_"
MAX_NGRAM = 6
"""Longest run of query words looked up as a page name."""


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

    def untagged(self, drop: set[int]) -> Query:
        """This query with the terms at the indexes in ``drop`` matching every column but
        ``tags`` (FTS5 ``- {tags} : (...)``; for the sections index only)."""
        return Query(
            self.text,
            [f"- {{tags}} : ({t})" if i in drop else t for i, t in enumerate(self.terms)],
            self.chunks,
            self.probes,
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


def _acronym(chunk: str, shouting: bool) -> bool:
    """A stop word written in capitals (``SO``, ``US``, ``IT``) in a query that is not all
    capitals: a name, kept."""
    letters = chunk.strip(_EDGE)
    return not shouting and len(letters) >= 2 and letters.isalpha() and letters.isupper()


def analyze(text: str, langs: tuple[str, ...] = DEFAULT_LANGUAGES) -> Query:
    """Analyse free text into a :class:`Query` (never raises for any input); words are
    also searched by their stems in the Snowball languages ``langs``."""
    chunks = _CONTROL.sub(" ", text or "").split()[:MAX_TERMS]
    letters = "".join(ch for ch in " ".join(chunks) if ch.isalpha())
    shouting = bool(letters) and letters.isupper()
    found: list[tuple[str, bool, list[tuple[str, bool]]]] = []
    seen: set[str] = set()
    for chunk in chunks:
        term = fts_term(chunk)
        if term is None:
            continue
        ws = words(chunk)
        stop = bool(ws) and all(w in STOP_WORDS for w in ws) and not _acronym(chunk, shouting)
        probe: list[tuple[str, bool]] = []
        if len(ws) == 1 and term == quote(ws[0]):
            probe = [(ws[0], False)]
            if not stop:
                stems = sorted(stem_words(ws, langs)[0])
                if stems:
                    term = "(" + " OR ".join(quote(x) for x in [ws[0], *stems]) + ")"
                    probe += [(x, False) for x in stems]
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
    words (:func:`words`): each term's exact word and, for a stemmed one, its Snowball
    stems (``retrying`` → ``[("retrying", False), ("retri", False)]``); the words of
    phrases and identifiers as written. ``is_prefix`` is False for every form
    :func:`analyze` makes today (kept for callers that add prefix forms of their own).
    What a face highlights, with :func:`matches_form`. Follows :func:`analyze`, so a
    change to stemming there changes the highlights too."""
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


def matches_form(
    word: str,
    forms: Sequence[tuple[str, bool]],
    langs: tuple[str, ...] = DEFAULT_LANGUAGES,
) -> bool:
    """True when a word of shown text matches one of ``forms`` (from :func:`match_forms`)
    the way the index matched it: one of its :func:`words` equals a form, starts with a
    prefix form, or has a Snowball stem (in ``langs``) equal to a form. So the query
    ``retrying`` (stem ``retri``) marks ``retry`` and ``retries``, as recall found them
    through the index's ``stems`` column."""
    if not forms:
        return False
    exact = {f for f, prefix in forms if not prefix}
    prefixes = [f for f, prefix in forms if prefix]
    ws = words(word)
    for w, stems in zip(ws, stem_words(ws, langs), strict=True):
        if w in exact or any(w.startswith(p) for p in prefixes) or stems & exact:
            return True
    return False
