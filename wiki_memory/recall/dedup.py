"""Near-duplicates among recall's matches: the word sets compared, the numbers and
environment names that keep two alike texts apart, and the prefix filter that finds the
first kept match a new one repeats (:class:`Dedup`). A section read from the index brings
its words and numbers as stored (:mod:`wiki_memory.index.sectionwords`, the one place of
that rule); caches of other texts' words and of token counts live here
(:func:`clear_caches` after a purge)."""

from __future__ import annotations

import functools
import itertools
from collections import Counter
from collections.abc import Iterable, Sequence, Set
from functools import reduce
from itertools import repeat
from operator import or_

from wiki_memory.index import sectionwords
from wiki_memory.index.sectionwords import NAMING_WORDS, numbers_key, word_order, words
from wiki_memory.recall.tokens import count_tokens

__all__ = ["NAMING_WORDS", "Dedup", "duplicate_of", "near_duplicate", "numbers", "tokens"]

DEDUP_SCAN = 200
"""A match is compared for near-duplicates with at most this many earlier kept matches
that carry the same numbers (more than ``limit`` + ``HEADS`` of the old 50-item
ceiling, so the first pages rank as before; linear when every match is ranked)."""

TEXT_CACHE = 4096
"""Texts whose words, numbers and token counts are kept between recalls (each entry holds
its text and its word set, a few KB): in process, 100 queries of the 20,000-page bench
corpus grew the resident memory by 115 MB with 20,000 entries and by 64 MB with 4,096,
at the same speed (bench/RESULTS.md, "Recall at 100,000 pages"). Sections read from the
index bring their words (``Hit.words``), so only other texts' words (running sessions'
observations, bare headings) and token counts fill these now."""


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


@functools.lru_cache(maxsize=TEXT_CACHE)
def numbers(toks: frozenset[str]) -> frozenset[str]:
    """What tells facts apart however alike their words: the words with a digit (dates,
    counts, versions, ids) and the :data:`NAMING_WORDS` (:func:`sectionwords.numbers`)."""
    return sectionwords.numbers(toks)


def duplicate_of(toks: frozenset[str], seen: list[frozenset[str]]) -> int | None:
    """The index of the first word set in ``seen`` that ``toks`` nearly duplicates."""
    if not toks:
        return None
    nums = numbers(toks)
    for i, other in enumerate(seen):
        if other and numbers(other) == nums and alike(toks, other):
            return i
    return None


def alike(a: frozenset[str], b: frozenset[str]) -> bool:
    """The word test of :func:`duplicate_of` for two non-empty sets with the same numbers:
    Jaccard ≥ 0.8, or (both at least 5 words) the smaller 90% inside the larger."""
    inter = len(a & b)
    if inter * 5 >= 4 * (len(a) + len(b) - inter):
        return True
    small = min(len(a), len(b))
    return small >= 5 and inter * 10 >= 9 * small


