"""Tokens, users, roles and per-project grants.

Every token belongs to one user. The local owner's token is kept in clear in
``auth/owner.token`` (mode 0600) so that local hooks, the CLI and the MCP bridge can
read it; every other token is stored only as its SHA-256 hash in ``auth/tokens.json``
(0600). Tokens are compared in constant time by hash. A token's id is the first 8 hex
digits of its hash (shown by ``token list``, written in the audit log).

``tokens.json`` (format version 2) also holds, per user, a role (``admin``, ``member``,
``reader``; the local owner is ``owner``) and grants (project -> ``"read"`` or
``"write"``). What they allow is decided in :mod:`wiki_memory.identity`, nowhere here.
Every change is a read-modify-write under ``auth/tokens.lock`` (an OS file lock), so the
CLI and a running server never lose each other's changes; a running server re-reads the
file when it changes, so a revocation or a grant binds its very next request.

User names are unique after the identity fold (:func:`wiki_memory.identity.fold`: case
and width), because pages' owners are compared folded: ``ALICE`` beside ``alice`` would
own each other's personal pages. :meth:`TokenStore.create` refuses such a twin and names
the existing user. A data directory from before this rule may hold twins: the user whose
first token is older (the local owner always) keeps working; every token of the newer
twin is refused (``user_name_twin``, :meth:`TokenStore.twin_for`) until the owner revokes
it (:func:`twins` lists them, for ``doctor``).

A file from before roles (no ``version``) is upgraded by :meth:`TokenStore.upgrade` at
the server's first start: every user holding a token becomes a ``member`` with a
write grant on every project that exists then.
"""

from __future__ import annotations

import dataclasses
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

from filelock import FileLock

from wiki_memory.identity import Identity, fold
from wiki_memory.plainfile import atomic_write

OWNER_FILE = "owner.token"
TOKENS_FILE = "tokens.json"
LOCK_FILE = "tokens.lock"
USED_FILE = "last_used.json"
#: how often (seconds) a running server writes when its tokens were last used
USED_FLUSH_SECONDS = 60.0
FORMAT = 2
#: roles a token can be created with (the owner is the data directory's own user)
GRANTABLE_ROLES = ("admin", "member", "reader")
USER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    """A fresh random token: ``wm_`` + 43 url-safe characters (256 bits)."""
    return "wm_" + secrets.token_urlsafe(32)


def _write_private(path: Path, text: str) -> None:
    atomic_write(path, text.encode("utf-8"), 0o600)


@dataclass(frozen=True)
class TokenRecord:
    """A stored token: ``token_id`` (first 8 hex of its hash), ``user``, ``created``
    (UTC epoch seconds), ``owner`` (the local owner's token), ``role`` and ``grants`` (its
    user's, project -> ``"read"``/``"write"``; None for the owner and admins: every
    project)."""

    token_id: str
    user: str
    created: float
    owner: bool = False
    role: str = "member"
    grants: dict[str, str] | None = None
    last_used: float | None = None


def twins(data: dict[str, Any]) -> dict[str, str]:
    """The users of a ``tokens.json`` mapping whose folded name equals an older user's:
    twin -> the user that keeps the name (the local owner, else the user whose first
    token was created first; ties by name)."""
    first: dict[str, float] = {}
    owner = str(data.get("owner_user") or "")
    for t in data.get("tokens", []):
        if not isinstance(t, dict) or not isinstance(t.get("user"), str):
            continue
        when = float("-inf") if t.get("owner") or t["user"] == owner else float(t.get("created", 0))
        first[t["user"]] = min(first.get(t["user"], float("inf")), when)
    if owner:
        first.setdefault(owner, float("-inf"))
    by_fold: dict[str, list[str]] = {}
    for user in first:
        by_fold.setdefault(fold(user), []).append(user)
    out: dict[str, str] = {}
    for users in by_fold.values():
        if len(users) > 1:
            users.sort(key=lambda u: (first[u], u))
            for u in users[1:]:
                out[u] = users[0]
    return out


@dataclass(frozen=True)
class Upgrade:
    """What :meth:`TokenStore.upgrade` did: ``users`` that became members with write
    grants on ``projects``."""

    users: list[str]
    projects: list[str]


