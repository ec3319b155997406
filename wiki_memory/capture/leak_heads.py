"""Where a generated name-then-value rule can match: at its names, read off its regex.

gitleaks' name-then-value rules (``leaks``, trimmed of their leading context) open with
the provider's names, ``(?i)(?:lob)...``, matched in any case. ``re`` has no literal to
skip to in a case-insensitive regex, so ``finditer`` over a window tries the regex at
every position; :func:`finditer_at` tries it only where a name occurs (``str.find`` in
the lowercased text, in C) and returns the same matches. Standard library only (the
hook runs these rules too).
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator


#: a trimmed name-then-value regex that opens with its names, a group of plain lowercase
#: literals (one, or an alternation of them) not repeated nor optional: ``(?i)(?:lob)...``
_HEADS_SOURCE = r"\(\?i\)\(\?:([a-z0-9_]+(?:\|[a-z0-9_]+)*)\)(?![?*+{])"


def _top_level_bar(source: str) -> bool:
    """Whether ``source`` has a ``|`` outside every group (an alternation of the whole)."""
    depth = 0
    i, n = 0, len(source)
    in_class = False
    while i < n:
        c = source[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if source.startswith("]", i + 1) or source.startswith("^]", i + 1):
                i += 2 if source[i + 1] == "]" else 3  # a leading ] is a literal
                continue
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            return True
        i += 1
    return False


def fast_heads(fast: str) -> tuple[str, ...]:
    """The names every match of the trimmed regex ``fast`` starts with (lowercase; matched
    case-insensitively, so found in the lowercased text), or ``()`` when it does not open
    with a group of plain literals or could match without one (a whole-regex ``|``)."""
    m = re.match(_HEADS_SOURCE, fast)
    if m is None or _top_level_bar(fast):
        return ()
    return tuple(m.group(1).split("|"))


def finditer_at(
    rx: re.Pattern[str], text: str, low: str, heads: tuple[str, ...], ws: int, we: int
) -> Iterator[re.Match[str]]:
    """``rx.finditer(text, ws, we)`` for a regex every match of which starts with one of
    ``heads`` (see :func:`fast_heads`): ``rx`` is matched (with the same end, ``we``)
    only where a head occurs in ``low[ws:we]``, in ascending order and after a match only
    from its end on, which is what ``finditer`` returns (each of its searches finds the
    leftmost start, and every start is a head's). ``re`` has no literal to skip to in a
    case-insensitive regex: ``finditer`` tries it at every position of the window."""
    starts: list[int] = []
    for h in heads:
        i = low.find(h, ws, we)
        while i >= 0:
            starts.append(i)
            i = low.find(h, i + 1, we)
    if len(heads) > 1:
        starts = sorted(set(starts))
    match = rx.match
    nxt = ws
    for p in starts:
        if p < nxt:
            continue
        m = match(text, p, we)
        if m is not None:
            yield m
            nxt = m.end()  # a match holds its head: never empty
