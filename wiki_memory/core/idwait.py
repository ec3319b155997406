"""Events that wait for their repository's id (docs/hooks.md, "A project is its
repository", "An event without an id").

An event whose hook named its project after a repository's folder (``project_from``
``git``) but sent no ``repo_id`` (the hook had not worked the id out yet, or git was
missing or too slow) is filed by that name only into a project with no repository id.
When the name's project is bound to an id, the event may belong to another repository
of that name, so it waits here, durably, until an event of the same session and name
arrives with its id; it then goes into that id's project, before the event that
brought the id. A session whose id is known already needs no wait: its later id-less
events of that name go to its id's project at once.

**The bound**: an event that waited :data:`HOLD_SECONDS` (ten minutes) without its id
is filed like an event whose sender found no project: into its session's current
project when the session has one, else into its user's own sessions
(``people/<user>/sessions/``, personal). Never into the project of the name, which is
another repository's.

Files: ``<data_dir>/spool/held/<session key>-<name hash>.jsonl``, one line per event
(``{"held_at", "project_from", "obs"}``), fsynced before the event is acknowledged;
owner-only and in backups like the rest of the spool. A file is renamed ``….taking`` while its events are
written into the spool, and deleted once that write is fsynced; a ``.taking`` file
left by a crash is taken again (the spool's ``event_id`` dedup drops what had landed).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from wiki_memory.capture.observation import Observation, session_key
from wiki_memory.capture.spoollines import write_all

__all__ = ["HOLD_SECONDS", "IdWait", "by_repository"]

#: how long an event waits for its session's repository id, in seconds
HOLD_SECONDS = 600.0


def _file_key(base: str, name: str) -> str:
    return f"{base}-{hashlib.sha1(name.encode()).hexdigest()[:12]}"


class IdWait:
    """The events waiting for their repository id, under ``folder`` (made on first use).

    Thread-safe. ``known`` remembers, per (session key, name), the id last seen with an
    event of that session and name (in memory: after a restart the next event with the
    id tells it again)."""

    def __init__(self, folder: Path) -> None:
        self.dir = folder
        self._lock = threading.Lock()
        #: (session key, name) -> repository id
        self._known: dict[tuple[str, str], str] = {}
        #: file key -> held_at of its oldest event (files on disk)
        self._oldest: dict[str, float] = {}
        self._load()

    def _load(self) -> None:
        if not self.dir.is_dir():
            return
        for f in sorted(self.dir.iterdir()):
            if f.suffix == ".taking":
                # a crash while its events were written into the spool: wait again
                held = f.with_suffix(".jsonl")
                with open(held, "ab") as out:
                    out.write(f.read_bytes())
                    out.flush()
                    os.fsync(out.fileno())
                f.unlink()
        for f in sorted(self.dir.glob("*.jsonl")):
            lines = self._read(f)
            if lines:
                self._oldest[f.stem] = min(float(x.get("held_at", 0)) for x in lines)

    @staticmethod
    def _read(path: Path) -> list[dict[str, Any]]:
        out = []
        try:
            data = path.read_bytes()
        except OSError:
            return []
        for raw in data.splitlines():
            try:
                rec = json.loads(raw)
            except ValueError:
                continue  # a line a crash cut short was never acknowledged
            if isinstance(rec, dict) and isinstance(rec.get("obs"), dict):
                out.append(rec)
        return out

    def note(self, base: str, name: str, repo_id: str) -> None:
        """Remember that session ``base``'s events named ``name`` come with ``repo_id``."""
        with self._lock:
            if len(self._known) >= 65536:
                self._known.clear()
            self._known[(base, name)] = repo_id

    def known(self, base: str, name: str) -> str | None:
        """The repository id seen with session ``base``'s events named ``name``, or None."""
        with self._lock:
            return self._known.get((base, name))

    def waiting(self, base: str, name: str) -> bool:
        """True when session ``base`` has events named ``name`` waiting."""
        with self._lock:
            return _file_key(base, name) in self._oldest

    def hold(self, base: str, name: str, obs: Observation, project_from: str) -> None:
        """Keep ``obs`` (sanitized already) until its id arrives; fsynced before this
        returns. Raises OSError when it cannot be written (nothing is then kept)."""
        now = time.time()
        line = json.dumps(
            {"held_at": now, "project_from": project_from, "obs": obs.to_json()},
            ensure_ascii=False,
        )
        key = _file_key(base, name)
        with self._lock:
            self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.dir / f"{key}.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                size = os.fstat(fd).st_size
                try:
                    write_all(fd, (line + "\n").encode())
                    os.fsync(fd)
                except OSError:
                    os.ftruncate(fd, size)
                    raise
            finally:
                os.close(fd)
            self._oldest.setdefault(key, now)

    def take(self, base: str, name: str) -> tuple[list[Observation], Path | None]:
        """The events of session ``base`` named ``name`` that wait, oldest first, and the
        file to :meth:`done` once they are in the spool (or :meth:`untake` if not)."""
        key = _file_key(base, name)
        with self._lock:
            if key not in self._oldest:
                return [], None
            src = self.dir / f"{key}.jsonl"
            dst = src.with_suffix(".taking")
            try:
                os.replace(src, dst)
            except OSError:
                return [], None
            del self._oldest[key]
        return [Observation.from_json(r["obs"]) for r in self._read(dst)], dst

    def done(self, taken: Path) -> None:
        """The taken events are fsynced in the spool: forget them."""
        try:
            taken.unlink()
        except OSError:
            pass

    def untake(self, taken: Path) -> None:
        """The taken events did not reach the spool: they wait again."""
        key = taken.stem
        with self._lock:
            held = taken.with_suffix(".jsonl")
            try:
                with open(held, "ab") as out:
                    out.write(taken.read_bytes())
                    out.flush()
                    os.fsync(out.fileno())
                taken.unlink()
            except OSError:
                return
            lines = self._read(held)
            if lines:
                self._oldest[key] = min(float(x.get("held_at", 0)) for x in lines)

    def expired(self, now: float | None = None) -> list[tuple[list[Observation], Path]]:
        """Take every file whose oldest event waited :data:`HOLD_SECONDS` or more."""
        now = time.time() if now is None else now
        out = []
        with self._lock:
            due = [k for k, t in self._oldest.items() if now - t >= HOLD_SECONDS]
        for key in due:
            with self._lock:
                if key not in self._oldest:
                    continue
                src = self.dir / f"{key}.jsonl"
                dst = src.with_suffix(".taking")
                try:
                    os.replace(src, dst)
                except OSError:
                    continue
                del self._oldest[key]
            out.append(([Observation.from_json(r["obs"]) for r in self._read(dst)], dst))
        return out

    def count(self) -> int:
        """How many sessions have events waiting."""
        with self._lock:
            return len(self._oldest)

    def scrub(self, needles: list[bytes], mark: bytes) -> int:
        """Replace each of ``needles`` by ``mark`` in every waiting event (purge); returns
        how many files changed."""
        changed = 0
        with self._lock:
            if not self.dir.is_dir():
                return 0
            for f in sorted(self.dir.iterdir()):
                if not f.is_file() or f.is_symlink():
                    continue
                data = f.read_bytes()
                new = data
                for needle in needles:
                    if needle:
                        new = new.replace(needle, mark)
                if new != data:
                    fd = os.open(f, os.O_WRONLY | os.O_TRUNC)
                    try:
                        write_all(fd, new)
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                    changed += 1
        return changed


