"""The results of precise edits by ``edit_id``, kept on disk so that a retry answers the
first result instead of editing twice (docs/api.md "Precise edits").

One SQLite file, ``<data_dir>/edits.db``; an id is the caller's own (keyed by user and
id, so one user's id never answers another's edit). Bounded: the newest
:data:`MAX_EDITS` results are kept (older ids are forgotten, a retry of one that old
edits again). Used on the writer thread only, so a look-up and the record after the
edit cannot interleave with another edit's.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import apsw

from wiki_memory.errors import BadRequest

__all__ = ["MAX_EDITS", "MAX_ID_CHARS", "EditLog", "check_edit_id"]

#: results kept; the oldest beyond this are dropped
MAX_EDITS = 20_000
#: longest edit_id accepted
MAX_ID_CHARS = 200


def check_edit_id(edit_id: Any) -> str | None:
    """``edit_id`` as given (None when absent). Raises BadRequest (field ``edit_id``) for a
    value that is not a non-empty string of at most :data:`MAX_ID_CHARS` characters."""
    if edit_id is None:
        return None
    if not isinstance(edit_id, str) or not edit_id.strip() or len(edit_id) > MAX_ID_CHARS:
        raise BadRequest(
            f"edit_id must be a non-empty string of at most {MAX_ID_CHARS} characters",
            field="edit_id",
        )
    return edit_id


class EditLog:
    """``(user, edit_id) -> result`` (a JSON-able dict), at ``path``."""

    def __init__(self, path: Path, limit: int = MAX_EDITS) -> None:
        self.path = Path(path)
        self.limit = limit
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = apsw.Connection(str(self.path))
        self._db.setbusytimeout(5000)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS edits (user TEXT NOT NULL, id TEXT NOT NULL, "
            "at REAL NOT NULL, result TEXT NOT NULL, PRIMARY KEY (user, id))"
        )

    def get(self, user: str, edit_id: str) -> dict[str, Any] | None:
        """The result recorded for ``user``'s ``edit_id``, or None."""
        with self._lock:
            for (raw,) in self._db.execute(
                "SELECT result FROM edits WHERE user = ? AND id = ?", (user, edit_id)
            ):
                found: dict[str, Any] = json.loads(raw)
                return found
        return None

    def put(self, user: str, edit_id: str, result: dict[str, Any]) -> None:
        """Record ``result`` for ``user``'s ``edit_id`` (durably: the transaction is
        committed before this returns) and drop the oldest beyond :attr:`limit`."""
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO edits (user, id, at, result) VALUES (?, ?, ?, ?)",
                (user, edit_id, time.time(), json.dumps(result)),
            )
            self._db.execute(
                "DELETE FROM edits WHERE rowid IN (SELECT rowid FROM edits "
                "ORDER BY at DESC LIMIT -1 OFFSET ?)",
                (self.limit,),
            )

    def close(self) -> None:
        with self._lock:
            self._db.close()
