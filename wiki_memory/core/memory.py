"""The Memory service: the operations every face (HTTP, MCP, CLI, web) calls.

One instance per data directory. It owns the spool, the writer thread (all writes to
``wiki/`` and their commits), the index and the watcher; faces never touch storage
themselves."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from wiki_memory.audit import AuditLog, audit_result
from wiki_memory.capture.observation import Observation
from wiki_memory.capture.sanitize import redact_text
from wiki_memory.capture.spool import SessionInfo, Spool
from wiki_memory.config import Settings
from wiki_memory.core import condense
from wiki_memory.core.capture import Capture, CaptureGate, is_self_check
from wiki_memory.core.delegate import Delegated
from wiki_memory.core.handoffs import HandoffService
from wiki_memory.core.indexcheck import prepare_index
from wiki_memory.core.newproject import ProjectStart
from wiki_memory.core.pagewrite import commit_hand_edits_now, follow_moves, update_pages
from wiki_memory.core.project_access import ProjectAccess
from wiki_memory.core.purge import finish_pending
from wiki_memory.core.reader import Reader
from wiki_memory.core.recaller import Recaller
from wiki_memory.core.repos import RepoMap
from wiki_memory.core.scope import Directory, ScopeRule, not_found
from wiki_memory.core.sessions import (
    SessionPages,
    owners_on_disk,
    plain_or_gone,
    seed_server_hashes,
)
from wiki_memory.core.stall import CommitHealth, DiskState
from wiki_memory.core.sync import SyncService
from wiki_memory.core.unindexed import Unindexed
from wiki_memory.core.writer import Author, Writer, WriteResult
from wiki_memory.errors import Conflict, Forbidden, NotFound
from wiki_memory.identity import Identity, may_admin
from wiki_memory.index.store import Index, is_indexable
from wiki_memory.index.watcher import Watcher
from wiki_memory.plainfile import page_hash, read_plain
from wiki_memory.recall.pool import Sources
from wiki_memory.wiki.git import GitBusy, GitStore, author_email_for
from wiki_memory.wiki.names import new_name_refusal
from wiki_memory.wiki.oddnames import on_disk, page_names
from wiki_memory.wiki.paths import PathRefused, clean_rel, locate

log = logging.getLogger("wiki_memory.core.memory")


class Memory:
    """The core service over one data directory (already laid out and locked by the caller)."""

    # -- the read side: the reader's, the project rule's and the recaller's methods ---
    list_pages = Delegated("reader", Reader.list_pages, audit="list")
    read_page = Delegated("reader", Reader.read_page, audit="read")
    expand = Delegated("reader", Reader.expand, audit="expand")
    folder = Delegated("reader", Reader.folder, audit="list")
    tagged = Delegated("reader", Reader.tagged, audit="list")
    page_links = Delegated("reader", Reader.page_links)
    visible = Delegated("reader", Reader.visible)
    session_visible = Delegated("reader", Reader.session_visible)
    page_history = Delegated("reader", Reader.page_history)
    page_version = Delegated("reader", Reader.page_version)
    page_diff = Delegated("reader", Reader.page_diff)
    page_meta = Delegated("reader", Reader.page_meta)
    names_for = Delegated("reader", Reader.names_for)
    forgotten_paths = Delegated("reader", Reader.forgotten_paths)
    projects = Delegated("reader", Reader.projects)
    most_linked = Delegated("reader", Reader.most_linked)
    project_exists = Delegated("reader", Reader.project_exists)
    session_page = Delegated("reader", Reader.session_page)
    readable_projects = Delegated("project_access", ProjectAccess.readable_projects)
    resolve_project = Delegated("project_access", ProjectAccess.resolve_project)
    recall = Delegated("recaller", Recaller.recall)

    def __init__(
        self, settings: Settings, owner_user: str = "owner", directory: Directory | None = None
    ) -> None:
        self.settings = settings
        self.owner = owner_user
        self.wiki_dir = settings.wiki_dir
        #: the one access rule every page read and write asks (wiki_memory.core.scope);
        #: ``directory`` (the token store) gives users' roles and grants
        self.scope = ScopeRule(self.wiki_dir, owner_user, directory)
        self.scope.refused = lambda who, op, rel, exc: self.audited(who, op, rel, audit_result(exc))
        #: logs/audit.jsonl: every change, who made it, with which token, on which face
        self.audit = AuditLog(settings.logs_dir / "audit.jsonl")
        # the caller holds the data directory lock: locks a killed server left are ours
        self.git = GitStore(
            self.wiki_dir,
            lock_wait_seconds=settings.git_lock_wait_seconds,
            clear_stale_locks=True,
        )
        self.spool = Spool(settings.spool_dir)
        self.index = Index(
            settings.index_path,
            stem_languages=settings.stem_language_names,
            vectors=settings.vectors,
            vectors_model=settings.vectors_model,
        )
        self.writer = Writer(
            self._commit,
            commit_delay=settings.commit_delay_seconds,
            retry_seconds=settings.commit_retry_seconds,
        )
        self.writer.classify = self.audit.owner_of = owners_on_disk(self.wiki_dir, self.git)
        #: path → sha256 of the bytes the server last wrote or committed there
        self.server_hashes: dict[str, str] = {}
        self.unindexed = Unindexed()  # written pages whose index update failed
        #: session page path → its user, for pages seeded at start (see sessions.seed_server_hashes)
        self._server_authors: dict[str, str] = {}
        #: the start-up recovery commit met GitBusy: the idle loop tries it again
        self._recover_due = False
        #: commits fail (a lock, a full disk, a broken repository), health.disk: see commit_status
        self.health = CommitHealth(self.git._controldir, DiskState(settings.data_dir))
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.watcher: Any = None
        self.started = False
        #: the read side: pages, listings, links, expand, history (wiki_memory.core.reader)
        self.reader = Reader(self.settings, self.index, self.scope, self.spool, self.git)
        #: session pages: compiling and merging with people's edits (writer thread)
        self.sessions = SessionPages(self)
        #: capture: hook events into the spool and the index (wiki_memory.core.capture);
        #: the gate applies grants and creates projects (wiki_memory.core.capture.CaptureGate)
        self.capturer = Capture(self.spool, self.index, self.request_compile, self.health.disk)
        self.capturer.gate = CaptureGate(self)
        self.capturer.repos = self.repos = RepoMap(self)
        #: what ranking reads (recall.rank receives these, never the Memory)
        self._sources = Sources(
            index=self.index,
            spool=self.spool,
            git=self.git,
            asof_dir=Path(settings.index_path).parent / "as-of",
            handle=self.reader.handle,
            session_visible=self.reader.session_visible,
            strength=self.reader.strength.of,
        )
        #: the projects a caller may read, and the one rule naming a call's project
        self.project_access = ProjectAccess(
            self.scope, self.spool, self.reader.projects, self.reader.session_visible
        )
        self.project_access.creation = settings.project_creation
        #: the project a write goes to, started when asked (wiki_memory.core.newproject)
        self.project_start = ProjectStart(self)
        #: budgeted recall over what ranking reads (wiki_memory.core.recaller)
        self.use = self.reader.use  # the use record (wiki_memory.core.userecord)
        self.recaller = Recaller(self._sources, self.scope, settings, self.audit_read, self.use)
        #: called on the writer thread when a session ends (SessionEnd or idle; never on
        #: a server restart): ``fn(memory, info, observations, page_path)``
        self.on_session_end: list[
            Callable[[Memory, SessionInfo, list[Observation], str], None]
        ] = []
        #: called with the purged path after a purge (wiki_memory.core.purge): the faces
        #: empty their caches of page text
        self.on_purge: list[Callable[[str], None]] = []
        #: the claim-once handoff service (wiki_memory.core.handoffs); its hook opens an
        #: automatic handoff when a session ends with unfinished work
        self.handoffs = HandoffService(self)
        self.on_session_end.append(self.handoffs.on_session_end)
        #: replication through git remotes (wiki_memory.core.sync); a purge makes it wait
        #: for an admin's ``sync --after-purge``
        self.sync = SyncService(self)
        self.on_purge.append(self.sync.on_purge)
        self.on_purge.append(self.reader.commit_owners.forget)

    # -- life cycle ----------------------------------------------------------------------
    def start(self) -> None:
        """Recover, index, and start the writer, idle and watcher threads."""
        seed_server_hashes(self.spool, self.wiki_dir, self.server_hashes, self._server_authors)
        self.writer.start()
        finish_pending(self, "history")  # a stopped purge's rewrite, before any commit
        self.writer.call(self._recover_job)
        prepare_index(self)  # checked, caught up with the files and the spool
        finish_pending(self, "rest")
        for key, info in self.spool.sessions.items():
            if info.state.get("compiled_count", 0) < info.count:
                # a self-check session left by a setup that was stopped: deleted now
                ended = info.state.get("status") == "ended" or is_self_check(info.session_id)
                self.request_compile(key, end=ended)
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
        self.sync.start(self.settings.sync_interval_seconds)
        self.started = True

    def stop(self) -> None:
        """Write pending pages, commit them, and stop every thread (SIGINT/SIGTERM path)."""
        self._stop.set()
        self.sync.stop()
        if self.watcher is not None:
            self.watcher.stop()
        # queued compiles run first, then every pending group is committed; a lock held
        # by another git is waited on briefly only, so shutdown stays bounded
        self.git.lock_wait_seconds = min(self.git.lock_wait_seconds, 1.0)
        try:
            self.writer.stop()
        except Exception as exc:  # noqa: BLE001 - files are on disk; the next start commits them
            log.warning("shutting down with uncommitted pages (%s): committed at next start", exc)
        self.spool.close()
        self.index.close()
        self.use.flush()
        self.git.close()  # pack files released now, not by dulwich at interpreter exit

    def _recover_job(self) -> WriteResult:
        """Commit files that changed on disk while no server ran (hand edits, or a page
        written before a crash and never committed: that one as the session's user).

        When another git holds the repository (GitBusy), start-up goes on and the idle
        loop tries again later."""
        self._recover_due = False
        try:
            # pages only (as the watcher): an editor's settings (.obsidian/), attachments
            # and hard-linked files are not committed on the owner's behalf
            dirty = [
                p
                for p in page_names(self.wiki_dir, self.git.dirty_paths())
                if is_indexable(p) and plain_or_gone(on_disk(self.wiki_dir, p))
            ]
            by_server: dict[str, list[str]] = {}
            by_hand: list[str] = []
            for p in dirty:
                data = read_plain(on_disk(self.wiki_dir, p))
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
                follow_moves(self, by_hand)  # pages moved meanwhile: their use rows follow
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
    def capture(self, body: Any, user: Identity, raw: bytes | None = None) -> list[dict[str, Any]]:
        """Accept one hook event or a list of them for the caller ``user`` (the
        :class:`~wiki_memory.identity.Identity` its door built), ``raw`` the request body it was parsed
        from when there is one: see :meth:`wiki_memory.core.capture.Capture.capture`.
        Raises CaptureRefused (403 or 404) for a project the caller may not write."""
        return self.capturer.capture(body, user, raw)

    def audited(
        self, who: Identity | None, op: str, target: str, result: str = "ok", **extra: Any
    ) -> None:
        """Append one line to the audit log for ``who`` (a name is looked up for its
        role; the token id and face come only with an Identity). A failure to write it is
        logged, never raised: the change it records has already happened."""
        ident = None if who is None else self.scope.identity(who)
        try:
            self.audit.record(ident, op, target, result, **extra)
        except OSError as exc:
            log.error("cannot write the audit log: %s", exc)

    def audit_read(self, who: Identity | None, op: str, target: str) -> None:
        """A read, listing or recall, audited only when ``audit_reads`` is set."""
        if self.settings.audit_reads:
            self.audited(who, op, target)

    # -- compile -------------------------------------------------------------------------
    def request_compile(self, key: str, end: bool = False) -> Any:
        """Queue a (re)compile of a session's page on the writer; returns a Future.

        A self-check session (:func:`~wiki_memory.core.capture.is_self_check`) is never
        compiled: its end (idle, or found at start) deletes its spool instead."""
        info = self.spool.sessions.get(key)
        if info is not None and is_self_check(info.session_id):

            def discard() -> WriteResult:
                if end:
                    self.capturer.discard(key)
                return WriteResult()

            return self.writer.submit(discard)
        return self.writer.submit(lambda: self.sessions.compile_guarded(key, end))

    def _cas_write(
        self, rel: str, full: Path, fn: Callable[[bytes | None], bytes | None]
    ) -> tuple[bytes | None, bytes | None]:
        """Read, compute, and replace ``full`` only if it still holds what was read.

        Returns ``(bytes read, bytes written or None)``. When a person saves in between,
        ``fn`` runs again on their version (up to 20 times, then Conflict)."""
        from wiki_memory.wiki.merge import replace_if_unchanged

        for _ in range(20):
            current = read_plain(full)
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
        who: Identity | None = None,
        op: str = "page.write",
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
        NotFound exactly as a missing one, before ``fn`` runs, and one it may read but not
        write raises Forbidden naming the grant. Raises PathRefused for a path outside
        ``wiki/``. A change made for a caller (``who``), and a refusal, is one line of
        the audit log with operation ``op``."""
        ident = None if who is None else self.scope.identity(who)
        if ident is None:
            rel, full = locate(self.wiki_dir, path)
        else:
            rel, full = self.scope.write_check(ident, path, op)
        if redact_text(rel)[1]:
            # a file name is not redacted in place: it would no longer be the name asked for
            raise PathRefused("the path holds what looks like a secret")

        def checked(current: bytes | None) -> bytes | None:
            if ident is not None:
                self.scope.check_write(ident, rel, current, None)
            new = fn(current)
            if ident is not None and new is not None and new != current:
                new = self.scope.stamp_owner(ident, rel, new)
                self.scope.check_write(ident, rel, current, new)
            return new

        def job() -> WriteResult:
            _current, new = self._cas_write(rel, full, checked)
            if new is None:
                return WriteResult(value=None, commit_now=commit_now)
            digest = page_hash(new)
            self.server_hashes[rel] = digest
            indexed = self.unindexed.index_written(self.index, rel, new)
            return WriteResult(
                indexed=indexed,
                paths=[rel],
                author=Author(user, author_email_for(user)),
                message=message,
                value=digest,
                commit_now=commit_now,
            )

        try:
            res = self.writer.call(job, timeout=timeout)
        except (NotFound, Forbidden, Conflict) as exc:
            if ident is not None:
                self.audited(ident, op, rel, audit_result(exc))
            raise
        if res.value is not None:
            self.audited(ident, op, rel, "ok", user=None if ident is not None else user)
        return res

    #: several pages in one commit, all or nothing (:func:`~wiki_memory.core.pagewrite.update_pages`)
    update_pages = update_pages

    def write_page(
        self,
        path: str,
        data: bytes,
        *,
        user: str,
        message: str,
        expected_hash: str | None = None,
        create_only: bool = False,
        who: Identity | None = None,
        on_current: Callable[[bytes | None], None] | None = None,
        supersedes: Any = None,
    ) -> WriteResult:
        """Write a whole page with a compare-and-set on its content hash.

        ``expected_hash``: the sha256 hex the caller read; a page that changed since (or
        that exists when ``create_only``) raises Conflict with the current hash, and a
        page that is gone raises NotFound. ``who``:
        the caller (see :meth:`update_page`): a page it may not see raises NotFound
        before any hash is compared, so no Conflict confirms it. ``on_current`` is told
        the bytes the write replaced (None: it created the page). Creating a page whose
        new path parts Windows cannot check out raises PathRefused (400 ``bad_path``,
        ``rule: portable_name``; :func:`wiki_memory.wiki.names.new_name_refusal`);
        an existing page with such a name is written as before. ``supersedes`` (a page
        path or title, or a list; docs/knowledge.md) retires those pages in the same
        commit (:mod:`wiki_memory.core.knowledge`): the page written gets ``supersedes``
        and ``valid_from``, each older one ``state: superseded``, ``superseded_by`` and
        ``valid_until``; a refusal on any of them writes nothing.
        """
        from wiki_memory.core import knowledge

        names = knowledge.check_supersedes(supersedes)

        def fn(current: bytes | None) -> bytes:
            if on_current is not None:
                on_current(current)
            cur = page_hash(current) if current is not None else None
            if expected_hash is not None and current is None:
                # nothing to replace: the same answer as for a page the caller may not see
                raise not_found(clean_rel(path))
            if create_only and current is not None:
                raise Conflict(f"{path} already exists", cur)
            if current is None:
                why = new_name_refusal(self.settings.wiki_dir, clean_rel(path))
                if why is not None:
                    raise PathRefused(why, rule="portable_name")
            if expected_hash is not None and expected_hash != cur:
                raise Conflict(f"{path} changed since it was read", cur)
            return data

        if not names:
            return self.update_page(path, fn, user=user, message=message, who=who)
        ident = who  # None: the server itself, which sees and writes every page
        rel = clean_rel(path)
        olds = knowledge.resolve_targets(self, names, rel, ident)
        when = knowledge.now_iso()
        return knowledge.write_superseding(
            self,
            rel,
            lambda current: knowledge.stamp_newer(fn(current), olds, when),
            olds,
            user=user,
            ident=ident,
            message=message,
            when=when,
        )

    def _idle_loop(self) -> None:
        """End sessions idle longer than ``idle_seconds``; clean up old spool files."""
        last_cleanup = last_condense = 0.0
        last_recover = 0.0
        while not self._stop.wait(self.settings.idle_check_seconds):
            now = time.time()
            # while commits stall, each try may wait for a lock: not more than every
            # stall_recover_seconds (30 s)
            stalled_retry = now - last_recover >= self.settings.stall_recover_seconds
            if self._recover_due and (self.health.ok or stalled_retry):
                self._recover_due = False
                last_recover = now
                self.writer.submit(self._recover_job)
            for key, info in list(self.spool.sessions.items()):
                st = info.state
                if st.get("status") == "ended":
                    continue
                if info.last_received and now - info.last_received > self.settings.idle_seconds:
                    self.request_compile(key, end=True)
            self.unindexed.retry(self.index, self.wiki_dir)
            self.capturer.expire_held(now)  # id-less events that waited long enough
            if now - last_cleanup > 3600:
                last_cleanup = now
                self.spool.cleanup(self.settings.spool_keep_seconds, now)
                last_condense = condense.scheduled_run(self, last_condense, now)

    # -- commits -------------------------------------------------------------------------
    def _commit(self, paths: list[str], author: Author, message: str) -> str | None:
        """Commit a group of server writes as ``author``. A path a person saved over since
        the server wrote it is committed first as their hand edit (so their save is not
        attributed to the server, and the server's write is merged back into it)."""
        mine: list[str] = []
        theirs: list[str] = []
        seen: dict[str, bytes] = {}
        for p in paths:
            data = read_plain(d) if plain_or_gone(d := on_disk(self.wiki_dir, p)) else None
            if data is None or self.server_hashes.get(p) in (None, page_hash(data)):
                mine.append(p)
                if data is not None:
                    seen[p] = data
            else:
                theirs.append(p)
        if theirs:
            self._commit_hand_edits_now(theirs)
        sha = (
            self._git_commit(mine, author.name, author.email, message, only_if=seen)
            if mine
            else None
        )
        for p in mine:
            if p in seen:
                self.server_hashes[p] = page_hash(seen[p])
            else:
                self.server_hashes.pop(p, None)
        # A save that landed after the look above was left out of the server's commit
        # (``only_if``) or came after it: either way it is the person's, committed as such.
        late = [p for p in seen if read_plain(on_disk(self.wiki_dir, p)) != seen[p]]
        if late:
            self._commit_hand_edits_now(late)
        if sha:
            self.git.maybe_pack(self.settings.pack_every_commits)
        return sha

    def _git_commit(
        self,
        paths: list[str],
        name: str,
        email: str,
        message: str,
        only_if: Mapping[str, bytes] | None = None,
    ) -> str | None:
        """``self.git.commit`` that keeps :meth:`commit_status` true: a failure starts (or
        continues) a stall, a success ends it. Raises what the commit raised."""
        try:
            sha = self.git.commit(paths, name, email, message, only_if=only_if)
        except Exception as exc:
            self._recover_due = True  # the idle loop commits what is left once it works
            self.health.failed(exc)
            raise
        if self.health.succeeded():
            self._recover_due = True  # hand edits that failed meanwhile
        return sha

    def watcher_alive(self) -> bool | None:
        """Whether the file watcher runs: None when watching is off (``watch`` false)."""
        if not self.settings.watch:
            return None
        return self.watcher is not None and bool(self.watcher.alive())

    def commit_status(self, detail: bool = True) -> dict[str, Any]:
        """Whether commits reach git: :meth:`wiki_memory.core.stall.CommitHealth.status`."""
        return self.health.status(detail)

    def server_wrote(self, path: str, data: bytes) -> bool:
        """True when ``data`` is what the server last wrote at ``path`` (watcher echo)."""
        return self.server_hashes.get(path) == page_hash(data)

    def commit_hand_edits(self, paths: list[str]) -> Any:
        """Commit pages a person changed on disk, as the local owner, one commit per save.

        Runs on the writer thread; returns its Future (``value``: the commit sha or None)."""
        return self.writer.submit(lambda: WriteResult(value=self._commit_hand_edits_now(paths)))

    #: :meth:`commit_hand_edits` on the writer thread (:func:`~wiki_memory.core.pagewrite.commit_hand_edits_now`)
    _commit_hand_edits_now = commit_hand_edits_now

    # -- index maintenance -----------------------------------------------------------------
    def reindex(self, user: Identity | None = None, progress: bool = False) -> int:
        """Rebuild the index from the files beside the old one and swap it in; returns
        the number of pages. ``user``: the caller a face acts for (None: the data
        directory's owner at the command line); anyone but the wiki's owner raises
        Forbidden (an admin operation: :func:`wiki_memory.identity.may_admin`)."""
        if user is not None and not may_admin(self.scope.identity(user)):
            self.audited(user, "reindex", "index.db", "denied")
            raise Forbidden(
                "rebuilding the index is for the wiki's owner and admins", grant="admin"
            )
        n = self.index.rebuild(self.wiki_dir, progress=progress)
        self.audited(user, "reindex", "index.db", "ok", pages=n)
        return n