class TokenStore:
    """The tokens and users of one data directory (``auth/``)."""

    def __init__(self, auth_dir: Path, owner_user: str | None = None) -> None:
        self.auth_dir = auth_dir
        self.owner_user = owner_user or os.environ.get("USER") or "owner"
        if not USER_RE.match(self.owner_user):
            self.owner_user = "owner"
        self._lock = threading.Lock()
        self._records: dict[str, TokenRecord] = {}
        self._users: dict[str, dict[str, Any]] = {}
        self._owner_name = ""
        #: newer twin -> the user that keeps the folded name (:func:`twins`)
        self._twins: dict[str, str] = {}
        self._stamp: Any = None
        #: token id -> when a request last presented it (written every minute at most)
        self._used: dict[str, float] = {}
        self._used_flushed = 0.0
        #: ``tokens.json``'s path as a string, for the ``stat`` every request makes
        #: (:meth:`_refresh`; a path object built per request cost more than the call)
        self._tokens_file = os.fspath(self.tokens_path)

    @property
    def owner_path(self) -> Path:
        return self.auth_dir / OWNER_FILE

    @property
    def tokens_path(self) -> Path:
        return self.auth_dir / TOKENS_FILE

    def _file_lock(self) -> FileLock:
        self.auth_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        return FileLock(str(self.auth_dir / LOCK_FILE), timeout=30)

    def ensure_owner(self) -> tuple[str, bool]:
        """Return the local owner's token, creating it on first run. ``(token, created)``."""
        with self._lock, self._file_lock():
            if self.owner_path.exists():
                return self.owner_path.read_text(encoding="utf-8").strip(), False
            token = new_token()
            _write_private(self.owner_path, token + "\n")
            data = self._read()
            fresh = not data["tokens"]
            data["tokens"] = [t for t in data["tokens"] if not t.get("owner")]
            data["tokens"].append(
                {
                    "hash": token_hash(token),
                    "user": self.owner_user,
                    "created": time.time(),
                    "owner": True,
                }
            )
            data["owner_user"] = self.owner_user
            if fresh:
                data["version"] = FORMAT  # nothing from before roles to upgrade
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

    # -- changes ---------------------------------------------------------------------
    def create(
        self,
        user: str,
        role: str | None = None,
        projects: list[str] | tuple[str, ...] = (),
        read_only: bool = False,
        tz: str | None = None,
    ) -> str:
        """Issue a token for ``user``; returns the token (shown once; only its hash is kept).

        ``tz``: the user's time zone (an IANA name or an offset), stored with the user:
        the days of its calls that name no zone (:mod:`wiki_memory.zones`).

        ``role`` (``admin``, ``member``, ``reader``) sets the user's role; None keeps an
        existing user's and makes a new user a ``member``. ``projects`` are granted (read
        and write for a member unless ``read_only``; read for a reader). Raises ValueError
        for a user name outside ``[A-Za-z0-9._-]{1,64}``, an unknown role, the local
        owner's name, a name that equals another user's after the identity fold (case
        and width: the message names that user), or a bad project name.
        """
        if not USER_RE.match(user):
            raise ValueError(f"invalid user name {user!r}: use letters, digits, '.', '_' or '-'")
        if role is not None and role not in GRANTABLE_ROLES:
            raise ValueError(f"unknown role {role!r}: use one of {', '.join(GRANTABLE_ROLES)}")
        for p in projects:
            _check_project(p)
        if tz:
            from wiki_memory.zones import zone, zone_name

            tz = zone_name(zone(tz))  # a ValueError (ZoneError) for an unknown zone
        token = new_token()
        with self._lock, self._file_lock():
            data = self._read()
            if user == data.get("owner_user"):
                raise ValueError(f"{user} is the local owner: the owner's token is `token`")
            known = {str(data.get("owner_user") or ""), *data["users"]}
            known.update(t["user"] for t in data["tokens"] if isinstance(t.get("user"), str))
            twin = next(
                (u for u in sorted(known) if u and u != user and fold(u) == fold(user)), None
            )
            if twin is not None:
                raise ValueError(
                    f"user name {user!r} differs from the existing user {twin!r} only in case "
                    f"or width; user names must differ after folding (use --user {twin} to "
                    "give that user another token)"
                )
            entry = data["users"].setdefault(user, {"role": "member", "grants": {}})
            if role is not None:
                entry["role"] = role
            if tz:
                entry["tz"] = tz
            for p in projects:
                entry["grants"][p] = _level(entry["role"], read_only)
            data["tokens"].append({"hash": token_hash(token), "user": user, "created": time.time()})
            self._save(data)
        return token

    def grant(self, user: str, project: str, read_only: bool = False) -> str:
        """Grant ``user`` read (``read_only``, or a reader) or read-and-write on
        ``project``; returns the level stored. Raises ValueError for an unknown user (no
        role and no token) or a bad project name."""
        _check_project(project)
        with self._lock, self._file_lock():
            data = self._read()
            entry = data["users"].get(user)
            if entry is None and any(t["user"] == user for t in data["tokens"]):
                entry = data["users"][user] = {"role": "member", "grants": {}}
            if entry is None:
                raise ValueError(f"no user {user!r}: create a token for them first")
            level = _level(entry.get("role", "member"), read_only)
            entry.setdefault("grants", {})[project] = level
            self._save(data)
            return level

    def ungrant(self, user: str, project: str) -> bool:
        """Remove ``user``'s grant on ``project``; True when there was one."""
        with self._lock, self._file_lock():
            data = self._read()
            entry = data["users"].get(user)
            if entry is None or project not in entry.get("grants", {}):
                return False
            del entry["grants"][project]
            self._save(data)
            return True

    def revoke(self, *, user: str | None = None, token_id: str | None = None) -> list[TokenRecord]:
        """Revoke every token of ``user`` or the one token whose id is ``token_id``:
        exact matches only, never a prefix, never the local owner's token. Returns the
        revoked records (empty when none matched)."""
        if (user is None) == (token_id is None):
            raise ValueError("name exactly one of user or token id")
        with self._lock, self._file_lock():
            data = self._read()
            keep, gone = [], []
            for t in data["tokens"]:
                hit = (user is not None and t["user"] == user) or (
                    token_id is not None and t["hash"][:8] == token_id
                )
                if hit and not t.get("owner"):
                    gone.append(self._record(t, data))
                    # kept (hash only) so that a later attempt with it is attributed
                    data["revoked"].append(
                        {"hash": t["hash"], "user": t["user"], "revoked": time.time()}
                    )
                else:
                    keep.append(t)
            data["tokens"] = keep
            if gone:
                self._save(data)
            return gone

    def upgrade(self, projects: list[str]) -> Upgrade | None:
        """Bring a ``tokens.json`` from before roles to format 2: every user holding a
        non-owner token and no role yet becomes a ``member`` with a write grant on each of
        ``projects`` (the projects that exist now). Returns what changed, or None when the
        file was already current (the server tells its console and audit log once)."""
        with self._lock, self._file_lock():
            data = self._read()
            if int(data.get("version") or 0) >= FORMAT:
                return None
            users = sorted(
                {
                    t["user"]
                    for t in data["tokens"]
                    if not t.get("owner") and t["user"] not in data["users"]
                }
            )
            for u in users:
                data["users"][u] = {"role": "member", "grants": dict.fromkeys(projects, "write")}
            data["version"] = FORMAT
            self._save(data)
            return Upgrade(users, sorted(projects))

    # -- reading ---------------------------------------------------------------------
    def list(self) -> list[TokenRecord]:
        """Every stored token with its user's role and grants and when it was last used
        (``auth/last_used.json``, at most a minute behind; None: never seen) — ids only,
        never a token."""
        data = self._read()
        used = {**self._read_used(), **self._used}
        return [
            dataclasses.replace(r, last_used=used.get(r.token_id))
            for r in (self._record(t, data) for t in data["tokens"])
        ]

    def _read_used(self) -> dict[str, float]:
        try:
            raw = json.loads((self.auth_dir / USED_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(raw, dict):
            return {}
        return {str(k): float(v) for k, v in raw.items() if isinstance(v, int | float)}

    def _note_used(self, token_id: str) -> None:
        now = time.time()
        self._used[token_id] = now
        if now - self._used_flushed < USED_FLUSH_SECONDS:
            return
        self._used_flushed = now
        try:
            merged = {**self._read_used(), **self._used}
            _write_private(self.auth_dir / USED_FILE, json.dumps(merged))
        except OSError:
            pass

    def users(self) -> dict[str, dict[str, Any]]:
        """user -> ``{"role", "grants"}`` for every user with a role (a copy)."""
        users: dict[str, dict[str, Any]] = json.loads(json.dumps(self._read()["users"]))
        return users

    def user_for(self, token: str) -> str | None:
        """The user a presented token belongs to, or None when it is unknown or revoked."""
        ident = self.identity_for(token)
        return ident.user if ident is not None else None

    def identity_for(self, token: str) -> Identity | None:
        """The :class:`~wiki_memory.identity.Identity` (user, role, grants, token id) of a
        presented token, or None when it is unknown or revoked. Re-reads ``tokens.json``
        when it changed, so a revocation binds at once."""
        if not token:
            return None
        h = token_hash(token)
        self._refresh()
        found = None
        for key, rec in self._records.items():
            if hmac.compare_digest(key, h):
                found = rec
        if found is None or found.user in self._twins:
            return None
        self._note_used(found.token_id)
        return self._identity(found.user, found.token_id)

    def twin_for(self, token: str) -> tuple[str, str, str] | None:
        """``(user, token id, existing user)`` of a presented token whose user is the
        newer twin of another user (:func:`twins`): refused until revoked."""
        if not token:
            return None
        h = token_hash(token)
        self._refresh()
        for key, rec in self._records.items():
            if hmac.compare_digest(key, h) and rec.user in self._twins:
                return rec.user, rec.token_id, self._twins[rec.user]
        return None

    def twins(self) -> dict[str, str]:
        """Newer twin -> the user that keeps the folded name (:func:`twins`)."""
        return twins(self._read())

    def revoked_for(self, token: str) -> tuple[str, str] | None:
        """``(user, token id)`` of a presented token that was revoked, for the audit log
        (None for a token never issued here)."""
        if not token:
            return None
        h = token_hash(token)
        for t in self._read()["revoked"]:
            if isinstance(t, dict) and hmac.compare_digest(str(t.get("hash", "")), h):
                return str(t.get("user", "")), str(t["hash"])[:8]
        return None

    def identity_of(self, user: str) -> Identity | None:
        """The user's current role and grants (no token id), or None for a user the store
        does not know. The local owner is ``owner``."""
        self._refresh()
        return self._identity(user, None)

    def _identity(self, user: str, token_id: str | None) -> Identity | None:
        if user in self._twins:
            return None
        if user == self._owner_name:
            return Identity(user=user, role="owner", token_id=token_id)
        entry = self._users.get(user)
        if entry is None:
            if token_id is None:
                return None
            return Identity(user=user, role="member", grants={}, token_id=token_id)
        role = str(entry.get("role") or "member")
        grants = dict(entry.get("grants") or {})
        return Identity(
            user=user,
            role=role,
            grants=None if role == "admin" else grants,
            token_id=token_id,
            tz=str(entry.get("tz") or ""),
        )

    def _record(self, t: dict[str, Any], data: dict[str, Any]) -> TokenRecord:
        owner = bool(t.get("owner"))
        entry = data["users"].get(t["user"]) or {}
        role = "owner" if owner else str(entry.get("role") or "member")
        grants = None if role in ("owner", "admin") else dict(entry.get("grants") or {})
        return TokenRecord(
            t["hash"][:8], t["user"], float(t.get("created", 0)), owner, role, grants
        )

    def _refresh(self) -> None:
        try:
            st = os.stat(self._tokens_file)
            stamp: Any = (st.st_mtime_ns, st.st_ino, st.st_size)
        except OSError:
            stamp = None
        with self._lock:
            if stamp is not None and stamp == self._stamp:
                return
            data = self._read()
            self._records = {t["hash"]: self._record(t, data) for t in data["tokens"]}
            self._users = data["users"]
            self._owner_name = str(data.get("owner_user") or "")
            self._twins = twins(data)
            self._stamp = stamp

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.tokens_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        if not isinstance(data, dict):
            data = {}
        data.setdefault("tokens", [])
        if not isinstance(data.get("users"), dict):
            data["users"] = {}
        if not isinstance(data.get("revoked"), list):
            data["revoked"] = []
        return data

    def _save(self, data: dict[str, Any]) -> None:
        _write_private(self.tokens_path, json.dumps(data, indent=1))
        self._stamp = None


PROJECT_RE = re.compile(r"^[^/\\\x00-\x1f.][^/\\\x00-\x1f]{0,199}$")


def _check_project(name: str) -> None:
    if not PROJECT_RE.match(name):
        raise ValueError(f"invalid project name {name!r}: one folder name under projects/")


def _level(role: str, read_only: bool) -> str:
    return "read" if read_only or role == "reader" else "write"
