"""Accepted events that are on no page as themselves, and a person's discard of them
(docs/sessions.md, "Placeholders: accepted means rendered").

Two kinds, both read from the sessions' spool states:

- **placeholders**: events the compiler could not render; the page holds a placeholder
  entry naming each spool record (``state["unrendered"]``);
- **a failing compile**: a session whose page cannot be written at all (its project's
  folder refused, a write that keeps failing): its events since the last written
  compile sit in the spool, retried with back-off (``state["compile_failed"]``).

The spool keeps them until they compile or a person discards them with
:func:`discard_unrendered` (``wiki-memory unrendered --discard``), which the audit log
records. Both functions are for the wiki's owner and admins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wiki_memory.capture.observation import iso
from wiki_memory.core.admin import require_admin
from wiki_memory.core.writer import WriteResult
from wiki_memory.errors import BadRequest, NotFound
from wiki_memory.identity import Identity

if TYPE_CHECKING:
    from wiki_memory.capture.spool import SessionInfo
    from wiki_memory.core.memory import Memory

_REFUSAL = "only the wiki's owner and admins may list or discard unrendered events"


def written_page(state: dict[str, Any]) -> str | None:
    """The page a session's spool ``state`` says was written, else None: a path named
    only by a write that never completed (the pending state written before it) is no
    page."""
    path = state.get("path")
    return str(path) if path and state.get("compiled_count") is not None else None


def _entry(info: SessionInfo) -> dict[str, Any] | None:
    """What session ``info`` holds that is on no page, or None when nothing is."""
    st = info.state
    held = [str(i) for i in st.get("unrendered") or []]
    failed = st.get("compile_failed") if isinstance(st.get("compile_failed"), dict) else None
    if not held and failed is None:
        return None
    out: dict[str, Any] = {
        "session": info.key,
        "harness": info.harness,
        "session_id": info.session_id,
        "user": info.user,
        "project": info.project or None,
        "page": written_page(st),
        "placeholders": held,
        "events": len(held),
        "compile_failed": None,
    }
    if failed is not None:
        out["compile_failed"] = {
            "at": iso(float(failed.get("at") or 0)),
            "cause": str(failed.get("cause") or ""),
            "tries": int(failed.get("tries") or 0),
            "events": int(failed.get("events") or 0),
        }
        out["events"] += int(failed.get("events") or 0)
    return out


def list_unrendered(memory: Memory, who: Identity | None) -> list[dict[str, Any]]:
    """Every session with accepted events on no page as themselves, by session key:
    ``[{"session", "harness", "session_id", "user", "project", "page" (None: no page
    yet), "placeholders": [spool record ids], "compile_failed": {"at", "cause", "tries",
    "events"} | None, "events": how many in all}]``. ``who`` None: the server itself.
    Raises Forbidden (``grant: admin``) for a caller who is not the owner or an admin."""
    require_admin(memory, who, "unrendered.list", "spool", _REFUSAL)
    rows = [_entry(info) for info in list(memory.spool.sessions.values())]
    return sorted((r for r in rows if r is not None), key=lambda r: str(r["session"]))


def discard_unrendered(memory: Memory, who: Identity | None, session: str) -> dict[str, Any]:
    """Discard what ``session`` (a session key from :func:`list_unrendered`; a unique
    prefix of 8 or more characters will do) holds on no page, for ``who``:

    - a session with no page (every compile failed): its spool files and its searchable
      spool rows go, as if it never came (its ``event_id`` dedup keys stay, so a retried
      event is not taken again);
    - a session with a page: its placeholders are no longer counted (``discarded`` in
      its state; the placeholder entries stay on the page, saying what is missing) and
      its spool may be cleaned up like any other. Events a failing compile holds back
      are not dropped from a page's session: they compile once the cause is fixed.

    Returns ``{"session", "page", "discarded": n events, "dropped_spool": bool}``.
    Audited (``unrendered.discard``). Raises Forbidden (not the owner or an admin),
    BadRequest (a prefix shorter than 8 or naming several), NotFound (no such session,
    or nothing of it to discard)."""
    ident = require_admin(memory, who, "unrendered.discard", session or "?", _REFUSAL)
    if not isinstance(session, str) or len(session) < 8:
        raise BadRequest("session: a session key (8 characters or more)", field="session")

    def job() -> WriteResult:
        keys = [k for k in list(memory.spool.sessions) if k.startswith(session)]
        if len(keys) > 1:
            raise BadRequest(f"session: {session!r} names {len(keys)} sessions", field="session")
        info = memory.spool.sessions.get(keys[0]) if keys else None
        entry = _entry(info) if info is not None else None
        if info is None or entry is None:
            raise NotFound(f"no session {session!r} with unrendered events")
        memory.sessions.backoff.succeeded(info.key)
        if not written_page(info.state):
            memory.spool.drop(info.key)
            memory.index.delete_spool_session(info.key)
            return WriteResult(value=(entry, int(entry["events"]), True))
        state = dict(info.state)
        held = [str(i) for i in state.get("unrendered") or []]
        if not held:
            raise NotFound(
                f"session {info.key[:12]} has a page; the events its failing compile holds "
                "back compile once the cause is fixed (see the server log)"
            )
        state["discarded"] = sorted({*(state.get("discarded") or []), *held})
        state["unrendered"] = []
        memory.spool.write_state(info.key, state)
        return WriteResult(value=(entry, len(held), False))

    try:
        entry, n, dropped = memory.writer.call(job).value
    except (BadRequest, NotFound) as exc:
        memory.audited(ident, "unrendered.discard", session, type(exc).__name__.lower())
        raise
    memory.audited(
        ident,
        "unrendered.discard",
        str(entry["session"]),
        "ok",
        events=n,
        dropped_spool=dropped,
        project=entry["project"],
    )
    return {
        "session": entry["session"],
        "page": entry["page"],
        "discarded": n,
        "dropped_spool": dropped,
    }
