"""gitleaks' provider rules, run the way gitleaks runs them (standard library only).

The table is generated (``gitleaks_rules.py``, from gitleaks' default ``gitleaks.toml``
by ``scripts/gen_gitleaks_rules.py``); this module runs it: a rule runs only when one of
its keywords occurs in the lowercased text (gitleaks' prefilter), its regex is compiled on
first use, its secret (the rule's secret group, else the first non-empty group, else the
match) must reach the rule's Shannon entropy, and the rule's and gitleaks' global
allowlists keep what they allow. A rule whose regex opens with gitleaks' name-then-value
shape (``[\\w.-]{0,50}?(?:name)...``) is run only in a window around each keyword it
has, so its cost follows the keyword's occurrences, not the text's length.

``sanitize`` imports this module on first use (not at its own import, for the hook's
start-up). Kinds: a rule whose secret we named before keeps that name (:data:`KINDS`,
so existing ``[REDACTED:...]`` placeholders keep their meaning); others take the rule id.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from math import log2

from wiki_memory.capture import gitleaks_rules as _G
from wiki_memory.capture.keyscan import KeySet
from wiki_memory.capture.leak_gaps import gap_matches, read_gap
from wiki_memory.capture.leak_heads import fast_heads, finditer_at
from wiki_memory.capture.leak_kinds import KINDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any


#: how far around a keyword a name-then-value rule looks: its name part reaches 50
#: characters before the keyword, its value at most a few hundred after
_BEFORE = 64
_AFTER = 512
_SEMI_GENERIC = r"[\w.-]{0,50}?"
#: the name-then-value shape's leading context (once or twice): what it matches before the
#: provider's name changes no secret found, and at every position it costs up to 50 (or
#: 2,500) steps, so it is dropped and the regex starts at the name
_LEAD_SOURCE = r"^(\(\?i\))?((?:\[\\w\.-\]\{0,50\}\?|\(\?i:)+)"
_SPACE_SOURCE = r"\s"  # compiled on first use (through re's cache): the hook's start-up


def _fast_source(source: str) -> str:
    """``source`` without its leading ``[\\w.-]{0,50}?`` runs (the scoped ``(?i:`` groups
    among them kept)."""
    m = re.match(_LEAD_SOURCE, source)
    if m is None:
        return source
    lead = m.group(2)
    kept = "(?i:" * lead.count("(?i:")
    return (m.group(1) or "") + kept + source[m.end() :]


#: rules whose secret is ``user:password``: only the password is redacted (as in
#: ``url-password`` and curl's ``-u`` in our own rules, whose kind they share)
_USER_KEPT = frozenset({"curl-auth-user"})


class Rule:
    """One generated rule, its regex compiled on first use."""

    __slots__ = (
        "id",
        "kind",
        "source",
        "keywords",
        "entropy",
        "group",
        "allows",
        "path",
        "windowed",
        "_rx",
        "_heads",
    )

    def __init__(self, row: tuple) -> None:  # type: ignore[type-arg]
        rid, source, keywords, entropy, group, allows, path, *_shape = row
        self.id: str = rid
        self.kind: str = KINDS.get(rid, rid)
        self.source: str = source
        self.keywords: tuple[str, ...] = keywords
        self.entropy: float = entropy
        self.group: int = group
        self.allows: tuple = allows  # type: ignore[type-arg]
        self.path: str | None = path
        self.windowed = _SEMI_GENERIC in source[:40]
        self._rx: re.Pattern[str] | None = None
        self._heads: tuple[str, ...] | None = None

    @property
    def fast(self) -> str:
        """The regex run: ``source``, for a name-then-value rule without its leading
        context (worked out on first compile, not at import: the hook's start-up)."""
        return _fast_source(self.source) if self.windowed else self.source

    @property
    def heads(self) -> tuple[str, ...]:
        """For a name-then-value rule, the names (lowercase) one of which every match of
        :attr:`fast` starts with (see :func:`leak_heads.fast_heads`); else, or when they cannot be
        read off, ``()``."""
        heads = self._heads
        if heads is None:
            heads = self._heads = fast_heads(self.fast) if self.windowed else ()
        return heads

    @property
    def rx(self) -> re.Pattern[str]:
        rx = self._rx
        if rx is None:
            rx = self._rx = re.compile(self.fast, re.ASCII)
        return rx

    def __repr__(self) -> str:
        return f"Rule({self.id!r})"

    def spans(self, text: str, low: str | None = None) -> Iterator[tuple[int, int]]:
        """This rule alone over ``text``: the spans of its secrets (keywords checked)."""
        if low is None:
            low = text.lower()
        if self.keywords and not any(k in low for k in self.keywords):
            return
        for s, e, _ in _run(self, text, low):
            yield s, e


RULES: tuple[Rule, ...] = tuple(Rule(r) for r in _G.RULES)
BY_ID: dict[str, Rule] = {r.id: r for r in RULES}

#: the characters of a secret-like run, and the least run a rule must hold to be looked
#: for only near such runs (the generator's ``RUN_LENGTH``, from each parsed regex)
RUN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.+/=~"
RUN_MIN = 20
_table = bytearray(b" " * 256)  # T for a run character, space for any other byte
for _c in RUN_CHARS.encode():
    _table[_c] = 84
_RUN_TABLE = bytes(_table)
del _table, _c
_RUN_NEEDLE = b"T" * RUN_MIN

#: keyword -> its rules, for the rules checked over the whole text (gitleaks' way) and for
#: the rules whose every match holds a run of RUN_MIN run characters (checked only in the
#: windows around such runs)
_KEYWORD_RULES: dict[str, list[Rule]] = {}
_NEAR_RULES: dict[str, list[Rule]] = {}
_IN_MATCH = frozenset(_G.KEYWORD_IN_MATCH)
_ALWAYS: list[Rule] = []  # rules with no keyword (none in gitleaks' table today)
for _r in RULES:
    if _r.path is not None:
        continue
    if not _r.keywords:
        _ALWAYS.append(_r)
    # near: every match holds a run of RUN_MIN run characters and one of the rule's
    # keywords (both read from its parsed regex by the generator), each keyword made of run
    # characters only; any other rule's keywords are looked for in the whole text
    near = (
        _G.RUN_LENGTH.get(_r.id, 0) >= RUN_MIN
        and _r.id in _IN_MATCH
        and not any(k.strip(RUN_CHARS) for k in _r.keywords)  # run characters only
    )
    for _k in _r.keywords:
        (_NEAR_RULES if near else _KEYWORD_RULES).setdefault(_k, []).append(_r)
del _r
#: the keywords, each once (a rule may share one with others)
KEYWORDS: tuple[str, ...] = tuple(sorted({*_KEYWORD_RULES, *_NEAR_RULES}))
_WHOLE_KEYWORDS: tuple[str, ...] = tuple(sorted(_KEYWORD_RULES))
WHOLE_KEYWORDS = _WHOLE_KEYWORDS  # for the caller's one keyword pass (see find)
_WHOLE_SET = frozenset(_WHOLE_KEYWORDS)
_NEAR_KEYWORDS: tuple[str, ...] = tuple(sorted(_NEAR_RULES))
#: the near keywords, looked for in one pass over the text near runs (see keyscan)
_NEAR_SET = KeySet(_NEAR_KEYWORDS, 0)  # ~200 in scans cost more than one call
#: how far before a run its rule's keyword may stand: a name-then-value rule's name ends
#: at most 20 + 3 + 3 + 5 characters before its value (name tail, quotes, operator, quotes)
_NEAR_BEFORE = max(map(len, _NEAR_KEYWORDS), default=0) + 32
_PATH_RULES = tuple(r for r in RULES if r.path is not None)


def near_sources() -> list[tuple[str, str]]:
    """``(rule id, regex run)`` of every rule looked for only near runs of
    :data:`RUN_MIN` run characters (for the compiled pass, ``rulescan``: a rule it does
    not name for a text is left out by :func:`find`'s ``maybe``)."""
    return list({r.id: r.fast for k in _NEAR_KEYWORDS for r in _NEAR_RULES[k]}.items())


_LEAD = _G.LEAD_RUN
_GLOBAL_RX: list[re.Pattern[str]] = []


def _global_allowed(secret: str) -> bool:
    if not _GLOBAL_RX:
        _GLOBAL_RX.extend(re.compile(x, re.ASCII) for x in _G.GLOBAL_ALLOW_REGEXES)
    low = secret.lower()
    if any(w in low for w in _G.GLOBAL_STOPWORDS):
        return True
    return any(rx.search(secret) for rx in _GLOBAL_RX)


_ALLOW_RX: dict[str, re.Pattern[str]] = {}


def _arx(source: str) -> re.Pattern[str]:
    rx = _ALLOW_RX.get(source)
    if rx is None:
        rx = _ALLOW_RX[source] = re.compile(source, re.ASCII)
    return rx


def _allowed(rule: Rule, text: str, m: re.Match[str], secret: str, path: str | None) -> bool:
    """gitleaks' allowlist check: any (OR) or all (AND) of an allowlist's conditions."""
    for target, condition, regexes, stopwords, paths in rule.allows:
        checks: list[bool] = []
        if regexes:
            if target == "match":
                subject = text[m.start() : m.end()]  # m may be over a tamed copy (leak_gaps)
            elif target == "line":
                ls = text.rfind("\n", 0, m.start()) + 1
                le = text.find("\n", m.end())
                subject = text[ls : le if le >= 0 else len(text)]
            else:
                subject = secret
            checks.append(any(_arx(x).search(subject) for x in regexes))
        if stopwords:
            low = secret.lower()
            checks.append(any(w in low for w in stopwords))
        if paths:
            checks.append(path is not None and any(_arx(x).search(path) for x in paths))
        if checks and (all(checks) if condition == "AND" else any(checks)):
            return True
    return False


def entropy(s: str) -> float:
    """Shannon entropy in bits per character, as gitleaks computes it."""
    n = len(s)
    if not n:
        return 0.0
    counts: dict[str, int] = {}
    for c in s:
        counts[c] = counts.get(c, 0) + 1
    return -sum(v / n * log2(v / n) for v in counts.values())


def _windows(low: str, keywords: tuple[str, ...], text: str) -> list[tuple[int, int]]:
    """Merged windows around every occurrence of the rule's keywords; each ends at a
    whitespace character (so a value is never cut by the window's edge) or the text's end."""
    n = len(low)
    starts: list[tuple[int, int]] = []
    for k in keywords:
        i = low.find(k)
        while i >= 0:
            starts.append((max(0, i - _BEFORE), i + len(k) + _AFTER))
            i = low.find(k, i + _AFTER // 2)  # the window after covers the next ones
    if not starts:
        return []
    starts.sort()
    out: list[list[int]] = []
    for s, e in starts:
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    res = []
    for s, e in out:
        if e >= n:
            e = n
        else:
            m = re.compile(_SPACE_SOURCE).search(text, e, min(n, e + 4096))
            e = m.start() if m is not None else min(n, e + 4096)
        res.append((s, e))
    return res


def _run_windows(runs: list[tuple[int, int]], width: int, n: int) -> list[tuple[int, int, int]]:
    """Where a rule whose every match holds one of ``runs`` and spans at most ``width``
    characters can match: ``(first start, last start, end)`` per merged window."""
    out: list[tuple[int, int, int]] = []
    for s, e in runs:
        ws = max(0, s - width)
        if out and ws <= out[-1][1]:
            out[-1] = (out[-1][0], e, min(n, e + width + 2))
        else:
            out.append((ws, e, min(n, e + width + 2)))
    return out


#: the width of the run windows the near rules share (most spans are at most this wide)
_SHARED_WIDTH = 256


def _cued(
    rx: re.Pattern[str],
    text: str,
    low: str,
    heads: tuple[str, ...],
    near: list[tuple[int, int, int]] | None = None,
    starts: list[int] | None = None,
) -> Iterator[re.Match[str]]:
    """``rx.finditer(text)`` for a rule every match of which starts with one of ``heads``
    (lowercase; :data:`gitleaks_rules.STARTS`): ``rx`` is tried only where one occurs
    (found in ``low`` by ``str.find``, in C), in ascending order and after a match only
    from its end on, as ``finditer`` does. Most of these regexes open with ``\\b`` or a
    look-around, which leaves ``re`` nothing to skip ahead to: it tries them at every
    position of the text, ~30 times the cost of a ``str.find``. ``near``: windows
    ``(first start, last start, end)`` outside of which no match can start (see
    :func:`_run_windows`); occurrences outside them are not tried. ``starts``: the
    places to try, found by the caller (sorted, each once), instead."""
    if starts is None:
        starts = []
        for ws, we in ((0, len(low)),) if near is None else ((w[0], w[1]) for w in near):
            for h in heads:
                i = low.find(h, ws, we + len(h))
                while i >= 0:
                    starts.append(i)
                    i = low.find(h, i + 1, we + len(h))
        if len(heads) > 1 or near is not None:
            starts = sorted(set(starts))
    match = rx.match
    nxt = 0
    for p in starts:
        if p < nxt:
            continue
        m = match(text, p)
        if m is not None:
            yield m
            nxt = m.end()


def _run_starts(low: str, heads: tuple[str, ...], inrun: list[Any]) -> list[int]:
    """Where in ``low`` one of ``heads`` starts at least :data:`RUN_MIN` characters before
    the end of a run (sorted, each once). ``inrun``: ``[runs]`` for the text, to which the
    runs joined by ``\n`` and where each starts in that join are added on first use (one
    ``str.find`` loop per head over the runs alone, not one per run and head)."""
    if len(inrun) == 1:
        bases, pos = [], 0
        for s, e in inrun[0]:
            bases.append(pos)
            pos += e - s + 1
        inrun.append("\n".join([low[s:e] for s, e in inrun[0]]))
        inrun.append(bases)
    runs: list[tuple[int, int]] = inrun[0]
    joined: str = inrun[1]
    bases = inrun[2]
    out: list[int] = []
    for h in heads:
        i = joined.find(h)
        while i >= 0:
            k = bisect_right(bases, i) - 1
            s, e = runs[k]
            p = s + i - bases[k]
            if p <= e - RUN_MIN:
                out.append(p)
            i = joined.find(h, i + 1)
    if len(heads) > 1:
        out = sorted(set(out))
    return out


def _matches(
    rule: Rule,
    rx: re.Pattern[str],
    text: str,
    low: str,
    runs: list[tuple[int, int]] | None,
    shared: list[tuple[int, int, int]] | None = None,
    inrun: list[Any] | None = None,
) -> Iterator[tuple[re.Match[str], int]]:
    """The rule's regex matches, each with the last start its window allows. ``shared``:
    the caller's list for the run windows of :data:`_SHARED_WIDTH` (filled on first
    need, then reused by the text's other rules). ``inrun``: for a rule every match of
    which starts with :data:`RUN_MIN` run characters (the generator's ``LEAD_RUN``), the
    places such a match can start, inside the runs (see :func:`find`)."""
    n = len(text)
    heads = _G.STARTS.get(rule.id)
    if heads and inrun is not None:
        for m in _cued(rx, text, low, heads, None, _run_starts(low, heads, inrun)):
            yield m, n
        return
    if heads and not rule.windowed:
        gap = read_gap(rule.fast)
        if gap is not None:  # tried only at heads with its tail in reach (leak_gaps.py)
            for m in gap_matches(rx, gap, text, low):
                yield m, n
            return
        width = _G.MAX_WIDTH[rule.id] if runs is not None else 0
        # a rule every match of which holds a run and spans at most width characters
        # starts within width characters before a run: only those places are tried (the
        # windows for _SHARED_WIDTH, made once per text, hold those of any less width)
        near = None
        if width and runs is not None:
            if width <= _SHARED_WIDTH and shared is not None:
                if not shared:
                    shared.extend(_run_windows(runs, _SHARED_WIDTH, n))
                near = shared
            else:
                near = _run_windows(runs, width, n)
        for m in _cued(rx, text, low, heads, near):
            yield m, n
        return
    spans: list[tuple[int, int, int]]
    if rule.windowed:
        wins = _windows(low, rule.keywords, text)
        named = rule.heads
        if named:
            for ws, we in wins:
                for m in finditer_at(rx, text, low, named, ws, we):
                    yield m, we
            return
        spans = [(ws, we, we) for ws, we in wins]
    elif runs is not None:
        spans = _run_windows(runs, _G.MAX_WIDTH[rule.id], n)
    else:
        spans = [(0, n, n)]
    for ws, we, end in spans:
        for m in rx.finditer(text, ws, end):
            yield m, we


def _run(
    rule: Rule,
    text: str,
    low: str,
    path: str | None = None,
    runs: list[tuple[int, int]] | None = None,
    shared: list[tuple[int, int, int]] | None = None,
    inrun: list[Any] | None = None,
) -> Iterator[tuple[int, int, str]]:
    """The rule's findings ``(start, end, kind)``. ``runs``: the text's runs of
    :data:`RUN_MIN` run characters, for a rule every match of which holds one and spans at
    most ``MAX_WIDTH`` characters: it is run only around them (a match starts at most that
    far before a run and ends at most that far after it). ``inrun``: see :func:`_matches`."""
    rx = rule.rx
    last = -1
    for m, we in _matches(rule, rx, text, low, runs, shared, inrun):
        if m.start() < last or m.start() > we:
            continue
        g = rule.group
        if g and g <= (rx.groups or 0):
            s, e = m.span(g)
        else:
            s = e = -1
            for i in range(1, (rx.groups or 0) + 1):
                s, e = m.span(i)
                if e > s:
                    break
            if e <= s:
                s, e = m.span()
        if e <= s:
            continue
        secret = text[s:e]
        if rule.entropy and entropy(secret) < rule.entropy:
            continue
        if _global_allowed(secret):
            continue
        if rule.allows and _allowed(rule, text, m, secret, path):
            continue
        last = m.end()
        if rule.id in _USER_KEPT:  # after the allowlists, which read user:password
            c = text.find(":", s, e)
            if c >= 0 and c + 1 < e:
                s = c + 1  # user:password: the user stays readable, as in our rules
        yield s, e, rule.kind


def near_runs(low: str, raw: bytes | None) -> tuple[bytes, list[tuple[int, int]]]:
    """The parts of ``low`` where a rule that needs a run of :data:`RUN_MIN` run
    characters can have its keyword: each such run, from :data:`_NEAR_BEFORE` characters
    before it (``\n``-joined ASCII bytes, lowercase: ``raw``'s parts lowered, which are
    ``low``'s; empty when the text has no such run), and the runs (maximal,
    ``(start, end)`` ascending). ``sanitize`` finds its provider tokens inside these runs
    and hands both back to :func:`find`, so a text is scanned for runs once."""
    if raw is None:
        raw = low.encode("ascii", "replace")
    cls = raw.translate(_RUN_TABLE)
    find = cls.find
    i = find(_RUN_NEEDLE)
    if i < 0:
        return b"", []
    parts = []
    runs = []
    n = len(cls)
    before = _NEAR_BEFORE
    start = end = -1
    while i >= 0:
        e = find(b" ", i + RUN_MIN)
        if e < 0:
            e = n
        runs.append((i, e))
        s = i - before if i > before else 0
        if s > end:  # a new window; one that touches the last grows it (no cut keyword)
            if end >= 0:
                parts.append(raw[start:end])
            start = s
        end = e
        i = find(_RUN_NEEDLE, e)
    parts.append(raw[start:end])
    return b"\n".join(parts).lower(), runs


def find(
    text: str,
    low: str,
    path: str | None = None,
    raw: bytes | None = None,
    present: set[str] | None = None,
    runs_out: list[tuple[int, int]] | None = None,
    near: tuple[bytes, list[tuple[int, int]]] | None = None,
    maybe: set[str] | None = None,
) -> list[tuple[int, int, str]]:
    """Every secret the rules find in ``text`` (``low`` is its lowercase, same length):
    ``(start, end, kind)``. ``path``: the file the text is from or for, if known (rules
    with a path condition run only then). ``raw``: ``text`` encoded to ASCII with ``?``
    for other characters, when the caller has it. ``present``: when the caller has
    already found which words occur in ``low`` (:class:`keyscan.KeySet` over at least
    :data:`WHOLE_KEYWORDS`), that set; else each keyword is looked for here.

    A rule runs when one of its keywords occurs, as in gitleaks; for a rule every match
    of which holds a run of :data:`RUN_MIN` run characters (letters, digits, ``_-.+/=~``)
    the keyword is looked for only in and just before such runs, where any match of it
    would put it (see docs/sanitizer.md), so most text is scanned once, not per keyword.
    ``runs_out``: a list the text's maximal runs of at least RUN_MIN run characters,
    ``(start, end)``, are added to, for the caller's other rules (left empty for a text
    shorter than RUN_MIN). ``near``: :func:`near_runs` of ``low`` and ``raw``, when the
    caller has made it (for a text at least RUN_MIN long). ``maybe``: when the compiled
    pass (``rulescan``) has run over ``text``, the ids it found can match: any other rule
    of :func:`near_sources` cannot, and is not run."""
    rules: dict[str, Rule] = {}
    if present is None:
        for k in _WHOLE_KEYWORDS:
            if k in low:
                for r in _KEYWORD_RULES[k]:
                    rules[r.id] = r
    else:  # the same keywords in the same (sorted) order, from the set found
        for k in sorted(_WHOLE_SET.intersection(present)):
            for r in _KEYWORD_RULES[k]:
                rules[r.id] = r
    near_rules: dict[str, Rule] = {}
    runs: list[tuple[int, int]] = []
    if len(low) >= RUN_MIN:
        near_text, runs = near if near is not None else near_runs(low, raw)
        if runs_out is not None:
            runs_out.extend(runs)
        if near_text:
            for k in sorted(_NEAR_SET.present(near_text)):  # _NEAR_KEYWORDS' order
                for r in _NEAR_RULES[k]:
                    if r.id not in rules and (maybe is None or r.id in maybe):
                        near_rules[r.id] = r
    for r in _ALWAYS:
        rules[r.id] = r
    if path:
        for r in _PATH_RULES:
            if _arx(r.path).search(path):  # type: ignore[arg-type]
                rules[r.id] = r
    out: list[tuple[int, int, str]] = []
    shared: list[tuple[int, int, int]] = []
    # a match that starts with RUN_MIN run characters starts inside a run (runs are
    # maximal), at most RUN_MIN characters before its end: only there is it tried
    inrun: list[Any] = [runs]
    for r in rules.values():
        out.extend(_run(r, text, low, path))
    for r in near_rules.values():
        if r.id in rules:
            continue
        if _LEAD.get(r.id, 0) >= RUN_MIN and not r.windowed:
            out.extend(_run(r, text, low, path, None, None, inrun))
        else:
            out.extend(_run(r, text, low, path, runs if _G.MAX_WIDTH[r.id] else None, shared))
    return out
