"""Claim-once handoffs: typed pages that one agent leaves and exactly one other takes up.

A handoff is a page, ``projects/<project>/handoffs/<id>.md`` (or, when personal,
``people/<user>/handoffs/<id>.md``: the owner's private folder, which no other user's
list, show, brief or recall sees). Its frontmatter holds the lasting state; see
``docs/handoffs.md`` for the protocol.

States: ``open`` → ``offered`` → ``claimed`` → ``done``; ``open``/``offered`` →
``cancelled``; ``open``/``offered`` → ``expired`` once ``expires`` has passed. An offer
is a lease to one session (``lease_seconds``, default 30 min) kept in memory only:
losing it (a restart) just reopens the handoff. Every other state lives in the page.

Every transition is a compare-and-set on the single writer thread (the writer runs one
job at a time, so the state a transition checks is the state it changes), and each one
is committed before the call returns. The claimant is a (user, harness, session) triple.

Errors: :class:`~wiki_memory.core.memory.NotFound` (no such handoff, or one the caller may not
see), :class:`HandoffConflict` (409: the state forbids the action; the message names the
holder or says expired/cancelled/done), :class:`HandoffForbidden` (403: not the
creator/claimant), ``ValueError`` (400: a bad field).
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import threading
import time
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wiki_memory.capture.observation import Observation, iso, parse_ts, project_name
from wiki_memory.capture.sanitize import redact_obj
from wiki_memory.capture.spool import SessionInfo, session_key
from wiki_memory.core.memory import replace_section
from wiki_memory.core.writer import WriteResult
from wiki_memory.errors import Conflict, Forbidden, NotFound, StateConflict
from wiki_memory.identity import Identity
from wiki_memory.wiki import compiler
from wiki_memory.wiki.compiler import escape_controls
from wiki_memory.wiki.frontmatter import FrontmatterError, dump_page, set_keys
from wiki_memory.wiki.page import parse_page

if TYPE_CHECKING:
    from wiki_memory.config import Settings
    from wiki_memory.core.memory import Memory

log = logging.getLogger("wiki_memory.core.handoffs")

#: stored states (``offered`` is never stored: it is an open handoff with a live lease)
STATES = ("open", "offered", "claimed", "done", "cancelled", "expired")
#: frontmatter keys the server owns on a handoff page (a person may edit any other)
OWNED_KEYS = (
    "type",
    "id",
    "title",
    "created",
    "updated",
    "project",
    "status",
    "user",
    "harness",
    "session",
    "to",
    "visibility",
    "expires",
    "claimed_by",
    "claimed_harness",
    "claimed_session",
    "claimed_at",
    "done_at",
    "done_by",
    "cancelled_at",
    "cancelled_by",
    "superseded_by",
    "supersedes",
    "auto",
    "signals",
    "session_page",
)
#: body sections: (JSON name, heading). The server writes them when it creates the page,
#: and afterwards only ``## Outcome`` (on complete, when a note is given).
SECTIONS = (
    ("where_we_left_off", "Where we left off"),
    ("what_failed", "What failed"),
    ("open_questions", "Open questions"),
    ("next_steps", "Next steps"),
    ("files", "Files"),
    ("outcome", "Outcome"),
)

ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")
_NUM_ID_RE = re.compile(r"^H-(\d+)$")
_TO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,79}$")
_MAX_TEXT = 20_000

#: a line of an assistant message that announces work still to do (anchored at the line
#: start, with a colon, so that chat such as "I'll go there next week" never matches)
NEXT_STEP_RE = re.compile(
    r"""^\s*(?:[-*+]\s+|\d+[.)]\s+)?(?:\#{1,6}\s*)?(?:\*\*|__)?(?:
        (?:next\s+steps?|to-?do|remaining(?:\s+(?:work|steps|tasks))?|still\s+to\s+do
          |left\s+to\s+do|open\s+items|follow[- ]?ups?|not\s+(?:yet\s+)?done)
        (?:\*\*|__)?\s*[:：]
      | (?-i:TODO)\b
      | \[\s\]\s+\S
    )""",
    re.X | re.I,
)


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class HandoffConfig:
    """Tunables. Units: seconds; counts.

    Read from ``<data_dir>/config.toml`` keys ``handoff_lease_seconds``,
    ``handoff_expires_seconds``, ``handoff_max_offers``, ``handoff_auto``,
    ``brief_recent_sessions``, ``brief_pinned_max_tokens``, then overridden by the env
    vars ``WIKI_MEMORY_HANDOFF_LEASE_SECONDS`` etc. (same names, upper case).
    """

    lease_seconds: float = 30 * 60.0
    expires_seconds: float = 14 * 24 * 3600.0
    max_offers: int = 3
    auto: bool = True
    recent_sessions: int = 5
    pinned_max_tokens: int = 400

    _KEYS = {
        "lease_seconds": "handoff_lease_seconds",
        "expires_seconds": "handoff_expires_seconds",
        "max_offers": "handoff_max_offers",
        "auto": "handoff_auto",
        "recent_sessions": "brief_recent_sessions",
        "pinned_max_tokens": "brief_pinned_max_tokens",
    }

    @classmethod
    def load(cls, settings: Settings | None) -> HandoffConfig:
        """Defaults < config.toml < environment. Raises ValueError for a bad value."""
        values: dict[str, Any] = {}
        if settings is not None:
            cfg = settings.data_dir / "config.toml"
            if cfg.exists():
                try:
                    raw = tomllib.loads(cfg.read_text(encoding="utf-8"))
                except (tomllib.TOMLDecodeError, OSError):
                    raw = {}
                for attr, key in cls._KEYS.items():
                    if key in raw:
                        values[attr] = raw[key]
        for attr, key in cls._KEYS.items():
            env = os.environ.get("WIKI_MEMORY_" + key.upper())
            if env is not None and env.strip():
                values[attr] = env
        base = cls()
        clean: dict[str, Any] = {}
        for attr, v in values.items():
            like = getattr(base, attr)
            if isinstance(like, bool):
                clean[attr] = v if isinstance(v, bool) else str(v).strip().lower() in _TRUE
            elif isinstance(like, int):
                clean[attr] = int(v)
            else:
                clean[attr] = float(v)
        return replace(base, **clean)


_TRUE = {"1", "true", "yes", "on"}


# --------------------------------------------------------------------------- errors


class HandoffConflict(StateConflict):
    """409: the handoff's state forbids the action.

    ``code``: ``claimed`` (held by another: ``holder`` names it), ``offered`` (leased to
    another session), ``done``, ``cancelled``, ``expired``, ``not_claimed`` (complete or
    release of a handoff nobody holds), ``unreadable`` (its frontmatter cannot be read).
    ``status`` is the handoff's effective status.
    """

    def __init__(
        self,
        code: str,
        message: str,
        status: str,
        holder: dict[str, Any] | None = None,
    ) -> None:
        extra: dict[str, Any] = {"state": status}
        if holder is not None:
            extra["holder"] = holder
        super().__init__(message, **extra)
        self.code = code
        self.status = status
        self.holder = holder

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": self.code, "message": str(self), "state": self.status}
        if self.holder is not None:
            out["holder"] = self.holder
        return out


class HandoffForbidden(Forbidden):
    """403: the caller may see the handoff but not do this (cancel by someone other than
    its creator or the wiki's owner)."""


# --------------------------------------------------------------------------- model


@dataclass(frozen=True)
class Claimant:
    """Who acts: the token's user plus the harness and session the request names."""

    user: str
    harness: str = "api"
    session: str = ""

    def describe(self) -> str:
        sess = f" session {self.session}" if self.session else ""
        return f"{self.user} ({self.harness}{sess})"

    def to_json(self) -> dict[str, str]:
        return {"user": self.user, "harness": self.harness, "session": self.session}


@dataclass
class Lease:
    """An offer: ``holder`` may confirm until ``until`` (UTC epoch seconds)."""

    holder: Claimant
    until: float


@dataclass
class Handoff:
    """A parsed handoff page. ``meta`` is its JSON-safe frontmatter."""

    id: str
    path: str
    meta: dict[str, Any]
    sections: dict[str, str] = field(default_factory=dict)
    title: str = ""

    @property
    def stored_status(self) -> str:
        return str(self.meta.get("status") or "open")

    @property
    def project(self) -> str | None:
        p = self.meta.get("project")
        return str(p) if p else _project_of_path(self.path)

    @property
    def owner(self) -> str:
        return str(self.meta.get("user") or "")

    @property
    def expires(self) -> float | None:
        v = self.meta.get("expires")
        return parse_ts(v) if v not in (None, "") else None

    @property
    def personal(self) -> bool:
        return (
            str(self.meta.get("visibility") or "project") == "personal"
            or _people_user(self.path) is not None
        )

    def holder(self) -> Claimant | None:
        by = self.meta.get("claimed_by")
        if not by:
            return None
        return Claimant(
            str(by),
            str(self.meta.get("claimed_harness") or ""),
            str(self.meta.get("claimed_session") or ""),
        )


def _project_of_path(path: str) -> str | None:
    parts = path.split("/")
    return parts[1] if len(parts) >= 3 and parts[0] == "projects" else None


def _people_user(path: str) -> str | None:
    parts = path.split("/")
    return parts[1] if len(parts) >= 3 and parts[0] == "people" else None


def parse_handoff(raw: bytes, path: str) -> Handoff | None:
    """The handoff in ``raw``, or None when the page is not a handoff (``type``)."""
    parsed = parse_page(raw, path)
    meta = parsed.metadata
    if str(meta.get("type") or "") != "handoff":
        return None
    stem = path.rsplit("/", 1)[-1].removesuffix(".md")
    sections: dict[str, str] = {}
    by_heading = {h: k for k, h in SECTIONS}
    for sec in parsed.sections:
        key = by_heading.get(sec.anchor)
        if key is not None and sec.level == 2:
            sections[key] = sec.text.strip()
    return Handoff(
        id=str(meta.get("id") or stem),
        path=path,
        meta=meta,
        sections=sections,
        title=str(meta.get("title") or parsed.title or stem),
    )


def next_step_lines(text: str, limit: int = 12) -> list[str]:
    """Lines of ``text`` that announce work still to do (``Next steps:``, ``TODO``,
    ``- [ ] …``), with the lines that follow a ``Next steps:`` heading; at most ``limit``."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines) and len(out) < limit:
        ln = lines[i]
        if NEXT_STEP_RE.match(ln):
            out.append(ln.strip())
            # a heading-like "Next steps:" with nothing after the colon: take its list
            if ln.rstrip().endswith((":", "：")):
                j = i + 1
                while j < len(lines) and len(out) < limit:
                    nxt = lines[j].strip()
                    if not nxt:
                        if j > i + 1:
                            break
                        j += 1
                        continue
                    if not re.match(r"^(?:[-*+]|\d+[.)])\s+", nxt):
                        break
                    out.append(nxt)
                    j += 1
                i = j
                continue
        i += 1
    return out


# --------------------------------------------------------------------------- signals


@dataclass
class SessionSignals:
    """Signs of unfinished work in a session's observations (all zero-LLM)."""

    failed_tool: tuple[str, str, str] | None = None  # (tool, command or "", error)
    unanswered_prompt: str | None = None
    next_steps: list[str] = field(default_factory=list)
    late_compaction: bool = False
    last_prompt: str = ""
    last_reply: str = ""
    open_questions: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        out = []
        if self.failed_tool:
            out.append("tool_failed")
        if self.unanswered_prompt is not None:
            out.append("unanswered_prompt")
        if self.next_steps:
            out.append("next_steps")
        if self.late_compaction:
            out.append("late_compaction")
        return out


_REPLY_KINDS = {"stop", "turn"}
_TOOL_RESULT_KINDS = {"tool_post", "tool_failure"}


def session_signals(observations: Sequence[Observation]) -> SessionSignals:
    """Look for signs of unfinished work, in event-time order:

    - the last tool result is a failure (``PostToolUseFailure``, ``StopFailure``, or a
      tool response carrying an error / non-zero exit code);
    - the last prompt got no answer (no ``Stop``/turn after it) while the session shows
      agent activity (a tool call or a reply); prompts with a ``speaker`` are dialogue
      transcripts, not requests to the agent, and never count;
    - lines in the last assistant message that announce work still to do
      (:data:`NEXT_STEP_RE`);
    - the context was compacted and no turn finished after it.
    """
    sig = SessionSignals()
    order = sorted(enumerate(observations), key=lambda t: (t[1].ts, t[0]))
    obs = [o for _, o in order]
    last_tool: Observation | None = None
    last_prompt_i: int | None = None
    last_reply_i: int | None = None
    last_compact_i: int | None = None
    activity = False
    for i, o in enumerate(obs):
        k = o.kind
        if k in _TOOL_RESULT_KINDS:
            last_tool = o
            activity = True
        elif k == "tool_pre":
            activity = True
        elif k == "prompt":
            speaker = o.payload.get("speaker")
            if not (isinstance(speaker, str) and speaker):
                last_prompt_i = i
                sig.last_prompt = _prompt_of(o)
        elif k in _REPLY_KINDS:
            activity = True
            last_reply_i = i
            text = compiler._reply_text(o)
            if k == "turn":
                p = compiler._prompt_text(o)
                if p:
                    sig.last_prompt = p
            if text:
                sig.last_reply = text
        elif k == "compact":
            last_compact_i = i
        for f in compiler._files_of(o):
            if f not in sig.files:
                sig.files.append(f)
    if last_tool is not None:
        err = compiler._failure_of(last_tool)
        if err:
            name = str(last_tool.payload.get("tool_name") or last_tool.event)
            sig.failed_tool = (name, compiler._command_of(last_tool) or "", err)
    if (
        last_prompt_i is not None
        and activity
        and (last_reply_i is None or last_reply_i < last_prompt_i)
    ):
        sig.unanswered_prompt = sig.last_prompt
    if sig.last_reply and last_reply_i is not None:
        # only the reply that ended the session's last turn counts
        sig.next_steps = next_step_lines(sig.last_reply)
        sig.open_questions = [
            ln.strip()
            for ln in sig.last_reply.splitlines()
            if ln.strip().endswith("?") and len(ln.strip()) > 3
        ][:5]
    if last_compact_i is not None and (last_reply_i is None or last_reply_i < last_compact_i):
        sig.late_compaction = True
    return sig


def _prompt_of(o: Observation) -> str:
    return compiler._prompt_text(o)


# --------------------------------------------------------------------------- rendering


def _bullets(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    items = [str(v).strip() for v in value if str(v).strip()]
    return "\n".join(f"- {v}" for v in items)


def _link_alias(text: str) -> str:
    return " ".join(text.replace("|", "/").replace("]", ")").replace("[", "(").split())[:80]


def session_link(page_path: str, title: str | None = None) -> str:
    """An Obsidian wikilink to a session page: ``[[projects/p/sessions/x|title]]``."""
    target = page_path.removesuffix(".md")
    return f"[[{target}|{_link_alias(title)}]]" if title else f"[[{target}]]"


def render_page(meta: dict[str, Any], title: str, sections: dict[str, str]) -> bytes:
    """A new handoff page: frontmatter in :data:`OWNED_KEYS` order, ``# title``, and the
    body sections in :data:`SECTIONS` order (empty ones get ``(none)``; ``Outcome`` is
    left out until there is one)."""
    parts = [f"# {_heading(title)}"]
    for key, heading in SECTIONS:
        text = sections.get(key, "").strip()
        if key == "outcome" and not text:
            continue
        parts.append(f"## {heading}\n\n{text or '(none)'}")
    body = escape_controls("\n\n".join(parts) + "\n")
    meta = {k: escape_controls(v) if isinstance(v, str) else v for k, v in meta.items()}
    return dump_page(meta, body).encode("utf-8")


def _heading(title: str) -> str:
    return " ".join(title.split()).lstrip("#").strip() or "Handoff"


def _clip(text: str, limit: int) -> str:
    return compiler.clip_bytes(text, limit)


# --------------------------------------------------------------------------- service


class HandoffService:
    """The handoff operations every face calls (HTTP, CLI through HTTP, MCP, web)."""

    def __init__(self, memory: Memory, config: HandoffConfig | None = None) -> None:
        self.memory = memory
        self.config = config or HandoffConfig.load(getattr(memory, "settings", None))
        self.wiki_dir: Path = memory.wiki_dir
        self._lock = threading.Lock()
        self._leases: dict[str, Lease] = {}
        self._next_num: int | None = None
        self._paths: dict[str, str] = {}
        self.clock: Callable[[], float] = time.time

    # -- locating pages ------------------------------------------------------------------
    def _handoff_files(self) -> Iterable[Path]:
        yield from self.wiki_dir.glob("projects/*/handoffs/*.md")
        yield from self.wiki_dir.glob("people/*/handoffs/*.md")

    def locate(self, hid: str) -> str | None:
        """The wiki-relative path of handoff ``hid`` (file name ``<hid>.md`` under a
        ``handoffs/`` folder), or None. Raises ValueError for a malformed id."""
        if not isinstance(hid, str) or not ID_RE.match(hid):
            raise ValueError(f"not a handoff id: {hid!r}")
        cached = self._paths.get(hid)
        if cached and (self.wiki_dir / cached).is_file() and self.memory.scope.plain(cached):
            return cached
        found = sorted(
            p.relative_to(self.wiki_dir).as_posix()
            for pattern in (f"projects/*/handoffs/{hid}.md", f"people/*/handoffs/{hid}.md")
            for p in self.wiki_dir.glob(pattern)
            if p.is_file() and self.memory.scope.plain(p.relative_to(self.wiki_dir).as_posix())
        )
        if not found:
            self._paths.pop(hid, None)
            return None
        if len(found) > 1:
            log.warning("handoff id %s names %d pages; using %s", hid, len(found), found[0])
        self._paths[hid] = found[0]
        return found[0]

    def _read(self, path: str) -> bytes | None:
        """The bytes of a handoff page as the server itself reads it (through the scope
        rule's file checks: no symlink on the way, one hard link), or None."""
        try:
            return self.memory.scope.read_file(path).data
        except (NotFound, ValueError):
            return None

    def _may_see(self, path: str, meta: dict[str, Any], user: Identity | str | None) -> bool:
        """The scope rule (:mod:`wiki_memory.core.scope`) for a handoff page."""
        return self.memory.scope.visible(user, path, meta)

    def _load(self, hid: str, user: str | None) -> Handoff:
        path = self.locate(hid)
        raw = self._read(path) if path else None
        h = parse_handoff(raw, path) if raw is not None and path else None
        if h is None or not self._may_see(h.path, h.meta, user):
            raise NotFound(f"no such handoff: {hid}")
        return h

    def _new_id(self) -> str:
        """The next free ``H-<n>`` (4+ digits); writer thread only."""
        if self._next_num is None:
            top = 0
            for p in self._handoff_files():
                m = _NUM_ID_RE.match(p.stem)
                if m:
                    top = max(top, int(m.group(1)))
            self._next_num = top + 1
        while True:
            hid = f"H-{self._next_num:04d}"
            self._next_num += 1
            if self.locate(hid) is None:
                return hid

    def _new_personal_id(self) -> str:
        """A fresh ``P-<8 hex>`` for a personal handoff (random, so it counts nothing)."""
        while True:
            hid = f"P-{secrets.token_hex(4)}"
            if self.locate(hid) is None:
                return hid

    # -- leases ----------------------------------------------------------------------------
    def _live_lease(self, hid: str, now: float) -> Lease | None:
        with self._lock:
            lease = self._leases.get(hid)
            if lease is not None and lease.until <= now:
                del self._leases[hid]
                return None
            return lease

    def _drop_lease(self, hid: str) -> None:
        with self._lock:
            self._leases.pop(hid, None)

    def release_offers(self, who: Claimant, ids: Iterable[str]) -> None:
        """Give back offers ``who`` holds on ``ids`` (a brief that could not show them)."""
        with self._lock:
            for hid in ids:
                lease = self._leases.get(hid)
                if lease is not None and lease.holder == who:
                    del self._leases[hid]

    # -- views ---------------------------------------------------------------------------
    def status_of(self, h: Handoff, now: float | None = None) -> str:
        """The effective status: stored status, ``offered`` while a lease runs, and
        ``expired`` for an open handoff past ``expires``."""
        now = self.clock() if now is None else now
        st = h.stored_status
        if st in ("open", "offered"):
            exp = h.expires
            if exp is not None and exp <= now:
                return "expired"
            return "offered" if self._live_lease(h.id, now) else "open"
        return st

    def to_json(self, h: Handoff, full: bool = False, now: float | None = None) -> dict[str, Any]:
        """The JSON form: ``{id, path, title, project, status, stored_status, user, harness,
        session, to, visibility, created, updated, expires, claimed_by, claimed_harness,
        claimed_session, claimed_at, done_at, auto, session_page, offered_to}`` and, with
        ``full``, ``sections`` (name → markdown) and ``metadata`` (all frontmatter)."""
        now = self.clock() if now is None else now
        m = h.meta
        lease = self._live_lease(h.id, now) if h.stored_status in ("open", "offered") else None
        out: dict[str, Any] = {
            "id": h.id,
            "path": h.path,
            "title": h.title,
            "project": h.project,
            "status": self.status_of(h, now),
            "stored_status": h.stored_status,
            "user": m.get("user"),
            "harness": m.get("harness"),
            "session": m.get("session"),
            "to": m.get("to") or "any",
            "visibility": "personal" if h.personal else "project",
            "created": m.get("created"),
            "updated": m.get("updated"),
            "expires": m.get("expires"),
            "claimed_by": m.get("claimed_by"),
            "claimed_harness": m.get("claimed_harness"),
            "claimed_session": m.get("claimed_session"),
            "claimed_at": m.get("claimed_at"),
            "done_at": m.get("done_at"),
            "auto": bool(m.get("auto")),
            "session_page": m.get("session_page"),
            "offered_to": (
                {**lease.holder.to_json(), "until": iso(lease.until)} if lease else None
            ),
        }
        if m.get("superseded_by"):
            out["superseded_by"] = m.get("superseded_by")
        if full:
            out["sections"] = dict(h.sections)
            out["metadata"] = m
        return out

    def _indexed(self, project: str | None) -> list[dict[str, Any]]:
        """Handoff rows from the index (kind ``handoff``), newest first."""
        rows: list[dict[str, Any]] = []
        offset = 0
        while True:
            batch = self.memory.index.list_pages(
                project=project, kind="handoff", limit=1000, offset=offset
            )
            rows.extend(batch)
            if len(batch) < 1000:
                return rows
            offset += 1000

    def list_handoffs(
        self,
        user: str | None,
        *,
        project: str | None = None,
        status: str | None = None,
        limit: int = 200,
    ) -> list[dict[str, Any]]:
        """Handoffs ``user`` may see, newest first, as :meth:`to_json` dicts. ``status``
        filters on the effective status (``offered`` and ``expired`` included).
        Raises ValueError for an unknown status."""
        if status is not None and status not in STATES:
            raise ValueError(f"status must be one of {', '.join(STATES)}")
        now = self.clock()
        out: list[dict[str, Any]] = []
        stale: list[str] = []
        for row in self._indexed(project):
            meta = row.get("meta") or {}
            if not self._may_see(row["path"], meta, user):
                continue
            stem = row["path"].rsplit("/", 1)[-1].removesuffix(".md")
            h = Handoff(
                id=str(meta.get("id") or stem),
                path=row["path"],
                meta=meta,
                title=str(meta.get("title") or row.get("title") or stem),
            )
            j = self.to_json(h, now=now)
            if j["status"] == "expired" and h.stored_status in ("open", "offered"):
                stale.append(h.id)
            if status is None or j["status"] == status:
                out.append(j)
            if len(out) >= limit:
                break
        if stale:
            self.memory.writer.submit(lambda: self._persist_expired(stale))
        return out

    def show(self, user: str | None, hid: str) -> dict[str, Any]:
        """One handoff with its sections and the page's markdown (``content``).
        Raises NotFound (also for a handoff the caller may not see)."""
        h = self._load(hid, user)
        out = self.to_json(h, full=True)
        raw = self._read(h.path) or b""
        out["content"] = raw.decode("utf-8", errors="replace")
        return out

    # -- create --------------------------------------------------------------------------
    def create(
        self,
        user: str,
        *,
        project: str,
        title: str,
        harness: str | None = None,
        session_id: str | None = None,
        to: str | None = None,
        visibility: str | None = None,
        expires: str | float | None = None,
        expires_in_seconds: float | None = None,
        where_we_left_off: str | None = None,
        what_failed: str | None = None,
        open_questions: str | list[str] | None = None,
        next_steps: str | list[str] | None = None,
        files: list[str] | str | None = None,
        session_page: str | None = None,
    ) -> dict[str, Any]:
        """Leave a handoff; returns it as :meth:`to_json` (``full``). Text fields are
        sanitized (secrets redacted) before anything is written. ``expires``: ISO-8601 or
        epoch seconds in the future; else ``expires_in_seconds``; else the default
        (``expires_seconds``, 14 days). The page links the session page of
        (user, harness, session_id) when one exists. Raises ValueError for a bad field."""
        proj = project_name(_req_str(project, "project"))
        if proj != project:
            raise ValueError(f"project: {project!r} is not a valid project name (try {proj!r})")
        title_s = " ".join(_req_str(title, "title").split())[:200]
        now = self.clock()
        vis = visibility or "project"
        if vis not in ("project", "personal"):
            raise ValueError("visibility must be 'project' or 'personal'")
        target = to or "any"
        if not _TO_RE.match(target):
            raise ValueError("to must be 'any', a harness name or a user name")
        exp = _expiry(expires, expires_in_seconds, now, self.config.expires_seconds)
        who = Claimant(user, harness or "api", session_id or "")
        page = session_page or self._session_page_of(who)
        sections = {
            "where_we_left_off": _opt_text(where_we_left_off, "where_we_left_off"),
            "what_failed": _opt_text(what_failed, "what_failed"),
            "open_questions": _bullets(_opt_list(open_questions, "open_questions")),
            "next_steps": _bullets(_opt_list(next_steps, "next_steps")),
            "files": _bullets([f"`{f.replace('`', '')}`" for f in _opt_list(files, "files") or []]),
        }
        sections = {k: redact_obj(v)[0] for k, v in sections.items()}
        title_s = redact_obj(title_s)[0]
        if page:
            link = f"From session {session_link(page, None)}."
            sections["where_we_left_off"] = (
                f"{link}\n\n{sections['where_we_left_off']}"
                if sections["where_we_left_off"]
                else link
            )

        def job() -> WriteResult:
            h = self._write_new(
                who,
                project=proj,
                title=title_s,
                to=target,
                visibility=vis,
                expires=exp,
                sections=sections,
                session_page=page,
                now=now,
                auto=False,
            )
            return WriteResult(value=h, commit_now=True)

        res = self.memory.writer.call(job)
        return self.to_json(res.value, full=True)

    def _write_new(
        self,
        who: Claimant,
        *,
        project: str,
        title: str,
        to: str,
        visibility: str,
        expires: float,
        sections: dict[str, str],
        session_page: str | None,
        now: float,
        auto: bool,
        signals: list[str] | None = None,
        supersedes: list[str] | None = None,
    ) -> Handoff:
        """Write a new handoff page (writer thread only); returns it."""
        # a personal handoff takes no number from the shared sequence: a gap there would
        # tell other users that a handoff they cannot see exists (invariant 9)
        hid = self._new_personal_id() if visibility == "personal" else self._new_id()
        path = (
            f"people/{who.user}/handoffs/{hid}.md"
            if visibility == "personal"
            else f"projects/{project}/handoffs/{hid}.md"
        )
        meta: dict[str, Any] = {
            "type": "handoff",
            "id": hid,
            "title": title,
            "created": iso(now),
            "updated": iso(now),
            "project": project,
            "status": "open",
            "user": who.user,
            "harness": who.harness,
            "session": who.session,
            "to": to,
            "visibility": visibility,
            "expires": iso(expires),
            "claimed_by": None,
            "claimed_harness": None,
            "claimed_session": None,
            "claimed_at": None,
            "done_at": None,
        }
        if auto:
            meta["auto"] = True
            meta["signals"] = signals or []
        if supersedes:
            meta["supersedes"] = supersedes
        if session_page:
            meta["session_page"] = session_page
        data = render_page(meta, title, sections)

        def fn(current: bytes | None) -> bytes:
            if current is not None:
                raise Conflict(f"{path} already exists")
            return data

        self.memory.update_page(
            path,
            fn,
            user=who.user,
            message=f"Handoff {hid} opened: {title[:60]}",
        )
        self._paths[hid] = path
        h = parse_handoff(data, path)
        assert h is not None
        return h

    def _session_page_of(self, who: Claimant) -> str | None:
        if not who.session:
            return None
        info = self.memory.spool.sessions.get(session_key(who.user, who.harness, who.session))
        if info is None:
            return None
        path = info.state.get("path")
        return str(path) if path else None

    # -- transitions ---------------------------------------------------------------------
    def _transition(
        self,
        hid: str,
        user: str,
        decide: Callable[[Handoff, bytes, float], dict[str, Any] | None],
        message: str,
        after: Callable[[bytes], bytes] | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """Run ``decide(handoff, raw, now)`` on the writer thread; it raises to refuse,
        returns None for "already so" (no write), or the frontmatter keys to set. The
        write is committed before this returns. Returns (handoff JSON, changed)."""
        path = self.locate(hid)
        if path is None:
            raise NotFound(f"no such handoff: {hid}")
        changed: dict[str, bool] = {"v": False}
        expired_after: dict[str, HandoffConflict | None] = {"err": None}

        def fn(current: bytes | None) -> bytes | None:
            if current is None:
                raise NotFound(f"no such handoff: {hid}")
            h = parse_handoff(current, path)
            if h is None or not self._may_see(path, h.meta, user):
                raise NotFound(f"no such handoff: {hid}")
            now = self.clock()
            try:
                updates = decide(h, current, now)
            except _ExpiredNow as exc:
                # persist the expiry the caller just ran into, then refuse
                expired_after["err"] = exc.conflict
                updates = {"status": "expired", "updated": iso(now)}
            if updates is None:
                return None
            try:
                new = set_keys(current, updates)
            except FrontmatterError as exc:
                raise HandoffConflict(
                    "unreadable",
                    f"handoff {hid}: its frontmatter cannot be read ({exc}); fix the page by hand",
                    h.stored_status,
                ) from None
            if after is not None and expired_after["err"] is None:
                new = after(new)
            changed["v"] = True
            return new

        self.memory.update_page(path, fn, user=user, message=message, commit_now=True)
        if expired_after["err"] is not None:
            raise expired_after["err"]
        raw = self._read(path)
        h = parse_handoff(raw, path) if raw is not None else None
        if h is None:
            raise NotFound(f"no such handoff: {hid}")
        return self.to_json(h, full=True), changed["v"]

    def _refuse_final(self, h: Handoff, now: float, action: str) -> None:
        """Raise the 409 for done/cancelled/expired handoffs."""
        st = h.stored_status
        m = h.meta
        holder = h.holder()
        if st == "done":
            by = m.get("done_by") or m.get("claimed_by") or "its claimant"
            raise HandoffConflict(
                "done",
                f"cannot {action} handoff {h.id}: it is done (completed by {by} at {m.get('done_at')})",
                "done",
                holder.to_json() if holder else None,
            )
        if st == "cancelled":
            extra = f"; superseded by {m['superseded_by']}" if m.get("superseded_by") else ""
            raise HandoffConflict(
                "cancelled",
                f"cannot {action} handoff {h.id}: it was cancelled"
                f" (by {m.get('cancelled_by') or 'its creator'} at {m.get('cancelled_at')}{extra})",
                "cancelled",
            )
        exp = h.expires
        if st == "expired" or (st in ("open", "offered") and exp is not None and exp <= now):
            conflict = HandoffConflict(
                "expired",
                f"cannot {action} handoff {h.id}: it expired at {m.get('expires')}",
                "expired",
            )
            if st != "expired":
                raise _ExpiredNow(conflict)
            raise conflict
        if st not in STATES:
            raise HandoffConflict(
                "bad_status",
                f"cannot {action} handoff {h.id}: its status {st!r} is not one of {', '.join(STATES)}",
                st,
            )

    def claim(
        self, user: str, hid: str, *, harness: str | None = None, session_id: str | None = None
    ) -> dict[str, Any]:
        """Claim ``hid`` for (user, harness, session_id). Returns ``{handoff, repeat}``.

        An open handoff (or one offered to this very session) becomes ``claimed``, for good:
        nobody else can claim it. The holder's repeat claim is a no-op (``repeat: true``,
        no write). 409 when another holds it (``claimed``/``offered``, naming the holder)
        or it is done, cancelled or expired. Claiming also gives back the session's other
        offers."""
        who = Claimant(user, harness or "api", session_id or "")

        def decide(h: Handoff, raw: bytes, now: float) -> dict[str, Any] | None:
            holder = h.holder()
            if h.stored_status == "claimed" and holder is not None:
                if holder == who:
                    return None
                raise HandoffConflict(
                    "claimed",
                    f"handoff {h.id} is already claimed by {holder.describe()}"
                    f" since {h.meta.get('claimed_at')}",
                    "claimed",
                    holder.to_json(),
                )
            self._refuse_final(h, now, "claim")
            if h.stored_status == "claimed":  # claimed without a holder: a hand edit
                raise HandoffConflict(
                    "claimed", f"handoff {h.id} is already claimed (no holder recorded)", "claimed"
                )
            lease = self._live_lease(h.id, now)
            if lease is not None and lease.holder != who:
                raise HandoffConflict(
                    "offered",
                    f"handoff {h.id} is offered to {lease.holder.describe()} until"
                    f" {iso(lease.until)}; it reopens then unless they claim it",
                    "offered",
                    lease.holder.to_json(),
                )
            with self._lock:
                self._leases.pop(h.id, None)
                # one handoff at a time: the session's other offers go back to the pool
                for other in [k for k, v in self._leases.items() if v.holder == who]:
                    del self._leases[other]
            return {
                "status": "claimed",
                "claimed_by": who.user,
                "claimed_harness": who.harness,
                "claimed_session": who.session,
                "claimed_at": iso(now),
                "updated": iso(now),
            }

        out, changed = self._transition(
            hid, user, decide, f"Handoff {hid} claimed by {who.describe()}"
        )
        return {"handoff": out, "repeat": not changed}

    def complete(
        self,
        user: str,
        hid: str,
        *,
        harness: str | None = None,
        session_id: str | None = None,
        note: str | None = None,
    ) -> dict[str, Any]:
        """Mark a claimed handoff done. Only its claimant's user may (any session of
        theirs). ``note`` becomes the ``## Outcome`` section. A repeat by the same user
        is a no-op. 409 when it is open (``not_claimed``), held by another, cancelled or
        expired. Returns ``{handoff, repeat}``."""
        who = Claimant(user, harness or "api", session_id or "")
        note_s = redact_obj(_opt_text(note, "note"))[0] if note else ""

        def decide(h: Handoff, raw: bytes, now: float) -> dict[str, Any] | None:
            holder = h.holder()
            if h.stored_status == "done":
                if (h.meta.get("done_by") or (holder.user if holder else None)) == user:
                    return None
            self._refuse_final(h, now, "complete")
            if h.stored_status != "claimed" or holder is None:
                raise HandoffConflict(
                    "not_claimed",
                    f"handoff {h.id} is {self.status_of(h, now)}: claim it before completing it",
                    self.status_of(h, now),
                )
            if holder.user != user:
                raise HandoffConflict(
                    "claimed",
                    f"handoff {h.id} is claimed by {holder.describe()}; only they can complete it",
                    "claimed",
                    holder.to_json(),
                )
            return {"status": "done", "done_at": iso(now), "done_by": who.user, "updated": iso(now)}

        def outcome(new: bytes) -> bytes:
            text = new.decode("utf-8")
            return replace_section(text, "Outcome", note_s.strip()).encode("utf-8")

        out, changed = self._transition(
            hid,
            user,
            decide,
            f"Handoff {hid} done by {who.describe()}",
            outcome if note_s else None,
        )
        return {"handoff": out, "repeat": not changed}

    def release(
        self, user: str, hid: str, *, harness: str | None = None, session_id: str | None = None
    ) -> dict[str, Any]:
        """Give a claimed handoff back: it is open again (claim keys cleared). Only its
        claimant's user may. 409 when nobody holds it (``not_claimed``), another holds
        it, or it is done/cancelled/expired. Returns ``{handoff, repeat}``."""
        who = Claimant(user, harness or "api", session_id or "")

        def decide(h: Handoff, raw: bytes, now: float) -> dict[str, Any] | None:
            holder = h.holder()
            if h.stored_status != "claimed":
                self._refuse_final(h, now, "release")
                raise HandoffConflict(
                    "not_claimed",
                    f"handoff {h.id} is {self.status_of(h, now)}: nobody holds it",
                    self.status_of(h, now),
                )
            if holder is not None and holder.user != user:
                raise HandoffConflict(
                    "claimed",
                    f"handoff {h.id} is claimed by {holder.describe()}; only they can release it",
                    "claimed",
                    holder.to_json(),
                )
            return {
                "status": "open",
                "claimed_by": None,
                "claimed_harness": None,
                "claimed_session": None,
                "claimed_at": None,
                "updated": iso(now),
            }

        out, changed = self._transition(
            hid, user, decide, f"Handoff {hid} released by {who.describe()}"
        )
        return {"handoff": out, "repeat": not changed}

    def cancel(self, user: str, hid: str, *, reason: str | None = None) -> dict[str, Any]:
        """Cancel an open or offered handoff (its lease ends). Only its creator or the
        wiki's owner may (403 otherwise). A repeat by the same user is a no-op. 409 when
        it is claimed (the claimant must release it first), done or expired.
        Returns ``{handoff, repeat}``."""
        reason_s = redact_obj(_opt_text(reason, "reason"))[0] if reason else ""

        def decide(h: Handoff, raw: bytes, now: float) -> dict[str, Any] | None:
            if h.stored_status == "cancelled" and h.meta.get("cancelled_by") == user:
                return None
            holder = h.holder()
            if h.stored_status == "claimed" and holder is not None:
                raise HandoffConflict(
                    "claimed",
                    f"handoff {h.id} is claimed by {holder.describe()}; it must be released"
                    " before it can be cancelled",
                    "claimed",
                    holder.to_json(),
                )
            self._refuse_final(h, now, "cancel")
            if user not in (h.owner, self.memory.owner):
                raise HandoffForbidden(
                    f"only {h.owner or 'its creator'} (or the wiki's owner) can cancel handoff {h.id}"
                )
            self._drop_lease(h.id)
            updates: dict[str, Any] = {
                "status": "cancelled",
                "cancelled_at": iso(now),
                "cancelled_by": user,
                "updated": iso(now),
            }
            if reason_s:
                updates["cancel_reason"] = reason_s
            return updates

        out, changed = self._transition(hid, user, decide, f"Handoff {hid} cancelled by {user}")
        return {"handoff": out, "repeat": not changed}

    def _persist_expired(self, ids: Sequence[str]) -> WriteResult:
        """Write ``status: expired`` on open handoffs past ``expires`` (writer thread)."""
        for hid in ids:
            path = self.locate(hid)
            if path is None:
                continue
            self._expire_inline(path)
        return WriteResult()

    def _expire_inline(self, path: str) -> None:
        def fn(current: bytes | None) -> bytes | None:
            if current is None:
                return None
            h = parse_handoff(current, path)
            now = self.clock()
            if h is None or h.stored_status not in ("open", "offered"):
                return None
            exp = h.expires
            if exp is None or exp > now:
                return None
            self._drop_lease(h.id)
            try:
                return set_keys(current, {"status": "expired", "updated": iso(now)})
            except FrontmatterError:
                return None

        owner = self.memory.owner
        self.memory.update_page(path, fn, user=owner, message=f"Handoff expired: {path}")

    # -- offers (the brief) ----------------------------------------------------------------
    def addressed_to(self, h: Handoff | dict[str, Any], who: Claimant) -> bool:
        """True when the handoff's ``to`` names ``any``, the caller's harness or user
        (``harness:<name>`` and ``user:<name>`` spell it out)."""
        meta = h.meta if isinstance(h, Handoff) else h
        to = str(meta.get("to") or "any")
        if to == "any":
            return True
        kind, _, name = to.partition(":")
        if name and kind == "harness":
            return name == who.harness
        if name and kind == "user":
            return name == who.user
        return to in (who.harness, who.user)

    def offer(
        self, who: Claimant, project: str, max_offers: int | None = None
    ) -> tuple[list[Handoff], list[Handoff]]:
        """Offers for a starting (or resumed) session: ``(held, offered)``.

        ``held``: handoffs this session has claimed and not finished. ``offered``: the
        session's live offers, renewed; a session holding offers or claims takes no new
        ones (a resumed or compacted session keeps what it had). Otherwise up to
        ``max_offers`` open handoffs it may see and is addressed by (newest first;
        those named to its harness or user first; never its own) are leased to it for
        ``lease_seconds``. Runs on the writer thread, so it never races a claim."""
        limit = self.config.max_offers if max_offers is None else max(0, int(max_offers))
        rows = [
            r
            for r in self._indexed(project)
            if self._may_see(r["path"], r.get("meta") or {}, who.user)
        ]

        def specific(r: dict[str, Any]) -> int:
            to = str((r.get("meta") or {}).get("to") or "any")
            return 0 if to != "any" else 1

        rows.sort(key=specific)  # stable: newest first within each group

        def job() -> WriteResult:
            now = self.clock()
            held: list[Handoff] = []
            offered: list[Handoff] = []
            for r in rows:
                m = r.get("meta") or {}
                if (
                    m.get("status") == "claimed"
                    and m.get("claimed_by") == who.user
                    and m.get("claimed_harness") == who.harness
                    and m.get("claimed_session") == who.session
                ):
                    h = self._fresh(r["path"], who)
                    if h is not None and h.stored_status == "claimed" and h.holder() == who:
                        held.append(h)
            with self._lock:
                mine = [k for k, v in self._leases.items() if v.holder == who and v.until > now]
            for hid in mine:
                path = self.locate(hid)
                h = self._fresh(path, who) if path else None
                if h is not None and self._offerable(h, now):
                    with self._lock:
                        self._leases[hid] = Lease(who, now + self.config.lease_seconds)
                    offered.append(h)
                else:
                    self._drop_lease(hid)
            if held or offered:
                return WriteResult(value=(held, offered))
            for r in rows:
                if len(offered) >= limit:
                    break
                m = r.get("meta") or {}
                if m.get("status") not in (None, "open", "offered"):
                    continue
                if not self.addressed_to(m, who) or _own(m, who):
                    continue
                h = self._fresh(r["path"], who)
                if h is None or not self.addressed_to(h, who) or _own(h.meta, who):
                    continue
                if h.stored_status in ("open", "offered") and h.expires is not None:
                    if h.expires <= now:
                        self._expire_inline(h.path)
                        continue
                if not self._offerable(h, now):
                    continue
                with self._lock:
                    lease = self._leases.get(h.id)
                    if lease is not None and lease.until > now and lease.holder != who:
                        continue
                    self._leases[h.id] = Lease(who, now + self.config.lease_seconds)
                offered.append(h)
            return WriteResult(value=(held, offered))

        res = self.memory.writer.call(job)
        value: tuple[list[Handoff], list[Handoff]] = res.value
        return value

    def _fresh(self, path: str, who: Claimant) -> Handoff | None:
        raw = self._read(path)
        if raw is None:
            return None
        h = parse_handoff(raw, path)
        if h is None or not self._may_see(path, h.meta, who.user):
            return None
        return h

    def _offerable(self, h: Handoff, now: float) -> bool:
        if h.stored_status not in ("open", "offered"):
            return False
        exp = h.expires
        return exp is None or exp > now

    # -- automatic handoffs ------------------------------------------------------------------
    def on_session_end(
        self, memory: Memory, info: SessionInfo, observations: list[Observation], page: str
    ) -> None:
        """The session-end hook (writer thread): open an automatic handoff when the session
        shows signs of unfinished work (:func:`session_signals`) and left none itself."""
        del memory
        if not self.config.auto:
            return
        sig = session_signals(observations)
        if not sig.names:
            return
        who = Claimant(info.user, info.harness, info.session_id)
        now = self.clock()
        older: list[Handoff] = []
        for r in self._indexed(info.project):
            m = r.get("meta") or {}
            if m.get("user") != info.user:
                continue
            if m.get("harness") == info.harness and m.get("session") == info.session_id:
                return  # the session left a handoff itself (or this hook already ran)
            if m.get("auto") and m.get("status") in ("open", "offered", None):
                h = self._fresh(r["path"], who)
                if h is not None and h.meta.get("auto") and h.stored_status in ("open", "offered"):
                    older.append(h)
        title_src = sig.last_prompt or (page.rsplit("/", 1)[-1].removesuffix(".md"))
        title = "Unfinished: " + " ".join(title_src.split())[:80]
        sections = _auto_sections(sig, page, title_src, info, now)
        h = self._write_new(
            who,
            project=info.project,
            title=title,
            to="any",
            visibility="project",
            expires=now + self.config.expires_seconds,
            sections=sections,
            session_page=page,
            now=now,
            auto=True,
            signals=sig.names,
            supersedes=[o.id for o in older] or None,
        )
        for o in older:
            self._supersede_inline(o.path, h.id, info.user)
        log.info("automatic handoff %s for %s (%s)", h.id, page, ", ".join(sig.names))

    def _supersede_inline(self, path: str, new_id: str, user: str) -> None:
        def fn(current: bytes | None) -> bytes | None:
            if current is None:
                return None
            h = parse_handoff(current, path)
            if h is None or h.stored_status not in ("open", "offered"):
                return None
            now = self.clock()
            self._drop_lease(h.id)
            try:
                return set_keys(
                    current,
                    {
                        "status": "cancelled",
                        "superseded_by": new_id,
                        "cancelled_at": iso(now),
                        "cancelled_by": user,
                        "updated": iso(now),
                    },
                )
            except FrontmatterError:
                return None

        self.memory.update_page(
            path, fn, user=user, message=f"Handoff superseded by {new_id}: {path}"
        )

    #: the verb's plain name (``svc.list(user, project=…)``), as the other faces call it
    list = list_handoffs


class _ExpiredNow(Exception):
    """Internal: a transition found an open handoff past ``expires``."""

    def __init__(self, conflict: HandoffConflict) -> None:
        super().__init__(str(conflict))
        self.conflict = conflict


def _own(meta: dict[str, Any], who: Claimant) -> bool:
    return (
        meta.get("user") == who.user
        and meta.get("harness") == who.harness
        and meta.get("session") == who.session
    )


def _auto_sections(
    sig: SessionSignals, page: str, title: str, info: SessionInfo, now: float
) -> dict[str, str]:
    why = {
        "tool_failed": "its last tool call failed",
        "unanswered_prompt": "its last prompt got no answer",
        "next_steps": "its last reply lists work still to do",
        "late_compaction": "its context was compacted and no turn finished after that",
    }
    reasons = "; ".join(why[n] for n in sig.names)
    where = [
        f"Session {session_link(page, title)} ({info.harness}, {info.user}) ended at"
        f" {iso(now)} with signs of unfinished work: {reasons}.",
    ]
    if sig.last_prompt:
        where.append("Last prompt:\n\n" + compiler.fence(_clip(sig.last_prompt, 1500)))
    if sig.last_reply:
        where.append("Last reply:\n\n" + compiler.fence(_clip(sig.last_reply, 2000)))
    failed = ""
    if sig.failed_tool:
        name, cmd, err = sig.failed_tool
        failed = f"Tool **{name}** failed"
        if cmd:
            failed += ":\n\n" + compiler.fence(_clip(cmd, 1000), "sh")
        failed += "\n\nerror:\n\n" + compiler.fence(_clip(err, 2000))
    questions = []
    if sig.unanswered_prompt:
        questions.append("The last prompt was not answered (quoted above).")
    questions.extend(f"`{q.replace('`', '')}`" for q in sig.open_questions)
    steps = [f"`{s.replace('`', '')}`" for s in sig.next_steps]
    if sig.late_compaction:
        steps.append("The context was compacted near the end: re-read the session page first.")
    return {
        "where_we_left_off": "\n\n".join(where),
        "what_failed": failed,
        "open_questions": _bullets(questions),
        "next_steps": _bullets(steps),
        "files": _bullets([f"`{f.replace('`', '')}`" for f in sig.files[:50]]),
    }


def _req_str(v: Any, name: str) -> str:
    if not isinstance(v, str) or not v.strip():
        raise ValueError(f"{name} is required (a non-empty string)")
    return v


def _opt_text(v: Any, name: str) -> str:
    if v is None:
        return ""
    if not isinstance(v, str):
        raise ValueError(f"{name} must be a string")
    if len(v) > _MAX_TEXT:
        raise ValueError(f"{name} is longer than {_MAX_TEXT} characters")
    return v.strip()


def _opt_list(v: Any, name: str) -> list[str] | None:
    if v is None:
        return None
    if isinstance(v, str):
        return [ln for ln in (x.strip() for x in v.splitlines()) if ln] or None
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ValueError(f"{name} must be a string or a list of strings")
    if sum(len(x) for x in v) > _MAX_TEXT:
        raise ValueError(f"{name} is longer than {_MAX_TEXT} characters")
    return [x.strip().lstrip("-*").strip() for x in v if x.strip()]


def _expiry(
    expires: str | float | None, in_seconds: float | None, now: float, default: float
) -> float:
    if expires is not None and expires != "":
        ts = parse_ts(expires)
        if ts is None:
            raise ValueError("expires must be an ISO-8601 time or epoch seconds")
        if ts <= now:
            raise ValueError("expires must be in the future")
        return ts
    if in_seconds is not None:
        if isinstance(in_seconds, bool) or not isinstance(in_seconds, int | float):
            raise ValueError("expires_in_seconds must be a number")
        if in_seconds <= 0:
            raise ValueError("expires_in_seconds must be > 0")
        return now + float(in_seconds)
    return now + default


# --------------------------------------------------------------------------- wiring


def install(memory: Memory) -> HandoffService:
    """The memory's HandoffService, created and hooked to session ends on first call
    (idempotent). Faces call this (``handoff_api.routes`` does at app creation)."""
    svc = getattr(memory, "handoffs", None)
    if isinstance(svc, HandoffService):
        return svc
    svc = HandoffService(memory)
    memory.handoffs = svc  # type: ignore[attr-defined]
    memory.on_session_end.append(svc.on_session_end)
    return svc
