"""Capture: hook events in, sanitized, durably spooled, searchable by any search made
after the reply, and the session page's compile queued (invariants 3 and 4). :class:`Capture` is built by
:class:`~wiki_memory.core.memory.Memory`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from wiki_memory.capture.echo import strip_echo
from wiki_memory.capture.observation import (
    Observation,
    ObservationError,
    iso,
    observation_text,
    parse_event,
    project_name,
    session_key,
)
from wiki_memory.capture.private import may_hold_private, strip_private, strip_private_obj
from wiki_memory.capture.sanitize import redact_obj
from wiki_memory.capture.spool import SessionInfo, Spool
from wiki_memory.capture.syncer import SpoolSyncer
from wiki_memory.core.idwait import IdWait, by_repository
from wiki_memory.core.sessions import END_KINDS
from wiki_memory.diskfull import DiskState, is_disk_full
from wiki_memory.errors import CaptureRefused, DiskFull, WikiMemoryError
from wiki_memory.identity import Identity, creation_refusal
from wiki_memory.index.store import Index

__all__ = [
    "COMPILE_KINDS",
    "SELF_CHECK_PREFIX",
    "Capture",
    "CaptureGate",
    "Written",
    "is_self_check",
]

#: Session ids starting with this are reserved for ``wiki-memory setup``'s self-check
#: (docs/operations.md, "The self-check"): their events are sanitized, spooled and
#: searchable like any other, but never compiled into a page or committed; the session's
#: end (or its idle end, or a restart) deletes its spool files and spool rows.
SELF_CHECK_PREFIX = "wiki-memory-self-check-"


def is_self_check(session_id: str | None) -> bool:
    """True for a session id reserved for the self-check (:data:`SELF_CHECK_PREFIX`)."""
    return bool(session_id) and str(session_id).startswith(SELF_CHECK_PREFIX)


#: events after which the session page is (re)written
COMPILE_KINDS = {"stop", "session_end", "turn"}

#: most events in one request (a list)
MAX_EVENTS = 1000

#: an observation's string fields that are sanitized like its payload
_FIELDS = ("harness", "event", "cwd", "project", "session_id", "event_id")


@dataclass
class Written:
    """A capture written to the spool and not acknowledged yet (:meth:`Capture.begin`):
    the reply's entries, the spool's sync target, the index rows and the compiles
    (session key -> the session ended) that follow the fsync."""

    out: list[dict[str, Any]]
    target: int
    rows: list[dict[str, Any]]
    to_compile: dict[str, bool]
    #: files of events that waited for their repository id and are in this write
    #: (:class:`~wiki_memory.core.idwait.IdWait`): forgotten after the fsync
    taken: list[Any] = field(default_factory=list)


class Capture:
    """Accepts hook events into ``spool`` and ``index``; ``request_compile(key, end)``
    queues a session page's compile on the writer."""

    def __init__(
        self,
        spool: Spool,
        index: Index,
        request_compile: Callable[..., Any],
        disk: DiskState | None = None,
    ) -> None:
        self.spool = spool
        self.index = index
        self.request_compile = request_compile
        #: the fsyncs :meth:`capture_async` awaits
        self.syncer = SpoolSyncer(spool)
        #: repository ids → projects (:class:`wiki_memory.core.repos.RepoMap`; None: off)
        self.repos: Any = None
        #: id-less events that wait for their repository's id (wiki_memory.core.idwait)
        self.held = IdWait(spool.dir / "held")
        #: called with the parsed events and the caller before anything is stored; it
        #: returns, per event, None (allowed) or the error refusing it (:class:`CaptureGate`)
        self.gate: Callable[[list[Observation], Identity], list[WikiMemoryError | None]] | None = (
            None
        )
        #: the data directory's disk state (wiki_memory.diskfull): a write refused for
        #: want of space is noted there, one that works ends it
        self.disk = disk

    def capture(self, body: Any, user: Identity, raw: bytes | None = None) -> list[dict[str, Any]]:
        """:meth:`begin`, the fsync, then :meth:`finish`: accept one hook event or a list
        of up to 1,000 for the caller ``user``. ``raw``: the request body
        ``body`` was parsed from, when there is one (see :meth:`begin`).

        Every event is validated (:class:`ObservationError` names the field), passed
        through :attr:`gate` (:class:`~wiki_memory.errors.CaptureRefused`), stripped of
        ``<private>`` spans (:mod:`wiki_memory.capture.private`), sanitized (invariant 4),
        appended durably to the spool (fsynced before this returns, invariant 3) and
        deduplicated by ``event_id``.

        Returns one dict per event, in order: ``{"id": obs_id, "duplicate": bool,
        "session_key": ...}`` for an accepted one. A single event (``body`` a dict) that
        is refused raises that error and nothing is written. In a list each event is
        judged on its own: a refused one is ``{"refused": <the WikiMemoryError>}`` in its
        place and the others are accepted (docs/api.md, "POST /v1/observations"). A list
        that is empty or longer than 1,000 raises ObservationError (field ``body``).
        """
        written = self.begin(body, user, raw)
        try:
            self.spool.sync_to(written.target)
        except OSError as exc:
            self._untake(written)
            raise self._failed(exc) from exc
        return self.finish(written)

    async def capture_async(
        self, body: Any, user: Identity, raw: bytes | None = None
    ) -> list[dict[str, Any]]:
        """:meth:`capture` for an event loop: :meth:`begin` runs in the caller (CPU work
        and page-cache writes, about a millisecond for one event), the fsync on the
        spool's sync thread (:class:`~wiki_memory.capture.syncer.SpoolSyncer`, shared by
        the concurrent requests), then :meth:`finish`. No thread per waiting request."""
        written = self.begin(body, user, raw)
        try:
            await self.syncer.wait(written.target)
        except OSError as exc:
            self._untake(written)
            raise self._failed(exc) from exc
        return self.finish(written)

    def begin(self, body: Any, user: Identity, raw: bytes | None = None) -> Written:
        """Everything :meth:`capture` does before the fsync: validate, gate, clean and
        write to the spool (not fsynced yet). Raises what :meth:`capture` raises; the
        result is acknowledged only after ``spool.sync_to(result.target)``. ``raw``: the
        JSON text ``body`` was parsed from; when it cannot hold a private tag
        (:func:`~wiki_memory.capture.private.may_hold_private`) the events are not
        searched for one."""
        who = user
        name = user.user
        single = not isinstance(body, list)
        events = [body] if single else body
        if not events:
            raise ObservationError("body", "an empty list holds no event")
        if len(events) > MAX_EVENTS:
            raise ObservationError("body", f"at most {MAX_EVENTS} events per request")
        now = time.time()
        parsed: list[Observation | WikiMemoryError] = []
        private = raw is None or may_hold_private(raw)
        for ev in events:
            try:
                parsed.append(self._place(parse_event(ev, name, now), private))
            except ObservationError as exc:
                if single:
                    raise
                parsed.append(exc)
        # a repository's events go to its project (wiki_memory.core.repos): placed now,
        # bound once accepted; an id-less event of a name bound to an id waits for its
        # session's id (wiki_memory.core.idwait), and the events that waited come back
        # before the event that brings it
        binds: dict[int, Any] = {}
        mine: list[bool] = [True] * len(parsed)  # False: an event that waited (no reply)
        wait: set[int] = set()
        taken: list[Any] = []
        if self.repos is not None:
            parsed, mine, binds, wait, taken = by_repository(parsed, self.repos, self.held)
        try:
            taken = self._judge(parsed, mine, wait, taken, who, single, private)
        except BaseException:
            for t in taken:
                self.held.untake(t)
            self._settle(binds, parsed, name, ok=False)
            raise
        good = [p for i, p in enumerate(parsed) if isinstance(p, Observation) and i not in wait]
        try:
            written, target = self.spool.write(good) if good else ([], 0)
        except OSError as exc:
            self._settle(binds, parsed, name, ok=False)
            for t in taken:
                self.held.untake(t)
            raise self._failed(exc, len(raw or b"")) from exc
        self._settle(binds, parsed, name, ok=True)
        accepted = iter(written)
        out: list[dict[str, Any]] = []
        spool_rows = []
        to_compile: dict[str, bool] = {}
        for i, p in enumerate(parsed):
            if not isinstance(p, Observation):
                if mine[i]:
                    out.append({"refused": p})
                continue
            if i in wait:
                out.append({"id": None, "duplicate": False, "held": True, "session_key": None})
                continue
            acc = next(accepted)
            if mine[i]:  # an event that waited is in the spool now, not in this reply
                out.append(
                    {"id": acc.obs_id, "duplicate": acc.duplicate, "session_key": acc.session_key}
                )
            if acc.duplicate:
                continue
            obs = p
            spool_rows.append(self._row(self.spool.sessions[acc.session_key], obs))
            if obs.kind in COMPILE_KINDS:
                to_compile[acc.session_key] = to_compile.get(acc.session_key, False) or (
                    obs.kind in END_KINDS
                )
            if obs.kind in END_KINDS:
                # the session ended: so did its parts in other projects
                for part in self.spool.parts_of(acc.session_key):
                    if self.spool.sessions[part].state.get("status") != "ended":
                        to_compile[part] = True
        return Written(out, target, spool_rows, to_compile, taken)

    def _judge(
        self,
        parsed: list[Any],
        mine: list[bool],
        wait: set[int],
        taken: list[Any],
        who: Identity,
        single: bool,
        private: bool,
    ) -> list[Any]:
        """:meth:`begin`'s gate, scrub and wait, in place on ``parsed``: a refused event
        becomes its error (raised for a ``single`` one); the events that ``wait`` are
        written to :attr:`held` (sanitized, fsynced). When an event put back is refused,
        the events put back wait again and are left out. Returns the taken files whose
        events are still in ``parsed``."""
        if self.gate is not None:
            # the right to write each event's project, before any payload is scanned;
            # an event that waits is judged when it comes back
            good = [p for i, p in enumerate(parsed) if isinstance(p, Observation) and i not in wait]
            refusals = iter(self.gate(good, who) if good else [])
            back_refused = None
            for i, p in enumerate(parsed):
                if isinstance(p, Observation) and i not in wait:
                    refused = next(refusals)
                    if refused is not None:
                        if single:
                            raise refused
                        parsed[i] = refused
                        if not mine[i]:
                            back_refused = refused
            if back_refused is not None:
                for t in taken:
                    self.held.untake(t)
                taken = []
                for i in range(len(parsed)):
                    if not mine[i]:
                        parsed[i] = back_refused
        may = getattr(self.gate, "may_write", None)
        if wait and may is not None and not may(who):
            # an event that waits is judged when it comes back, but a caller who may
            # write nowhere (a reader) has nothing kept meanwhile
            for i in sorted(wait):
                p = parsed[i]
                if isinstance(p, Observation):
                    refused = CaptureRefused(p.project or "", hidden=True, lacking="write")
                    if single:
                        raise refused
                    parsed[i] = refused
        for i, p in enumerate(parsed):
            if isinstance(p, Observation) and mine[i]:
                try:
                    self._scrub(p, private)
                except ObservationError as exc:
                    if single:
                        raise
                    parsed[i] = exc
        try:
            for i in sorted(wait):
                p = parsed[i]
                if isinstance(p, Observation):
                    self.held.hold(self._base(p), p.project or "", p, p.project_from)
        except OSError as exc:
            raise self._failed(exc) from exc
        return taken

    @staticmethod
    def _base(obs: Observation) -> str:
        return session_key(obs.user, obs.harness, obs.session_id)

    def _untake(self, written: Written) -> None:
        """The waiting events of a write whose fsync failed wait again."""
        for t in written.taken:
            self.held.untake(t)

    def expire_held(self, now: float | None = None) -> int:
        """File the events that waited :data:`~wiki_memory.core.idwait.HOLD_SECONDS` for
        their repository id like events whose sender found no project (the session's
        current project, else the user's own sessions); returns how many (the idle loop
        calls this)."""
        n = 0
        for back, path in self.held.expired(now):
            # the session's id came meanwhile (two requests crossed): that id's project
            rid = self.held.known(self._base(back[0]), back[0].project or "") if back else None
            placed = self.repos.project_of_id(rid) if rid and self.repos is not None else None
            for o in back:
                o.project, o.project_from = (placed, "git") if placed else (None, "none")
            try:
                acc, target = self.spool.write(back) if back else ([], 0)
                self.spool.sync_to(target)
            except OSError:
                self.held.untake(path)
                continue
            rows: list[dict[str, Any]] = []
            compiles: dict[str, bool] = {}
            for a, o in zip(acc, back, strict=True):
                if a.duplicate:
                    continue
                rows.append(self._row(self.spool.sessions[a.session_key], o))
                if o.kind in COMPILE_KINDS:
                    compiles[a.session_key] = compiles.get(a.session_key, False) or (
                        o.kind in END_KINDS
                    )
            self.finish(Written([], target, rows, compiles, [path]))
            n += len(back)
        return n

    def _settle(self, binds: dict[int, Any], parsed: list[Any], user: str, ok: bool) -> None:
        """Write the repository bindings of accepted events; release the others."""
        for i, b in binds.items():
            if ok and isinstance(parsed[i], Observation):
                self.repos.bind(b, user)
            else:
                self.repos.release(b)

    def _failed(self, exc: OSError, need: int = 0) -> Exception:
        """The error to raise for a spool write or fsync that failed with ``exc``: a full
        disk is :class:`~wiki_memory.errors.DiskFull` (507, noted in :attr:`disk`);
        anything else stays the OSError (a 500)."""
        if not is_disk_full(exc):
            return exc
        if self.disk is not None:
            self.disk.failed(exc, "spool", need)
        return DiskFull()

    def finish(self, written: Written) -> list[dict[str, Any]]:
        """What follows the fsync of a :meth:`begin`: its spool rows queued for the
        index and its sessions' compiles requested. Returns :meth:`capture`'s list."""
        if self.disk is not None:
            self.disk.succeeded()
        for t in written.taken:
            self.held.done(t)
        if written.rows:
            # off the request path: written by the index's own thread, many requests'
            # rows per transaction; a search flushes them first, so they are found by
            # any search made after the reply
            self.index.queue_spool(written.rows)
        for key, end in written.to_compile.items():
            if is_self_check(self.spool.sessions[key].session_id):
                if end:
                    self.discard(key)
                continue
            self.request_compile(key, end=end)
        return written.out

    def close(self) -> None:
        """Stop the spool's sync thread (the server's shutdown)."""
        self.syncer.close()

    def _place(self, obs: Observation, private: bool = True) -> Observation:
        """``obs`` with its short string fields (harness, event, cwd, project, session
        id, event id) cleaned of ``<private>`` spans and secrets: all that the gate reads
        and audits. The payload waits for :meth:`_scrub`, after the gate. The project is
        the sender's (its ``repo_id`` and ``project``): the server never looks at its own
        disk at an event's ``cwd``, which names a folder on the sender's machine
        (:meth:`Spool.part_for` has the rule for a sender that names none)."""
        names = [a for a in _FIELDS if isinstance(getattr(obs, a), str)]
        fields = [getattr(obs, a) for a in names]
        if private:
            fields = [strip_private(v) for v in fields]
        clean_fields, _ = redact_obj(fields)
        for attr, v in zip(names, clean_fields, strict=True):
            setattr(obs, attr, v)
        return obs

    def _scrub(self, obs: Observation, private: bool = True) -> None:
        """``obs``'s payload with its ``<private>`` spans removed (unless ``private`` is
        False: its request holds no tag), then its secrets redacted (private spans go
        first: before redaction, and before any cut); raises ObservationError for a
        payload nested too deeply."""
        payload = obs.payload
        try:
            if private:
                payload = strip_private_obj(payload)[0]
            obs.payload = redact_obj(payload)[0]
        except RecursionError:
            raise ObservationError("payload", "nested too deeply") from None
        # no echo: the memory's own output is kept as a reference, and a compaction's
        # summary as its size, before anything is spooled (docs/sessions.md)
        obs.kind, obs.payload = strip_echo(obs.kind, obs.payload)

    def discard(self, key: str) -> None:
        """Forget self-check session ``key``: its spool files and its searchable spool
        rows go (its ``event_id`` dedup keys stay, like any dropped session's)."""
        self.spool.drop(key)
        self.index.delete_spool_session(key)

    def project_of(self, user: Identity, harness: str | None, session_id: str | None) -> str | None:
        """The project a request about a session of the caller ``user`` belongs to when it
        names none (the brief of a hook that found none, or whose repository's id is not
        known yet): the session's current project (its spool part that took the last
        event), else None. Never a look at the server's own disk at the caller's ``cwd``."""
        if harness and session_id:
            part = self.spool.current_part(user.user, harness, session_id)
            if part is not None and part.project:
                return part.project
        return None

    def _row(self, info: SessionInfo, obs: Observation) -> dict[str, Any]:
        text = observation_text(obs)
        return {
            "session_key": info.key,
            "obs_id": obs.obs_id,
            "project": info.project,
            "harness": info.harness,
            "session_id": info.session_id,
            "user": info.user,
            "ts": iso(obs.ts),
            "text": text,
        }

    def reindex_spool(self) -> None:
        """Put every uncompiled observation of the spool into the index again (at start)."""
        rows = []
        for info, obs in self.spool.iter_all():
            if int(obs.obs_id.rsplit("-", 1)[-1]) > int(info.state.get("compiled_count", 0)):
                rows.append(self._row(info, obs))
        self.index.replace_spool(rows)


