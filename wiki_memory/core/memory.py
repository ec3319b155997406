"""The Memory service: the operations every face (HTTP, MCP, CLI, web) calls.

One instance per data directory. It owns the spool, the writer thread (all writes to
``wiki/`` and their commits), the index and the watcher; faces never touch storage
themselves.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wiki_memory.capture.observation import (
    Observation,
    ObservationError,
    iso,
    parse_event,
)
from wiki_memory.capture.sanitize import redact_obj, redact_text
from wiki_memory.capture.spool import SessionInfo, Spool
from wiki_memory.config import Settings
from wiki_memory.core.scope import ScopeRule, frontmatter_of, not_found
from wiki_memory.core.writer import Author, Writer, WriteResult
from wiki_memory.errors import BadRequest, Conflict, Forbidden, NotFound
from wiki_memory.identity import Identity, may_admin, may_read
from wiki_memory.index.store import Index
from wiki_memory.index.watcher import Watcher
from wiki_memory.recall import rank
from wiki_memory.recall.filters import parse_time
from wiki_memory.recall.pack import pack
from wiki_memory.wiki import compiler
from wiki_memory.wiki.git import CommitInfo, GitBusy, GitStore, author_email_for
from wiki_memory.wiki.paths import PathRefused, atomic_write, clean_rel, locate

log = logging.getLogger("wiki_memory.core.memory")

#: events after which the session page is (re)written
COMPILE_KINDS = {"stop", "session_end", "turn"}
END_KINDS = {"session_end"}


@dataclass
class RecallResult:
    """``{items, used_tokens, budget_tokens, omitted}`` as returned by recall."""

    items: list[dict[str, Any]]
    used_tokens: int
    budget_tokens: int
    omitted: int

    def to_json(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "used_tokens": self.used_tokens,
            "budget_tokens": self.budget_tokens,
            "omitted": self.omitted,
        }


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Memory:
    """The core service over one data directory (already laid out and locked by the caller)."""

    def __init__(self, settings: Settings, owner_user: str = "owner") -> None:
        self.settings = settings
        self.owner = owner_user
        self.wiki_dir = settings.wiki_dir
        #: the one access rule every page read and write asks (wiki_memory.core.scope)
        self.scope = ScopeRule(self.wiki_dir, owner_user)
        # the caller holds the data directory lock: locks a killed server left are ours
        self.git = GitStore(self.wiki_dir, clear_stale_locks=True)
        self.spool = Spool(settings.spool_dir)
        self.index = Index(settings.index_path)
        self.writer = Writer(self._commit, commit_delay=settings.commit_delay_seconds)
        #: path → sha256 of the bytes the server last wrote or committed there
        self._server_hashes: dict[str, str] = {}
        #: session page path → its user, for pages seeded at start (see _seed_server_hashes)
        self._server_authors: dict[str, str] = {}
        #: the start-up recovery commit met GitBusy: the idle loop tries it again
        self._recover_due = False
        #: commits fail (a lock, a full disk, a broken repository): see commit_status
        self._stall: dict[str, Any] | None = None
        #: session page path → the server's last pure renderings (newest first), the
        #: bases of the three-way merge with a person's edits (see :meth:`_merge_page`)
        self._renders: OrderedDict[str, list[bytes]] = OrderedDict()
        #: session page path → (session key, state) while its compile job runs
        self._render_ctx: dict[str, tuple[str, dict[str, Any]]] = {}
        #: page path → the server's version that could not be merged (a conflict copy)
        self._conflicts: dict[str, bytes] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.watcher: Any = None
        self.started = False
        #: short recall handle → anchor (see :meth:`_handle`)
        self._handles: dict[str, str] = {}
        #: what ranking reads (recall.rank receives these, never the Memory)
        self._sources = rank.Sources(
            index=self.index,
            spool=self.spool,
            git=self.git,
            asof_dir=Path(settings.index_path).parent / "as-of",
            handle=self._handle,
            session_visible=self.session_visible,
        )
        #: called on the writer thread when a session ends (SessionEnd or idle; never on
        #: a server restart): ``fn(memory, info, observations, page_path)``
        self.on_session_end: list[
            Callable[[Memory, SessionInfo, list[Observation], str], None]
        ] = []

    # -- life cycle ----------------------------------------------------------------------
    def start(self) -> None:
        """Recover, index, and start the writer, idle and watcher threads."""
        self._seed_server_hashes()
        self.writer.start()
        self.writer.call(self._recover_job)
        if self.index.needs_rebuild or not self.index.paths():
            self.index.rebuild(self.wiki_dir)
        else:
            self.index.sync_paths(self.wiki_dir, ["."])
            self.index.set_wiki_root(self.wiki_dir)
        self._reindex_spool()
        for key, info in self.spool.sessions.items():
            if info.state.get("compiled_count", 0) < info.count:
                self.request_compile(key, end=info.state.get("status") == "ended")
        t = threading.Thread(target=self._idle_loop, name="wiki-idle", daemon=True)
        t.start()
        self._threads.append(t)
        if self.settings.watch:
            self.watcher = Watcher(
                self.wiki_dir,
                self.index,
                self.git,
                self.commit_hand_edits,
                self.settings.hand_edit_settle_seconds,
            )
            self.watcher.start()
        self.started = True

    def stop(self) -> None:
        """Write pending pages, commit them, and stop every thread (SIGINT/SIGTERM path)."""
        self._stop.set()
        if self.watcher is not None:
            self.watcher.stop()
        # queued compiles run first, then every pending group is committed; a lock held
        # by another git is waited on briefly only, so shutdown stays bounded
        self.git.lock_wait_seconds = min(self.git.lock_wait_seconds, 1.0)
        try:
            self.writer.stop()
        except Exception as exc:  # noqa: BLE001 - files are on disk; the next start commits them
            log.warning(
                "shutting down with uncommitted pages (%s); the next start commits them", exc
            )
        self.spool.close()
        self.index.close()

    def _seed_server_hashes(self) -> None:
        """After a restart, know which session pages on disk hold the server's own bytes:
        those whose sha256 the session's spool state recorded as written (``page_sha256``),
        about to be written (``pending_sha256``, a crash before the state caught up), or
        rendered. Such a page is never taken for a person's hand edit."""
        for info in list(self.spool.sessions.values()):
            st = info.state
            path = st.get("path")
            if not isinstance(path, str):
                continue
            full = self.wiki_dir / path
            data = _read_plain(full) if _plain_or_gone(full) else None
            if data is None:
                continue
            digest = sha256(data)
            known = {st.get("page_sha256"), st.get("pending_sha256")}
            known.update(r.get("sha256") for r in st.get("renders") or [] if isinstance(r, dict))
            if digest in known:
                self._server_hashes[path] = digest
                self._server_authors[path] = info.user

    def _recover_job(self) -> WriteResult:
        """Commit files that changed on disk while no server ran (hand edits, or a page
        written before a crash and never committed: that one as the session's user).

        When another git holds the repository (GitBusy), start-up goes on and the idle
        loop tries again later."""
        from wiki_memory.index.store import is_indexable

        self._recover_due = False
        try:
            # pages only (as the watcher): an editor's settings (.obsidian/), attachments
            # and hard-linked files are not committed on the owner's behalf
            dirty = [
                p
                for p in self.git.dirty_paths()
                if is_indexable(p) and _plain_or_gone(self.wiki_dir / p)
            ]
            by_server: dict[str, list[str]] = {}
            by_hand: list[str] = []
            for p in dirty:
                data = _read_plain(self.wiki_dir / p)
                user = self._server_authors.get(p)
                if user is not None and data is not None and self.server_wrote(p, data):
                    by_server.setdefault(user, []).append(p)
                elif data is not None and self.server_wrote(p, data):
                    continue  # a server write waiting in the writer's groups
                else:
                    by_hand.append(p)
            for user, paths in sorted(by_server.items()):
                self._git_commit(
                    paths,
                    user,
                    author_email_for(user),
                    f"Update {len(paths)} session page(s) written before the server stopped",
                )
            if by_hand:
                self._git_commit(
                    by_hand,
                    self.owner,
                    author_email_for(self.owner),
                    f"Recover {len(by_hand)} change(s) made while the server was stopped",
                )
        except GitBusy as exc:
            self._recover_due = True
            log.warning("start-up recovery commit postponed: %s; retrying later", exc)
        return WriteResult()

    # -- capture -------------------------------------------------------------------------
    def capture(self, body: Any, user: str) -> list[dict[str, Any]]:
        """Accept one hook event or a list of them for ``user``.

        Every event is validated first (ObservationError names the field; nothing is
        written then), sanitized (invariant 4), appended durably to the spool (fsynced
        before this returns, invariant 3) and deduplicated by ``event_id``. Returns
        ``[{"id": obs_id, "duplicate": bool, "session_key": ...}]``.
        """
        events = body if isinstance(body, list) else [body]
        if not events:
            raise ObservationError("body", "an empty list holds no event")
        if len(events) > 1000:
            raise ObservationError("body", "at most 1000 events per request")
        now = time.time()
        parsed: list[Observation] = []
        for i, ev in enumerate(events):
            try:
                obs = parse_event(ev, user, now)
            except ObservationError as exc:
                if len(events) > 1:
                    raise ObservationError(f"[{i}].{exc.field}", exc.message) from None
                raise
            try:
                clean, _ = redact_obj(obs.payload)
            except RecursionError:
                raise ObservationError("payload", "nested too deeply") from None
            obs.payload = clean
            for attr in ("harness", "event", "cwd", "project", "session_id", "event_id"):
                v = getattr(obs, attr)
                if isinstance(v, str):
                    setattr(obs, attr, redact_obj(v)[0])
            parsed.append(obs)
        accepted = self.spool.append(parsed)
        spool_rows = []
        to_compile: dict[str, bool] = {}
        for obs, acc in zip(parsed, accepted, strict=True):
            if acc.duplicate:
                continue
            spool_rows.append(self._spool_row(self.spool.sessions[acc.session_key], obs))
            if obs.kind in COMPILE_KINDS:
                to_compile[acc.session_key] = to_compile.get(acc.session_key, False) or (
                    obs.kind in END_KINDS
                )
        if spool_rows:
            self.index.add_spool(spool_rows)
        for key, end in to_compile.items():
            self.request_compile(key, end=end)
        return [
            {"id": a.obs_id, "duplicate": a.duplicate, "session_key": a.session_key}
            for a in accepted
        ]

    def _spool_row(self, info: SessionInfo, obs: Observation) -> dict[str, Any]:
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

    def _reindex_spool(self) -> None:
        rows = []
        for info, obs in self.spool.iter_all():
            if int(obs.obs_id.rsplit("-", 1)[-1]) > int(info.state.get("compiled_count", 0)):
                rows.append(self._spool_row(info, obs))
        self.index.replace_spool(rows)

    # -- compile -------------------------------------------------------------------------
    def request_compile(self, key: str, end: bool = False) -> Any:
        """Queue a (re)compile of a session's page on the writer; returns a Future."""
        return self.writer.submit(lambda: self._compile_job(key, end))

    def _session_meta(self, info: SessionInfo) -> compiler.SessionMeta:
        return compiler.SessionMeta(
            key=info.key,
            harness=info.harness,
            session_id=info.session_id,
            project=info.project,
            user=info.user,
            cwd=info.cwd,
            started=info.started,
        )

    def _compile_job(self, key: str, end: bool, remerge: bool = False) -> WriteResult:
        """Write a session's page. ``remerge``: no new observations, but a person saved the
        page; render exactly what the server last rendered and merge it into their version
        again (their save may have been based on an older version of the page)."""
        info = self.spool.sessions.get(key)
        if info is None:
            return WriteResult()
        obs = self.spool.observations(key)
        state = dict(info.state)
        now = time.time()
        ended_now = end or any(o.kind in END_KINDS for o in obs)
        already = state.get("compiled_count") == len(obs) and (
            state.get("status") == "ended" or not ended_now
        )
        renders = list(state.get("renders") or [])
        if remerge:
            if not renders or not state.get("path"):
                return WriteResult()
            last = renders[0]
            obs = obs[: int(last["count"])]
            status, ended_at, now = last["status"], last.get("ended"), float(last["now"])
        elif already and state.get("path"):
            return WriteResult(value=state.get("path"))
        else:
            status = "ended" if ended_now else "active"
            ended_at = state.get("ended_at") or (now if ended_now else None)
        meta = self._session_meta(info)
        path = state.get("path")
        if path and not (self.wiki_dir / path).exists():
            path = self._find_session_page(info) or None
        comp = compiler.compile_session(
            meta,
            obs,
            status=status,
            ended=ended_at,
            now=now,
            created=state.get("created"),
            path=path,
            excerpt_bytes=self.settings.tool_output_excerpt_bytes,
        )
        full = self.wiki_dir / comp.path
        self._render_ctx[comp.path] = (key, state)
        fresh = compiler_bytes(comp)
        render = {
            "count": len(obs),
            "status": status,
            "ended": ended_at,
            "now": now,
            "sha256": sha256(fresh),
        }

        def merged(cur: bytes | None) -> bytes:
            self._commit_person_first(comp.path, cur)
            new = self._merge_page(comp, current=cur)
            if new != cur:
                # Before the page changes on disk, the spool state names the bytes (and
                # the rendering) about to be written: after a kill -9 between this write
                # and the state update, the next start knows the page is the server's
                # own, not a hand edit, and has its base for later merges.
                pending = dict(state, path=comp.path, pending_sha256=sha256(new))
                pending["created"] = state.get("created") or now
                if not remerge:
                    pending["renders"] = [render, *renders[:2]]
                self.spool.write_state(key, pending)
            return new

        try:
            current, written = self._cas_write(comp.path, full, merged)
        finally:
            self._render_ctx.pop(comp.path, None)
        self._remember_render(comp.path, fresh)
        paths = [comp.path]
        if written is not None:
            self._server_hashes[comp.path] = sha256(written)
            self.index.upsert_page(comp.path, written)
        copy = self._write_conflict_copy(comp.path)
        if copy:
            paths.append(copy)
        if remerge:
            if written is None:
                return WriteResult()
            return WriteResult(
                paths=paths,
                author=Author(info.user, author_email_for(info.user)),
                message=f"Merge session {comp.metadata['title'][:60]} into a hand edit",
                value=comp.path,
            )
        self.index.delete_spool_session(key)
        state.update(
            path=comp.path,
            compiled_count=len(obs),
            status=status,
            created=state.get("created") or now,
        )
        if ended_at:
            state["ended_at"] = ended_at
        state["renders"] = [render, *renders[:2]]
        if written is not None:
            state["page_sha256"] = sha256(written)
        state.pop("pending_sha256", None)
        just_ended = status == "ended" and info.state.get("status") != "ended"
        self.spool.write_state(key, state)
        if just_ended:
            for hook in self.on_session_end:
                try:
                    hook(self, info, obs, comp.path)
                except Exception:
                    log.exception("a session-end hook failed for %s", key)
        author = Author(info.user, author_email_for(info.user))
        verb = "End" if status == "ended" else "Update"
        return WriteResult(
            paths=paths,
            author=author,
            message=f"{verb} session {comp.metadata['title'][:60]} ({info.harness})",
            value=comp.path,
        )

    def _find_session_page(self, info: SessionInfo) -> str | None:
        d = self.wiki_dir / "projects" / info.project / "sessions"
        for p in d.glob(f"*-{info.key[:8]}.md"):
            return p.relative_to(self.wiki_dir).as_posix()
        return None

    def _merge_page(self, comp: compiler.Compiled, *, current: Any = ...) -> bytes:
        """The bytes to write for a compiled page, keeping a person's edits (invariant 8).

        ``current`` is the page's bytes on disk (None: absent; left out: read now). When
        the page is absent, or is exactly what the server last rendered, the fresh
        rendering is written. Otherwise a person changed it: the server's change since its
        last rendering (the *base*) is merged into their version line by line
        (:func:`wiki_memory.wiki.merge.merge3`), so their new keys, paragraphs and edits
        stay byte for byte. Of the server's last three renderings, the base is the one
        closest to the person's version (their editor may have saved over a newer server
        write). Where both changed the same lines, the person's lines are kept and the
        server's whole rendering is written beside the page as ``<name>.server-copy.md``
        (see :meth:`_write_conflict_copy`). When no earlier rendering is known, only the
        owned frontmatter keys and sections (``## Summary``, ``## Timeline``) are replaced.
        """
        from wiki_memory.wiki.merge import changed_lines, merge3

        fresh = compiler_bytes(comp)
        if current is ...:
            current = _read_plain(self.wiki_dir / comp.path)
        if current is None or current == fresh:
            return fresh
        bases = self._previous_renders(comp.path)
        if bases and current == bases[0]:
            return fresh
        if not bases:
            return self._merge_owned_parts(comp, current)
        bom, text, eol = _split_text(current)
        fresh_t = _with_eol(fresh.decode("utf-8", "surrogateescape"), eol)
        cands = [_with_eol(b.decode("utf-8", "surrogateescape"), eol) for b in bases]
        base = min(cands, key=lambda c: changed_lines(c, text))  # first (newest) on ties
        res = merge3(base, fresh_t, text)
        merged = bom + res.text.encode("utf-8", "surrogateescape")
        if _frontmatter_broken(merged) and not _frontmatter_broken(current):
            return self._merge_owned_parts(comp, current)
        if res.conflicts:
            self._conflicts[comp.path] = fresh
            log.warning(
                "%s: a hand edit and the server changed the same lines; the person's "
                "lines were kept, the server's version is written beside the page",
                comp.path,
            )
        return merged

    def _merge_owned_parts(self, comp: compiler.Compiled, current: bytes) -> bytes:
        """Without a known base: splice the owned keys and sections into ``current``."""
        from wiki_memory.wiki.frontmatter import FrontmatterError, set_keys

        try:
            merged = set_keys(current, comp.metadata)
        except FrontmatterError:
            merged = current
        text = merged.decode("utf-8", errors="surrogateescape")
        for name, content in (("Summary", comp.summary), ("Timeline", comp.timeline)):
            text = replace_section(text, name, content)
        return text.encode("utf-8", errors="surrogateescape")

    def _remember_render(self, path: str, fresh: bytes) -> None:
        old = self._renders.pop(path, [])
        self._renders[path] = [fresh, *[r for r in old if r != fresh][:2]]
        while len(self._renders) > 256:
            self._renders.popitem(last=False)

    def _previous_renders(self, path: str) -> list[bytes]:
        """The server's last renderings of a session page, newest first: from memory, else
        rendered again from the parameters kept in the session's spool state (checked
        against the sha256 recorded then)."""
        if path in self._renders:
            return list(self._renders[path])
        ctx = self._render_ctx.get(path)
        if ctx is None:
            return []
        key, state = ctx
        info = self.spool.sessions.get(key)
        if info is None:
            return []
        out: list[bytes] = []
        obs: list[Observation] | None = None
        for r in state.get("renders") or []:
            try:
                if obs is None:
                    obs = self.spool.observations(key)
                comp = compiler.compile_session(
                    self._session_meta(info),
                    obs[: int(r["count"])],
                    status=r["status"],
                    ended=r.get("ended"),
                    now=float(r["now"]),
                    created=state.get("created"),
                    path=path,
                    excerpt_bytes=self.settings.tool_output_excerpt_bytes,
                )
            except Exception:  # noqa: BLE001 - an old state the compiler cannot replay
                log.exception("cannot render an earlier version of %s", path)
                continue
            data = compiler_bytes(comp)
            if sha256(data) == r.get("sha256"):
                out.append(data)
        return out

    def _commit_person_first(self, path: str, current: bytes | None) -> None:
        """Before the server writes over a person's uncommitted save, commit that save as
        theirs (the local owner), so git holds both: their edit, then the server's."""
        if current is None or self.server_wrote(path, current):
            return None
        try:
            sha = self._git_commit(
                [path], self.owner, author_email_for(self.owner), f"Edit by hand: {path}"
            )
        except Exception:  # noqa: BLE001 - GitBusy etc.: the merge is committed later anyway
            log.warning("could not commit the hand edit of %s before merging", path)
            return None
        if sha is not None or self.git.tracked(path):
            self._server_hashes[path] = sha256(current)
        return None

    def _write_conflict_copy(self, path: str) -> str | None:
        """Write the server's version of ``path`` that could not be merged beside it, as
        ``<stem>.server-copy.md`` (type ``conflict``, ``conflict_of`` naming the page).
        Returns the copy's path, or None when there was no conflict."""
        fresh = self._conflicts.pop(path, None)
        if fresh is None:
            return None
        from wiki_memory.wiki.frontmatter import FrontmatterError, set_keys

        copy = conflict_copy_path(path)
        try:
            data = set_keys(fresh, {"type": "conflict", "conflict_of": path})
            parsed_id = _frontmatter_value(fresh, "id")
            if parsed_id:
                data = set_keys(data, {"id": f"{parsed_id}-server-copy"})
        except FrontmatterError:
            data = fresh
        atomic_write(self.wiki_dir / copy, data)
        self._server_hashes[copy] = sha256(data)
        self.index.upsert_page(copy, data)
        return copy

    def _cas_write(
        self, rel: str, full: Path, fn: Callable[[bytes | None], bytes | None]
    ) -> tuple[bytes | None, bytes | None]:
        """Read, compute, and replace ``full`` only if it still holds what was read.

        Returns ``(bytes read, bytes written or None)``. When a person saves in between,
        ``fn`` runs again on their version (up to 20 times, then Conflict)."""
        from wiki_memory.wiki.merge import replace_if_unchanged

        for _ in range(20):
            current = _read_plain(full)
            new = fn(current)
            if new is None or new == current:
                return current, None
            if replace_if_unchanged(full, new, current):
                return current, new
        raise Conflict(f"{rel} kept changing while the server wrote it", None)

    def update_page(
        self,
        path: str,
        fn: Callable[[bytes | None], bytes | None],
        *,
        user: str,
        message: str,
        commit_now: bool = False,
        timeout: float = 60,
        who: Identity | str | None = None,
    ) -> WriteResult:
        """Read-modify-write one page on the writer thread (the single writer).

        ``fn(current)`` gets the page's bytes on disk (None when absent) and returns the
        new bytes, or None to leave the page alone; it may raise (Conflict, ValueError…)
        to refuse, and the error reaches the caller. The new bytes replace the file only
        if it still holds ``current``: when a person saves in between, ``fn`` runs again on
        their version (invariant 8), so ``fn`` must be a pure function of its argument
        (splice with ``set_keys``, never cache ``current``). The write is atomic, indexed at once,
        and committed with ``user`` as author in the next group (``commit_now`` waits for
        that commit). Returns the WriteResult; ``value`` is the sha256 of the new bytes,
        or None when nothing was written. ``who`` is the caller a face acts for (None: the
        server itself): the scope rule (:mod:`wiki_memory.core.scope`) checks the target before
        the job and the bytes on disk inside it, so a page ``who`` may not see raises
        NotFound exactly as a missing one, before ``fn`` runs. Raises PathRefused for a
        path outside ``wiki/``.
        """
        ident = None if who is None else self.scope.identity(who)
        if ident is None:
            rel, full = locate(self.wiki_dir, path)
        else:
            rel, full = self.scope.check_target(ident, path)
        if redact_text(rel)[1]:
            # a file name is not redacted in place: it would no longer be the name asked for
            raise PathRefused("the path holds what looks like a secret")

        def checked(current: bytes | None) -> bytes | None:
            if ident is not None:
                self.scope.check_write(ident, rel, current, None)
            new = fn(current)
            if ident is not None and new is not None and new != current:
                self.scope.check_write(ident, rel, current, new)
            return new

        def job() -> WriteResult:
            _current, new = self._cas_write(rel, full, checked)
            if new is None:
                return WriteResult(value=None, commit_now=commit_now)
            digest = sha256(new)
            self._server_hashes[rel] = digest
            self.index.upsert_page(rel, new)
            return WriteResult(
                paths=[rel],
                author=Author(user, author_email_for(user)),
                message=message,
                value=digest,
                commit_now=commit_now,
            )

        return self.writer.call(job, timeout=timeout)

    def write_page(
        self,
        path: str,
        data: bytes,
        *,
        user: str,
        message: str,
        expected_hash: str | None = None,
        create_only: bool = False,
        who: Identity | str | None = None,
        on_current: Callable[[bytes | None], None] | None = None,
    ) -> WriteResult:
        """Write a whole page with a compare-and-set on its content hash.

        ``expected_hash``: the sha256 hex the caller read; a page that changed since (or
        that exists when ``create_only``) raises Conflict with the current hash, and a
        page that is gone raises NotFound. ``who``:
        the caller (see :meth:`update_page`): a page it may not see raises NotFound
        before any hash is compared, so no Conflict confirms it. ``on_current`` is told
        the bytes the write replaced (None: it created the page).
        """

        def fn(current: bytes | None) -> bytes:
            if on_current is not None:
                on_current(current)
            cur = sha256(current) if current is not None else None
            if expected_hash is not None and current is None:
                # nothing to replace: the same answer as for a page the caller may not see
                raise not_found(clean_rel(path))
            if create_only and current is not None:
                raise Conflict(f"{path} already exists", cur)
            if expected_hash is not None and expected_hash != cur:
                raise Conflict(f"{path} changed since it was read", cur)
            return data

        return self.update_page(path, fn, user=user, message=message, who=who)

    def _idle_loop(self) -> None:
        """End sessions idle longer than ``idle_seconds``; clean up old spool files."""
        last_cleanup = 0.0
        last_recover = 0.0
        while not self._stop.wait(self.settings.idle_check_seconds):
            now = time.time()
            # while commits stall, each try may wait for a lock: not more than every 30 s
            if self._recover_due and (self._stall is None or now - last_recover >= 30):
                self._recover_due = False
                last_recover = now
                self.writer.submit(self._recover_job)
            for key, info in list(self.spool.sessions.items()):
                st = info.state
                if st.get("status") == "ended":
                    continue
                if info.last_received and now - info.last_received > self.settings.idle_seconds:
                    self.request_compile(key, end=True)
            if now - last_cleanup > 3600:
                last_cleanup = now
                self.spool.cleanup(self.settings.spool_keep_seconds, now)

    # -- commits -------------------------------------------------------------------------
    def _commit(self, paths: list[str], author: Author, message: str) -> str | None:
        """Commit a group of server writes as ``author``. A path a person saved over since
        the server wrote it is committed first as their hand edit (so their save is not
        attributed to the server, and the server's write is merged back into it)."""
        mine: list[str] = []
        theirs: list[str] = []
        seen: dict[str, str] = {}
        for p in paths:
            data = _read_plain(self.wiki_dir / p) if _plain_or_gone(self.wiki_dir / p) else None
            if data is None or self._server_hashes.get(p) in (None, sha256(data)):
                mine.append(p)
                if data is not None:
                    seen[p] = sha256(data)
            else:
                theirs.append(p)
        if theirs:
            self._commit_hand_edits_now(theirs)
        sha = self._git_commit(mine, author.name, author.email, message) if mine else None
        for p in mine:
            if p in seen:
                self._server_hashes[p] = seen[p]
            else:
                self._server_hashes.pop(p, None)
        if sha:
            self.git.maybe_pack(self.settings.pack_every_commits)
        return sha

    def _git_commit(self, paths: list[str], name: str, email: str, message: str) -> str | None:
        """``self.git.commit`` that keeps :meth:`commit_status` true: a failure starts (or
        continues) a stall, a success ends it. Raises what the commit raised."""
        try:
            sha = self.git.commit(paths, name, email, message)
        except Exception as exc:
            self._commit_failed(exc)
            raise
        if self._stall is not None:
            if self._stall.get("declared"):
                log.warning("commits resumed after %.0f s", time.time() - self._stall["since"])
            self._stall = None
            self._recover_due = True  # hand edits that failed meanwhile
        return sha

    def _commit_failed(self, exc: Exception) -> None:
        from wiki_memory.wiki.locks import lock_files

        self._recover_due = True  # the idle loop commits what is left once it works
        if self._stall is not None:
            self._stall["failures"] += 1
            if self._stall["failures"] == 2:  # a person's git holds a lock for a moment:
                self._declare_stall()  # said from the second failure in a row on
            return
        locks = lock_files(self.git._controldir)
        if isinstance(exc, GitBusy) and locks:
            # no lock file name in the log or a reply (C21): doctor names them
            cause = (
                f"{len(locks)} git lock file(s) held or left by another program "
                "(`wiki-memory doctor` lists them)"
            )
            remedy = (
                "if no git program is running, `wiki-memory doctor --fix` removes locks no "
                "process holds"
            )
        elif isinstance(exc, GitBusy):
            cause = str(exc) or "the git repository is busy"
            remedy = "finish or abort the git operation in the wiki"
        elif isinstance(exc, OSError) and exc.errno in (28, 122):  # ENOSPC, EDQUOT
            cause = "the disk is full"
            remedy = "free disk space"
        else:
            cause = f"{type(exc).__name__}: {exc}"
            remedy = "run `wiki-memory doctor` to check the repository"
        self._stall = {
            "since": time.time(),
            "cause": cause,
            "remedy": remedy,
            "public_cause": "a git lock held by another program"
            if isinstance(exc, GitBusy) and locks
            else ("the disk is full" if remedy == "free disk space" else type(exc).__name__),
            "failures": 1,
        }

    def _declare_stall(self) -> None:
        st = self._stall
        if st is None:
            return
        st["declared"] = True
        cause, remedy = st["cause"], st["remedy"]
        log.warning(
            "memory is not being committed to git: %s. Every accepted change stays on disk "
            "and is committed when this is fixed; remedy: %s",
            cause,
            remedy,
        )

    def commit_status(self, detail: bool = True) -> dict[str, Any]:
        """``{"ok": True}``, or while commits fail ``{"ok": False, "since" (ISO-8601 UTC),
        "cause", "remedy", "failures"}``. ``detail`` False leaves out what names files
        (for the unauthenticated health route)."""
        st = self._stall
        if st is None or not st.get("declared"):
            return {"ok": True}
        return {
            "ok": False,
            "since": iso(st["since"]),
            "cause": st["cause"] if detail else st["public_cause"],
            "remedy": st["remedy"],
            "failures": st["failures"],
        }

    def server_wrote(self, path: str, data: bytes) -> bool:
        """True when ``data`` is what the server last wrote at ``path`` (watcher echo)."""
        return self._server_hashes.get(path) == sha256(data)

    def commit_hand_edits(self, paths: list[str]) -> Any:
        """Commit pages a person changed on disk, as the local owner, one commit per save.

        Runs on the writer thread; returns its Future (``value``: the commit sha or None)."""
        return self.writer.submit(lambda: WriteResult(value=self._commit_hand_edits_now(paths)))

    def _commit_hand_edits_now(self, paths: list[str]) -> str | None:
        """:meth:`commit_hand_edits` on the writer thread. Paths whose bytes are the
        server's own (echoes), symlinks and hard-linked files are left out. A session page
        saved by hand gets the server's latest rendering merged back in (the person's
        editor may have saved over a newer server write); not after a checkout or pull,
        which makes no commit."""
        real: list[str] = []
        seen: dict[str, str | None] = {}
        for p in paths:
            full = self.wiki_dir / p
            if not _plain_or_gone(full):
                continue
            data = _read_plain(full) if full.is_file() else None
            if data is not None and self.server_wrote(p, data):
                continue
            real.append(p)
            seen[p] = sha256(data) if data is not None else None
        if not real:
            return None
        msg = "Edit by hand: " + ", ".join(real[:5]) + (" …" if len(real) > 5 else "")
        sha = self._git_commit(real, self.owner, author_email_for(self.owner), msg)
        for p in real:
            digest = seen[p]
            if digest is None:
                self._server_hashes.pop(p, None)
            else:
                self._server_hashes[p] = digest
        for p in real if sha else []:
            key = self._session_of(p)
            if key is not None:
                self.writer.submit(functools.partial(self._compile_job, key, False, True))
        return sha

    def _session_of(self, path: str) -> str | None:
        for key, info in self.spool.sessions.items():
            if info.state.get("path") == path:
                return key
        return None

    def _echo(self, path: str) -> bool:
        try:
            data = (self.wiki_dir / path).read_bytes()
        except OSError:  # deleted, or a directory: let git decide whether anything changed
            return False
        return self.server_wrote(path, data)

    # -- recall --------------------------------------------------------------------------
    def recall(
        self,
        query: str,
        *,
        project: str | None = None,
        budget_tokens: int | None = None,
        kinds: list[str] | None = None,
        limit: int = 50,
        user: Identity | str | None = None,
        tags: list[str] | str | None = None,
        since: str | float | None = None,
        until: str | float | None = None,
        as_of: str | float | None = None,
    ) -> RecallResult:
        """Budgeted recall: handles for the best sections and running-session observations.

        Each item is ``{id, path, anchor, title, kind, snippet, why, score, expand_tokens,
        updated}``; ``used_tokens`` counts the items as serialized (compact JSON, cl100k)
        and never exceeds ``budget_tokens``. ``user`` is the caller (a name or an
        :class:`~wiki_memory.identity.Identity`; None is an anonymous caller, who sees shared pages only): pages it may
        not see (:mod:`wiki_memory.identity`) are filtered out in the SQL before ranking
        (invariant 9). Filters ``tags``,
        ``since``/``until`` (ISO-8601 or epoch seconds) and ``as_of`` (the wiki as committed
        then) are described in ``wiki_memory.recall.rank.candidates``. Raises ValueError for
        a negative budget or a bad filter (``FilterError`` names the field).
        """
        budget = self.settings.default_budget_tokens if budget_tokens is None else budget_tokens
        if budget < 0:
            raise BadRequest("budget_tokens must be >= 0", field="budget_tokens")
        candidates = self._candidates(
            query,
            project=project,
            kinds=kinds,
            limit=limit,
            filters={
                "tags": tags,
                "since": since,
                "until": until,
                "as_of": as_of,
                "who": self.scope.identity(user),
            },
        )
        packed = pack(candidates, budget)
        return RecallResult(packed.items, packed.used_tokens, budget, packed.omitted)

    def _candidates(
        self,
        query: str,
        *,
        project: str | None,
        kinds: list[str] | None,
        limit: int,
        exclude_dirs: list[str] | None = None,
        filters: dict[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        return rank.candidates(
            self._sources,
            query,
            project=project,
            kinds=kinds,
            limit=limit,
            exclude_dirs=exclude_dirs or [],
            **(filters or {}),
        )

    def _handle(self, anchor: str) -> str:
        """A short, stable id for an anchor (``h`` + 10 hex of its SHA-1), remembered so
        that :meth:`expand` can resolve it; expand also takes anchors and paths."""
        hid = "h" + hashlib.sha1(anchor.encode("utf-8")).hexdigest()[:10]
        self._handles[hid] = anchor
        if len(self._handles) > 100_000:
            self._handles.pop(next(iter(self._handles)))
        return hid

    def visible(self, path: str, user: Identity | str | None) -> bool:
        """True when ``user`` may see the indexed page at ``path`` (by the scope rule, on
        its path and indexed frontmatter); False for a page the index does not hold.
        ``user`` None is an anonymous caller (shared pages only)."""
        return self.index.page_meta(path, self.scope.identity(user)) is not None

    def expand(
        self, ids: list[str], budget_tokens: int, user: Identity | str | None = None
    ) -> dict[str, Any]:
        """Whole sections or pages for handles from recall, packed under ``budget_tokens``.

        Returns ``{items: [{id, path, anchor, text, tokens}], used_tokens, budget_tokens,
        omitted: [ids that did not fit], missing: [ids not found]}``. Pages ``user`` may
        not see are reported missing.
        """
        if budget_tokens < 0:
            raise BadRequest("budget_tokens must be >= 0", field="budget_tokens")
        cands: list[dict[str, Any]] = []
        missing: list[str] = []
        who = self.scope.identity(user)
        for raw_id in ids:
            target = self._handles.get(str(raw_id), str(raw_id))
            text = self._expand_one(target, who)
            if text is None:
                missing.append(str(raw_id))
                continue
            if target.startswith("spool:"):
                cands.append({"id": raw_id, "path": None, "anchor": None, "text": text})
                continue
            path, _, anchor = target.partition("#")
            cands.append({"id": raw_id, "path": path, "anchor": target, "text": text})
        packed = pack(cands, budget_tokens)
        return {
            "items": packed.items,
            "used_tokens": packed.used_tokens,
            "budget_tokens": budget_tokens,
            "omitted": packed.omitted_ids,
            "missing": missing,
        }

    def session_visible(self, session_key: str, user: Identity | str | None) -> bool:
        """May ``user`` see a session's observations? Only when it may see the session's
        page (the scope rule on its path and indexed frontmatter: a person may mark a
        session page ``visibility: personal``); a session with no page yet is its
        project's, seen by all."""
        info = self.spool.sessions.get(session_key)
        path = info.state.get("path") if info is not None else None
        if not isinstance(path, str) or not path:
            return True
        row = self.index.page_meta(path)
        return may_read(self.scope.identity(user), path, row["meta"] if row else None)

    def _expand_one(self, item_id: str, who: Identity | None) -> str | None:
        if item_id.startswith("spool:"):
            obs_id = item_id[6:]
            key_prefix = obs_id.rsplit("-", 1)[0]
            for key in self.spool.sessions:
                if key.startswith(key_prefix) and self.session_visible(key, who):
                    for o in self.spool.observations(key):
                        if o.obs_id == obs_id:
                            return observation_text(o)
            return None
        path, _, anchor = item_id.partition("#")
        try:
            page = self.scope.read(who, path)
        except (PathRefused, NotFound):
            return None
        if not anchor:
            return page.data.decode("utf-8", errors="replace")
        for sec in self.index.sections_of(page.rel):
            if sec["anchor"] == anchor:
                return str(sec["text"])
        return None

    # -- pages ---------------------------------------------------------------------------
    def list_pages(
        self,
        project: str | None = None,
        kind: str | None = None,
        since: str | None = None,
        limit: int = 100,
        offset: int = 0,
        user: Identity | str | None = None,
    ) -> list[dict[str, Any]]:
        """Pages from the index, newest first: ``[{path, id, title, kind, project, updated}]``.
        Pages ``user`` may not see are left out in the SQL (they take no place in
        ``limit``/``offset``; None: an anonymous caller). ``since``
        (ISO-8601, or epoch seconds as text) keeps pages updated at or after it; anything
        else raises :class:`~wiki_memory.recall.filters.FilterError` naming ``since``."""
        if since is not None:
            when = parse_time(since, "since")
            try:
                float(since)
            except ValueError:
                pass  # an ISO string: compared as written, like the stored ones
            else:  # epoch seconds: as the ISO-8601 UTC text the index compares
                since = datetime.fromtimestamp(when or 0.0, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        return self.index.list_pages(
            project=project,
            kind=kind,
            since=since,
            limit=limit,
            offset=offset,
            who=self.scope.identity(user),
        )

    def read_page(
        self,
        path: str,
        cursor: int = 0,
        max_bytes: int = 64 * 1024,
        user: Identity | str | None = None,
    ) -> dict[str, Any]:
        """One page, paged by a byte cursor that never splits a UTF-8 character.

        Returns ``{path, metadata, title, diagnostics, content, cursor, next_cursor,
        truncated, total_bytes, hash, links, backlinks, attachments}``:

        - ``links``: outgoing links and note embeds, in file order, each ``{target,
          fragment, alias, embed, line, in_frontmatter, status, path, candidates,
          fragment_found}``; ``status`` is ``resolved`` (``path`` is the page),
          ``unresolved`` (``target`` keeps the literal text) or ``ambiguous``
          (``candidates`` lists the pages). Same-page references (``[[#Heading]]``) are
          not links to another page and are left out. ``fragment_found`` is None without
          a fragment or target page, else whether the heading or block exists.
        - ``backlinks``: ``{path, title, line, fragment, alias, embed}`` of every link
          from another page that resolves to this one.
        - ``attachments``: links and embeds of files that are not pages (``![[a.png|400]]``):
          ``{target, alias, embed, line, path, exists}``.
        - ``diagnostics``: the parser's (unreadable frontmatter, duplicate keys, ...) plus
          ``unresolved_link``, ``ambiguous_link``, ``missing_attachment``,
          ``missing_fragment`` (a warning: the link still resolves) and ``merge_conflict``
          (a ``.server-copy.md`` beside the page holds the server's unmerged version),
          each ``{kind, line, message[, key]}``.

        The scope rule decides on the file read (:meth:`wiki_memory.core.scope.ScopeRule.read`):
        paths through symlinks, files with more than one hard link and pages ``user``
        may not see answer NotFound, exactly as missing ones. Raises PathRefused (outside
        ``wiki/``), NotFound, or BadRequest for a bad cursor.
        """
        who = self.scope.identity(user)
        page = self.scope.read(who, path)
        rel, data = page.rel, page.data
        if cursor < 0 or cursor > len(data):
            raise BadRequest("cursor out of range", field="cursor")
        if cursor < len(data) and (data[cursor] & 0xC0) == 0x80:
            raise BadRequest(
                "cursor is inside a UTF-8 character; use a next_cursor value", field="cursor"
            )
        end = min(len(data), cursor + max(1, max_bytes))
        while end < len(data) and (data[end] & 0xC0) == 0x80:
            end -= 1
        if end == cursor and cursor < len(data):
            # max_bytes is smaller than the next character: return that one character whole
            end += 1
            while end < len(data) and (data[end] & 0xC0) == 0x80:
                end += 1
        chunk = data[cursor:end]
        meta = self.index.page_meta(rel) or {}
        graph = self.page_links(rel, who)
        return {
            "path": rel,
            "metadata": meta.get("meta", {}),
            "title": meta.get("title"),
            "diagnostics": list(meta.get("diagnostics", [])) + graph["diagnostics"],
            "content": chunk.decode("utf-8", errors="replace"),
            "cursor": cursor,
            "next_cursor": end if end < len(data) else None,
            "truncated": end < len(data),
            "total_bytes": len(data),
            "hash": sha256(data),
            "links": graph["links"],
            "backlinks": graph["backlinks"],
            "attachments": graph["attachments"],
        }

    def page_links(
        self, path: str, user: Identity | str | None = None
    ) -> dict[str, list[dict[str, Any]]]:
        """The link graph around one indexed page: ``{links, backlinks, attachments,
        diagnostics}`` as in :meth:`read_page` (empty lists for a page not indexed), as
        ``user`` sees it: pages it may not see are never named (a link to one reads as
        unresolved; a backlink from one is left out)."""
        who = self.scope.identity(user)
        from wiki_memory.wiki.links import ATTACHMENT, fragment_found

        links: list[dict[str, Any]] = []
        attachments: list[dict[str, Any]] = []
        diags: list[dict[str, Any]] = []
        anchors: dict[str, tuple[list[str], list[str]]] = {}

        def parts_of(p: str) -> tuple[list[str], list[str]]:
            if p not in anchors:
                secs = self.index.sections_of(p)
                anchors[p] = (
                    [
                        s["heading"]
                        for s in secs
                        if s["heading"] and not s["anchor"].startswith("^")
                    ],
                    [s["anchor"] for s in secs if s["anchor"].startswith("^")],
                )
            return anchors[p]

        for lk in self.index.outlinks(path, who):
            if lk["status"] == ATTACHMENT:
                attachments.append(
                    {
                        "target": lk["target"],
                        "alias": lk["alias"],
                        "embed": lk["embed"],
                        "line": lk["line"],
                        "path": lk["path"],
                        "exists": lk["path"] is not None,
                    }
                )
                if lk["path"] is None:
                    diags.append(
                        {
                            "kind": "missing_attachment",
                            "line": lk["line"],
                            "message": f"no file named {lk['target']!r} in the wiki",
                            "key": lk["target"],
                        }
                    )
                continue
            found: bool | None = None
            if lk["fragment"] and lk["path"]:
                headings, blocks = parts_of(lk["path"])
                found = fragment_found(lk["fragment"], headings, blocks)
                if not found:
                    diags.append(
                        {
                            "kind": "missing_fragment",
                            "line": lk["line"],
                            "message": f"{lk['path']} has no heading or block "
                            f"{lk['fragment']!r}; the link leads to the page",
                            "key": lk["fragment"],
                        }
                    )
            if not lk["target"]:
                continue  # a same-page reference: not a link to a page
            lk["fragment_found"] = found
            links.append(lk)
            if lk["status"] == "unresolved":
                diags.append(
                    {
                        "kind": "unresolved_link",
                        "line": lk["line"],
                        "message": f"no page named {lk['target']!r} (yet)",
                        "key": lk["target"],
                    }
                )
            elif lk["status"] == "ambiguous":
                diags.append(
                    {
                        "kind": "ambiguous_link",
                        "line": lk["line"],
                        "message": f"{lk['target']!r} names {len(lk['candidates'])} pages: "
                        + ", ".join(lk["candidates"][:5]),
                        "key": lk["target"],
                    }
                )
        backlinks = [
            {
                "path": b["src_path"],
                "title": b["title"],
                "line": b["line"],
                "fragment": b["fragment"],
                "alias": b["alias"],
                "embed": b["embed"],
            }
            for b in self.index.backlinks(path, who)
            if b["src_path"] != path
        ]
        copy = conflict_copy_path(path)
        if copy != path and (self.wiki_dir / copy).is_file():
            diags.append(
                {
                    "kind": "merge_conflict",
                    "line": None,
                    "message": f"a hand edit and the server changed the same lines; the "
                    f"server's version is in {copy}",
                    "key": copy,
                }
            )
        return {
            "links": links,
            "backlinks": backlinks,
            "attachments": attachments,
            "diagnostics": diags,
        }

    # -- history -------------------------------------------------------------------------
    def page_history(
        self, path: str, user: Identity | str | None, limit: int = 200
    ) -> list[CommitInfo]:
        """The commits that changed a page, newest first (at most ``limit``), that
        ``user`` may see: the page must be visible now (else NotFound, as for a missing
        page), and a commit whose version of the page was hidden from ``user`` (it was
        personal then) is left out."""
        who = self.scope.identity(user)
        page = self.scope.read(who, path)
        return [
            c for c in self.git.log(page.rel, limit=limit) if self._version_ok(page.rel, c, who)
        ]

    def page_version(self, path: str, sha: str, user: Identity | str | None) -> bytes | None:
        """The page's bytes as committed in ``sha`` (None where it did not exist then),
        for ``user``: NotFound unless :meth:`page_history` lists that commit."""
        who = self.scope.identity(user)
        rel, commit = self._visible_commit(path, sha, who)
        return self.git.read_at(rel, commit.sha)

    def page_diff(self, path: str, sha: str, user: Identity | str | None) -> str:
        """The unified diff of the page in commit ``sha`` against its first parent, for
        ``user``: NotFound unless both versions are ones it may see."""
        who = self.scope.identity(user)
        rel, commit = self._visible_commit(path, sha, who)
        for parent in commit.parents[:1]:
            old = self.git.read_at(rel, parent)
            if old is not None and not may_read(who, rel, frontmatter_of(old, rel)):
                raise not_found(rel)
        return self.git.diff(rel, commit.sha)

    def _visible_commit(self, path: str, sha: str, who: Identity) -> tuple[str, CommitInfo]:
        page = self.scope.read(who, path)
        for c in self.git.log(page.rel, limit=100_000):
            if c.sha.startswith(sha) and self._version_ok(page.rel, c, who):
                return page.rel, c
        raise not_found(page.rel)

    def _version_ok(self, rel: str, commit: CommitInfo, who: Identity) -> bool:
        data = self.git.read_at(rel, commit.sha)
        return data is None or may_read(who, rel, frontmatter_of(data, rel))

    # -- index maintenance -----------------------------------------------------------------
    def reindex(self, user: Identity | str | None = None, progress: bool = False) -> int:
        """Rebuild the index from the files beside the old one and swap it in; returns
        the number of pages. ``user``: the caller a face acts for (None: the data
        directory's owner at the command line); anyone but the wiki's owner raises
        Forbidden (an admin operation: :func:`wiki_memory.identity.may_admin`)."""
        if user is not None and not may_admin(self.scope.identity(user)):
            raise Forbidden("rebuilding the index is for the wiki's owner")
        return self.index.rebuild(self.wiki_dir, progress=progress)


def compiler_bytes(comp: compiler.Compiled) -> bytes:
    """A compiled session page as the server renders it on its own (no person's edits)."""
    from wiki_memory.wiki.frontmatter import dump_page

    return dump_page(comp.metadata, comp.body).encode("utf-8")


def conflict_copy_path(path: str) -> str:
    """Where the server writes its version of ``path`` when it cannot merge it with a
    person's edit: ``notes/x.md`` -> ``notes/x.server-copy.md``."""
    return path[:-3] + ".server-copy.md" if path.endswith(".md") else path + ".server-copy.md"


_O_READ = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)


def _read_plain(full: Path) -> bytes | None:
    """The bytes of a regular file (never through a symlink); None when absent."""
    try:
        fd = os.open(full, _O_READ)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _plain_or_gone(full: Path) -> bool:
    """True for a path that is gone, a folder, or a regular file with a single link: what
    the server may commit or serve (a symlink or a hard link may lead out of the wiki)."""
    try:
        st = os.lstat(full)
    except (FileNotFoundError, NotADirectoryError):
        return True
    if stat.S_ISDIR(st.st_mode):
        return True
    return stat.S_ISREG(st.st_mode) and st.st_nlink <= 1


def _split_text(data: bytes) -> tuple[bytes, str, str]:
    """``(bom, text, line ending)`` of a page's bytes; undecodable bytes survive a round
    trip (surrogateescape)."""
    bom = b""
    while data.startswith(b"\xef\xbb\xbf"):
        bom += b"\xef\xbb\xbf"
        data = data[3:]
    text = data.decode("utf-8", "surrogateescape")
    first = text.split("\n", 1)[0]
    return bom, text, "\r\n" if first.endswith("\r") else "\n"


def _with_eol(text: str, eol: str) -> str:
    return text.replace("\n", eol) if eol != "\n" else text


def _frontmatter_broken(data: bytes) -> bool:
    from wiki_memory.wiki.page import parse_page

    kinds = {d.kind for d in parse_page(data, "x.md").diagnostics}
    return bool(kinds & {"frontmatter_invalid", "frontmatter_unclosed", "frontmatter_not_mapping"})


def _frontmatter_value(data: bytes, key: str) -> Any:
    from wiki_memory.wiki.page import parse_page

    return parse_page(data, "x.md").metadata.get(key)


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
            s = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
            parts.append(s[:4000])
    return "\n".join(parts)


def replace_section(text: str, heading: str, content: str) -> str:
    """Replace the body of the level-2 section ``## heading`` (up to the next level-1/2
    heading) with ``content``; append the section when it is missing."""
    lines = text.split("\n")
    start = None
    for i, ln in enumerate(lines):
        if ln.rstrip("\r") == f"## {heading}":
            start = i
            break
    if start is None:
        return text.rstrip("\n") + f"\n\n## {heading}\n\n{content}\n"
    end = len(lines)
    fence_char = ""
    fence_len = 0
    for j in range(start + 1, len(lines)):
        s = lines[j]
        stripped = s.lstrip()
        run = len(stripped) - len(stripped.lstrip(stripped[:1])) if stripped[:1] in "`~" else 0
        if run >= 3:
            if not fence_char:
                fence_char, fence_len = stripped[0], run
            elif stripped[0] == fence_char and run >= fence_len and not stripped[run:].strip():
                fence_char = ""
            continue
        if not fence_char and (s.startswith("# ") or s.startswith("## ")):
            end = j
            break
    new = lines[: start + 1] + ["", *content.split("\n"), ""] + lines[end:]
    return "\n".join(new)
