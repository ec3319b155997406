"""Which of a fixed set of keywords occur in a text: one pass where a library allows it.

The generated rules (``leaks``) and our structured-format rules (``formats``) each run
only when one of their keywords or cues occurs in the lowercased text, as gitleaks runs
its rules. Asked one keyword at a time, that is one C scan of the whole text per keyword
(about 250 of them), which cost more than every other rule together. Where the optional
``ahocorasick_rs`` package is importable (the server's environment: a dependency in
``pyproject.toml``), :meth:`KeySet.present` finds them all in one Aho-Corasick pass with
every overlapping occurrence, so the set it returns is the same set the one-at-a-time
scans give. The hook (``python -S``, standard library only) never imports it: texts
shorter than :data:`AC_MIN` characters, and any process where the import fails, take the
``in`` scans.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: texts at least this long use the one-pass automaton when it is available (below it,
#: a few dozen ``in`` scans of a short text cost about what the call does; the hook never
#: imports the library); a set of many more keywords, such as the generated rules' near
#: keywords (about 200), sets its own lower bound (0: one call costs less than 200 scans)
AC_MIN = 64

_AC_MODULE: Any = None  # None: not tried yet; False: not importable


def _ac_module() -> Any:
    global _AC_MODULE
    if _AC_MODULE is None:
        try:
            import ahocorasick_rs

            _AC_MODULE = ahocorasick_rs
        except Exception:  # not installed, or a python -S process without site-packages
            _AC_MODULE = False
    return _AC_MODULE


class KeySet:
    """A fixed tuple of lowercase ASCII keywords (``keywords``), and which of them a
    lowercased text holds. The automaton is built on first use (building it costs about
    a millisecond, which the hook's start-up never pays)."""

    __slots__ = ("keywords", "min_len", "_ac", "_bytes", "_bac")

    def __init__(self, keywords: tuple[str, ...], min_len: int = AC_MIN) -> None:
        self.keywords = keywords
        self.min_len = min_len  # shorter texts take the in scans
        self._ac: Any = None  # None: not built; False: no library
        self._bytes = tuple(k.encode("ascii") for k in keywords)
        self._bac: Any = None  # the same over bytes (ASCII texts read ~1.5x as fast)

    def _build(self, kind: str, keys: tuple[Any, ...]) -> Any:
        """An automaton of the library's class ``kind`` over ``keys``, or False without
        the library or keywords."""
        mod = _ac_module()
        if not (mod and self.keywords):
            return False
        return getattr(mod, kind)(
            list(keys),
            matchkind=mod.MatchKind.Standard,
            implementation=mod.Implementation.DFA,
        )

    def automaton(self) -> Any:
        """The Aho-Corasick automaton over ``keywords``, or False without the library."""
        if self._ac is None:
            self._ac = self._build("AhoCorasick", tuple(self.keywords))
        return self._ac

    def bytes_automaton(self) -> Any:
        """:meth:`automaton` for ``bytes`` texts, or False without the library."""
        if self._bac is None:
            self._bac = self._build("BytesAhoCorasick", self._bytes)
        return self._bac

    def present(self, low: str | bytes, fast: bool = True) -> set[str]:
        """The keywords that occur in ``low`` (a lowercased text, or its lowercase ASCII
        bytes): the same set whether the automaton or ``in`` finds them. ``fast=False``
        forces the ``in`` scans (the standard-library path, for tests that compare the
        two)."""
        if isinstance(low, bytes):
            kws = self.keywords
            if fast and len(low) >= self.min_len:
                ac = self._bac if self._bac is not None else self.bytes_automaton()
                if ac:
                    return {kws[i] for i, _, _ in ac.find_matches_as_indexes(low, overlapping=True)}
            return {kws[i] for i, k in enumerate(self._bytes) if k in low}
        if fast and len(low) >= self.min_len:
            ac = self._ac if self._ac is not None else self.automaton()
            if ac:
                kws = self.keywords
                return {kws[i] for i, _, _ in ac.find_matches_as_indexes(low, overlapping=True)}
        return {k for k in self.keywords if k in low}

    def occurrences(self, low: bytes) -> list[tuple[int, int, int]]:
        """Every occurrence, overlapping ones too, of a keyword in ``low`` (lowercase ASCII
        bytes) as ``(index into keywords, start, end)``, from the one-pass automaton
        (call only where :meth:`available` says it is taken)."""
        ac = self._bac if self._bac is not None else self.bytes_automaton()
        return ac.find_matches_as_indexes(low, overlapping=True)  # type: ignore[no-any-return]

    def available(self, low: str | bytes) -> bool:
        """Whether :meth:`present` takes the one-pass automaton for ``low``."""
        return len(low) >= self.min_len and bool(
            self._ac if self._ac is not None else self.automaton()
        )


def starts(text: str, needles: tuple[str, ...]) -> list[int]:
    """Where each of ``needles`` starts in ``text`` (``str.find``, in C, case as given),
    every occurrence, overlapping ones too: ascending (sorted when there is more than one
    needle; a start two needles share is listed twice). The places a rule whose matches
    all start at (or a fixed distance before) a needle is tried."""
    out: list[int] = []
    for nd in needles:
        i = text.find(nd)
        while i >= 0:
            out.append(i)
            i = text.find(nd, i + 1)
    if len(needles) > 1:
        out.sort()
    return out
