"""The handoff service: the operations every face calls (HTTP, CLI through HTTP, MCP, web).

Owns :class:`HandoffService` (create, list, show, claim, complete, release, cancel, and
the brief's offers); the core's ``Memory`` builds it as ``memory.handoffs``. It finds handoff pages, runs every transition as
a compare-and-set job on the single writer thread (the rules are in
:mod:`~wiki_memory.core.handoffs.states`), commits it before it returns, and writes
``status: expired`` on handoffs found past ``expires``. It reaches the core only through
:class:`~wiki_memory.core.handoffs.model.HandoffMemory`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from wiki_memory.capture.observation import Observation, iso, project_name
from wiki_memory.capture.sanitize import redact_obj
from wiki_memory.capture.spool import SessionInfo
from wiki_memory.core.handoffs.auto import open_automatic
from wiki_memory.core.handoffs.model import (
    OFFER_CODE_PREFIX,
    STATES,
    TO_RE,
    Claimant,
    Handoff,
    HandoffConflict,
    Lease,
    bullets,
    expiry_of,
    is_offer_code,
    opt_list,
    opt_text,
    parse_handoff,
    req_str,
    session_link,
)
from wiki_memory.core.handoffs.pages import HandoffPages
from wiki_memory.core.handoffs.states import (
    ExpiredNow,
    decide_cancel,
    decide_claim,
    decide_complete,
    decide_release,
    status_of,
)
from wiki_memory.core.text import replace_section
from wiki_memory.core.writer import WriteResult
from wiki_memory.errors import BadRequest, Forbidden, NotFound
from wiki_memory.identity import Identity
from wiki_memory.wiki.frontmatter import FrontmatterError, set_keys

log = logging.getLogger("wiki_memory.core.handoffs")

# --------------------------------------------------------------------------- service


class HandoffService(HandoffPages):
    """The handoff operations every face calls (HTTP, CLI through HTTP, MCP, web).

    ``HandoffService(memory)`` has no side effects; the core registers
    :meth:`on_session_end` on ``Memory.on_session_end`` itself."""

    # -- leases ----------------------------------------------------------------------------
    def _live_lease(self, hid: str, now: float) -> Lease | None:
        return self.leases.live(hid, now)

    def release_offers(self, who: Claimant, ids: Iterable[str]) -> None:
        """Give back offers ``who`` holds on ``ids`` (a brief that could not show them)."""
        self.leases.give_back(who, ids)

    # -- views ---------------------------------------------------------------------------
    def status_of(self, h: Handoff, now: float | None = None) -> str:
        """The effective status: stored status, ``offered`` while a lease runs, and
        ``expired`` for an open handoff past ``expires``."""
        return status_of(h, self.clock() if now is None else now, self.leases)

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

    def list_handoffs(
        self,
        user: Identity | None,
        *,
        project: str | None = None,
        status: str | None = None,
        limit: int = 200,
    ) -> list[dict[str, Any]]:
        """Handoffs ``user`` may see, newest first, as :meth:`to_json` dicts. ``status``
        filters on the effective status (``offered`` and ``expired`` included).
        Raises ValueError for an unknown status."""
        if status is not None and status not in STATES:
            raise BadRequest(f"status must be one of {', '.join(STATES)}", field="status")
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

    def show(self, user: Identity | None, hid: str) -> dict[str, Any]:
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
        user: Identity,
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
        proj = project_name(req_str(project, "project"))
        if proj != project:
            raise BadRequest(
                f"project: {project!r} is not a valid project name (try {proj!r})", field="project"
            )
        title_s = " ".join(req_str(title, "title").split())[:200]
        now = self.clock()
        vis = visibility or "project"
        if vis not in ("project", "personal"):
            raise BadRequest("visibility must be 'project' or 'personal'", field="visibility")
        target = to or "any"
        if not TO_RE.match(target):
            raise BadRequest("to must be 'any', a harness name or a user name", field="to")
        # a project the caller may not read answers as one that does not exist; one it
        # may only read is a 403 naming the write grant it lacks. A personal handoff is
        # written in the caller's own folder: that folder decides (a reader writes none)
        probe = (
            f"people/{user.user}/handoffs/new.md"
            if vis == "personal"
            else f"projects/{proj}/handoffs/new.md"
        )
        if not self.memory.scope.visible(user, probe, None):
            self.memory.audited(user, "handoff.create", f"projects/{proj}", "not_found")
            raise NotFound(f"no such project: {proj}")
        try:
            self.memory.scope.require_write(user, probe)
        except Forbidden:
            self.memory.audited(user, "handoff.create", f"projects/{proj}", "denied")
            raise
        exp = expiry_of(expires, expires_in_seconds, now, self.config.expires_seconds)
        who = Claimant.of(user, harness, session_id)
        page = session_page or self._session_page_of(who)
        sections = {
            "where_we_left_off": opt_text(where_we_left_off, "where_we_left_off"),
            "what_failed": opt_text(what_failed, "what_failed"),
            "open_questions": bullets(opt_list(open_questions, "open_questions")),
            "next_steps": bullets(opt_list(next_steps, "next_steps")),
            "files": bullets([f"`{f.replace('`', '')}`" for f in opt_list(files, "files") or []]),
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
        self.memory.audited(user, "handoff.create", res.value.id, "ok", path=res.value.path)
        self._note_cited(user, res.value.path, page)
        return self.to_json(res.value, full=True)

    def _note_cited(self, user: Identity, path: str, session_page: str | None) -> None:
        """The pages a new handoff at ``path`` links, as ``user`` sees them, count as
        cited by ``user`` in the use record (not its session page: the server links it)."""
        links = self.memory.page_links(path, user)["links"]
        skip = {path, session_page}
        cited = [str(lk["path"]) for lk in links if lk.get("path") and lk["path"] not in skip]
        self.memory.use.note("cited", cited, user.user or None)

    # -- transitions ---------------------------------------------------------------------
    def _transition(
        self,
        hid: str,
        user: Identity,
        decide: Callable[[Handoff, float], dict[str, Any] | None],
        message: str,
        after: Callable[[bytes], bytes] | None = None,
        op: str = "handoff.update",
    ) -> tuple[dict[str, Any], bool]:
        """Run ``decide(handoff, now)`` (a rule of :mod:`~wiki_memory.core.handoffs.states`)
        on the writer thread; it raises to refuse, returns None for "already so" (no
        write), or the frontmatter keys to set. The write is committed before this
        returns. Returns (handoff JSON, changed)."""
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
                updates = decide(h, now)
            except ExpiredNow as exc:
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

        # the caller passes the scope rule on the page (404 hidden, 403 without a write
        # grant on its project) and the transition is one line of the audit log
        try:
            self.memory.update_page(
                path, fn, user=user.user, message=message, commit_now=True, who=user, op=op
            )
        except NotFound:
            raise NotFound(f"no such handoff: {hid}") from None
        if expired_after["err"] is not None:
            raise expired_after["err"]
        raw = self._read(path)
        h = parse_handoff(raw, path) if raw is not None else None
        if h is None:
            raise NotFound(f"no such handoff: {hid}")
        return self.to_json(h, full=True), changed["v"]

    def claim(
        self, user: Identity, hid: str, *, harness: str | None = None, session_id: str | None = None
    ) -> dict[str, Any]:
        """Claim ``hid`` (a handoff id, or the offer code a brief printed) for (user,
        harness, session_id). Returns ``{handoff, repeat}``.

        An open handoff (or one offered to this very session) becomes ``claimed``, for good:
        nobody else can claim it. The holder's repeat claim is a no-op (``repeat: true``,
        no write). While an offer runs, the offered user's claim by id, from any session,
        is the offered session's claim. An offer code claims as the session it was
        offered to, once: it is bound to that user (another user's code, an unknown one
        and one whose offer ended raise NotFound, like a missing handoff) and a used one
        raises :class:`HandoffConflict` ``used``. 409 when another holds it
        (``claimed``/``offered``, naming the holder) or it is done, cancelled or expired.
        Claiming also gives back the session's other offers."""
        who = Claimant.of(user, harness, session_id)
        if is_offer_code(hid):
            hid, who = self._redeem(user, hid)

        def decide(h: Handoff, now: float) -> dict[str, Any] | None:
            return decide_claim(h, now, who, self.leases)

        out, changed = self._transition(
            hid, user, decide, f"Handoff {hid} claimed by {user.user}", op="handoff.claim"
        )
        return {"handoff": out, "repeat": not changed}

    def _redeem(self, user: Identity, code: str) -> tuple[str, Claimant]:
        """The handoff id and the offered session an offer code stands for (``user`` must
        be the offered user); raises NotFound or HandoffConflict ``used``."""
        found = self.leases.by_code(code, self.clock())
        if found is not None and found[1].holder.user == user.user:
            return found[0], replace(found[1].holder, caller=user)
        spent = self.leases.spent(code)
        if found is None and spent is not None and spent[1] == user.user:
            raise HandoffConflict(
                "used",
                f"this offer code was used already: handoff {spent[0]} was claimed with it"
                f" (see it with `wiki-memory handoff show {spent[0]}`)",
                "claimed",
            )
        raise NotFound(
            f"no such handoff: {OFFER_CODE_PREFIX}… (no running offer to you has this code)"
        )

    def complete(
        self,
        user: Identity,
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
        who = Claimant.of(user, harness, session_id)
        note_s = redact_obj(opt_text(note, "note"))[0] if note else ""

        def decide(h: Handoff, now: float) -> dict[str, Any] | None:
            return decide_complete(h, now, who, self.leases)

        def outcome(new: bytes) -> bytes:
            text = new.decode("utf-8")
            return replace_section(text, "Outcome", note_s.strip()).encode("utf-8")

        out, changed = self._transition(
            hid,
            user,
            decide,
            f"Handoff {hid} done by {who.describe()}",
            outcome if note_s else None,
            op="handoff.complete",
        )
        return {"handoff": out, "repeat": not changed}

    def release(
        self, user: Identity, hid: str, *, harness: str | None = None, session_id: str | None = None
    ) -> dict[str, Any]:
        """Give a claimed handoff back: it is open again (claim keys cleared). Only its
        claimant's user may. 409 when nobody holds it (``not_claimed``), another holds
        it, or it is done/cancelled/expired. Returns ``{handoff, repeat}``."""
        who = Claimant.of(user, harness, session_id)

        def decide(h: Handoff, now: float) -> dict[str, Any] | None:
            return decide_release(h, now, user.user, self.leases)

        out, changed = self._transition(
            hid,
            user,
            decide,
            f"Handoff {hid} released by {who.describe()}",
            op="handoff.release",
        )
        return {"handoff": out, "repeat": not changed}

    def cancel(self, user: Identity, hid: str, *, reason: str | None = None) -> dict[str, Any]:
        """Cancel an open or offered handoff (its lease ends). Only its creator or the
        wiki's owner may (403 otherwise). A repeat by the same user is a no-op. 409 when
        it is claimed (the claimant must release it first), done or expired.
        Returns ``{handoff, repeat}``."""
        reason_s = redact_obj(opt_text(reason, "reason"))[0] if reason else ""

        def decide(h: Handoff, now: float) -> dict[str, Any] | None:
            return decide_cancel(h, now, user.user, self.memory.owner, reason_s, self.leases)

        out, changed = self._transition(
            hid, user, decide, f"Handoff {hid} cancelled by {user.user}", op="handoff.cancel"
        )
        return {"handoff": out, "repeat": not changed}

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
            # offered only to a caller who may claim it: a write grant on its project
            if self.memory.scope.writable(who.caller, r["path"], r.get("meta") or {})
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
            for hid in self.leases.held_by(who, now):
                path = self.locate(hid)
                h = self._fresh(path, who) if path else None
                if h is not None and self._offerable(h, now):
                    self.leases.renew(hid, who, now + self.config.lease_seconds)
                    offered.append(h)
                else:
                    self.leases.drop(hid)
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
                if not self.leases.grant(h.id, who, now, now + self.config.lease_seconds):
                    continue
                offered.append(h)
            return WriteResult(value=(held, offered))

        res = self.memory.writer.call(job)
        value: tuple[list[Handoff], list[Handoff]] = res.value
        return value

    def _offerable(self, h: Handoff, now: float) -> bool:
        if h.stored_status not in ("open", "offered"):
            return False
        exp = h.expires
        return exp is None or exp > now

    # -- automatic handoffs ------------------------------------------------------------------
    def on_session_end(
        self, memory: object, info: SessionInfo, observations: list[Observation], page: str
    ) -> None:
        """The session-end hook the core calls on the writer thread
        (``Memory.on_session_end``): open an automatic handoff when the session shows
        signs of unfinished work and left none itself
        (:func:`~wiki_memory.core.handoffs.auto.open_automatic`)."""
        del memory
        open_automatic(self, info, observations, page)

    #: the verb's plain name (``svc.list(user, project=…)``), as the other faces call it
    list = list_handoffs


def _own(meta: dict[str, Any], who: Claimant) -> bool:
    return (
        meta.get("user") == who.user
        and meta.get("harness") == who.harness
        and meta.get("session") == who.session
    )
