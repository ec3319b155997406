"""Near-duplicates among recall's matches: the word sets compared, the numbers and
environment names that keep two alike texts apart, and the prefix filter that finds the
first kept match a new one repeats (:class:`Dedup`). Caches of section texts' words and
token counts live here (:func:`clear_caches` after a purge)."""

from __future__ import annotations

import functools
import itertools
from collections import Counter
from collections.abc import Iterable, Set

from wiki_memory.recall.terms import words
from wiki_memory.recall.tokens import count_tokens

DEDUP_SCAN = 200
"""A match is compared for near-duplicates with at most this many earlier kept matches
that carry the same numbers (more than ``limit`` + ``HEADS`` of the old 50-item
ceiling, so the first pages rank as before; linear when every match is ranked)."""

TEXT_CACHE = 4096
"""Section texts whose words, numbers and token counts are kept between recalls (each
entry holds its text and its word set, a few KB): in process, 100 queries of the
20,000-page bench corpus grew the resident memory by 115 MB with 20,000 entries and by
64 MB with 4,096, at the same speed (bench/RESULTS.md, "Recall at 100,000 pages")."""


def clear_caches() -> None:
    """Empty the caches of section texts' words and counts (after a purge)."""
    for fn in (tokens, cached_count, numbers):
        fn.cache_clear()


@functools.lru_cache(maxsize=TEXT_CACHE)
def tokens(text: str) -> frozenset[str]:
    """The words compared for near-duplicates."""
    return frozenset(words(text))


@functools.lru_cache(maxsize=TEXT_CACHE)
def cached_count(text: str) -> int:
    """``count_tokens(text)``, cached."""
    return count_tokens(text)


NAMING_WORDS = frozenset(
    "prod production staging stage preprod dev development test qa uat sandbox canary "
    "localhost".split()
)
"""Words that name an environment: like a number, one found on one side only keeps two
near-identical texts apart ("never push to prod" against "never push to staging")."""


@functools.lru_cache(maxsize=TEXT_CACHE)
def numbers(toks: frozenset[str]) -> frozenset[str]:
    """What tells facts apart however alike their words: the words with a digit (dates,
    counts, versions, ids) and the :data:`NAMING_WORDS`."""
    # isalpha() (one C call) rules out most words: a letter is never a digit
    return frozenset(
        t for t in toks if (not t.isalpha() and any(ch.isdigit() for ch in t)) or t in NAMING_WORDS
    )


def duplicate_of(toks: frozenset[str], seen: list[frozenset[str]]) -> int | None:
    """The index of the first word set in ``seen`` that ``toks`` nearly duplicates."""
    if not toks:
        return None
    n = len(toks)
    nums = numbers(toks)
    for i, other in enumerate(seen):
        if not other or numbers(other) != nums:
            continue
        inter = len(toks & other)
        if inter * 5 >= 4 * (n + len(other) - inter):
            return i
        small = min(n, len(other))
        if small >= 5 and inter * 10 >= 9 * small:
            return i
    return None


DEDUP_SAMPLE = 500
"""The first this many matches give the word counts that order :class:`Dedup`'s prefixes."""


class Dedup:
    """The near-duplicate rule of :func:`duplicate_of` against the first
    :data:`DEDUP_SCAN` kept matches of each group of equal numbers, without comparing with
    each of them: a prefix filter (Chaudhuri et al. 2006, "A primitive operator for
    similarity joins"). Both of the rule's tests need the two word sets to share at least
    8/9 of the smaller one's words (Jaccard ≥ 0.8 gives 9·shared ≥ 4·(n+m) ≥ 8·min), so
    with every set's words in one fixed order (rarest in ``sample`` first), the smaller
    set's first ``s - ⌊8s/9⌋ + 1`` words hold a shared word. ``find`` looks only at kept
    sets found through those prefixes and answers exactly what comparing in turn would:
    the earliest kept match that is a near-duplicate."""

    def __init__(self, sample: Iterable[frozenset[str]]) -> None:
        #: how many sets of ``sample`` hold each word: the fixed order is by (count, word),
        #: so unseen words come first, among themselves alphabetical
        self._counts = Counter(itertools.chain.from_iterable(sample))
        self._prefixes: dict[frozenset[str], list[str]] = {}
        #: numbers -> (members [(kept index, words)], word -> members holding it,
        #: prefix word -> members whose prefix holds it); members as bits of an int
        #: (bit ``pos`` for ``members[pos]``): one OR per word, no list per word
        self._groups: dict[
            frozenset[str],
            tuple[list[tuple[int, frozenset[str]]], dict[str, int], dict[str, int]],
        ] = {}

    def _prefix(self, toks: frozenset[str]) -> list[str]:
        got = self._prefixes.get(toks)
        if got is None:
            k = len(toks) - (8 * len(toks)) // 9 + 1
            count = self._counts.get
            got = self._prefixes[toks] = sorted(toks, key=lambda w: (count(w, 0), w))[:k]
        return got

    def find(self, toks: frozenset[str]) -> int | None:
        """The kept index of the first kept set ``toks`` nearly duplicates, or None."""
        group = self._groups.get(numbers(toks)) if toks else None
        if group is None:
            return None
        members, every, prefix = group
        near = 0
        get = every.get
        for w in self._prefix(toks):
            near |= get(w, 0)
        get = prefix.get
        for w in toks:
            near |= get(w, 0)
        while near:  # the members in kept order: lowest bit first
            low = near & -near
            kept_at, other = members[low.bit_length() - 1]
            if duplicate_of(toks, [other]) is not None:
                return kept_at
            near ^= low
        return None

    def add(self, kept_at: int, toks: frozenset[str]) -> None:
        """Keep ``toks`` (kept index ``kept_at``) for later :meth:`find` calls."""
        group = self._groups.setdefault(numbers(toks), ([], {}, {}))
        members, every, prefix = group
        if len(members) >= DEDUP_SCAN:
            return
        bit = 1 << len(members)
        members.append((kept_at, toks))
        if not toks:
            return  # an empty set never matches
        get = every.get
        for w in toks:
            every[w] = get(w, 0) | bit
        get = prefix.get
        for w in self._prefix(toks):
            prefix[w] = get(w, 0) | bit


def near_duplicate(a: Set[str], b: Set[str]) -> bool:
    """True when two word sets say the same thing: the same numbers (a word with a digit:
    dates, counts, versions and ids tell facts apart) and environment names
    (:data:`NAMING_WORDS`), and Jaccard similarity ≥ 0.8, or
    (both at least 5 words) the smaller 90% inside the larger. Empty sets never match."""
    return duplicate_of(frozenset(a), [frozenset(b)]) is not None
