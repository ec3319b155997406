"""Word forms: Snowball stems (PyStemmer) written beside the exact words.

The index keeps every word exactly as written (folded, CJK bigrams, identifier parts:
:mod:`wiki_memory.index.text`) and adds, in the ``stems`` column, the Snowball stem of
each word whose stem differs from it (``married`` → ``marri``, ``biking`` → ``bike``).
The query side (:mod:`wiki_memory.recall.terms`) asks for a word *or* its stem, so a
section holding the very word matches both and stays ahead of one holding another form.

Only words of letters are stemmed: numbers, identifiers' parts and CJK bigrams are left
alone (a stemmer knows nothing of them), and so are words shorter than 3 letters.

Stemmers come from PyStemmer (the Snowball project's C stemmers: Porter, "Snowball: A
language for stemming algorithms", 2001; https://snowballstem.org). Which language:
a page's frontmatter ``lang`` when it names one Snowball knows (``de``, ``german``),
else every language of the ``stem_languages`` setting (default English).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from itertools import compress, repeat
from operator import is_

import Stemmer

__all__ = ["language", "stem_words", "stems_of_words", "stems_text", "DEFAULT_LANGUAGES"]

DEFAULT_LANGUAGES: tuple[str, ...] = ("english",)
"""The ``stem_languages`` setting's default."""

_ISO = {
    "ar": "arabic",
    "hy": "armenian",
    "eu": "basque",
    "ca": "catalan",
    "cs": "czech",
    "da": "danish",
    "nl": "dutch",
    "en": "english",
    "eo": "esperanto",
    "et": "estonian",
    "fi": "finnish",
    "fr": "french",
    "de": "german",
    "el": "greek",
    "hi": "hindi",
    "hu": "hungarian",
    "id": "indonesian",
    "ga": "irish",
    "it": "italian",
    "lt": "lithuanian",
    "ne": "nepali",
    "no": "norwegian",
    "nb": "norwegian",
    "nn": "norwegian",
    "fa": "persian",
    "pl": "polish",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sr": "serbian",
    "st": "sesotho",
    "es": "spanish",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
    "yi": "yiddish",
}
_KNOWN = frozenset(Stemmer.algorithms())
WORD = re.compile(r"[^\W\d_]{3,}")
_CACHE_MAX = 200_000


def language(name: object) -> str | None:
    """The Snowball algorithm for a language name or code (``"de"``, ``"de-AT"``,
    ``"German"``, ``"english"``), or None when Snowball has none."""
    if not isinstance(name, str) or not name.strip():
        return None
    key = name.strip().lower().replace("_", "-")
    if key in _KNOWN:
        return key
    return _ISO.get(key.split("-", 1)[0])


def languages(names: Iterable[object]) -> tuple[str, ...]:
    """The known Snowball algorithms among ``names``, in order, each once."""
    out: dict[str, None] = {}
    for n in names:
        lang = language(n)
        if lang is not None:
            out.setdefault(lang, None)
    return tuple(out)


@functools.lru_cache(maxsize=64)
def _stemmer(lang: str) -> Stemmer.Stemmer:
    s = Stemmer.Stemmer(lang)
    s.maxCacheSize = _CACHE_MAX
    return s


def stem_words(words: Sequence[str], langs: Sequence[str]) -> list[set[str]]:
    """For each lowercase word, its stems in ``langs`` that differ from it (empty for
    numbers, words under 3 letters and words every stemmer leaves alone)."""
    out: list[set[str]] = [set() for _ in words]
    idx = [i for i, w in enumerate(words) if WORD.fullmatch(w)]
    if not idx:
        return out
    todo = [words[i] for i in idx]
    for lang in langs:
        for i, stem in zip(idx, _stemmer(lang).stemWords(todo), strict=True):
            if stem and stem != words[i]:
                out[i].add(stem)
    return out


