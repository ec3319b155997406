"""The durable spool: accepted, sanitized observations not yet compiled.

Layout under ``<data_dir>/spool/``::

    <session_key>.jsonl    line 1: the session header; then one observation per line
    <session_key>.state    compile state (JSON, replaced atomically)
    seen-events.log        one dedup key per accepted event with an event_id

Appends are flushed and fsynced before :meth:`Spool.append` returns (invariant 3).
Concurrent appends share fsyncs (group commit): a caller waits for a sync that
covers its write, and one sync covers every write made before it started.
Readers tolerate a torn last line left by a crash.

An accepted event's dedup key is durable in its session's spool line (``"dedup"``),
which that fsync covers, so an append fsyncs the session files alone. ``seen-events.log``
keeps the keys once the session files are gone: they are written to it in batches of
:data:`SEEN_BATCH`, and written and fsynced before any session file is deleted (clean-up,
drop) and at close, and at start every key found in a session
file but missing from the log (its tail, after a crash) is written back to it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wiki_memory.capture.observation import Observation, SessionMeta, dedup_key, session_key
from wiki_memory.capture.spoolcache import ObservationCache
from wiki_memory.capture.spoollines import (
    LINE_JSON,
    PartialWrite,
    Undo,
    cut_lines,
    encode_line,
    failure_of,
    fsync_all,
    read_from,
    read_lines,
    write_all,
)
from wiki_memory.plainfile import atomic_write, scrub_files

SEEN_LOG = "seen-events.log"
#: dedup keys gathered before one write to ``seen-events.log`` (each is durable in its
#: spool line already; the log needs them only once that file can be deleted)
SEEN_BATCH = 256
#: threads that fsync a group's session files side by side (:meth:`Spool.sync_to`)
SYNC_THREADS = 8


@dataclass
class SessionInfo(SessionMeta):
    """What the spool knows of a session, or of one part of it: a session whose events
    move to another project continues in a part of its own there (same harness session
    id, its own key and page). ``project`` "" is no project (the page is the user's
    own, under ``people/<user>/sessions/``). Its :class:`SessionMeta` fields are what
    the compiler is given."""

    last_ts: float = 0.0
    last_received: float = 0.0
    count: int = 0
    state: dict[str, Any] = field(default_factory=dict)

    def header(self) -> dict[str, Any]:
        return {
            "type": "session",
            "key": self.key,
            "harness": self.harness,
            "session_id": self.session_id,
            "project": self.project,
            "user": self.user,
            "cwd": self.cwd,
            "started": self.started,
        }


@dataclass
class Accepted:
    """The outcome for one event: its observation id and whether it was a duplicate."""

    obs_id: str
    duplicate: bool
    session_key: str


class Spool:
    """Append-only per-session JSONL files with durable dedup. Thread-safe."""

    def __init__(self, spool_dir: Path) -> None:
        self.dir = spool_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._fds: dict[str, int] = {}
        self._dirty: set[int] = set()
        #: session file -> the size to cut it back to before its next write (a failed
        #: write whose truncation failed too)
        self._torn: dict[int, int] = {}
        #: session file -> its size at its last fsync that worked
        self._good: dict[int, int] = {}
        #: session file -> its length after the last write or cut made here, when known
        #: (no failure since): read with ``fstat`` only when absent, so an append and a
        #: sync cost no system call of their own to learn it (nothing else writes the
        #: spool's files while the server holds the data directory)
        self._size: dict[int, int] = {}
        #: sync targets a failed fsync took back: ``(after, upto, error)``, newest last
        self._failed: list[tuple[int, int, OSError]] = []
        self._written = 0
        self._synced = 0
        self._seen: dict[str, str] = {}
        #: lines of ``seen-events.log`` not written yet (see :meth:`_write_seen`)
        self._seen_pending: list[str] = []
        self.sessions: dict[str, SessionInfo] = {}
        #: base key (user, harness, session id) -> the key of the session's current part
        self._current: dict[str, str] = {}
        #: the threads of :meth:`_fsync_all`, started with the first group of several files
        self._pool: ThreadPoolExecutor | None = None
        self._obs = ObservationCache()
        self._seen_fd = os.open(self.dir / SEEN_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._load()

    # -- loading -----------------------------------------------------------------------
    def _load(self) -> None:
        torn = False
        try:
            with open(self.dir / SEEN_LOG, "rb") as f:
                for raw in f:
                    if not raw.endswith(b"\n"):
                        torn = True  # a line a crash cut short: its key is in its spool line
                        break
                    parts = raw.decode("utf-8", "replace").strip().split(" ", 1)
                    if len(parts[0]) == 32:
                        self._seen[parts[0]] = parts[1] if len(parts) > 1 else ""
        except OSError:
            pass
        if torn:
            # end the cut line, so that the next key starts a line of its own
            write_all(self._seen_fd, b"\n")
            os.fsync(self._seen_fd)
        logged = len(self._seen)
        for p in sorted(self.dir.glob("*.jsonl")):
            info = self._scan(p)
            if info is not None:
                self.sessions[info.key] = info
        if len(self._seen) > logged:
            # keys whose log lines a crash took (only the session files were fsynced):
            # write them back before any session file can be cleaned up
            missing = list(self._seen.items())[logged:]
            write_all(self._seen_fd, "".join(f"{k} {v}\n" for k, v in missing).encode())
            os.fsync(self._seen_fd)
        for info in sorted(self.sessions.values(), key=lambda i: i.last_received):
            self._current[session_key(info.user, info.harness, info.session_id)] = info.key

    def _scan(self, path: Path) -> SessionInfo | None:
        info: SessionInfo | None = None
        for rec in read_lines(path):
            if rec.get("type") == "session":
                info = SessionInfo(
                    key=rec["key"],
                    harness=rec["harness"],
                    session_id=rec["session_id"],
                    project=rec["project"],
                    user=rec["user"],
                    cwd=rec.get("cwd"),
                    started=float(rec["started"]),
                )
                continue
            if info is None:
                return None
            info.count += 1
            info.last_ts = max(info.last_ts, float(rec.get("ts", 0)))
            info.last_received = max(info.last_received, float(rec.get("received", 0)))
            dk = rec.get("dedup")
            if dk and dk not in self._seen:
                self._seen[dk] = rec.get("obs_id", "")
        if info is not None:
            info.state = self.read_state(info.key)
        return info

    # -- writing -----------------------------------------------------------------------
    def append(self, observations: list[Observation]) -> list[Accepted]:
        """Append observations durably; returns one :class:`Accepted` per input, in order.

        Each observation must already be sanitized. Its project (:meth:`part_for`)
        picks the part of the session it goes to. Raises OSError when the disk write
        fails (nothing is acknowledged then). :meth:`write` then :meth:`sync_to`.
        """
        out, target = self.write(observations)
        self.sync_to(target)
        return out

    def write(self, observations: list[Observation]) -> tuple[list[Accepted], int]:
        """Append observations WITHOUT waiting for their fsync: returns one
        :class:`Accepted` per input, in order, and the sync target to give
        :meth:`sync_to` (or :meth:`synced`) before any of them is acknowledged.

        All or nothing: when a write fails (a full disk), every file this call wrote to
        is truncated back to its last complete line, the sessions, dedup keys and
        counts are as before the call, and the OSError is raised (nothing is
        acknowledged, and nothing later is glued to a torn line)."""
        out: list[Accepted] = []
        #: per session file, its new bytes (a new session's header first) and its new
        #: lines' (dedup key, observation id); written with one write per file once
        #: every observation is placed
        data: dict[int, list[bytes]] = {}
        keys: dict[int, list[tuple[str | None, str]]] = {}
        undo = Undo()
        with self._lock:
            for obs in observations:
                base = session_key(obs.user, obs.harness, obs.session_id)
                dk = dedup_key(obs)
                if dk is not None and dk in self._seen:
                    out.append(Accepted(self._seen[dk], True, self._current.get(base, base)))
                    continue
                key, project = self.part_for(obs)
                info = self.sessions.get(key)
                fd = self._fd(key)
                if fd not in data:
                    data[fd] = []
                    keys[fd] = []
                    undo.sizes[fd] = self._repair(fd)
                if base not in undo.current:
                    undo.current[base] = self._current.get(base)
                if info is None:
                    info = SessionInfo(
                        key=key,
                        harness=obs.harness,
                        session_id=obs.session_id,
                        project=project,
                        user=obs.user,
                        cwd=obs.cwd,
                        started=obs.ts,
                    )
                    self.sessions[key] = info
                    undo.new.add(key)
                    data[fd].append((LINE_JSON.encode(info.header()) + "\n").encode())
                elif key not in undo.infos and key not in undo.new:
                    undo.infos[key] = (info.count, info.last_ts, info.last_received)
                self._current[base] = key
                info.count += 1
                obs.project = info.project
                obs.obs_id = f"{key[:12]}-{info.count}"
                rec = obs.to_json()
                rec["dedup"] = dk
                data[fd].append(encode_line(rec))
                keys[fd].append((dk, obs.obs_id))
                if dk is not None:
                    # seen at once (a second copy later in this list is a duplicate);
                    # taken back if the write fails
                    self._seen[dk] = obs.obs_id
                    undo.seen.append(dk)
                info.last_ts = max(info.last_ts, obs.ts)
                info.last_received = max(info.last_received, obs.received)
                out.append(Accepted(obs.obs_id, False, key))
            try:
                for fd, chunks in data.items():
                    undo.written.append(fd)
                    self._size.pop(fd, None)  # unknown until the write is whole
                    self._size[fd] = undo.sizes[fd] + write_all(fd, b"".join(chunks))
                    self._dirty.add(fd)
            except OSError as exc:
                self._roll_back(undo)
                raise (exc.error if isinstance(exc, PartialWrite) else exc) from None
            for items in keys.values():
                # each key is durable through its spool line's own "dedup" (fsynced with
                # it); the log gets it later, written and fsynced before that line's
                # file can go (:meth:`_remove_session`)
                self._seen_pending.extend(f"{dk} {oid}\n" for dk, oid in items if dk)
            if len(self._seen_pending) >= SEEN_BATCH:
                try:
                    self._write_seen()
                except OSError:
                    pass  # kept pending: the keys are in their spool lines meanwhile
            self._written += 1
            target = self._written
        return out, target

    def _repair(self, fd: int) -> int:
        """The size of session file ``fd`` before this write, after cutting off what a
        failed write left there that could not be truncated then (the caller holds the
        lock). Raises OSError when that still fails."""
        torn = self._torn.get(fd)
        if torn is not None:
            os.ftruncate(fd, torn)
            del self._torn[fd]
            self._obs.clear()
        size = self._size.get(fd)
        if size is None:
            size = self._size[fd] = os.fstat(fd).st_size
        return size

    def _roll_back(self, undo: Undo) -> None:
        """Undo a :meth:`write` that failed (the caller holds the lock): its files cut
        back to their size before it, its sessions, parts and dedup keys as they were."""
        self._obs.clear()
        for fd in undo.written:
            size = undo.sizes[fd]
            self._size.pop(fd, None)  # read again before the next write
            try:
                os.ftruncate(fd, size)
            except OSError:
                self._torn[fd] = size  # cut before the next write to this file
        for dk in undo.seen:
            self._seen.pop(dk, None)
        for key, (count, last_ts, last_received) in undo.infos.items():
            info = self.sessions.get(key)
            if info is not None:
                info.count, info.last_ts, info.last_received = count, last_ts, last_received
        for base, prev in undo.current.items():
            if prev is None:
                self._current.pop(base, None)
            else:
                self._current[base] = prev
        for key in undo.new:
            self.sessions.pop(key, None)
            nfd = self._fds.get(key)
            if nfd is not None and nfd not in self._torn and undo.sizes.get(nfd) == 0:
                # a new session whose first write failed: no empty file left behind
                del self._fds[key]
                self._dirty.discard(nfd)
                self._good.pop(nfd, None)
                self._size.pop(nfd, None)
                os.close(nfd)
                try:
                    (self.dir / f"{key}.jsonl").unlink()
                except OSError:
                    pass

    def _write_seen(self) -> None:
        """Append the dedup keys not yet in ``seen-events.log`` (not fsynced; the caller
        holds the lock)."""
        if self._seen_pending:
            size = os.fstat(self._seen_fd).st_size
            try:
                write_all(self._seen_fd, "".join(self._seen_pending).encode())
            except OSError:
                with suppress(OSError):
                    os.ftruncate(self._seen_fd, size)  # no torn key line left
                raise
            self._seen_pending.clear()

    def part_for(self, obs: Observation) -> tuple[str, str]:
        """``(spool key, project)`` for ``obs`` (the caller holds the lock).

        The project: ``obs.project`` when set; else, when the sender found none
        (``project_from`` ``"none"``), the session's current project, or "" (none);
        else (a sender that did not resolve it) the current project, or for a new session
        the last component of ``cwd`` (kept for HTTP clients of earlier releases). The
        key: the session's current part when its project matches; the session's first
        part (the plain session key) when that one is in the project; else a part of its
        own, keyed by the session and the project."""
        base = session_key(obs.user, obs.harness, obs.session_id)
        cur = self.sessions.get(self._current.get(base, base))
        if obs.project:
            project = obs.project
        elif cur is not None:
            project = cur.project
        elif obs.project_from == "none":
            project = ""
        else:
            project = _project_from_cwd(obs.cwd)
        if cur is not None and cur.project == project:
            return cur.key, project
        first = self.sessions.get(base)
        if first is None or first.project == project:
            return base, project
        return session_key(obs.user, obs.harness, f"{obs.session_id}\0{project}"), project

    def current_part(self, user: str, harness: str, session_id: str) -> SessionInfo | None:
        """The part of a session that took its last event, or None for an unknown session."""
        base = session_key(user, harness, session_id)
        return self.sessions.get(self._current.get(base, base))

    def parts_of(self, key: str) -> list[str]:
        """The keys of every part of the session that ``key`` is a part of."""
        info = self.sessions.get(key)
        if info is None:
            return [key]
        return [
            k
            for k, i in list(self.sessions.items())
            if (i.user, i.harness, i.session_id) == (info.user, info.harness, info.session_id)
        ]

    def _fd(self, key: str) -> int:
        fd = self._fds.get(key)
        if fd is None:
            fd = os.open(self.dir / f"{key}.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            self._fds[key] = fd
        return fd

    def synced(self, target: int) -> bool:
        """True when the writes up to sync target ``target`` are fsynced."""
        return self._synced >= target and failure_of(self._failed, target) is None

    def sync_to(self, target: int) -> None:
        """Return once the writes up to sync target ``target`` (from :meth:`write`) are
        fsynced: a caller waits for a sync that covers its write, and one sync covers
        every write made before it started (concurrent callers share it). Raises
        OSError when an fsync fails: then every write not yet fsynced to a file whose
        fsync failed is cut off (after a failed fsync the kernel may drop those pages
        and report success the next time), and every write made up to that moment is
        refused, so no later fsync can acknowledge bytes that are gone."""
        with self._sync_lock:
            error = failure_of(self._failed, target)
            if error is not None:
                raise error
            if self._synced >= target:
                return
            with self._lock:
                fds = list(self._dirty)
                self._dirty.clear()
                upto = self._written
                sizes = {}
                for fd in fds:
                    size = self._size.get(fd)
                    if size is not None:
                        sizes[fd] = size
                    else:
                        with suppress(OSError):
                            sizes[fd] = os.fstat(fd).st_size
            failed = self._fsync_all(fds)
            if failed:
                err = failed[fds[0]] if fds[0] in failed else next(iter(failed.values()))
                with self._lock:
                    self._take_back(failed)
                    self._failed = [*self._failed[-15:], (self._synced, self._written, err)]
                raise err
            self._good.update(sizes)
            self._synced = upto

    def _take_back(self, failed: dict[int, OSError]) -> None:
        """Cut each file of ``failed`` back to its size at its last fsync that worked and
        forget what the cut lines held (their dedup keys, their sessions' counts); the
        caller holds the lock. The cut bytes were never acknowledged."""
        by_fd = {fd: key for key, fd in self._fds.items()}
        for fd in failed:
            key = by_fd.get(fd)
            if key is None:
                continue
            good = self._good.get(fd, 0)
            cut = read_from(self.dir / f"{key}.jsonl", good)  # the fd is write-only
            self._size.pop(fd, None)
            try:
                os.ftruncate(fd, good)
            except OSError:
                self._torn[fd] = good
            self._dirty.add(fd)  # the cut itself is fsynced by the next sync
            lines, header, gone = cut_lines(cut)
            for dk in gone:
                self._seen.pop(dk, None)
            if gone:
                self._seen_pending = [
                    p for p in self._seen_pending if p.split(" ", 1)[0] not in gone
                ]
            info = self.sessions.get(key)
            if info is not None:
                info.count = max(0, info.count - lines)
                if header or good == 0:
                    del self.sessions[key]
                    self._current = {b: k for b, k in self._current.items() if k != key}

    def _fsync_all(self, fds: list[int]) -> dict[int, OSError]:
        """:func:`~wiki_memory.capture.spoollines.fsync_all` on this spool's threads."""
        if len(fds) > 1 and self._pool is None:
            self._pool = ThreadPoolExecutor(SYNC_THREADS, thread_name_prefix="wiki-fsync")
        return fsync_all(self._pool, fds)

    # -- reading -----------------------------------------------------------------------
    def observations(self, key: str) -> list[Observation]:
        """Every observation of a session, in arrival order."""
        return self._obs.read(self.dir / f"{key}.jsonl")  # read from where the last stopped

    def iter_all(self) -> Iterator[tuple[SessionInfo, Observation]]:
        """Every spooled observation of every session (for indexing the spool)."""
        for info in list(self.sessions.values()):
            for obs in self.observations(info.key):
                yield info, obs

    def read_state(self, key: str) -> dict[str, Any]:
        """The compile state of a session (``{}`` before its first compile)."""
        try:
            data = json.loads((self.dir / f"{key}.state").read_text(encoding="utf-8"))
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def write_state(self, key: str, state: dict[str, Any]) -> None:
        """Replace a session's compile state atomically (fsynced)."""
        # on a full disk no temporary file is left behind
        atomic_write(self.dir / f"{key}.state", json.dumps(state).encode(), 0o600)
        info = self.sessions.get(key)
        if info is not None:
            info.state = dict(state)

    def cleanup(self, keep_seconds: float, now: float | None = None) -> list[str]:
        """Delete spool files of sessions whose page was committed with every observation
        and that ended more than ``keep_seconds`` ago. Dedup memory is kept. Returns keys."""
        now = time.time() if now is None else now
        gone = []
        with self._lock:
            for key, info in list(self.sessions.items()):
                st = info.state
                if (
                    st.get("status") == "ended"
                    and st.get("committed_count", -1) >= info.count
                    and not st.get("unrendered")
                    and now - float(st.get("ended_at", now)) > keep_seconds
                ):
                    self._remove_session(key)
                    gone.append(key)
        return gone

    def scrub(self, needles: list[bytes], mark: bytes) -> int:
        """Replace every occurrence of each of ``needles`` in every spool file (session
        logs, their state, the dedup log) by ``mark``, in place (the append descriptors
        stay valid) and fsynced; session states are re-read. Returns how many files
        changed. Used by purge (docs/operations.md)."""
        with self._lock:
            changed = scrub_files(self.dir, needles, mark)
            self._size.clear()  # the files changed length in place
            # each changed file was fsynced whole at its new length: that is where a
            # failed fsync's take-back cuts it to now (the length before would leave
            # zeros, or half of a line written since)
            for key, fd in self._fds.items():
                if f"{key}.jsonl" in changed:
                    with suppress(OSError):  # an open descriptor: fstat does not fail
                        self._good[fd] = os.fstat(fd).st_size
            for info in self.sessions.values():
                info.state = self.read_state(info.key)
            self._obs.clear()
        return len(changed)

    def drop(self, key: str) -> bool:
        """Delete session ``key``'s spool files now (purge of its page); its dedup keys
        are kept. Returns False for an unknown session."""
        with self._lock:
            if key not in self.sessions:
                return False
            self._remove_session(key)
            return True

    def _remove_session(self, key: str) -> None:
        """Close session ``key``'s append descriptor and delete its log and state files
        (its dedup keys stay: the log is fsynced first). The caller holds ``self._lock``."""
        self._write_seen()
        os.fsync(self._seen_fd)
        fd = self._fds.pop(key, None)
        if fd is not None:
            os.close(fd)
            self._dirty.discard(fd)
            self._good.pop(fd, None)
            self._size.pop(fd, None)
            self._torn.pop(fd, None)
        self._obs.clear(self.dir / f"{key}.jsonl")
        for suffix in (".jsonl", ".state"):
            try:
                (self.dir / f"{key}{suffix}").unlink()
            except OSError:
                pass
        del self.sessions[key]

    def close(self) -> None:
        """Write the pending dedup keys, fsync and close every file."""
        with self._lock:
            try:
                self._write_seen()
            except OSError:
                pass  # the session files hold them: the next start writes them back
            for fd in list(self._fds.values()) + [self._seen_fd]:
                try:
                    os.fsync(fd)
                    os.close(fd)
                except OSError:
                    pass
            self._fds.clear()
            self._size.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True)


def _project_from_cwd(cwd: str | None) -> str:
    from wiki_memory.capture.observation import project_name

    return project_name(cwd or "default")
