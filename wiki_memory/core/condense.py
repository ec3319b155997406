"""Cold session pages condensed to their durable facts, reversibly (docs/knowledge.md,
"Cold sessions condensed"): :func:`condense_sessions` (``wiki-memory condense``, the
scheduled run when ``condense_sessions`` is set) and :func:`uncondense`
(``wiki-memory uncondense PATH``). Both for the wiki's owner and admins; every write goes
through :meth:`~wiki_memory.core.memory.Memory.update_pages` (the one door), one commit
per run. The text work is :mod:`wiki_memory.wiki.condense`."""

from __future__ import annotations

import logging
import time
from typing import Any

from wiki_memory.core.admin import require_admin
from wiki_memory.core.knowledge import now_iso
from wiki_memory.errors import BadRequest, NotFound
from wiki_memory.identity import Identity
from wiki_memory.plainfile import read_plain
from wiki_memory.recall.tokens import count_tokens
from wiki_memory.wiki.condense import condense_page, is_cold, restore_timeline
from wiki_memory.wiki.frontmatter import set_keys
from wiki_memory.wiki.page import parse_metadata
from wiki_memory.wiki.paths import clean_rel
from wiki_memory.wiki.sessionparts import part_owner

#: the :class:`~wiki_memory.core.memory.Memory` these run on (which runs the scheduled
#: run from its idle loop, so it is not imported here)
Memory = Any

__all__ = ["DAY", "condense_sessions", "linked_entries", "scheduled_run", "uncondense"]

log = logging.getLogger("wiki_memory.core")
DAY = 86400.0
#: how many session pages one run looks at, at most
MAX_PAGES = 100_000
_REFUSAL = "only the wiki's owner and admins may condense or uncondense sessions"


def linked_entries(memory: Memory, path: str) -> set[str]:
    """The block ids (``t7``, ``t7r``) of ``path``'s timeline entries that a link of some
    other page lands on (``[[page#^t7]]``), from the index's links."""
    out: set[str] = set()
    for link in memory.index.backlinks(path):
        frag = str(link.get("fragment") or "")
        if frag.startswith("^t"):
            out.add(frag[1:])
    return out


