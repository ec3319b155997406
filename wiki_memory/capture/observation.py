"""Harness hook payloads → :class:`Observation`.

The body of ``POST /v1/observations`` is one event object or a list of them::

    {"harness": "claude-code", "event": "PostToolUse", "session_id": "...",
     "project": "...", "cwd": "/home/u/proj", "event_id": "...", "ts": "ISO-8601",
     "payload": {...the harness's own hook JSON...}}

``cwd`` or ``project`` is required. Unknown fields and unknown events are accepted.
``project_from`` (optional, sent by the hook) says how the hook found ``project``;
``"none"`` with no ``project`` means the event belongs to the session's current project
(see :mod:`wiki_memory.capture.project`).
Event names are mapped to a small set of kinds (:data:`KINDS`) that the compiler
understands; the raw name is kept.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from wiki_memory.errors import BadRequest

#: harness event name → kind. Kinds: session_start, prompt, tool_pre, tool_post,
#: tool_failure, stop, subagent_stop, compact, session_end, notification, turn, other.
EVENT_KINDS: dict[str, str] = {
    "SessionStart": "session_start",
    "UserPromptSubmit": "prompt",
    "BeforeAgent": "prompt",
    "PreToolUse": "tool_pre",
    "BeforeTool": "tool_pre",
    "PostToolUse": "tool_post",
    "AfterTool": "tool_post",
    "PostToolUseFailure": "tool_failure",
    "Stop": "stop",
    "AfterAgent": "stop",
    "SubagentStop": "subagent_stop",
    "PreCompact": "compact",
    "PreCompress": "compact",
    "PostCompact": "compact",
    "SessionEnd": "session_end",
    "Notification": "notification",
    "agent-turn-complete": "turn",
    "StopFailure": "tool_failure",
}

KINDS = frozenset(EVENT_KINDS.values()) | {"other"}

#: payload fields the session compiler reads as text: a 400 names one that is not
_PAYLOAD_STRINGS = (
    "prompt",
    "tool_name",
    "tool_use_id",
    "source",
    "reason",
    "trigger",
    "last_assistant_message",
    "prompt_response",
    "last-assistant-message",
    "agent_type",
    "speaker",
)

_PROJECT_RE = re.compile(r"[^\w.\-]+", re.UNICODE)
_SAFE_ID_RE = re.compile(r"^[\w.:@+\-]{1,200}$", re.UNICODE)


class ObservationError(BadRequest):
    """400: a hook event that cannot be accepted; ``field`` names what was wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}", field=field)
        self.message = message


def project_name(value: str) -> str:
    """A project name safe as one path component: the last component of a path, cleaned.

    Raises ObservationError when nothing usable is left (``""``, ``..``, ``/``).
    """
    last = value.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].strip()
    clean = _PROJECT_RE.sub("-", last).strip(".-")
    if not clean:
        raise ObservationError("project", f"cannot make a project name from {value!r}")
    return clean[:80]


#: accepted event times: 1970-01-01 up to 9999-12-30 (UTC epoch seconds)
TS_MIN = 0.0
TS_MAX = 253402128000.0


def parse_ts(value: Any) -> float | None:
    """An ISO-8601 string or epoch number (seconds, or milliseconds above 1e11) → UTC epoch
    seconds; None when unreadable, not finite, or outside 1970 … 9999 (:data:`TS_MIN`,
    :data:`TS_MAX`), so that every accepted time can be rendered and compiled."""
    if value is None:
        return None
    v: float
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            v = float(value)
        except OverflowError:
            return None
        if v > 1e11:
            v = v / 1000.0
    elif isinstance(value, str) and value.strip():
        s = value.strip().replace("Z", "+00:00")
        try:
            dt = datetime.fromisoformat(s)
            if dt.tzinfo is None:
                dt = dt.replace(tzinfo=UTC)
            v = dt.timestamp()
        except (ValueError, OverflowError):
            return None
    else:
        return None
    if not math.isfinite(v) or not TS_MIN <= v <= TS_MAX:
        return None
    return v


_OFFSET_TAIL = re.compile(r"[T ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?([+-])(\d\d):?(\d\d)$")


def ts_offset(value: Any) -> int | None:
    """The UTC offset (minutes east, -1439 … 1439) an ISO-8601 ``ts`` string ends with
    (``2026-03-15T00:20:00+09:00`` → 540); None for ``Z``, no offset or a number."""
    if not isinstance(value, str):
        return None
    m = _OFFSET_TAIL.search(value.strip())
    if m is None:
        return None
    minutes = int(m[2]) * 60 + int(m[3])
    return (-minutes if m[1] == "-" else minutes) if minutes < 1440 else None


