"""A session's observations read once: each spool file is read from where its last read
stopped, so a compile of a long session decodes only the lines appended since.

The cache is keyed by the file's path and checked against its identity (device and inode)
and size: a file replaced, deleted, or shorter than what was read is read again from its
start. The spool empties it itself where it changes a file in place (a purge's scrub, a
failed write cut back): :meth:`ObservationCache.clear`. A read racing such a change does
not store what it read (a generation number).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from wiki_memory.capture.observation import Observation
from wiki_memory.capture.spoollines import parse_line

#: sessions whose observations are kept (the least recently read go first)
MAX_FILES = 16


@dataclass
class _Read:
    ident: tuple[int, int]
    offset: int
    obs: list[Observation] = field(default_factory=list)


class ObservationCache:
    """Parsed observations per spool file, appended to as the file grows. Thread-safe."""

    def __init__(self, max_files: int = MAX_FILES) -> None:
        self._lock = threading.Lock()
        self._files: dict[Path, _Read] = {}
        self._gen = 0
        self.max_files = max_files

    def clear(self, path: Path | None = None) -> None:
        """Forget one file's observations (``path``), or every file's."""
        with self._lock:
            self._gen += 1
            if path is None:
                self._files.clear()
            else:
                self._files.pop(path, None)

    def read(self, path: Path) -> list[Observation]:
        """Every observation of spool file ``path`` in arrival order (a new list; its
        session header line left out; [] when the file cannot be read). Like
        :func:`~wiki_memory.capture.spoollines.read_lines`, a torn last line is not read
        (it is read once it is complete)."""
        try:
            f = open(path, "rb")
        except OSError:
            return []
        with f:
            st = os.fstat(f.fileno())
            ident = (st.st_dev, st.st_ino)
            with self._lock:
                gen = self._gen
                have = self._files.pop(path, None)
                if have is not None:
                    self._files[path] = have  # most recently read last
            if have is None or have.ident != ident or st.st_size < have.offset:
                have = _Read(ident, 0)
            if st.st_size == have.offset:
                return list(have.obs)
            f.seek(have.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # a torn last line waits for its end
        new: list[Observation] = []
        for raw in data[: end - 1].split(b"\n") if end else ():
            rec = parse_line(raw)
            if rec is not None and rec.get("type") != "session":
                new.append(Observation.from_json(rec))
        done = _Read(ident, have.offset + end, have.obs + new)
        with self._lock:
            if gen == self._gen:
                self._files[path] = done
                while len(self._files) > self.max_files:
                    del self._files[next(iter(self._files))]
        return list(done.obs)
