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
from wiki_memory.recall.filters import FilterError, Filters, parse_time, str_list


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
        """The filters of this query for caller ``who`` (None: the server), its values
        checked and parsed (:func:`~wiki_memory.recall.filters.parse_time`), periods in
        ``zone`` (default: the zone :attr:`tz` names). Raises ``FilterError`` naming the
        field for a bad value (an empty ``kinds`` list too: it would match nothing) and
        ``ZoneError`` for a bad zone."""
        zone = zones.zone(self.tz) if zone is None else zone
        project = self.project
        if project is not None and not isinstance(project, str):
            raise FilterError("project", "expected a string")
        k = str_list(self.kinds, "kinds")
        if k == ():
            # an empty list would allow no kind, so match nothing: refused, never a silent []
            raise FilterError("kinds", "names no kind: name at least one, or leave it out for all")
        t = tuple(x.lstrip("#") for x in (str_list(self.tags, "tags") or ()) if x.lstrip("#"))
        s = parse_time(self.since, "since", zone=zone)
        u = parse_time(self.until, "until", end_of_day=True, zone=zone)
        if s is not None and u is not None and s > u:
            raise FilterError("until", "is before since")
        a = parse_time(self.as_of, "as_of", end_of_day=True, zone=zone)
        return Filters(project or None, k, t, s, u, tuple(self.exclude_dirs), who, a)

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