_STEMS_MAX = 100_000
"""Words whose ``stems`` column value :func:`stems_text` keeps, per tuple of languages
(a word costs about 100-200 bytes; the dict is emptied when full)."""
_STEMS: dict[tuple[str, ...], dict[str, str]] = {}


def _word_stems(token: str, langs: Sequence[str]) -> str:
    """What ``token`` (as found in the text) adds to the ``stems`` column: its stems in
    ``langs`` that differ from its lowercase form, sorted, space-separated; "" for an
    identifier in mixed case (``getUserName``), a number or a word under 3 letters."""
    if not (token.islower() or token.istitle() or token.isupper()):
        return ""
    return " ".join(sorted(stem_words([token.lower()], langs)[0]))


def _token_stems(tokens: list[str], key: tuple[str, ...]) -> list[str]:
    """What each of ``tokens`` (matches of :data:`WORD`) adds to the ``stems`` column,
    each distinct token stemmed once and remembered (:data:`_STEMS_MAX`)."""
    known = _STEMS.get(key)
    if known is None:
        known = _STEMS[key] = {}
    new = set(tokens).difference(known)
    if new:
        if len(known) + len(new) > _STEMS_MAX:
            # a new dict, not clear(): another thread may be reading the old one
            known = _STEMS[key] = {}
            new = set(tokens)
        for t in new:
            known[t] = _word_stems(t, key)
    return list(map(known.__getitem__, tokens))


_WORDS_MAX = 200_000
"""Whitespace-separated words whose share of the ``stems`` column :func:`stems_of_words`
keeps, per tuple of languages (the dict is replaced by an empty one when full)."""
_WORDS_LEN = 64
"""Longer words (URLs, base64) are not kept."""
_WORD_STEMS: dict[tuple[str, ...], dict[str, str]] = {}


def stems_of_words(words: Sequence[str], langs: Sequence[str]) -> str:
    """The ``stems`` column value for the text whose whitespace-separated words are
    ``words`` (already normalised): :func:`stems_text` of ``" ".join(words)``. Each
    distinct word's share (the stems of the :data:`WORD` tokens in it) is worked out
    once and remembered, so a page's words are mostly looked up at C speed."""
    if not words or not langs:
        return ""
    key = tuple(langs)
    seen = _WORD_STEMS.get(key)
    if seen is None:
        seen = _WORD_STEMS[key] = {}
    got = list(map(seen.get, words))
    if None in got:
        # the words not seen yet, found at C speed (a section holding a URL, too long to
        # be kept, comes here every time)
        missing = list(dict.fromkeys(compress(words, map(is_, got, repeat(None)))))
        tokens = [WORD.findall(w) for w in missing]
        flat = _token_stems([t for ts in tokens for t in ts], key)
        fresh: dict[str, str] = {}
        at = 0
        for w, ts in zip(missing, tokens, strict=True):
            fresh[w] = " ".join(filter(None, flat[at : at + len(ts)]))
            at += len(ts)
        if len(seen) + len(fresh) > _WORDS_MAX:
            # a new dict, not clear(): another thread may be reading the old one
            seen = _WORD_STEMS[key] = {}
        for w, v in fresh.items():
            if len(w) <= _WORDS_LEN:
                seen[w] = v
        got = list(map(fresh.get, words, got))  # a word's fresh value, else the one seen
    return " ".join(filter(None, got))


def stems_text(normalized: str, langs: Sequence[str]) -> str:
    """The ``stems`` column value for already normalised text: the stems of its words
    that differ from the words, space-separated, in text order (repeats kept, so bm25's
    term frequency sees them as often as the words). Identifiers (``getUserName``) are
    not words of a language: their parts are indexed instead. Each distinct word is
    stemmed once and remembered (:data:`_STEMS_MAX`, :func:`stems_of_words`)."""
    if not normalized or not langs:
        return ""
    # A WORD match never spans whitespace (no whitespace character is a letter), so
    # the words of the split text hold the same tokens in the same order.
    return stems_of_words(normalized.split(), langs)
