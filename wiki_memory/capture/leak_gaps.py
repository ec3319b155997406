"""Where a generated rule with a long gap can match: at a head with its tail in reach.

Two of gitleaks' rules (the curl ones) open with their keyword, allow up to 1,024
characters on each of up to six lines, then need a flag and a value:
``\\bcurl\\b(?:.{0,1024}?|.{0,1024}?(?:[\\r\\n]{1,2}.{0,1024}?){1,5})[ \\t\\n\\r](?:-H|--header)…``.
Tried at a ``curl`` with no such tail after it, ``re`` walks the whole gap (about 6,000
characters) before it fails, so ``curl=`` repeated to 1 MiB costs 7–9 CPU seconds.
:func:`gap_starts` finds where the tail matches first (only at its flags, found by
``str.find`` in C), and keeps the heads that have one within the gap's reach; the rule's
own regex then runs at those alone, so it finds what it found before (a head with no tail
in reach cannot match) at a cost that follows the tails. Standard library only.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from functools import cache

#: a source that opens with ``\\bkeyword\\b``, then a gap of up to N characters on each of
#: up to R + 1 lines (lazy or greedy), then a tail opening with a blank and an
#: alternation of plain flags: keyword, N, R, flags, tail
_GAP_SOURCE = re.compile(
    r"\\b([a-z0-9_]+)\\b"
    r"\(\?:\.\{0,(\d+)\}\??\|\.\{0,\2\}\??\(\?:\[\\r\\n\]\{1,2\}\.\{0,\2\}\??\)\{1,(\d+)\}\)"
    r"(\[ \\t\\n\\r\]\(\?:([-a-zA-Z]+(?:\|[-a-zA-Z]+)*)\).*)\Z",
    re.DOTALL,
)


class Gap:
    """A rule's gap read off its source: ``keyword`` (lowercase), ``reach`` (the most
    characters the gap spans: N + R·(2 + N)), ``flags`` (the tail's plain flags, one of
    which every tail holds one character in) and ``tail`` (the tail's compiled regex,
    ``re.ASCII`` as the rule's)."""

    __slots__ = ("keyword", "reach", "flags", "tail")

    def __init__(self, keyword: str, reach: int, flags: tuple[str, ...], tail: str) -> None:
        self.keyword = keyword
        self.reach = reach
        self.flags = flags
        self.tail = re.compile(tail, re.ASCII)


@cache
def read_gap(source: str) -> Gap | None:
    """The gap of a rule whose regex ``source`` has the shape above, else ``None`` (the
    rule is then run as before). Compiles the tail on first call per source."""
    m = _GAP_SOURCE.match(source)
    if m is None:
        return None
    n, r = int(m.group(2)), int(m.group(3))
    return Gap(m.group(1), n + r * (2 + n), tuple(m.group(5).split("|")), m.group(4))


def tail_starts(gap: Gap, text: str) -> list[int]:
    """Where ``gap.tail`` matches in ``text`` (ascending, each once): each flag's
    occurrences one character in, checked with ``tail.match`` there. A tail's values
    stop at a blank or a quote, which every later tail opens with or holds, so the
    checks together read the text about once."""
    found: set[int] = set()
    match = gap.tail.match
    for flag in gap.flags:
        i = text.find(flag, 1)
        while i >= 0:
            if match(text, i - 1) is not None:
                found.add(i - 1)
            i = text.find(flag, i + 1)
    return sorted(found)


def gap_starts(gap: Gap, text: str, low: str) -> list[int]:
    """Where the rule can match: each occurrence of ``gap.keyword`` in ``low`` (ascending)
    with a tail starting from right after it to ``gap.reach`` characters further; ``[]``
    when the text has no tail at all (then nothing of ``text`` is read but the flags'
    ``str.find``)."""
    tails = tail_starts(gap, text)
    if not tails:
        return []
    k, reach = gap.keyword, gap.reach
    out: list[int] = []
    i = low.find(k)
    while i >= 0:
        lo = i + len(k)
        j = bisect_left(tails, lo)
        if j < len(tails) and tails[j] <= lo + reach:
            out.append(i)
        i = low.find(k, i + 1)
    return out
