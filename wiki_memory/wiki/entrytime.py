"""A session page's times (docs/sessions.md, "Frontmatter"): each entry's clock in UTC,
the section's offset in ``started`` and its ``Started`` line, and an entry's own local
time when its event carried another offset than its section's (a DST change or a zone
change within one session). Offsets are minutes east of UTC, as the hook sends them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from wiki_memory.capture.observation import iso

__all__ = ["at_offset", "clock", "entry_local", "local_iso", "started_line"]


def clock(ts: float) -> str:
    """``HH:MM:SS`` of ``ts`` (epoch seconds) in UTC: every entry's first line."""
    return datetime.fromtimestamp(ts, UTC).strftime("%H:%M:%S")


def at_offset(ts: float, offset: int) -> datetime:
    """``ts`` (epoch seconds) as an aware datetime at UTC ``offset`` (minutes east)."""
    return datetime.fromtimestamp(ts, timezone(timedelta(minutes=offset)))


def local_iso(ts: float, offset: int | None) -> str:
    """``ts`` as ISO-8601 at the sender's UTC ``offset`` (minutes; ``+09:00``), or UTC
    (``Z``) when it sent none or was at UTC: a session keeps the offset of its events."""
    if not offset:
        return iso(ts)
    return at_offset(ts, offset).isoformat(timespec="seconds")


def started_line(ts: float, offset: int | None) -> str | None:
    """The summary's ``Started`` line: the local date and time beside UTC, for a session
    whose first event carried an offset other than UTC's (None otherwise)."""
    if not offset:
        return None
    local = at_offset(ts, offset).strftime("%Y-%m-%d %H:%M %z")
    utc = datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M")
    return f"- **Started:** {local[:-2]}:{local[-2:]} ({utc} UTC)"


def entry_local(ts: float, own: int | None, section: int | None) -> str:
    """`` (HH:MM ±HH:MM)``: an entry's local time, written after its UTC clock only when
    its event carried an offset other than its section's (``started``'s): a session
    that crosses a DST change or a zone change keeps each entry's own; "" otherwise."""
    if own is None or own == (section or 0):
        return ""
    local = at_offset(ts, own).strftime("%H:%M %z")
    return f" ({local[:-2]}:{local[-2:]})"
