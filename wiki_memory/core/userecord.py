"""The use record: which pages each user was served and used, per day (docs/knowledge.md,
"The use record").

It lives in ``<data_dir>/use/`` (not in git, not replicated: each server keeps its own;
in backups) as one file per UTC day, ``use/days/YYYY-MM-DD.jsonl``, holding one row per
page and user that day::

    {"day": "2026-12-06", "path": "projects/p/notes/a.md", "user": "alice",
     "recalled": 3, "expanded": 1, "repeated": 0, "read": 0, "cited": 0,
     "helped": 1, "not_helpful": 0}

``recalled``: the page's items a recall returned to that user (one per reply);
``expanded``: its sections or page expand returned; ``repeated``: remembers of an equal
text (``repeats.jsonl`` keeps one line per repeat, :func:`wiki_memory.core.knowledge.
count_repeat`); ``read``: the page read whole (``page_read``, ``GET /v1/pages/…``, the
web page view); ``cited``: handoffs that link it; ``helped`` / ``not_helpful``: the
user's feedback that day (:meth:`UseRecord.feedback`: one verdict, the last). Never a query, a page's text, a session or a harness. So the record is
bounded by pages x users x days, compacted as it is written (the day being written is
kept in memory and rewritten whole at most every :data:`FLUSH_SECONDS`, and on stop), and
days older than :data:`KEEP_DAYS` are deleted. A user reads only their own rows
(:meth:`UseRecord.rows`). Ranking reads it through :mod:`wiki_memory.core.strength`.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Container, Iterable
from pathlib import Path
from typing import Any

from wiki_memory.plainfile import atomic_write

__all__ = ["COUNTS", "FLUSH_SECONDS", "KEEP_DAYS", "VERDICTS", "UseRecord"]

log = logging.getLogger(__name__)

#: what a row counts
COUNTS = ("recalled", "expanded", "repeated", "read", "cited", "helped", "not_helpful")
#: the verdicts of :meth:`UseRecord.feedback`
VERDICTS = ("helped", "not_helpful")
#: the day being written is rewritten at most this often (and on stop, and before a read)
FLUSH_SECONDS = 5.0
#: day files older than this many days are deleted
KEEP_DAYS = 400
#: the most days :meth:`UseRecord.rows` reads
MAX_DAYS = KEEP_DAYS


_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def _day(t: float) -> str:
    return _dt.datetime.fromtimestamp(t, _dt.UTC).strftime("%Y-%m-%d")


class UseRecord:
    """The use record of one data directory (``data_dir``). Thread-safe. ``clock`` gives
    the time in epoch seconds (tests move it)."""

    def __init__(self, data_dir: Path, clock: Callable[[], float] = time.time) -> None:
        self.folder = data_dir / "use"
        self.days = self.folder / "days"
        self.clock = clock
        self._lock = threading.Lock()
        self._day: str | None = None
        #: (path, user) -> row, of the day being written
        self._rows: dict[tuple[str, str | None], dict[str, Any]] = {}
        self._dirty = False
        self._flushed = 0.0
        #: grows whenever a row of a day before today may have changed (a new day, an
        #: import, a purge, a move): :mod:`wiki_memory.core.strength` reads them again
        self.version = 0

    def note(self, kind: str, paths: Iterable[str], user: str | None) -> None:
        """Count ``kind`` (one of :data:`COUNTS`) once for each distinct page path of
        ``paths`` for ``user`` (a user name; None: an anonymous caller or the server)
        today. ValueError for an unknown ``kind``. A failure to write is logged, never
        raised here (the record must not fail a recall); the rows stay for the next flush."""
        if kind not in COUNTS:
            raise ValueError(f"unknown use count: {kind!r}")
        wanted = [p for p in dict.fromkeys(paths) if p]
        if not wanted:
            return
        now = self.clock()
        with self._lock:
            self._switch(_day(now))
            for p in wanted:
                row = self._rows.get((p, user))
                if row is None:
                    row = self._rows[(p, user)] = self._new_row(p, user)
                row[kind] = int(row.get(kind) or 0) + 1  # a row of an older file lacks it
            self._dirty = True
            if now - self._flushed >= FLUSH_SECONDS:
                try:
                    self._write()
                except OSError as exc:  # kept in memory; the next flush tries again
                    log.warning("the use record could not be written: %s", exc)

    def feedback(self, path: str, user: str, verdict: str) -> str:
        """Record ``user``'s ``verdict`` (one of :data:`VERDICTS`) on the page ``path``
        today: one verdict per user, page and day, the last given (the other count of the
        row becomes 0, the given one 1). Returns the day (``YYYY-MM-DD``, UTC). ValueError
        for an unknown verdict. Written at once (OSError when the folder cannot be)."""
        if verdict not in VERDICTS:
            raise ValueError(f"unknown verdict: {verdict!r}")
        now = self.clock()
        with self._lock:
            day = _day(now)
            self._switch(day)
            row = self._rows.get((path, user))
            if row is None:
                row = self._rows[(path, user)] = self._new_row(path, user)
            for v in VERDICTS:
                row[v] = int(v == verdict)
            self._dirty = True
            self._write()
        return day

    def today(self, paths: Container[str]) -> tuple[str, list[dict[str, Any]]]:
        """The day being recorded now (by :attr:`clock`) and a copy of its rows of the
        pages ``paths``, every user's: for :mod:`wiki_memory.core.strength`, never shown
        to a user."""
        now = self.clock()
        with self._lock:
            self._switch(_day(now))
            rows = [dict(r) for (p, _u), r in self._rows.items() if p in paths]
            return str(self._day), rows

    def flush(self) -> None:
        """Write the day being recorded now. OSError when the folder cannot be written."""
        with self._lock:
            self._write()

    def rows(self, user: str | None, days: int = 30) -> list[dict[str, Any]]:
        """``user``'s rows of the last ``days`` days (1 … :data:`MAX_DAYS`; today
        included), newest day first, then by path. Another user's rows are never
        returned."""
        days = max(1, min(int(days), MAX_DAYS))
        now = self.clock()
        with self._lock:
            self._write()
            out: list[dict[str, Any]] = []
            for back in range(days):
                day = _day(now - back * 86400)
                out += sorted(
                    (r for r in self._read(day) if r.get("user") == user),
                    key=lambda r: str(r.get("path")),
                )
        return out

    def every_row(self) -> list[dict[str, Any]]:
        """Every row of every day, oldest day first (for ``wiki-memory export``, the
        owner's)."""
        with self._lock:
            self._write()
            days = sorted(f.stem for f in self.days.glob("*.jsonl")) if self.days.is_dir() else []
            return [r for day in days for r in self._read(day)]

    def merge(self, rows: Iterable[dict[str, Any]]) -> int:
        """Take imported rows (``wiki-memory import --json``): each count becomes the
        larger of the row's and the record's, so importing the same rows again changes
        nothing. Rows of a bad shape are skipped. Returns how many rows changed."""
        by_day: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            day, path, user = r.get("day"), r.get("path"), r.get("user")
            counts = [r.get(k, 0) for k in COUNTS]
            if (
                not isinstance(day, str)
                or not _DAY.fullmatch(day)
                or not isinstance(path, str)
                or not path
                or not (user is None or isinstance(user, str))
                or not all(
                    isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts
                )
            ):
                continue
            by_day.setdefault(day, []).append(
                {"day": day, "path": path, "user": user, **dict(zip(COUNTS, counts, strict=True))}
            )
        changed = 0
        with self._lock:
            self._write()
            for day, new in by_day.items():
                have = {(str(r["path"]), r.get("user")): r for r in self._read(day)}
                for r in new:
                    got = have.setdefault(
                        (r["path"], r["user"]), self._new_row(r["path"], r["user"], day)
                    )
                    before = [got[k] for k in COUNTS]
                    for k in COUNTS:
                        got[k] = max(int(got.get(k) or 0), r[k])
                    changed += before != [got[k] for k in COUNTS]
                self._save(day, list(have.values()))
                if day == self._day:
                    self._rows = have
            self.version += 1
        return changed

    def purge(self, rel: str, needles: list[bytes] | None, new_rel: str | None = None) -> None:
        """A purge reaches the record like every other place: ``needles`` None deletes
        every row of the page ``rel``; else the rows of ``rel`` follow the page to
        ``new_rel`` when the purge renamed it, and every occurrence of each needle in a
        row's path becomes ``[purged]`` (rows that then name one page are merged), so no
        row keeps the old path. ``repeats.jsonl`` is rewritten the same way."""
        from wiki_memory.wiki.purge import MARK

        mark = MARK.decode()
        texts = [n.decode("utf-8", "replace") for n in needles] if needles is not None else None

        def renamed(path: str) -> str | None:
            if texts is None:
                return None if path == rel else path
            if new_rel is not None and path == rel:
                return new_rel
            for t in texts:
                path = path.replace(t, mark)
            return path

        self._rewrite(renamed)

    def move(self, moves: Iterable[tuple[str, str]]) -> None:
        """Pages moved or renamed (``(old path, new path)`` pairs): their rows, and their
        ``repeats.jsonl`` lines, follow them, so no row keeps an old path (rows that then
        name one page and user on one day are added up)."""
        to = dict(moves)
        if to:
            self._rewrite(lambda path: to.get(path, path))

    def _rewrite(self, renamed: Callable[[str], str | None]) -> None:
        """Every row's path through ``renamed`` (None: the row is deleted)."""
        with self._lock:
            self._write()
            files = sorted(self.days.glob("*.jsonl")) if self.days.is_dir() else []
            for f in files:
                merged: dict[tuple[str, str | None], dict[str, Any]] = {}
                for r in self._read(f.stem):
                    path = renamed(str(r.get("path")))
                    if path is None:
                        continue
                    key = (path, r.get("user"))
                    got = merged.setdefault(key, self._new_row(path, key[1], f.stem))
                    for k in COUNTS:
                        got[k] += int(r.get(k) or 0)
                self._save(f.stem, list(merged.values()))
            self.version += 1
            if self._day is not None:
                self._rows = {(str(r["path"]), r["user"]): r for r in self._read(self._day)}
            self._purge_repeats(renamed)

    # -- inside ------------------------------------------------------------------------
    def _new_row(self, path: str, user: str | None, day: str | None = None) -> dict[str, Any]:
        return {"day": day or self._day, "path": path, "user": user, **dict.fromkeys(COUNTS, 0)}

    def _switch(self, day: str) -> None:
        """Make ``day`` the day being written (the one before is written first)."""
        if day == self._day:
            return
        self._write()
        self._day = day
        self.version += 1
        self._rows = {(str(r["path"]), r.get("user")): r for r in self._read(day)}
        self._prune(day)

    def _write(self) -> None:
        if self._dirty and self._day is not None:
            self._save(self._day, list(self._rows.values()))
            self._dirty = False
        self._flushed = self.clock()

    def _read(self, day: str) -> list[dict[str, Any]]:
        if day == self._day and self._dirty:
            return [dict(r) for r in self._rows.values()]
        try:
            text = (self.days / f"{day}.jsonl").read_text(encoding="utf-8")
        except (FileNotFoundError, UnicodeDecodeError):
            return []
        out = []
        for line in text.splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if isinstance(r, dict) and isinstance(r.get("path"), str):
                out.append(r)
        return out

    def _save(self, day: str, rows: list[dict[str, Any]]) -> None:
        """Rewrite ``day``'s file with ``rows`` (atomic: a temporary file renamed)."""
        self.days.mkdir(mode=0o700, parents=True, exist_ok=True)
        f = self.days / f"{day}.jsonl"
        if not rows:
            f.unlink(missing_ok=True)
            return
        rows = sorted(rows, key=lambda r: (str(r["path"]), str(r.get("user"))))
        body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        atomic_write(f, body.encode("utf-8"), 0o600)

    def _prune(self, today: str) -> None:
        """Delete the day files older than :data:`KEEP_DAYS` before ``today``."""
        if not self.days.is_dir():
            return
        t = _dt.datetime.strptime(today, "%Y-%m-%d").replace(tzinfo=_dt.UTC).timestamp()
        oldest = _day(t - KEEP_DAYS * 86400)
        for f in self.days.glob("*.jsonl"):
            if f.stem < oldest:
                f.unlink(missing_ok=True)

    def _purge_repeats(self, renamed: Callable[[str], str | None]) -> None:
        f = self.folder / "repeats.jsonl"
        try:
            lines = f.read_text(encoding="utf-8").splitlines()
        except (FileNotFoundError, UnicodeDecodeError):
            return
        keep = []
        for line in lines:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            path = renamed(str(r.get("path")))
            if path is not None:
                keep.append(json.dumps({**r, "path": path}, ensure_ascii=False))
        atomic_write(f, "".join(k + "\n" for k in keep).encode("utf-8"), 0o600)
