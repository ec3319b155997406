"""The audit log: one JSON line per change in ``logs/audit.jsonl``, and the one escaping
of request values every log line uses.

A line is ``{"time", "user", "token_id", "face", "op", "target", "result", ...}``:

- ``time``: UTC, ISO 8601 with milliseconds and ``Z``;
- ``user`` and ``token_id``: who acted (``token_id`` None for the server itself or a CLI
  command acting as the data directory's owner);
- ``face``: ``http``, ``mcp``, ``web``, ``cli`` (``server`` for the server's own work,
  such as the upgrade at first start);
- ``op``: what happened (``page.write``, ``handoff.claim``, ``capture``, ``token.create``,
  ``grant``, ``reindex``, ``pin``... docs/team-server.md lists them);
- ``target``: the path or id acted on; a personal page's path is never written: the
  target is then ``[personal page]`` and ``owner`` names whose it is (``owner_of``);
- ``result``: ``ok``, ``denied`` (403) or ``not_found`` (404: the caller may not see it,
  or it is not there), or another error code;
- ``agent``: the request's ``User-Agent``, when it sent one.

The file is opened with ``O_APPEND`` for every line and never truncated by the server
(backups copy it with the rest of ``logs/``); the one rewrite is a purge's
(:meth:`AuditLog.redact`: a temporary file renamed over it, under its lock). Lines are written with
:func:`json.dumps`, so a newline or control character taken from a request is escaped
(``\\n``) and can never start a line of its own; :func:`escape` does the same for the
plain-text access log. No token value and no page content is ever written here.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wiki_memory.errors import Forbidden, NotFound, WikiMemoryError
from wiki_memory.identity import OWNER_KEY, Identity
from wiki_memory.plainfile import atomic_write

__all__ = ["AuditLog", "audit_result", "dumps", "escape", "parse_since"]

FACES = ("http", "mcp", "web", "cli", "server")
#: the bidirectional formatting controls (a right-to-left override makes ``gpj.exe``
#: read ``exe.jpg``): escaped in every log line like the controls
BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_LINE_BREAKS = re.compile(f"[\x7f-\x9f\u2028\u2029{BIDI}]")
_BIDI = re.compile(f"[{BIDI}]")
#: every character :func:`escape` rewrites: a value holding none is returned as it is
_TO_ESCAPE = re.compile(f"[\\\\\x00-\x1f\x7f-\x9f\u2028\u2029{BIDI}]")


def dumps(value: Any) -> str:
    """``value`` as one line of JSON with every control character escaped: C0 (as JSON
    does), DEL, C1, U+2028/2029 and the bidirectional controls (JSON leaves those raw).
    Every output of the audit log (the file, ``GET /v1/audit``, ``audit --json``) is
    written with it, so a value the file holds escaped is never re-emitted raw."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return _LINE_BREAKS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def escape(value: str) -> str:
    """``value`` with backslashes and every control character (C0, DEL, C1, the Unicode
    line and paragraph separators and the bidirectional controls) written as Python-style escapes (``\\n``,
    ``\\x1b``, ``\\u2028``), so a value from a request stays on its log line."""
    if _TO_ESCAPE.search(value) is None:
        return value  # the common case (a method, a user name): one scan in C
    out = []
    for ch in value:
        o = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif o < 0x20 or 0x7F <= o < 0xA0:
            out.append(f"\\x{o:02x}")
        elif o in (0x2028, 0x2029, 0x85) or _BIDI.match(ch):
            out.append(f"\\u{o:04x}")
        else:
            out.append(ch)
    return "".join(out)


def now_iso(ts: float | None = None) -> str:
    """``ts`` (epoch seconds; now when None) as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (UTC)."""
    t = time.time() if ts is None else ts
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def parse_since(text: str) -> float:
    """An ISO-8601 time (``2026-12-01``, ``2026-12-01T10:00Z``; UTC when no offset) or
    epoch seconds as epoch seconds, within the years 1970 to 9999. Raises ValueError."""
    try:
        t = float(text)
    except ValueError:
        s = text.strip().replace("Z", "+00:00").replace("z", "+00:00")
        dt = datetime.fromisoformat(s)
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        t = dt.timestamp()
    if not 0 <= t < _YEAR_10000:  # NaN too
        raise ValueError(f"outside the years 1970-9999: {text!r}")
    return t


#: 10000-01-01T00:00:00Z in epoch seconds
_YEAR_10000 = 253402300800.0


