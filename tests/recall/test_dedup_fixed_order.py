"""The near-duplicate filter in the order recall uses (the index's stored word order, no
sample): :class:`~wiki_memory.recall.dedup.Dedup` answers what comparing with every kept
set of the same numbers in turn answers, for groups of one set, of a few and of more than
``DEDUP_SCAN``, with the words and numbers given as stored or worked out."""

from __future__ import annotations

import random

from wiki_memory.index.sectionwords import numbers_key, word_order
from wiki_memory.recall import dedup as dedup_rules


def _in_turn(toks: frozenset[str], kept: list[frozenset[str]]) -> int | None:
    """The first kept set of the same numbers that ``toks`` nearly duplicates, among the
    first ``DEDUP_SCAN`` of them: the rule, one comparison at a time."""
    nums = dedup_rules.numbers(toks)
    group = [i for i, k in enumerate(kept) if dedup_rules.numbers(k) == nums]
    at = dedup_rules.duplicate_of(toks, [kept[i] for i in group[: dedup_rules.DEDUP_SCAN]])
    return group[at] if at is not None else None


def test_fixed_order_filter_answers_as_comparing_in_turn() -> None:
    rng = random.Random(47)
    vocab = [f"w{i}" + "x" * (i % 7) for i in range(80)]
    numbers = ["2023", "v1", "prod", "42"]
    for round_ in range(40):
        # few numbers: one large group; many: groups of one or a few sets
        nums_pool = numbers[: 1 + round_ % 4]
        base = [frozenset(rng.sample(vocab, rng.randint(1, 40))) for _ in range(15)]
        sets: list[frozenset[str]] = []
        for _ in range(400):
            b = set(rng.choice(base))
            for _ in range(rng.randint(0, 4)):
                b.symmetric_difference_update({rng.choice(vocab)})
            if rng.random() < 0.3:
                b.add(rng.choice(nums_pool))
            sets.append(frozenset(b) if rng.random() < 0.9 else frozenset())
        stored = round_ % 2 == 0  # words and numbers as the index stores them, or not
        dedup = dedup_rules.Dedup()
        kept: list[frozenset[str]] = []
        for toks in sets:
            ordered = word_order(toks) if stored else None
            nums = numbers_key(dedup_rules.numbers(toks)) if stored else None
            want = _in_turn(toks, kept)
            assert dedup.find(toks, ordered, nums) == want
            if want is None:
                dedup.add(len(kept), toks, ordered, nums)
                kept.append(toks)


def test_a_copy_is_found_in_a_group_of_one_and_in_a_large_group() -> None:
    dedup = dedup_rules.Dedup()
    alone = frozenset("deploy the service on release 2024 with the blue switch".split())
    dedup.add(0, alone)
    many = [frozenset({f"topic{i}", f"other{i}", "shared", "words", "here"}) for i in range(30)]
    for i, toks in enumerate(many, 1):
        dedup.add(i, toks)
    other = frozenset("deploy the service on release 2024 after the migration ran".split())
    assert dedup.find(alone | {"again"}) == 0
    assert dedup.find(other) is None  # 6 words shared of 9 and 10: not a copy
    assert dedup.find(many[17] | {"extra"}) == 18
    assert dedup.find(frozenset({"topic3", "other3", "shared", "words", "there"})) is None
