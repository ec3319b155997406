"""Tokens and users.

Every token belongs to one user. The local owner's token is kept in clear in
``auth/owner.token`` (mode 0600) so that local hooks, the CLI and the MCP bridge can
read it; every other token is stored only as its SHA-256 hash in ``auth/tokens.json``
(0600). Tokens are compared in constant time by hash.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OWNER_FILE = "owner.token"
TOKENS_FILE = "tokens.json"
USER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    """A fresh random token: ``wm_`` + 43 url-safe characters (256 bits)."""
    return "wm_" + secrets.token_urlsafe(32)


def _write_private(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


@dataclass(frozen=True)
class TokenRecord:
    """A stored token: its id (first 8 hex of the hash), user, creation time (UTC epoch s)."""

    token_id: str
    user: str
    created: float
    owner: bool = False


class TokenStore:
    """The tokens of one data directory (``auth/``)."""

    def __init__(self, auth_dir: Path, owner_user: str | None = None) -> None:
        self.auth_dir = auth_dir
        self.owner_user = owner_user or os.environ.get("USER") or "owner"
        if not USER_RE.match(self.owner_user):
            self.owner_user = "owner"
        self._lock = threading.Lock()
        self._records: dict[str, TokenRecord] = {}
        self._mtime = -1.0

    @property
    def owner_path(self) -> Path:
        return self.auth_dir / OWNER_FILE

    @property
    def tokens_path(self) -> Path:
        return self.auth_dir / TOKENS_FILE

    def ensure_owner(self) -> tuple[str, bool]:
        """Return the local owner's token, creating it on first run. ``(token, created)``."""
        with self._lock:
            self.auth_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            if self.owner_path.exists():
                return self.owner_path.read_text(encoding="utf-8").strip(), False
            token = new_token()
            _write_private(self.owner_path, token + "\n")
            data = self._read()
            data["tokens"] = [t for t in data["tokens"] if not t.get("owner")]
            data["tokens"].append(
                {
                    "hash": _hash(token),
                    "user": self.owner_user,
                    "created": time.time(),
                    "owner": True,
                }
            )
            data["owner_user"] = self.owner_user
            self._save(data)
            return token, True

    def owner_token(self) -> str | None:
        """The local owner's token, or None before the first run."""
        try:
            return self.owner_path.read_text(encoding="utf-8").strip() or None
        except OSError:
            return None

    def owner_name(self) -> str:
        """The local owner's user name as recorded at first run."""
        return str(self._read().get("owner_user") or self.owner_user)

    def create(self, user: str) -> str:
        """Issue a token for ``user``; returns the token (shown once; only its hash is kept).

        Raises ValueError for a user name outside ``[A-Za-z0-9._-]{1,64}``.
        """
        if not USER_RE.match(user):
            raise ValueError(f"invalid user name {user!r}: use letters, digits, '.', '_' or '-'")
        token = new_token()
        with self._lock:
            data = self._read()
            data["tokens"].append({"hash": _hash(token), "user": user, "created": time.time()})
            self._save(data)
        return token

    def revoke(self, user_or_id: str) -> int:
        """Revoke every non-owner token of a user, or the token whose id is given. Returns the count."""
        with self._lock:
            data = self._read()
            keep, gone = [], 0
            for t in data["tokens"]:
                if not t.get("owner") and (
                    t["user"] == user_or_id or t["hash"].startswith(user_or_id)
                ):
                    gone += 1
                else:
                    keep.append(t)
            data["tokens"] = keep
            self._save(data)
            return gone

    def list(self) -> list[TokenRecord]:
        """Every stored token (ids only, never the token)."""
        return [
            TokenRecord(t["hash"][:8], t["user"], float(t.get("created", 0)), bool(t.get("owner")))
            for t in self._read()["tokens"]
        ]

    def user_for(self, token: str) -> str | None:
        """The user a presented token belongs to, or None when it is unknown or revoked."""
        if not token:
            return None
        h = _hash(token)
        self._refresh()
        found = None
        for key, rec in self._records.items():
            if hmac.compare_digest(key, h):
                found = rec.user
        return found

    def _refresh(self) -> None:
        try:
            mtime = self.tokens_path.stat().st_mtime_ns
        except OSError:
            mtime = 0
        if mtime != self._mtime:
            data = self._read()
            self._records = {
                t["hash"]: TokenRecord(
                    t["hash"][:8], t["user"], float(t.get("created", 0)), bool(t.get("owner"))
                )
                for t in data["tokens"]
            }
            self._mtime = mtime

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.tokens_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        if not isinstance(data, dict):
            data = {}
        data.setdefault("tokens", [])
        return data

    def _save(self, data: dict[str, Any]) -> None:
        _write_private(self.tokens_path, json.dumps(data, indent=1))
        self._mtime = -1
