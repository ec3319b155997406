"""Handoff pages on disk, reached through the core: find, read, number, write, expire.

Owns :class:`HandoffPages`, the base of
:class:`~wiki_memory.core.handoffs.service.HandoffService`: the service's state (the
memory, the tunables, the clock, the leases, the id counter and the path cache) and the
page operations the verbs, the brief's offers and the automatic handoff share. Reads go
through the scope rule (no symlink on the way, one hard link; what a caller may not see
is missing); writes go through ``memory.update_page`` on the single writer thread.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from wiki_memory.capture.observation import iso, session_key
from wiki_memory.core.handoffs.model import (
    ID_RE,
    NUM_ID_RE,
    Claimant,
    Handoff,
    HandoffConfig,
    HandoffMemory,
    claim_fields,
    parse_handoff,
    render_page,
)
from wiki_memory.core.handoffs.states import Leases
from wiki_memory.core.writer import WriteResult
from wiki_memory.errors import BadRequest, Conflict, NotFound
from wiki_memory.identity import Identity
from wiki_memory.wiki.frontmatter import FrontmatterError, page_head, set_keys

log = logging.getLogger("wiki_memory.core.handoffs")


class HandoffPages:
    """The handoff pages of one memory (see the module's docstring)."""

    def __init__(self, memory: HandoffMemory, config: HandoffConfig | None = None) -> None:
        """Over ``memory``; ``config`` defaults to what ``memory.settings`` and the
        environment say (:meth:`HandoffConfig.load`)."""
        self.memory = memory
        self.config = config or HandoffConfig.load(memory.settings)
        self.wiki_dir: Path = memory.wiki_dir
        #: the offers (in memory only: a restart reopens them)
        self.leases = Leases()
        self._next_num: int | None = None
        self._paths: dict[str, str] = {}
        self.clock: Callable[[], float] = time.time

    # -- locating pages -------------------------------------------------------------------
    def _handoff_files(self) -> Iterable[Path]:
        yield from self.wiki_dir.glob("projects/*/handoffs/*.md")
        yield from self.wiki_dir.glob("people/*/handoffs/*.md")

    def locate(self, hid: str) -> str | None:
        """The wiki-relative path of handoff ``hid`` (file name ``<hid>.md`` under a
        ``handoffs/`` folder), or None. Raises ValueError for a malformed id."""
        if not isinstance(hid, str) or not ID_RE.match(hid):
            raise BadRequest(f"not a handoff id: {hid!r}", field="id")
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

    def _may_see(self, path: str, meta: dict[str, Any], user: Identity | None) -> bool:
        """The scope rule (:mod:`wiki_memory.core.scope`) for a handoff page."""
        return self.memory.scope.visible(user, path, meta)

    def _load(self, hid: str, user: Identity | None) -> Handoff:
        path = self.locate(hid)
        raw = self._read(path) if path else None
        h = parse_handoff(raw, path) if raw is not None and path else None
        if h is None or not self._may_see(h.path, h.meta, user):
            raise NotFound(f"no such handoff: {hid}")
        return h

    def _fresh(self, path: str, who: Claimant) -> Handoff | None:
        raw = self._read(path)
        if raw is None:
            return None
        h = parse_handoff(raw, path)
        if h is None or not self._may_see(path, h.meta, who.caller):
            return None
        return h

    def _indexed(self, project: str | None) -> list[dict[str, Any]]:
        """Handoff rows from the index (kind ``handoff``), newest first: of ``project``,
        of every project (None), or of none (``""``: the personal handoffs a session with
        no project left)."""
        rows: list[dict[str, Any]] = []
        offset = 0
        while True:
            batch = self.memory.index.list_pages(
                project=project or None, kind="handoff", limit=1000, offset=offset
            )
            rows.extend(r for r in batch if project != "" or not r.get("project"))
            if len(batch) < 1000:
                return rows
            offset += 1000

    # -- new pages ------------------------------------------------------------------------
    def _new_id(self) -> str:
        """The next free ``H-<n>`` (4+ digits); writer thread only."""
        if self._next_num is None:
            top = 0
            for p in self._handoff_files():
                m = NUM_ID_RE.match(p.stem)
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
        # project None: a session that had no project
        meta: dict[str, Any] = {
            **page_head("handoff", hid, title, iso(now), iso(now), project or None),
            "status": "open",
            "user": who.user,
            "harness": who.harness,
            "session": who.session,
            "to": to,
            "visibility": visibility,
            "expires": iso(expires),
            **claim_fields(None),
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
            message=f"Handoff {hid} opened: {path}",
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

    # -- expiry ---------------------------------------------------------------------------
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
            self.leases.drop(h.id)
            try:
                return set_keys(current, {"status": "expired", "updated": iso(now)})
            except FrontmatterError:
                return None

        owner = self.memory.owner
        self.memory.update_page(path, fn, user=owner, message=f"Handoff expired: {path}")