class AuditLog:
    """``logs/audit.jsonl`` of one data directory. Thread-safe; every line is one
    ``write`` on a file opened with ``O_APPEND`` (so lines of two processes never
    interleave) and flushed before :meth:`record` returns."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        #: the user a wiki path belongs to alone (None: shared), for hiding personal
        #: paths (the Memory sets it; None: targets are written as given)
        self.owner_of: Callable[[str], str | None] | None = None

    def record(
        self,
        who: Identity | None,
        op: str,
        target: str = "",
        result: str = "ok",
        *,
        face: str | None = None,
        user: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """Append one line and return it. ``who`` is the caller (None: the server
        itself or the data directory's owner at the command line; ``user`` then names
        them); ``face`` overrides ``who.face``; ``extra`` adds keys (strings from a request
        are escaped by the JSON encoding). An OSError is raised to the caller."""
        line: dict[str, Any] = {
            "time": now_iso(),
            "user": user if user is not None else (who.user if who is not None else ""),
            "token_id": who.token_id if who is not None else None,
            "face": face or (who.face if who is not None and who.face else "server"),
            "op": op,
            "target": target,
            "result": result,
        }
        owner = self._personal(target)
        if owner is not None:
            line["target"], line["owner"] = "[personal page]", owner
        if who is not None and who.agent:
            line["agent"] = who.agent
        if who is not None and who.address:
            line["address"] = who.address
        line.update(extra)
        # JSON leaves DEL, the C1 controls (NEL), U+2028/2029 and the bidi controls raw:
        # escaped too, so no reader (str.splitlines, an editor, a terminal) is misled
        data = (dumps(line) + "\n").encode("utf-8")
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        return line

    def redact(self, values: list[str], mark: str) -> int:
        """Replace every occurrence of each of ``values`` in every string of every line
        (keys and values, nested ones too) by ``mark``: the file is rewritten whole to a
        temporary file beside it (0600, fsynced) renamed over it, under the lock
        :meth:`record` takes, so no line of this process is lost. A line that is not
        JSON has the values replaced as text. Returns how many lines changed; an OSError
        is raised to the caller."""
        values = sorted({v for v in values if v}, key=len, reverse=True)

        def clean(x: Any) -> Any:
            if isinstance(x, str):
                for v in values:
                    x = x.replace(v, mark)
                return x
            if isinstance(x, list):
                return [clean(i) for i in x]
            if isinstance(x, dict):
                return {clean(k): clean(v) for k, v in x.items()}
            return x

        with self._lock:
            try:
                raw = self.path.read_bytes()
            except FileNotFoundError:
                return 0
            out: list[bytes] = []
            changed = 0
            for line in raw.splitlines(keepends=True):
                body = line.rstrip(b"\n")
                try:
                    rec = json.loads(body)
                    new = (dumps(clean(rec)) + "\n").encode("utf-8")
                    same = clean(rec) == rec
                except ValueError:
                    text = body.decode("utf-8", "replace")
                    new = (clean(text) + "\n").encode("utf-8")
                    same = clean(text) == text
                if same:
                    out.append(line)
                else:
                    out.append(new)
                    changed += 1
            if changed:
                atomic_write(self.path, b"".join(out), 0o600)
        return changed

    def _personal(self, target: str) -> str | None:
        """The owner of a personal page ``target`` (its folded name; ``owner`` for the
        wiki's owner's), else None."""
        if self.owner_of is None or "/" not in target:
            return None
        try:
            key = self.owner_of(target)
        except Exception:  # noqa: BLE001 - a line is written whatever happens
            return None
        return None if key is None else ("owner" if key == OWNER_KEY else key)

    def lines(self) -> Iterator[dict[str, Any]]:
        """Every line, oldest first (a line that is not JSON is skipped)."""
        try:
            f = self.path.open("r", encoding="utf-8", errors="replace")
        except OSError:
            return
        with f:
            for raw in f:
                try:
                    rec = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(rec, dict):
                    yield rec

    def read(
        self, user: str | None = None, since: float | None = None, limit: int = 10_000
    ) -> list[dict[str, Any]]:
        """Lines of ``user`` (exact name; None: everyone) at or after ``since`` (epoch
        seconds), oldest first, at most the newest ``limit``."""
        out: list[dict[str, Any]] = []
        cut = now_iso(since) if since is not None else None
        for rec in self.lines():
            if user is not None and rec.get("user") != user:
                continue
            if cut is not None and str(rec.get("time", "")) < cut:
                continue
            out.append(rec)
        return out[-limit:] if limit > 0 else []


def audit_result(exc: BaseException) -> str:
    """An error as an audit ``result``: ``denied`` (403), ``not_found`` (404), else its code."""
    if isinstance(exc, Forbidden):
        return "denied"
    if isinstance(exc, NotFound):
        return "not_found"
    if isinstance(exc, WikiMemoryError):
        return exc.error_code
    return type(exc).__name__
