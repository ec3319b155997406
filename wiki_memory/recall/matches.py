"""Every match of a query, best first (:class:`Ranked`): the ranked pool, then the tail
of the other sections holding the query's words in their own text, by bm25 — read into
Python (:class:`ListTail`) or counted in SQL and read when asked for (:class:`SqlTail`)."""

from __future__ import annotations

from typing import Any, Protocol

from wiki_memory.index import signals
from wiki_memory.index import tail as tail_rows
from wiki_memory.index.signals import Hit
from wiki_memory.index.store import Index
from wiki_memory.recall.candidate import Cand

NO_LIMIT = 1 << 40
"""The ``limit`` of ``rank.ranked``: every match (SQLite takes it as a plain integer)."""
TAIL_CHUNK = 32
"""Sections after the pool read from SQLite at a time by the optimized path."""


class ListTail:
    """The matches after the pool, every one read (the plain path, and ``as_of``)."""

    def __init__(self, hits: list[Hit]) -> None:
        self.hits = hits

    def __len__(self) -> int:
        return len(self.hits)

    def hit(self, j: int) -> Hit:
        """The ``j``-th section after the pool (IndexError past the end)."""
        return self.hits[j]


class SqlTail:
    """The matches after the pool, counted in SQL and read from the ``j``-th on when
    asked for (the optimized path): the same sections in the same order as
    :class:`ListTail`. Each read takes :data:`TAIL_CHUNK` rows or as many as were read
    before, whichever is more, so a reply that walks the whole tail sorts the matches a
    logarithmic number of times, not once per chunk."""

    def __init__(
        self,
        index: Index,
        match: str,
        scope: signals.Scope,
        cols: dict[str, float],
        pool: set[tuple[str, str]],
        last: set[str] | None = None,
    ) -> None:
        self.index, self.match, self.scope, self.cols, self.pool = index, match, scope, cols, pool
        self.last = last or set()
        self.n = tail_rows.count_own(index, match, scope, cols, pool)
        self.rows: dict[int, Hit] = {}

    def __len__(self) -> int:
        return self.n

    def hit(self, j: int) -> Hit:
        """The ``j``-th section after the pool; IndexError when the index changed since
        the count and has fewer now."""
        got = self.rows.get(j)
        if got is None:
            found = tail_rows.own_sections(
                self.index,
                self.match,
                self.scope,
                max(TAIL_CHUNK, len(self.rows)),
                self.cols,
                offset=j,
                exclude=self.pool,
                last=self.last,
            )
            for k, h in enumerate(found):
                self.rows[j + k] = h
            if j not in self.rows:
                raise IndexError(j)
            got = self.rows[j]
        return got


class Items(Protocol):
    """What builds a ranked candidate's recall item (the ranker)."""

    def item(self, c: Cand) -> dict[str, Any]:
        """The recall item of ``c``."""
        ...


class Ranked:
    """Every match of a query, best first: ``len()`` of them, each recall item built when
    first asked for (:meth:`item`), so that counting all matches costs no snippets. The
    ranked pool (``cands``) comes first, then the ``tail``; ``ranker`` builds the items."""

    def __init__(
        self, ranker: Items | None, cands: list[Cand], tail: ListTail | SqlTail | None = None
    ) -> None:
        self._ranker = ranker
        self._cands = cands
        self._tail = tail
        self._items: dict[int, dict[str, Any]] = {}

    def __len__(self) -> int:
        return len(self._cands) + (len(self._tail) if self._tail is not None else 0)

    @property
    def whole(self) -> bool:
        """Every match went through the fusion (no tail follows a pool: at most
        ``rank.FULL_RANK`` matches, or none)."""
        return self._tail is None

    def key(self, i: int) -> str:
        """The ``i``-th match's key (``path#anchor``, or a running session's observation
        id), without building its item. IndexError past the end."""
        if i < len(self._cands):
            c = self._cands[i]
            return f"spool:{c.spool.obs_id}" if c.spool is not None else f"{c.key[0]}#{c.key[1]}"
        if self._tail is None:
            raise IndexError(i)
        h = self._tail.hit(i - len(self._cands))
        return f"{h.path}#{h.anchor}"

    def item(self, i: int) -> dict[str, Any]:
        """The ``i``-th match (0 = best) as a recall item (see ``Memory.recall``). Raises
        IndexError past the end (also when the index shrank since the count)."""
        got = self._items.get(i)
        if got is None:
            assert self._ranker is not None
            if i < len(self._cands):
                c = self._cands[i]
            else:
                if self._tail is None:
                    raise IndexError(i)
                h = self._tail.hit(i - len(self._cands))
                c = Cand((h.path, h.anchor), h.path, hit=h)
            got = self._items[i] = self._ranker.item(c)
        return got