def condense_sessions(
    memory: Memory,
    who: Identity | None,
    *,
    older_than_days: float | None = None,
    dry_run: bool = False,
    project: str | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """Condense every session page whose ``ended`` and ``updated`` are more than
    ``older_than_days`` (default the ``condense_after_days`` setting) before ``now``
    (UTC epoch seconds; default the clock), in ``project`` or everywhere, in one commit
    (none for ``dry_run``, which writes nothing). ``who`` None: the server itself.

    Returns ``{"older_than_days", "dry_run", "pages": [{"path", "entries", "kept"
    (entries left with their block id), "tokens_before", "tokens_after"}], "condensed":
    n, "tokens_before", "tokens_after"}`` (tokens: cl100k_base, whole page). Audited
    (``session.condense``). Raises Forbidden (``grant: admin``) for a caller who is not
    the owner or an admin, NotFound for a ``project`` the caller may not read, BadRequest
    for a negative or non-numeric ``older_than_days``. A caller's run passes over pages
    the caller may not read (another user's personal sessions: theirs alone)."""
    ident = require_admin(memory, who, "session.condense", project or "*", _REFUSAL)
    days = memory.settings.condense_after_days if older_than_days is None else older_than_days
    if isinstance(days, bool) or not isinstance(days, int | float) or days < 0:
        raise BadRequest("older_than_days: a number of days, 0 or more", field="older_than_days")
    if (
        project is not None
        and ident is not None
        and not memory.reader.project_exists(project, ident)
    ):
        raise NotFound(f"no project {project!r}")
    at = time.time() if now is None else float(now)
    limit = float(days) * DAY
    plans: dict[str, tuple[set[str], dict[str, Any]]] = {}
    for row in memory.index.list_pages(project=project, kind="session", limit=MAX_PAGES):
        path = str(row["path"])
        if ident is not None and not memory.reader.visible(path, ident):
            continue  # another user's personal session: theirs alone, admins included
        raw = read_plain(memory.wiki_dir / path)
        if raw is None or not _cold(memory, path, parse_metadata(raw), at, limit):
            continue
        linked = linked_entries(memory, path)
        done = condense_page(raw, linked, at, path)
        if done is None:
            continue
        new, _facts, n = done
        kept = new.decode("utf-8", "surrogateescape").count("\n^t")
        plans[path] = (
            linked,
            {
                "path": path,
                "entries": n,
                "kept": kept,
                "tokens_before": count_tokens(raw.decode("utf-8", "replace")),
                "tokens_after": count_tokens(new.decode("utf-8", "replace")),
            },
        )
    rows = [r for _l, r in plans.values()]
    out = {
        "older_than_days": days,
        "dry_run": dry_run,
        "pages": rows,
        "condensed": len(rows),
        "tokens_before": sum(r["tokens_before"] for r in rows),
        "tokens_after": sum(r["tokens_after"] for r in rows),
    }
    if dry_run or not rows:
        memory.audited(ident, "session.condense", project or "*", "ok", pages=0, dry_run=dry_run)
        return out

    def change(path: str, linked: set[str]) -> Any:
        def fn(current: bytes | None) -> bytes | None:
            # decided again on the bytes the write replaces (a person's save in between)
            if current is None or not _cold(memory, path, parse_metadata(current), at, limit):
                return None
            done = condense_page(current, linked, at, path)
            return None if done is None else done[0]

        return fn

    changes = [(p, change(p, linked)) for p, (linked, _r) in plans.items()]
    res = memory.update_pages(
        changes,
        user=memory.owner,
        message=f"Condense {len(changes)} cold session page(s) older than {days:g} days",
        op="session.condense",
    )
    written = set(res.paths)
    out["pages"] = [r for r in rows if r["path"] in written]
    out["condensed"] = len(out["pages"])
    memory.audited(ident, "session.condense", project or "*", "ok", pages=len(written))
    return out


def _before_condensing(memory: Memory, path: str) -> bytes:
    """The page's bytes in the newest commit before the one that condensed it."""
    seen_condensed = False
    for rel, info in memory.git.page_log(path, limit=500):
        data: bytes | None = memory.git.read_at(rel, info.sha)
        if data is None:
            continue
        if parse_metadata(data).get("condensed"):
            seen_condensed = True
        elif seen_condensed:
            return data
    raise NotFound(f"{path}: no version before it was condensed in the page's git history")


def uncondense(memory: Memory, who: Identity | None, path: str) -> dict[str, Any]:
    """Put a condensed session page's ``## Timeline`` back as it was in the commit before
    it was condensed, byte for byte, keeping every other byte of the page as it is now (a
    person's later edits); frontmatter ``condensed`` goes. One commit. Returns ``{"path",
    "tokens_before", "tokens_after"}``. Audited (``session.uncondense``). Raises Forbidden
    (not the owner or an admin), NotFound (no such page, one the caller may not read, or
    no earlier version in git), BadRequest (the page is not condensed). The page keeps
    frontmatter ``uncondensed`` (when), so later runs leave it whole."""
    ident = require_admin(memory, who, "session.uncondense", str(path), _REFUSAL)
    if not isinstance(path, str) or not path:
        raise BadRequest("path: a session page's path", field="path")
    rel = clean_rel(path)
    current = read_plain(memory.wiki_dir / rel)
    if current is None or (ident is not None and not memory.reader.visible(rel, ident)):
        raise NotFound(f"no page {rel}")  # hidden means missing
    if not parse_metadata(current).get("condensed"):
        raise BadRequest(f"{rel} is not condensed", field="path")
    before = _before_condensing(memory, rel)

    def fn(cur: bytes | None) -> bytes | None:
        if cur is None or not parse_metadata(cur).get("condensed"):
            return None
        back = restore_timeline(cur, before)
        # a person's choice that outlasts the next run: later runs leave it whole
        return None if back is None else set_keys(back, {"uncondensed": now_iso()})

    res = memory.update_page(
        rel,
        fn,
        user=memory.owner,
        message=f"Uncondense {rel}",
        commit_now=True,
        op="session.uncondense",
    )
    memory.audited(ident, "session.uncondense", rel, "ok" if res.paths else "unchanged")
    after = read_plain(memory.wiki_dir / rel) or b""
    return {
        "path": rel,
        "tokens_before": count_tokens(current.decode("utf-8", "replace")),
        "tokens_after": count_tokens(after.decode("utf-8", "replace")),
    }


def scheduled_run(memory: Memory, last: float, now: float) -> float:
    """The scheduled run, at most daily, when the ``condense_sessions`` setting is on:
    :func:`condense_sessions` as the server itself. Returns when it last ran."""
    if not memory.settings.condense_sessions or now - last < DAY:
        return last
    try:
        condense_sessions(memory, None, now=now)
    except Exception:  # noqa: BLE001 - the next day tries again
        log.exception("condensing cold session pages failed")
    return now


def _cold(memory: Any, path: str, meta: dict[str, Any], at: float, limit: float) -> bool:
    """:func:`~wiki_memory.wiki.condense.is_cold` for a page; a long session's part
    (:mod:`wiki_memory.wiki.sessionparts`) is cold when its session page is, condensed
    or not, and the part itself is not condensed yet."""
    session, k = part_owner(memory.wiki_dir, path)
    if k < 2:
        return is_cold(meta, at, limit)
    if meta.get("condensed") or meta.get("uncondensed"):
        return False
    raw = read_plain(memory.wiki_dir / session)
    if raw is None:
        return False
    head = {k: v for k, v in parse_metadata(raw).items() if k != "condensed"}
    return is_cold(head, at, limit)
