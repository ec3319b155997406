"""One recall's question (:class:`RecallQuery`), built once by the face that received it
(HTTP ``/v1/recall``, MCP ``memory_recall``, the web view's search; the CLI's ``recall``
goes through HTTP) and passed down unchanged to the recaller, the filters and the ranker."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import tzinfo
from typing import Any

from wiki_memory import zones
from wiki_memory.identity import Identity
from wiki_memory.recall.filters import Filters


@dataclass(frozen=True)
class RecallQuery:
    """What a recall asks for.

    ``text``: the query; filters ``project``; ``kinds`` (page kinds, e.g.
    ``["session", "note"]``; ``[]`` allows none); ``tags`` (a string or list: the page
    must carry every one, ``a`` also matching the nested ``a/b``); ``since``/``until``
    (ISO-8601, a calendar period or epoch seconds: the time the page covers must overlap
    the range); ``as_of`` (search the wiki as committed then, from git; no spool);
    ``exclude_dirs`` (folders whose pages are never seen). ``now`` (ISO-8601 or epoch
    seconds; default the present): the reference time for relative dates in the query;
    ``tz``: the caller's zone (a name or offset, :mod:`wiki_memory.zones`; default the
    user's stored one, else UTC). Paging: ``budget_tokens`` (None: the server's default)
    and ``cursor`` (0, or a ``next_cursor`` recall returned).

    Values are kept as the face received them: they are checked where they are read
    (:meth:`filters` raises ``FilterError``, a 400 naming the field)."""

    text: str
    project: str | None = None
    kinds: Sequence[str] | None = None
    tags: Sequence[str] | str | None = None
    since: str | float | None = None
    until: str | float | None = None
    as_of: str | float | None = None
    now: str | float | None = None
    tz: str | tzinfo | None = None
    budget_tokens: int | None = None
    cursor: int = 0
    exclude_dirs: Iterable[str] = ()

    def filters(self, who: Identity | None, zone: tzinfo | None = None) -> Filters:
        """The filters of this query for caller ``who`` (None: the server), their periods
        in ``zone`` (default: the zone :attr:`tz` names). Raises ``FilterError`` for a bad
        value and ``ZoneError`` for a bad zone."""
        return Filters.build(
            project=self.project,
            kinds=self.kinds,
            tags=self.tags,
            since=self.since,
            until=self.until,
            as_of=self.as_of,
            exclude_dirs=self.exclude_dirs,
            who=who,
            zone=zones.zone(self.tz) if zone is None else zone,
        )

    def fingerprint_fields(self, zone: tzinfo) -> dict[str, Any]:
        """The filters a walk cursor belongs to (with the zone resolved: ``zone``)."""
        return {
            "project": self.project,
            "kinds": self.kinds,
            "tags": self.tags,
            "since": self.since,
            "until": self.until,
            "as_of": self.as_of,
            "now": self.now,
            "tz": str(zone),
        }