class CaptureGate:
    """Grants applied to capture, and projects made by capturing (docs/team-server.md).

    For each project the events go to (an existing session's project, else the event's
    ``project``, else the last folder of its ``cwd``), the caller must hold a write grant
    (:meth:`wiki_memory.identity.Identity.grant`). A project that does not exist yet
    (no folder under ``wiki/projects/``, no session in the spool) is created by the
    capture: a member gets a write grant on it from the token store (audited as
    ``project.create``), unless ``project_creation = "admins"``; a reader never creates
    one. Otherwise :class:`~wiki_memory.errors.CaptureRefused` is raised: 403 where the
    caller may read the project, 404 where not. Accepted and refused captures are
    audited once per session and server run.

    ``memory`` is the :class:`~wiki_memory.core.memory.Memory` (its scope, spool,
    projects, settings and audit log).
    """

    def __init__(self, memory: Any) -> None:
        self.memory = memory
        self._lock = threading.Lock()
        self._audited: set[tuple[str, str]] = set()

    def __call__(self, events: list[Observation], who: Identity) -> list[WikiMemoryError | None]:
        """Per event of ``events``, in order: None when ``who`` may capture it, else the
        :class:`~wiki_memory.errors.CaptureRefused` for its project (every event of a
        refused project gets the same one)."""
        m = self.memory
        ident: Identity = m.scope.identity(who)
        by_project: dict[str, list[str]] = {}
        projects: list[str] = []
        for obs in events:
            key = session_key(obs.user, obs.harness, obs.session_id)
            info = m.spool.sessions.get(key)
            if info is not None:
                project = info.project
            else:
                project = obs.project or project_name(obs.cwd or "default")
            by_project.setdefault(project, []).append(f"{obs.harness}/{obs.session_id}")
            projects.append(project)
        refused: dict[str, WikiMemoryError] = {}
        for project, sessions in sorted(by_project.items()):
            try:
                self._check(ident, project, sessions)
            except CaptureRefused as exc:
                refused[project] = exc
        return [refused.get(p) for p in projects]

    def may_write(self, who: Identity) -> bool:
        """True when ``who`` may capture into some project (an owner, admin or member;
        a reader never)."""
        return self.memory.scope.identity(who).role in ("owner", "admin", "member")

    def _check(self, ident: Identity, project: str, sessions: list[str]) -> None:
        m = self.memory
        target = f"projects/{project}"
        grant = ident.grant(project)
        if grant == "write":
            self._audit_once(ident, "capture", target, sessions, "ok")
            return
        if not self._exists(project):
            lacking = creation_refusal(ident, m.settings.project_creation)
            if lacking is None and m.scope.directory is not None:
                with self._lock:
                    m.scope.directory.grant(ident.user, project)
                m.audited(ident, "project.create", target, "ok", grant="write")
                self._audit_once(ident, "capture", target, sessions, "ok")
                return
            lacking = lacking or "project creation (reserved to admins)"
            self._audit_once(ident, "capture", target, sessions, "denied")
            raise CaptureRefused(project, hidden=False, lacking=lacking)
        hidden = grant is None
        self._audit_once(ident, "capture", target, sessions, "not_found" if hidden else "denied")
        raise CaptureRefused(project, hidden=hidden, lacking=f"write on project {project}")

    def _exists(self, project: str) -> bool:
        m = self.memory
        if project in m.projects():
            return True
        return any(info.project == project for info in list(m.spool.sessions.values()))

    def _audit_once(
        self, ident: Identity, op: str, target: str, sessions: list[str], result: str
    ) -> None:
        for s in sorted(set(sessions)):
            mark = (f"{ident.user}\0{s}", result)
            with self._lock:
                if mark in self._audited:
                    continue
                self._audited.add(mark)
            self.memory.audited(ident, op, target, result, session=s)