def _base(obs: Observation) -> str:
    return session_key(obs.user, obs.harness, obs.session_id)


def by_repository(
    parsed: list[Any], repos: Any, held: IdWait
) -> tuple[list[Any], list[bool], dict[int, Any], set[int], list[Any]]:
    """Place a request's events by their repository (docs/hooks.md): those with an
    id in its project (the bindings to make), the id-less ones of a repository's
    name into the project of their session's id, else by name when that project
    has no id, else they wait; the waiting events of a session whose id came are
    put back before the event that brought it. Returns the new event list, which of
    its entries are this request's, the bindings by position, the positions that
    wait, and the taken files of the events put back. ``parsed``: Observations and
    the errors of events refused already; ``repos``: the
    :class:`~wiki_memory.core.repos.RepoMap`."""
    names: dict[int, str] = {}
    made: dict[int, Any] = {}
    for i, p in enumerate(parsed):
        if isinstance(p, Observation) and p.repo_id and p.project:
            names[i] = p.project
            if p.project_from != "config":
                held.note(_base(p), p.project, p.repo_id)
            made[i] = repos.apply(p)
    out: list[Any] = []
    mine: list[bool] = []
    binds: dict[int, Any] = {}
    wait: set[int] = set()
    taken: list[Any] = []
    for i, p in enumerate(parsed):
        if isinstance(p, Observation) and i in names:
            b = made[i]
            base, name = _base(p), names[i]
            if held.waiting(base, name):
                back, path = held.take(base, name)
                if path is not None:
                    taken.append(path)
                for o in back:
                    o.project, o.project_from = p.project, "git"
                    out.append(o)
                    mine.append(False)
            if b is not None:
                binds[len(out)] = b
        elif isinstance(p, Observation) and not p.repo_id and p.project and p.project_from == "git":
            base = _base(p)
            rid = held.known(base, p.project)
            placed = repos.project_of_id(rid) if rid else None
            if placed:
                p.project = placed  # its session's id is known: that id's project
            elif held.waiting(base, p.project) or repos.bound(p.project):
                wait.add(len(out))  # perhaps another repository's: wait for the id
        out.append(p)
        mine.append(True)
    return out, mine, binds, wait, taken
