"""What a section's text gives the index, remembered by the text's digest: a page
indexed again (a session page grows by a turn at each ``Stop``) pays the word forms,
stems and date words only for its new or changed sections, not for every section again.

The memo is per process and bounded (:data:`MAX_ENTRIES` sections, :data:`MAX_CHARS`
characters of derived text; the oldest go first). Its values are pure functions of
their key, so a hit is exactly what computing them again gives."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

#: at most this many sections remembered
MAX_ENTRIES = 50_000
#: at most this many characters of derived text remembered (about 4 bytes each at worst)
MAX_CHARS = 32_000_000

#: (text digest, heading, day, stemmer languages) -> (heading words, body words, stems,
#: date words), the ``fts`` columns a section's text gives, and its near-duplicate words
#: and numbers (``sections.words``, ``sections.nums``)
Key = tuple[str, str, str | None, tuple[str, ...]]
Derived = tuple[str, str, str, str, str, str]

_memo: OrderedDict[Key, Derived] = OrderedDict()
_chars = 0
_lock = threading.Lock()


def derived(key: Key, compute: Callable[[], Derived]) -> Derived:
    """The derived columns of the section ``key`` names: remembered, else ``compute()``
    (then remembered). Thread-safe; ``compute`` runs outside the lock."""
    global _chars
    with _lock:
        hit = _memo.get(key)
        if hit is not None:
            _memo.move_to_end(key)
            return hit
    value = compute()
    size = sum(len(v) for v in value)
    with _lock:
        if key not in _memo:
            _memo[key] = value
            _chars += size
            while len(_memo) > MAX_ENTRIES or _chars > MAX_CHARS:
                _, old = _memo.popitem(last=False)
                _chars -= sum(len(v) for v in old)
    return value


def clear() -> None:
    """Forget everything remembered (a purge: no copy of purged text stays in memory)."""
    global _chars
    with _lock:
        _memo.clear()
        _chars = 0
