"""Sync: replicating the wiki through git remotes (docs/git.md, "Replication";
docs/operations.md, "More than one machine").

:class:`SyncService` runs ``sync`` for one remote or all: fetch (network, off the writer
thread), then on the writer thread merge the remote's branch with the shared projection of
the local one (:mod:`wiki_memory.core.syncmerge`, over :mod:`wiki_memory.wiki.replicate`
and :mod:`wiki_memory.wiki.projection`), write the changed files and move the branch; then
push the new projection with a lease (network again, off the writer thread). Capture and
recall never wait for a remote: only the short local merge step holds the writer.

After a purge (:mod:`wiki_memory.core.purge` calls :meth:`SyncService.on_purge` through
``Memory.on_purge``) a sync refuses to fetch or push until an admin runs it with
``after_purge``: then the remote's branch is replaced by the rewritten history with a
lease on the commit this server last saw there, and a remote on a local path is
garbage-collected. Another server whose last-seen commit is no longer an ancestor of the
remote's branch follows the rewrite when the purge is announced (signed): its pages are
merged onto the new history and its old history is dropped (reflogs expired,
unreachable objects pruned).

A hub never wipes the wiki (:mod:`wiki_memory.core.syncguard`): an unrelated history is
merged as a union; a rewrite without a signed purge announcement, or a merge deleting
more shared pages than the limits allow, stops (409, recorded) until ``accept_deletions``.

:meth:`SyncService.status` is the one summary of the sync state (last success, last
error, conflict copies) that ``doctor``, ``status`` and the brief show.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dulwich import porcelain
from dulwich.file import FileLocked
from dulwich.objects import ObjectID
from dulwich.refs import Ref
from dulwich.repo import Repo

from wiki_memory.core import syncguard as guard
from wiki_memory.core.fieldsjson import fields_json
from wiki_memory.core.syncmerge import CACHE, SyncMerge
from wiki_memory.core.syncstate import STATE as _STATE
from wiki_memory.core.syncstate import sync_lines, sync_status, utc_stamp
from wiki_memory.core.writer import WriteResult
from wiki_memory.errors import Forbidden, NotFound, SyncRefused, Unavailable
from wiki_memory.identity import Identity, may_admin
from wiki_memory.plainfile import atomic_write
from wiki_memory.wiki import replicate as rp
from wiki_memory.wiki.netchild import NetRunner, Timeouts
from wiki_memory.wiki.purge import expire_reflogs

__all__ = ["SyncReport", "SyncService", "local_path", "sync_lines", "sync_status"]

# the state and its summary live in syncstate.py (doctor and the brief read them without
# a Memory); re-exported here as the one place faces import them from

log = logging.getLogger(__name__)

_ATTEMPTS = 3


def local_path(url: str) -> Path | None:
    """The folder of a remote on this machine (a plain path or ``file://``), else None."""
    if url.startswith("file://"):
        return Path(url[len("file://") :])
    if "://" in url or (":" in url.split("/", 1)[0] and not url.startswith("/")):
        return None
    return Path(url)


#: said with a stopped rewrite on a server with no ``sync_purge_secret`` (docs/git.md)
NO_SECRET = (
    " (this server has no `sync_purge_secret`, so it cannot verify a purge another server "
    "announced: set the same secret on every server of the hub, once, and purges are "
    "followed without this step)"
)
#: said by ``sync --after-purge`` / ``--rewrite-hub`` on a server with no secret
NOT_ANNOUNCED = (
    ", not announced (no `sync_purge_secret` here: the other servers stop at the rewrite "
    "until an admin runs `wiki-memory sync --accept-deletions` there, or sets the same "
    "secret on every server)"
)


@dataclass
class SyncReport:
    """What one remote's sync did: ``action`` (``up to date``, ``pushed``, ``pulled``,
    ``merged``, ``followed rewrite``, ``forced after purge``), ``pushed`` (a push moved
    the remote), ``conflicts`` (path -> conflict copy), ``remote_gc`` (what happened to
    the old objects on the remote after a forced push: ``pruned`` or ``needs gc on the
    host``), ``refused`` (the incoming entries the border refused for the first time in
    this sync: ``[{"path", "blob", "reason"}]``, the path escaped for display; each
    (path, blob) is reported once, then listed by ``doctor``), ``error`` (set when the
    sync of this remote was refused as a whole, such as a fetch over
    ``max_fetch_bytes``: the reply is still 2xx and the other remotes still sync),
    ``notes`` (conflict copy -> one line naming whose version is where, as seen from this
    replica: :func:`wiki_memory.core.syncconflicts.merge_notes`)."""

    remote: str
    action: str
    pushed: bool = False
    conflicts: dict[str, str] = field(default_factory=dict)
    remote_gc: str | None = None
    refused: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None
    notes: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Every field under its own name (:func:`~wiki_memory.core.fieldsjson.fields_json`)."""
        return fields_json(self)


class SyncService:
    """Sync of one Memory's wiki with its git remotes (see the module). Thread-safe: one
    sync per remote at a time, remotes side by side; every network step runs in a child
    process with deadlines (:class:`~wiki_memory.wiki.netchild.NetRunner`) that
    :meth:`stop` kills."""

    def __init__(self, memory: Any) -> None:
        #: the :class:`~wiki_memory.core.memory.Memory` (typed loosely: it builds this
        #: service, and the rooms allow no import cycle)
        self.memory = memory
        self.wiki_dir: Path = Path(memory.wiki_dir)
        self._lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: the merge jobs this service runs on the writer thread
        self.merge = SyncMerge(memory, self._state_lock)
        #: one lock per remote: one sync of it at a time
        self._locks: dict[str, threading.Lock] = {}
        s = memory.settings
        #: the network steps, each in a child process with its deadlines
        self.net = NetRunner(
            Timeouts(
                s.sync_connect_timeout_seconds,
                s.sync_progress_timeout_seconds,
                s.sync_timeout_seconds,
            )
        )

    # ------------------------------------------------------------------ state
    @property
    def _control(self) -> Path:
        return self.wiki_dir / ".git"

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads((self._control / _STATE).read_text("utf-8"))
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def _save(self, state: dict[str, Any]) -> None:
        path = self._control / _STATE
        atomic_write(path, json.dumps(state, indent=1, sort_keys=True).encode("utf-8"))

    def _update(self, name: str, **values: Any) -> None:
        with self._state_lock:
            state = self._load()
            entry = state.setdefault("remotes", {}).setdefault(name, {})
            if "last_error" in values:
                # how long sync has failed: from the first failure after a success
                failing = values["last_error"] is not None
                entry["failing_since"] = (
                    (entry.get("failing_since") or utc_stamp()) if failing else None
                )
            entry.update(values)
            self._save(state)

    def status(self) -> dict[str, Any]:
        """The sync state of this wiki: :func:`sync_status`."""
        with self._state_lock:
            return sync_status(self.wiki_dir)

    def on_purge(self, _rel: str) -> None:
        """A purge rewrote history: no sync pushes or fetches until ``after_purge``."""
        for name in rp.list_remotes(self.wiki_dir):
            self._update(name, purge_pending=True)
        (self._control / CACHE).unlink(missing_ok=True)

    # ------------------------------------------------------------------ periodic
    def start(self, every_seconds: float) -> None:
        """Sync every remote every ``every_seconds`` (0: never) on a thread of its own;
        failures are recorded in the state and logged, never raised."""
        if every_seconds <= 0 or self._thread is not None:
            return

        def loop() -> None:
            while not self._stop.wait(every_seconds):
                try:
                    self.tick()
                except Exception as exc:  # noqa: BLE001 - recorded in the state already
                    log.warning("periodic sync failed: %s", exc)

        self._thread = threading.Thread(target=loop, name="wiki-sync", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the periodic thread and kill every network step under way (a sync
        waiting on a remote ends at once with an error; no child is left)."""
        self._stop.set()
        self.net.kill_all()

    # ------------------------------------------------------------------ sync
    def sync(
        self,
        remote: str | None = None,
        *,
        after_purge: bool = False,
        accept_deletions: bool = False,
        rewrite_hub: bool = False,
        who: Identity | None = None,
        periodic: bool = False,
    ) -> list[SyncReport]:
        """Sync with ``remote`` (None: every configured remote, in name order).

        ``who``: the caller (None: the server itself or the owner at the command line);
        anyone but the owner or an admin raises Forbidden (``grant: admin``). Raises
        NotFound for an unknown remote or when none is configured, SyncRefused (409) when a purge
        waits for ``after_purge`` or, with it, when the remote moved since this server
        last saw it, Unavailable (503) when a remote cannot be reached; each is recorded
        in the state, the other remotes are still tried, and the first error is raised
        after them.

        A merge that would wipe (a rewritten hub with no valid purge announcement, or
        more deletions than the limits allow) stops with SyncRefused (``cause``,
        ``deletions``, ``shared``) before touching the wiki, and is recorded as
        ``stopped``: the periodic sync (``periodic``) skips that remote until an admin
        runs it with ``accept_deletions``. ``rewrite_hub``: replace the hub's branch with
        this wiki's history projected afresh (the hub's own commits too: personal content
        and purged versions that reached the hub before are left out), announced like a
        purge."""
        ident = None if who is None else self.memory.scope.identity(who)
        if who is not None and not may_admin(ident):
            self.memory.audited(ident, "sync", remote or "*", "denied")
            raise Forbidden("sync is for the wiki's owner and admins", grant="admin")
        remotes = rp.list_remotes(self.wiki_dir)
        if remote is not None and remote not in remotes:
            raise NotFound(f"no remote named {remote!r}")
        names = [remote] if remote is not None else sorted(remotes)
        if periodic:
            state = self._load().get("remotes", {})
            names = [n for n in names if not state.get(n, {}).get("stopped")]
        if not names and periodic:
            return []
        if not names:
            raise NotFound("no remote is configured: wiki-memory remote add NAME URL")
        if rewrite_hub:
            # projected afresh, the hub's commits adopted as they were included: what
            # leaked to the hub before (doctor's hub_leaks) is left out of what is pushed
            (self._control / CACHE).unlink(missing_ok=True)
        results: dict[str, SyncReport | Exception] = {}

        def one(name: str) -> None:
            results[name] = self._one(
                name, remotes[name], ident, after_purge or rewrite_hub, accept_deletions
            )

        if len(names) == 1:
            one(names[0])
        else:  # a hung remote never delays another one's sync
            threads = [threading.Thread(target=one, args=(n,), daemon=True) for n in names]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        reports = [r for r in (results.get(n) for n in names) if isinstance(r, SyncReport)]
        errors = [
            (n, r) for n, r in ((n, results.get(n)) for n in names) if isinstance(r, Exception)
        ]
        for _n, exc in errors:
            if isinstance(exc, SyncRefused):
                raise exc
        if errors:
            raise Unavailable("; ".join(f"sync with {n} failed: {exc}" for n, exc in errors))
        return reports

    def tick(self) -> None:
        """The periodic sync: every remote not stopped and not already syncing, each on
        a thread of its own that nobody waits for (a hung remote delays no other, and no
        second sync of it piles up behind it)."""
        remotes = rp.list_remotes(self.wiki_dir)
        state = self._load().get("remotes", {})
        for name, url in sorted(remotes.items()):
            if state.get(name, {}).get("stopped") or self._busy(name):
                continue
            threading.Thread(
                target=self._one,
                args=(name, url, None, False, False),
                name=f"wiki-sync-{name}",
                daemon=True,
            ).start()

    def _busy(self, name: str) -> bool:
        lock = self._locks.setdefault(name, threading.Lock())
        return lock.locked()

    def _one(
        self, name: str, url: str, ident: Identity | None, force: bool, accept: bool
    ) -> SyncReport | Exception:
        """Sync one remote, holding its lock (none free: another sync of it is under way,
        answered as a failure at once); the report, or the error it ends with (recorded
        in the state and the audit log, not raised)."""
        with self._lock:
            lock = self._locks.setdefault(name, threading.Lock())
        if not lock.acquire(blocking=False):
            return Unavailable(f"a sync with {name} is already under way")
        try:
            return self._one_locked(name, url, ident, force, accept)
        finally:
            lock.release()

    def _one_locked(
        self, name: str, url: str, ident: Identity | None, force: bool, accept: bool
    ) -> SyncReport | Exception:
        self._update(name, last_attempt=utc_stamp())
        try:
            rep = self._after_purge(name, url) if force else self._sync_one(name, accept)
        except guard.SyncStop as exc:
            if exc.cause == "rewrite" and not self.memory.settings.sync_purge_secret:
                exc.message += NO_SECRET
            stopped = {
                "cause": exc.cause,
                "message": exc.message,
                "deletions": exc.deletions,
                "shared": exc.shared,
                "since": utc_stamp(),
            }
            self._update(name, last_error=exc.message, stopped=stopped)
            self.memory.audited(ident, "sync", name, "stopped", error=exc.message[:200])
            log.warning("sync with %s stopped: %s", name, exc.message)
            return SyncRefused(
                exc.message,
                cause=exc.cause,
                deletions=exc.deletions,
                shared=exc.shared,
                remote=name,
            )
        except (rp.RemoteError, SyncRefused, FileLocked) as exc:
            msg = str(exc)
            self._update(name, last_error=msg)
            self.memory.audited(ident, "sync", name, "failed", error=msg[:200])
            log.warning("sync with %s failed: %s", name, msg)
            return exc if isinstance(exc, SyncRefused) else Unavailable(msg)
        if rep.error is not None:
            self._update(name, last_error=rep.error)
            self.memory.audited(ident, "sync", name, "refused", error=rep.error[:200])
            return rep
        self._update(name, last_success=utc_stamp(), last_error=None, stopped=None)
        if rep.conflicts or rep.notes:
            with self._state_lock:
                state = self._load()
                state["conflicts"] = sorted(
                    set(state.get("conflicts", [])) | set(rep.conflicts.values()) | set(rep.notes)
                )
                state["conflict_notes"] = {**state.get("conflict_notes", {}), **rep.notes}
                self._save(state)
        self.memory.audited(
            ident, "sync", name, "ok", action=rep.action, conflicts=len(rep.conflicts)
        )
        return rep

    def _announced(self, name: str, seen: str | None, theirs: ObjectID | None) -> bool:
        """True when the hub no longer holds ``seen`` and announces, with a valid HMAC,
        a purge whose new history is (an ancestor of) ``theirs`` and is ``seen``'s as a
        purge rewrites it; the announcement's tombstones are then added here."""
        secret = self.memory.settings.sync_purge_secret
        if not seen or theirs is None or not secret:
            return False
        with Repo(str(self.wiki_dir)) as repo:
            try:
                if rp.is_ancestor(repo, ObjectID(seen.encode()), theirs):
                    return False
            except KeyError:
                return False
        found = self.net.run(
            "fetch_prefixed",
            self.wiki_dir,
            name=name,
            prefix=guard.ANNOUNCE_PREFIX.decode(),
            max_bytes=self.memory.settings.max_fetch_bytes,
        )
        with Repo(str(self.wiki_dir)) as repo:
            for sha in (ObjectID(v.encode()) for v in found.values()):
                ann = guard.parse_announcement(repo, sha, secret)
                if ann is None:
                    continue
                new = ObjectID(ann.new.encode())
                try:
                    if not rp.is_ancestor(repo, new, theirs):
                        continue
                    stones = guard.load_tombstones(self.wiki_dir)
                    stones.ids |= ann.tombstones.ids
                    stones.blobs |= ann.tombstones.blobs
                    if not guard.purge_shaped(repo, ObjectID(seen.encode()), ann, stones):
                        continue
                except KeyError:
                    continue
                guard.add_tombstones(self.wiki_dir, ann.tombstones.ids, ann.tombstones.blobs)
                return True
        return False

    def _fetch(self, name: str) -> ObjectID | None:
        got = self.net.run(
            "fetch", self.wiki_dir, name=name, max_bytes=self.memory.settings.max_fetch_bytes
        )
        return None if got is None else ObjectID(got.encode())

    def _push(
        self,
        name: str,
        sha: ObjectID,
        expected: ObjectID | None,
        extra: dict[bytes, ObjectID] | None = None,
    ) -> None:
        self.net.run(
            "push",
            self.wiki_dir,
            name=name,
            sha=sha.decode(),
            expected=None if expected is None else expected.decode(),
            extra={k.decode(): v.decode() for k, v in (extra or {}).items()},
        )

    def _sync_one(self, name: str, accept: bool = False) -> SyncReport:
        entry = self._load().get("remotes", {}).get(name, {})
        if entry.get("purge_pending"):
            raise SyncRefused(
                "a purge rewrote this wiki's history: nothing is fetched or pushed until an "
                "admin runs `wiki-memory sync --after-purge`"
            )
        seen = entry.get("remote_sha")
        refused: list[dict[str, str]] = []  # new refusals, over every attempt
        follow = False  # once followed, a retry finds ``seen`` gone: it stays followed
        for _attempt in range(_ATTEMPTS):
            try:
                theirs = self._fetch(name)
            except rp.FetchTooLarge as exc:
                return SyncReport(name, "fetch refused", error=str(exc))
            follow = follow or self._announced(name, seen, theirs)
            self.memory.writer.flush()
            job = functools.partial(
                self.merge.merge_write, name, theirs, seen, False, follow, accept
            )
            try:
                res = self.memory.writer.call(job, timeout=600).value
            except rp.TreeTooLarge as exc:
                return SyncReport(name, "fetch refused", error=str(exc))
            shared, action, conflicts, fresh, notes = res
            refused.extend(fresh)
            rep = SyncReport(name, action, conflicts=conflicts, refused=refused, notes=notes)
            if shared != theirs:
                try:
                    self._push(name, shared, theirs)
                except rp.LeaseFailed:
                    continue  # someone pushed meanwhile: fetch and merge again
                rep.pushed = True
                if action == "up to date":
                    rep.action = "pushed"
            self._update(name, remote_sha=shared.decode())
            return rep
        raise rp.RemoteError("the remote kept moving during the sync; try again")

    def _after_purge(self, name: str, url: str) -> SyncReport:
        entry = self._load().get("remotes", {}).get(name, {})
        seen = entry.get("remote_sha")
        head = self.net.run("remote_head", self.wiki_dir, url=url)
        current = None if head is None else ObjectID(head.encode())
        action = "forced after purge"
        if current is not None and current.decode() != seen:
            # another server pushed since: its pages are taken in as one commit on the
            # rewritten history, and the old history it came with is dropped again
            self.memory.writer.flush()
            try:
                theirs = self._fetch(name)
            except rp.FetchTooLarge as exc:
                return SyncReport(name, "fetch refused", error=str(exc))
            if theirs != current:
                raise SyncRefused(f"{name} kept moving during the sync; try again")
            job = functools.partial(self.merge.merge_write, name, theirs, seen, True)
            shared = self.memory.writer.call(job, timeout=600).value[0]
            action = "forced after purge, with the remote's new pages"
        else:
            self.memory.writer.flush()
            shared = self.memory.writer.call(
                lambda: WriteResult(value=self.merge.project_job()), timeout=600
            ).value
        extra: dict[bytes, ObjectID] = {}
        with Repo(str(self.wiki_dir)) as repo:
            secret = self.memory.settings.sync_purge_secret
            if secret:
                ann = guard.announcement_commit(
                    repo,
                    secret,
                    None if current is None else current.decode(),
                    shared.decode(),
                    guard.load_tombstones(self.wiki_dir),
                )
                extra[guard.ANNOUNCE_PREFIX + ann[:12]] = ann
                repo.refs[Ref(guard.ANNOUNCE_PREFIX + ann[:12])] = ann  # kept reachable here
        self._push(name, shared, current, extra)
        gc = "needs gc on the host"
        folder = local_path(url)
        if folder is not None and folder.is_dir():
            with Repo(str(folder)) as remote_repo:
                expire_reflogs(remote_repo)
                porcelain.gc(remote_repo, prune=True, grace_period=0)
            gc = "pruned"
        self._update(name, remote_sha=shared.decode(), purge_pending=False, stopped=None)
        if not self.memory.settings.sync_purge_secret:
            action += NOT_ANNOUNCED
        return SyncReport(name, action, pushed=True, remote_gc=gc)
