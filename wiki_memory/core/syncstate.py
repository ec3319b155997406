"""The sync state of a wiki and its one summary (docs/operations.md, "What `sync` does").

:mod:`wiki_memory.core.sync` writes ``wiki/.git/wiki-memory-sync.json`` after every
attempt; :func:`sync_status` and :func:`sync_lines` read it with the git config, so
``doctor``, ``status`` and the brief need neither a server nor a Memory.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wiki_memory.audit import escape
from wiki_memory.wiki import replicate as rp

__all__ = [
    "CONFLICT_LINE",
    "REFUSED",
    "STATE",
    "refused_entries",
    "sync_lines",
    "sync_status",
    "utc_stamp",
]

#: the state file's name inside ``wiki/.git``
STATE = "wiki-memory-sync.json"
#: how a line of :func:`sync_lines` about a conflict copy starts (one line per copy)
CONFLICT_LINE = "sync conflict: "
#: the record of what the border refused from hubs, beside the state
REFUSED = "wiki-memory-refused.json"


def utc_stamp() -> str:
    """The time the state and the refusal record stamp their entries with: UTC, to the
    second, ``2026-01-02T03:04:05Z``."""
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def refused_entries(wiki_dir: Path) -> list[dict[str, str]]:
    """The record of incoming entries the border refused and the hub still carries:
    ``[{"remote", "path", "blob", "reason", "first_seen"}]``, one per (path, blob), in
    the order first seen. ``path`` is as the hub spelled it (escape it to print it).
    Empty when there is no record or it cannot be read."""
    try:
        data = json.loads((Path(wiki_dir) / ".git" / REFUSED).read_text("utf-8"))
    except (OSError, ValueError):
        return []
    rows = data.get("refused") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        return []
    keys = ("remote", "path", "blob", "reason", "first_seen")
    return [
        {k: str(r.get(k, "")) for k in keys}
        for r in rows
        if isinstance(r, dict) and isinstance(r.get("path"), str)
    ]


def sync_status(wiki_dir: Path) -> dict[str, Any]:
    """The sync state of the wiki in ``wiki_dir``, read from its files (so ``doctor`` and
    ``status`` need no server): ``{"remotes": {name: {"url", "last_success",
    "last_attempt", "last_error", "purge_pending", "failing_since", "stopped"}},
    "last_success", "last_error",
    "conflicts", "conflict_notes", "refused"}``.

    Times are ISO-8601 UTC strings (None: never). ``last_success`` is the newest of the
    remotes', ``last_error`` names the remote whose last attempt failed (None when every
    remote's last attempt worked). ``conflicts`` lists the conflict copies syncs made
    that are still in the wiki (``wiki-memory sync-conflicts resolve`` removes one),
    ``conflict_notes`` each one's line naming whose version is where. ``refused`` is
    :func:`refused_entries`. With no remote configured ``remotes`` is empty."""
    wiki_dir = Path(wiki_dir)
    try:
        remotes = rp.list_remotes(wiki_dir)
    except Exception:  # noqa: BLE001 - no repository yet: nothing to report
        remotes = {}
    try:
        state = json.loads((wiki_dir / ".git" / STATE).read_text("utf-8"))
    except (OSError, ValueError):
        state = {}
    known = state.get("remotes", {}) if isinstance(state, dict) else {}
    out: dict[str, Any] = {}
    successes = []
    error = None
    for name, url in sorted(remotes.items()):
        e = known.get(name, {})
        out[name] = {
            "url": url,
            "last_success": e.get("last_success"),
            "last_attempt": e.get("last_attempt"),
            "last_error": e.get("last_error"),
            "purge_pending": bool(e.get("purge_pending")),
            "failing_since": e.get("failing_since") if e.get("last_error") else None,
            "stopped": e.get("stopped") or None,
        }
        if e.get("last_success"):
            successes.append(e["last_success"])
        if e.get("last_error"):
            error = f"{name}: {e['last_error']}"
    conflicts = sorted(
        c
        for c in (state.get("conflicts", []) if isinstance(state, dict) else [])
        if (wiki_dir / c).is_file()
    )
    notes = state.get("conflict_notes") if isinstance(state, dict) else None
    notes = notes if isinstance(notes, dict) else {}
    return {
        "remotes": out,
        "last_success": max(successes) if successes else None,
        "last_error": error,
        "conflicts": conflicts,
        "conflict_notes": {c: str(notes.get(c) or f"{c} is a conflict copy") for c in conflicts},
        "refused": refused_entries(wiki_dir),
    }


def sync_lines(wiki_dir: Path, per_conflict: bool = True) -> list[str]:
    """What a person should know about sync, one sentence each (empty when there are no
    remotes, or sync is fine): the last error with the last success, a purge waiting
    for ``sync --after-purge``, one line per conflict copy (:data:`CONFLICT_LINE`, whose
    version is where; the first five; with ``per_conflict`` False, as the brief asks,
    one line with their count and no path), incoming files the border
    refused (count and the first paths, escaped). Used by the brief and ``doctor``."""
    st = sync_status(wiki_dir)
    if not st["remotes"]:
        return []
    out = []
    if st["last_error"]:
        since = min(
            (r["failing_since"] for r in st["remotes"].values() if r.get("failing_since")),
            default=None,
        )
        out.append(
            f"sync failing since {since or 'unknown'} ({st['last_error']}); "
            f"last succeeded {st['last_success'] or 'never'}"
        )
    for name, r in st["remotes"].items():
        stop = r.get("stopped")
        if stop:
            out.append(
                f"sync with {name} stopped since {stop.get('since')}: it would delete "
                f"{stop.get('deletions')} of {stop.get('shared')} shared page(s) "
                f"({stop.get('cause')}); an admin decides with "
                "`wiki-memory sync --accept-deletions`"
            )
    if any(r["purge_pending"] for r in st["remotes"].values()):
        out.append("a purge waits for an admin's `wiki-memory sync --after-purge`")
    if st["conflicts"] and not per_conflict:
        out.append(
            f"{len(st['conflicts'])} sync conflict copy(ies) to resolve: "
            "`wiki-memory sync-conflicts` says whose version is where"
        )
    for c in st["conflicts"][:5] if per_conflict else []:
        out.append(f"{CONFLICT_LINE}{st['conflict_notes'][c]}")
    if len(st["conflicts"]) > 5 and per_conflict:
        out.append(
            f"{CONFLICT_LINE}{len(st['conflicts']) - 5} more: `wiki-memory sync-conflicts` "
            "lists them"
        )
    if st["refused"]:
        paths = sorted({escape(r["path"]) for r in st["refused"]})
        out.append(
            f"{len(st['refused'])} incoming file(s) refused from a hub and left out "
            f"(docs/team-server.md, threat model): " + ", ".join(paths[:5])
        )
    return out
