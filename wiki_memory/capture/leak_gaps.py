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
from bisect import bisect_left, bisect_right
from functools import cache

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

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


def tail_matches(gap: Gap, text: str) -> list[re.Match[str]]:
    """Where ``gap.tail`` matches in ``text``, ascending by start, each start once: each
    flag's occurrences one character in, checked with ``tail.match`` there. A tail's value
    stops at a quote (a quoted one) or a blank (a bare one), which every later tail opens
    with or holds, so the checks together read the text about once."""
    found: dict[int, re.Match[str]] = {}
    match = gap.tail.match
    for flag in gap.flags:
        i = text.find(flag, 1)
        while i >= 0:
            m = match(text, i - 1)
            if m is not None:
                found[i - 1] = m
            i = text.find(flag, i + 1)
    return [found[k] for k in sorted(found)]


def gap_starts(gap: Gap, text: str, low: str, starts: list[int] | None = None) -> list[int]:
    """Where the rule can match: each occurrence of ``gap.keyword`` in ``low`` (ascending)
    with a tail starting from right after it to ``gap.reach`` characters further; ``[]``
    when the text has no tail at all (then nothing of ``text`` is read but the flags'
    ``str.find``). ``starts``: the tails' starts, when the caller has them."""
    if starts is None:
        starts = [m.start() for m in tail_matches(gap, text)]
    if not starts:
        return []
    k, reach = gap.keyword, gap.reach
    out: list[int] = []
    i = low.find(k)
    while i >= 0:
        lo = i + len(k)
        j = bisect_left(starts, lo)
        if j < len(starts) and starts[j] <= lo + reach:
            out.append(i)
        i = low.find(k, i + 1)
    return out


#: lone carriage returns (not before a newline) that may lie within a head's reach and
#: still leave its match to ``re``: ``.`` takes a ``\r`` and so does the line break
#: ``[\r\n]{1,2}``, so ``re`` tries each way for each one (40 of them took seconds, 60
#: about a minute)
LONE_CR_MAX = 4


def _lone_crs(text: str) -> list[int]:
    """Where ``text`` has a ``\r`` not followed by ``\n`` (ascending)."""
    out = []
    i = text.find("\r")
    while i >= 0:
        if not text.startswith("\n", i + 1):
            out.append(i)
        i = text.find("\r", i + 1)
    return out


def gap_matches(rx: re.Pattern[str], gap: Gap, text: str, low: str) -> Iterator[re.Match[str]]:
    """``rx.finditer(text)`` for a rule with ``gap``: ``rx`` is tried only at the heads
    :func:`gap_starts` keeps, in order and after a match only from its end on.

    A head with more than :data:`LONE_CR_MAX` lone ``\r`` between it and the end of its
    reach (its gap, its tails included) is not given to ``re``: each tail that starts
    within its reach is yielded as a match of its own (the tail's match object, whose
    groups are the rule's: its gap has none), without checking the gap's six lines. Such a
    text may have more redacted than ``re`` would find, never less."""
    tails = tail_matches(gap, text)
    if not tails:
        return
    starts = [m.start() for m in tails]
    ends: list[int] = []  # the farthest end of the tails so far
    for t in tails:
        ends.append(max(t.end(), ends[-1] if ends else 0))
    lone = _lone_crs(text)
    k, reach = len(gap.keyword), gap.reach
    nxt = 0
    for i in gap_starts(gap, text, low, starts):
        if i < nxt:
            continue
        lo = i + k
        j = bisect_left(starts, lo)
        end = bisect_right(starts, lo + reach)
        ahead = max(lo + reach + 1, ends[end - 1])
        if bisect_left(lone, ahead) - bisect_left(lone, lo) <= LONE_CR_MAX:
            hit = rx.match(text, i)
            if hit is not None:
                yield hit
                nxt = hit.end()
        else:
            for t in tails[j:end]:
                if t.start() >= nxt:
                    yield t
                    nxt = t.end()