class Dedup:
    """The near-duplicate rule of :func:`duplicate_of` against the first
    :data:`DEDUP_SCAN` kept matches of each group of equal numbers, without comparing with
    each of them: a prefix filter (Chaudhuri et al. 2006, "A primitive operator for
    similarity joins"). Both of the rule's tests need the two word sets to share at least
    8/9 of the smaller one's words (Jaccard ≥ 0.8 gives 9·shared ≥ 4·(n+m) ≥ 8·min), so
    with every set's words in one fixed order, the smaller set's first
    ``s - ⌊8s/9⌋ + 1`` words hold a shared word. ``find`` looks only at kept sets found
    through those prefixes and answers exactly what comparing in turn would: the earliest
    kept match that is a near-duplicate. Any fixed order gives the same answers; it only
    decides how many kept sets are looked at.

    The order is :func:`sectionwords.word_order` (the order the index stores a section's
    words in, so a stored list is passed as ``ordered`` and nothing is sorted), or, when
    a ``sample`` of word sets is given, rarest in ``sample`` first (unseen words first,
    among themselves alphabetical; then ``ordered`` is not used). ``nums``, when given,
    is :func:`sectionwords.numbers_key` of the set's numbers (as stored)."""

    def __init__(self, sample: Iterable[frozenset[str]] = ()) -> None:
        #: how many sets of ``sample`` hold each word (None: the fixed order)
        self._counts: Counter[str] | None = Counter(itertools.chain.from_iterable(sample))
        if not self._counts:
            self._counts = None
        #: numbers -> its group of kept sets (:class:`_Group`)
        self._groups: dict[str, _Group] = {}
        #: numbers -> the one kept set of a group no set was compared with yet, as
        #: ``(kept index, its words as stored)`` (:meth:`add_stored`): split when the
        #: group is first needed
        self._stored: dict[str, tuple[int, str]] = {}

    def _prefix(self, toks: frozenset[str], ordered: Sequence[str] | None) -> Sequence[str]:
        k = len(toks) - (8 * len(toks)) // 9 + 1
        if self._counts is not None:
            count = self._counts.get
            return sorted(toks, key=lambda w: (count(w, 0), w))[:k]
        return (ordered if ordered is not None else word_order(toks))[:k]

    @staticmethod
    def _key(toks: frozenset[str], nums: str | None) -> str:
        return nums if nums is not None else numbers_key(numbers(toks))

    def find(
        self, toks: frozenset[str], ordered: Sequence[str] | None = None, nums: str | None = None
    ) -> int | None:
        """The kept index of the first kept set ``toks`` nearly duplicates, or None
        (``ordered``: ``toks`` in the fixed order; ``nums``: its numbers' key)."""
        group = self._group(self._key(toks, nums)) if toks else None
        if group is None:
            return None
        members = group.members
        if len(members) <= SCAN_SMALL:  # a few: compared in turn
            for kept_at, other, _pre in members:
                if alike(toks, other):  # an empty member is alike to nothing
                    return kept_at
            return None
        every, prefix = group.indexed()
        # the members holding a word of this set's prefix, and those whose prefix holds
        # a word of this set (the words found in C: ``keys() &`` looks up this set's):
        # ORs of their bits
        near = reduce(or_, map(every.get, self._prefix(toks, ordered), repeat(0)), 0)
        near = reduce(or_, map(prefix.__getitem__, prefix.keys() & toks), near)
        while near:  # the members in kept order: lowest bit first
            low = near & -near
            kept_at, other, _pre = members[low.bit_length() - 1]
            if alike(toks, other):  # a member is never empty and has the same numbers
                return kept_at
            near ^= low
        return None

    def add(
        self,
        kept_at: int,
        toks: frozenset[str],
        ordered: Sequence[str] | None = None,
        nums: str | None = None,
    ) -> None:
        """Keep ``toks`` (kept index ``kept_at``) for later :meth:`find` calls."""
        key = self._key(toks, nums)
        group = self._group(key)
        if group is None:
            group = self._groups[key] = _Group()
        if len(group.members) < DEDUP_SCAN:
            group.members.append((kept_at, toks, self._prefix(toks, ordered) if toks else ()))

    def known(self, nums: str) -> bool:
        """Whether a set with the numbers' key ``nums`` was kept (else :meth:`find` finds
        nothing for a set with these numbers)."""
        return nums in self._groups or nums in self._stored

    def add_stored(self, kept_at: int, words: str, nums: str) -> None:
        """:meth:`add` of the first set of its numbers (``nums`` not :meth:`known`) as the
        index stores it: ``words`` space-joined in the fixed order. Split only when a later
        set with the same numbers is compared with it (most numbers are one set's own)."""
        self._stored[nums] = (kept_at, words)

    def _group(self, key: str) -> _Group | None:
        """The group of ``key``, its stored first set split now (None: no set kept)."""
        group = self._groups.get(key)
        if group is None and key in self._stored:
            kept_at, words = self._stored.pop(key)
            ordered = words.split()
            toks = frozenset(ordered)
            group = self._groups[key] = _Group()
            group.members.append((kept_at, toks, self._prefix(toks, ordered) if toks else ()))
        return group


SCAN_SMALL = 8
"""A group of at most this many kept sets is compared in turn; a larger one is indexed
(most groups of a recall hold one set: its own numbers)."""


class _Group:
    """The kept sets of one numbers key: ``members`` ``[(kept index, words, prefix)]`` in
    kept order, and, once a :meth:`Dedup.find` needs them, the indexes of the prefix
    filter (:meth:`indexed`)."""

    __slots__ = ("members", "_every", "_prefix", "_done")

    def __init__(self) -> None:
        self.members: list[tuple[int, frozenset[str], Sequence[str]]] = []
        #: word -> members holding it; prefix word -> members whose prefix holds it;
        #: members as bits of an int (bit ``pos`` for ``members[pos]``)
        self._every: dict[str, int] = {}
        self._prefix: dict[str, int] = {}
        self._done = 0  # members indexed so far

    def indexed(self) -> tuple[dict[str, int], dict[str, int]]:
        """The word and prefix indexes, every member in them."""
        every, prefix = self._every, self._prefix
        for pos in range(self._done, len(self.members)):
            _kept_at, toks, pre = self.members[pos]
            bit = 1 << pos
            # each word's members OR this one's bit, in C (map, zip, dict.update): a
            # set's words are distinct, so each is read before it is written
            every.update(
                zip(toks, map(or_, map(every.get, toks, repeat(0)), repeat(bit)), strict=True)
            )
            prefix.update(
                zip(pre, map(or_, map(prefix.get, pre, repeat(0)), repeat(bit)), strict=True)
            )
        self._done = len(self.members)
        return every, prefix


def near_duplicate(a: Set[str], b: Set[str]) -> bool:
    """True when two word sets say the same thing: the same numbers (a word with a digit:
    dates, counts, versions and ids tell facts apart) and environment names
    (:data:`NAMING_WORDS`), and Jaccard similarity ≥ 0.8, or
    (both at least 5 words) the smaller 90% inside the larger. Empty sets never match."""
    return duplicate_of(frozenset(a), [frozenset(b)]) is not None
