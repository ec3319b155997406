"""The handoff's data, with no behaviour that needs a running server.

Owns: the error types (:class:`HandoffConflict` 409, :class:`HandoffForbidden` 403), the
value types (:class:`Claimant`, :class:`Lease`, :class:`Handoff`), the page format
(:data:`OWNED_KEYS`, :data:`SECTIONS`, :func:`parse_handoff`, :func:`render_page`), ids
and their patterns, the tunables (:class:`HandoffConfig`), the checks of a request's
fields, and :class:`HandoffMemory`: what the service uses of the core's ``Memory``
(a protocol, so this package never imports ``wiki_memory.core.memory``, which imports it).
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from wiki_memory.capture.observation import parse_ts
from wiki_memory.core.pagehost import PageDoor
from wiki_memory.errors import BadRequest, Forbidden, StateConflict
from wiki_memory.identity import Identity, project_of
from wiki_memory.wiki import compiler
from wiki_memory.wiki.compiler import escape_controls
from wiki_memory.wiki.frontmatter import HEAD_KEYS, dump_page
from wiki_memory.wiki.page import parse_page

if TYPE_CHECKING:
    from wiki_memory.capture.spool import Spool
    from wiki_memory.config import Settings
    from wiki_memory.core.scope import ScopeRule
    from wiki_memory.core.userecord import UseRecord
    from wiki_memory.core.writer import Writer
    from wiki_memory.index.store import Index


#: stored states (``offered`` is never stored: it is an open handoff with a live lease)
STATES = ("open", "offered", "claimed", "done", "cancelled", "expired")
#: frontmatter keys of a handoff's claim: who holds it (user, harness, session) and since
#: when; all empty while nobody holds it (:func:`claim_fields`)
CLAIM_KEYS = ("claimed_by", "claimed_harness", "claimed_session", "claimed_at")
#: frontmatter keys the server owns on a handoff page (a person may edit any other)
OWNED_KEYS = (
    *HEAD_KEYS,
    "status",
    "user",
    "harness",
    "session",
    "to",
    "visibility",
    "expires",
    *CLAIM_KEYS,
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
#: keys of a handoff's JSON (:meth:`~wiki_memory.core.handoffs.service.HandoffService.to_json`)
#: a listing of many leaves out (:func:`list_entry`): the stored state, the links to other
#: pages and what only ``show`` returns; the listing keeps what to act on
LIST_OMITS = frozenset(
    {"stored_status", "session_page", "superseded_by", "sections", "metadata", "content"}
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
NUM_ID_RE = re.compile(r"^H-(\d+)$")
TO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,79}$")
_MAX_TEXT = 20_000


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
    """Who acts: the token's user plus the harness and session the request names;
    ``caller``: the :class:`~wiki_memory.identity.Identity` the door built, which the
    scope rule judges (None: a holder read back from a page, never judged; not compared)."""

    user: str
    harness: str = "api"
    session: str = ""
    caller: Identity | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, caller: Identity, harness: str | None, session: str | None) -> Claimant:
        """The claimant ``caller`` is in ``harness`` (default ``api``) and ``session``."""
        return cls(caller.user, harness or "api", session or "", caller)

    def describe(self) -> str:
        sess = f" session {self.session}" if self.session else ""
        return f"{self.user} ({self.harness}{sess})"

    def to_json(self) -> dict[str, str]:
        return {"user": self.user, "harness": self.harness, "session": self.session}


@dataclass
class Lease:
    """An offer: ``holder`` may confirm until ``until`` (UTC epoch seconds) with ``code``,
    the offer code the brief printed (:func:`new_offer_code`; kept in memory only, never
    written to a page, the spool or a log)."""

    holder: Claimant
    until: float
    code: str = ""


#: the fixed start of every offer code; the sanitizer redacts ``wmo_`` + 20 or more
#: letters and digits like a token (``wiki-memory-offer-code``, docs/sanitizer.md)
OFFER_CODE_PREFIX = "wmo_"
_OFFER_CODE_RE = re.compile(r"wmo_[a-z2-7]{26}")


def new_offer_code() -> str:
    """A fresh offer code: :data:`OFFER_CODE_PREFIX` + 26 base32 characters (130 random
    bits from :mod:`secrets`), lowercase so that it survives being typed or pasted."""
    import base64
    import secrets

    return OFFER_CODE_PREFIX + base64.b32encode(secrets.token_bytes(20)).decode()[:26].lower()


def is_offer_code(ref: str) -> bool:
    """True when ``ref`` is spelled like an offer code (prefix and length; any case)."""
    return bool(_OFFER_CODE_RE.fullmatch(ref.strip().lower()))


@dataclass
class Handoff:
    """A parsed handoff page. ``meta`` is its JSON-safe frontmatter."""

    id: str
    path: str
    meta: dict[str, Any]
    sections: dict[str, str] = field(default_factory=dict)
    title: str = ""

    def text(self, key: str, default: str = "") -> str:
        """The frontmatter value of ``key`` as text; ``default`` when it is missing or
        empty."""
        return str(self.meta.get(key) or default)

    @property
    def stored_status(self) -> str:
        return self.text("status", "open")

    @property
    def project(self) -> str | None:
        return self.text("project") or project_of(self.path)

    @property
    def owner(self) -> str:
        return self.text("user")

    @property
    def expires(self) -> float | None:
        v = self.meta.get("expires")
        return parse_ts(v) if v not in (None, "") else None

    @property
    def personal(self) -> bool:
        return (
            self.text("visibility", "project") == "personal" or _people_user(self.path) is not None
        )

    def holder(self) -> Claimant | None:
        by = self.meta.get("claimed_by")
        if not by:
            return None
        return Claimant(
            str(by),
            self.text("claimed_harness"),
            self.text("claimed_session"),
        )


def claim_fields(who: Claimant | None, at: str | None = None) -> dict[str, Any]:
    """The :data:`CLAIM_KEYS` of a handoff as frontmatter: held by ``who`` since ``at``
    (ISO-8601 text): ``{claimed_by: user, claimed_harness, claimed_session, claimed_at}``;
    with ``who`` None (nobody holds it), every key None. Raises nothing."""
    if who is None:
        return dict.fromkeys(CLAIM_KEYS)
    return dict(zip(CLAIM_KEYS, (who.user, who.harness, who.session, at), strict=True))


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


# --------------------------------------------------------------------------- rendering


def list_entry(rec: dict[str, Any]) -> dict[str, Any]:
    """A handoff as a listing of many shows it: ``rec`` (a
    :meth:`~wiki_memory.core.handoffs.service.HandoffService.to_json` dict) without the keys
    in :data:`LIST_OMITS`, in ``rec``'s order (``{id, path, title, project, status, user,
    harness, session, to, visibility, created, updated, expires, claimed_by,
    claimed_harness, claimed_session, claimed_at, done_at, auto, offered_to}``). A new
    dict; ``rec`` is not changed."""
    return {k: v for k, v in rec.items() if k not in LIST_OMITS}


def bullets(value: Any) -> str:
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


def clip(text: str, limit: int) -> str:
    return compiler.clip_bytes(text, limit)


# --------------------------------------------------------------------------- fields


def req_str(v: Any, name: str) -> str:
    if not isinstance(v, str) or not v.strip():
        raise BadRequest(f"{name} is required (a non-empty string)", field=name)
    return v


def opt_text(v: Any, name: str) -> str:
    if v is None:
        return ""
    if not isinstance(v, str):
        raise BadRequest(f"{name} must be a string", field=name)
    if len(v) > _MAX_TEXT:
        raise BadRequest(f"{name} is longer than {_MAX_TEXT} characters", field=name)
    return v.strip()


def opt_list(v: Any, name: str) -> list[str] | None:
    if v is None:
        return None
    if isinstance(v, str):
        return [ln for ln in (x.strip() for x in v.splitlines()) if ln] or None
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise BadRequest(f"{name} must be a string or a list of strings", field=name)
    if sum(len(x) for x in v) > _MAX_TEXT:
        raise BadRequest(f"{name} is longer than {_MAX_TEXT} characters", field=name)
    return [x.strip().lstrip("-*").strip() for x in v if x.strip()]


def expiry_of(
    expires: str | float | None, in_seconds: float | None, now: float, default: float
) -> float:
    if expires is not None and expires != "":
        ts = parse_ts(expires)
        if ts is None:
            raise BadRequest("expires must be an ISO-8601 time or epoch seconds", field="expires")
        if ts <= now:
            raise BadRequest("expires must be in the future", field="expires")
        return ts
    if in_seconds is not None:
        if isinstance(in_seconds, bool) or not isinstance(in_seconds, int | float):
            raise BadRequest("expires_in_seconds must be a number", field="expires_in_seconds")
        if in_seconds <= 0:
            raise BadRequest("expires_in_seconds must be > 0", field="expires_in_seconds")
        return now + float(in_seconds)
    return now + default


# --------------------------------------------------------------------------- the memory


class HandoffMemory(PageDoor, Protocol):
    """What the handoff service uses of :class:`wiki_memory.core.memory.Memory`: its
    settings and owner, the wiki folder, the scope rule, the index, the spool (to find a
    session's page), the writer thread, ``update_page`` (the one door for writes,
    :class:`~wiki_memory.core.pagehost.PageDoor`), and
    ``page_links`` and the use record ``use`` (pages a new handoff cites)."""

    settings: Settings
    owner: str
    wiki_dir: Path
    scope: ScopeRule
    index: Index
    spool: Spool
    writer: Writer
    use: UseRecord

    def page_links(self, path: str, user: Any = None) -> dict[str, Any]: ...

    def audited(self, who: Any, op: str, target: str, result: str = "ok", **extra: Any) -> None:
        """One line of the audit log (:meth:`wiki_memory.core.memory.Memory.audited`)."""
        ...