#: the last second :func:`iso` wrote: (whole epoch seconds, its text)
_ISO_LAST: tuple[int, str] = (-1, "")


def iso(ts: float) -> str:
    """UTC epoch seconds → ``YYYY-MM-DDTHH:MM:SSZ``. The last second's text is reused
    (events arrive many to a second), except within a microsecond of the next second,
    which the conversion may round up to."""
    global _ISO_LAST
    whole = int(ts)
    last = _ISO_LAST
    if whole == last[0] and ts - whole < 0.999998:
        return last[1]
    text = datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if ts - whole < 0.999998:
        _ISO_LAST = (whole, text)
    return text


@dataclass
class SessionMeta:
    """Who and what a session is: its spool ``key`` (:func:`session_key`), the
    ``harness`` and its ``session_id``, the ``project`` ("" for none), the ``user``, the
    first event's ``cwd`` and ``started`` (UTC epoch seconds). The spool's
    :class:`~wiki_memory.capture.spool.SessionInfo` adds what it has read of the
    session; the compiler needs only this part."""

    key: str
    harness: str
    session_id: str
    project: str
    user: str
    cwd: str | None
    started: float


@dataclass
class Observation:
    """One accepted hook event, sanitized. ``ts`` is the event time (UTC epoch seconds)."""

    harness: str
    event: str
    kind: str
    session_id: str
    project: str | None
    cwd: str | None
    event_id: str | None
    ts: float
    payload: dict[str, Any]
    user: str = ""
    received: float = field(default_factory=time.time)
    obs_id: str = ""
    #: how the sender found ``project`` (``config``, ``git``, ``explicit``, or ``none``:
    #: it found none, so the session's current project applies); "" for a sender that
    #: does not say (an HTTP client; the server resolves ``cwd`` itself). Not stored.
    project_from: str = ""
    #: the UTC offset (minutes east) the sender wrote in ``ts`` (``+09:00``), None when
    #: it wrote none or ``Z``: the session page shows its times in it beside UTC
    offset: int | None = None
    #: the repository's id the hook sent (``root:<sha>``, ``origin:<host/owner/name>``,
    #: ``new:<random>``; :mod:`wiki_memory.core.repos`), its origin, and a provisional
    #: id it had before its first commit (joined to it); None when not sent
    repo_id: str | None = None
    repo_origin: str | None = None
    repo_prev: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "obs_id": self.obs_id,
            "harness": self.harness,
            "event": self.event,
            "kind": self.kind,
            "session_id": self.session_id,
            "project": self.project,
            "cwd": self.cwd,
            "event_id": self.event_id,
            "ts": self.ts,
            "received": self.received,
            "user": self.user,
            "payload": self.payload,
        } | {
            k: v
            for k, v in (
                ("offset", self.offset),
                ("repo_id", self.repo_id),
                ("repo_origin", self.repo_origin),
                ("repo_prev", self.repo_prev),
            )
            if v is not None
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Observation:
        return cls(
            harness=d["harness"],
            event=d["event"],
            kind=d.get("kind") or EVENT_KINDS.get(d["event"], "other"),
            session_id=d["session_id"],
            project=d.get("project"),
            cwd=d.get("cwd"),
            event_id=d.get("event_id"),
            ts=float(d["ts"]),
            payload=d.get("payload") or {},
            user=d.get("user", ""),
            received=float(d.get("received", 0)),
            obs_id=d.get("obs_id", ""),
            offset=int(d["offset"]) if isinstance(d.get("offset"), int) else None,
            repo_id=d.get("repo_id"),
            repo_origin=d.get("repo_origin"),
            repo_prev=d.get("repo_prev"),
        )


def _str_field(d: dict[str, Any], name: str, required: bool) -> str | None:
    v = d.get(name)
    if v is None or v == "":
        if required:
            raise ObservationError(name, "is required")
        return None
    if not isinstance(v, str):
        raise ObservationError(name, f"must be a string, got {type(v).__name__}")
    if len(v) > 4096:
        raise ObservationError(name, "is longer than 4096 characters")
    return v


def parse_event(d: Any, user: str, now: float | None = None) -> Observation:
    """Validate one event object and build its :class:`Observation` (not yet sanitized).

    Fields fall back to the harness payload (``session_id``, ``cwd``, ``hook_event_name``,
    Codex notify's ``thread-id`` and ``type``). Raises ObservationError naming the field.
    """
    if not isinstance(d, dict):
        raise ObservationError("body", "each event must be a JSON object")
    payload = d.get("payload", {})
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise ObservationError("payload", "must be a JSON object (the harness's hook JSON)")
    for k in _PAYLOAD_STRINGS:
        v = payload.get(k)
        if v is not None and not isinstance(v, str):
            # what the compiler reads as text is checked here, before the 2xx: an event
            # accepted is an event its page can render
            raise ObservationError(f"payload.{k}", f"must be a string, got {type(v).__name__}")
    harness = _str_field(d, "harness", True)
    event = _str_field(d, "event", False) or payload.get("hook_event_name") or payload.get("type")
    if not isinstance(event, str) or not event:
        raise ObservationError("event", "is required")
    session_id = (
        _str_field(d, "session_id", False) or payload.get("session_id") or payload.get("thread-id")
    )
    if not isinstance(session_id, str) or not session_id:
        raise ObservationError("session_id", "is required")
    if not _SAFE_ID_RE.match(session_id):
        raise ObservationError("session_id", "must be 1-200 letters, digits or ._:@+-")
    project = _str_field(d, "project", False)
    cwd = _str_field(d, "cwd", False) or (
        payload.get("cwd") if isinstance(payload.get("cwd"), str) else None
    )
    if not project and not cwd:
        raise ObservationError("cwd", "cwd or project is required")
    if project:
        project = project_name(project)
    project_from = _str_field(d, "project_from", False) or ""
    event_id = _str_field(d, "event_id", False)
    if event_id is None:
        tuid = payload.get("tool_use_id")
        if isinstance(tuid, str) and tuid:
            event_id = f"{event}:{tuid}"
    ts_raw = d.get("ts", payload.get("timestamp"))
    ts = parse_ts(ts_raw)
    if ts_raw is not None and ts is None:
        raise ObservationError(
            "ts", f"not an ISO-8601 time or epoch number between 1970 and 9999: {ts_raw!r}"
        )
    now = time.time() if now is None else now
    return Observation(
        harness=harness or "",
        event=event,
        kind=EVENT_KINDS.get(event, "other"),
        session_id=session_id,
        project=project,
        cwd=cwd,
        event_id=event_id,
        ts=ts if ts is not None else now,
        payload=payload,
        user=user,
        received=now,
        project_from=project_from,
        offset=ts_offset(ts_raw) if ts is not None else None,
        repo_id=_repo_field(d, "repo_id"),
        repo_origin=_repo_field(d, "repo_origin"),
        repo_prev=_repo_field(d, "repo_prev"),
    )


def _repo_field(d: dict[str, Any], name: str) -> str | None:
    """A repository field of an event: a string of at most 200 printable characters
    without spaces (``repo_id``, ``repo_origin``, ``repo_prev``), else None."""
    v = _str_field(d, name, False)
    if v is None:
        return None
    if len(v) > 200 or not v.isprintable() or any(c.isspace() for c in v):
        raise ObservationError(name, "must be at most 200 printable characters, no spaces")
    return v


@lru_cache(maxsize=4096)
def session_key(user: str, harness: str, session_id: str) -> str:
    """The spool's key for a session: 24 hex of SHA-1 over user, harness and session id
    (remembered for the last 4,096 sessions: every event of a session asks for it,
    several times)."""
    h = hashlib.sha1(f"{user}\0{harness}\0{session_id}".encode()).hexdigest()
    return h[:24]


def dedup_key(obs: Observation) -> str | None:
    """The durable dedup key of an observation with an ``event_id`` (32 hex), else None."""
    if not obs.event_id:
        return None
    raw = f"{obs.user}\0{obs.harness}\0{obs.session_id}\0{obs.event_id}"
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


#: ``json.dumps(v, ensure_ascii=False)`` without making its encoder at every call
_TEXT_JSON = json.JSONEncoder(ensure_ascii=False)


def observation_text(obs: Observation) -> str:
    """The searchable text of one observation (prompt, reply, tool input/output, error)."""
    p = obs.payload
    parts: list[str] = []
    for k in (
        "speaker",
        "prompt",
        "last_assistant_message",
        "prompt_response",
        "last-assistant-message",
        "tool_name",
        "error",
        "message",
    ):
        v = p.get(k)
        if isinstance(v, str) and v:
            parts.append(v)
    msgs = p.get("input-messages")
    if isinstance(msgs, list):
        parts.extend(m for m in msgs if isinstance(m, str))
    for k in ("tool_input", "tool_response"):
        v = p.get(k)
        if v not in (None, "", {}):
            s = v if isinstance(v, str) else _TEXT_JSON.encode(v)
            parts.append(s[:4000])
    return "\n".join(parts)
