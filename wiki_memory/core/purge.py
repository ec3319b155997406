"""Purge: the one real delete (docs/operations.md, "Purge"; invariant 7's exception).

:func:`purge_page` removes a page (or one text inside it) from the working tree, from
every commit of git history (:func:`wiki_memory.wiki.purge.purge_history`: the branch
rewritten, reflogs expired, old objects pruned), from the index (rebuilt from scratch, so
no freed SQLite page keeps it), from the spool, from the access and server logs and from
the as-of cache, and from the caches of page text in memory (recall's, the web view's
rendered pages: :attr:`~wiki_memory.core.memory.Memory.on_purge`). Audit entries hold
no page text and stay; one more says what was purged
and where copies may remain. The wiki's owner and admins only, and it is the one action
an admin may take on another user's personal page.
"""

from __future__ import annotations

import json
import logging
import shutil
import weakref
from pathlib import Path
from typing import Any

from wiki_memory.audit import now_iso
from wiki_memory.core.pausepoint import pause
from wiki_memory.core.scope import not_found
from wiki_memory.core.syncguard import add_tombstones
from wiki_memory.core.writer import WriteResult
from wiki_memory.errors import BadRequest, Forbidden
from wiki_memory.identity import Identity, may_admin
from wiki_memory.index import sectionmemo
from wiki_memory.recall import rank
from wiki_memory.wiki.page import parse_metadata
from wiki_memory.wiki.paths import atomic_write, clean_rel
from wiki_memory.wiki.purge import MARK, PurgeReport, purge_history

__all__ = ["MEANING", "PENDING", "PURGE_PAUSE_ENV", "finish_pending", "purge_page"]

log = logging.getLogger("wiki_memory.purge")

#: what "deleted" means, written into the purge's audit entry and printed by the CLI
MEANING = (
    "removed from this data directory: the working tree, every commit of every local "
    "branch, tag and remote-tracking ref (history rewritten, reflogs expired, unreachable "
    "objects pruned), the index, the spool, the access and server logs, the as-of "
    "cache and the caches in memory; copies may remain in git remotes, in other people's clones, in backups made "
    "before now, and in exports"
)


def _needles(text: str) -> list[bytes]:
    """The text as stored raw and as JSON escapes it (spool lines, logs)."""
    out = {text.encode("utf-8")}
    out.add(json.dumps(text)[1:-1].encode("utf-8"))
    out.add(json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8"))
    return sorted(out, key=len, reverse=True)


def _scrub_logs(logs: Path, needles: list[bytes]) -> list[str]:
    """Replace ``needles`` by the mark in every log file but the audit log, in place (a
    logging handler appending to one keeps its descriptor). Returns the files changed."""
    changed = []
    for f in sorted(logs.glob("*")):
        if not f.is_file() or f.is_symlink() or f.name.startswith("audit"):
            continue
        data = f.read_bytes()
        new = data
        for n in needles:
            new = new.replace(n, MARK)
        if new != data:
            with open(f, "r+b") as out:
                out.write(new)
                out.truncate()
            changed.append(f.name)
    return changed


#: a test's kill point: purge stops (sleeps) at the step this names
PURGE_PAUSE_ENV = "WIKI_MEMORY_PURGE_PAUSE_AT"
#: the purge under way, in the data directory: removed once its closing audit line is written
PENDING = "purge-pending.json"
#: what purge_page found to purge, for a second purge of a page a stopped one finished at
#: start (so that one answers with what was done, not 404)
_finished: weakref.WeakKeyDictionary[Any, dict[str, dict[str, Any]]] = weakref.WeakKeyDictionary()


def _rewrite(memory: Any, rel: str, text: str | None, page_id: Any) -> PurgeReport:
    """History and the working tree (on the writer thread)."""
    report = purge_history(memory.wiki_dir, rel, None if text is None else text.encode("utf-8"))
    # what sync honours whatever history a hub shows later: ids, never a path or text
    add_tombstones(
        memory.wiki_dir, {str(page_id)} if page_id is not None else set(), set(report.blobs)
    )
    memory.git.reopen()
    memory.server_hashes.pop(rel, None)
    return report


def _clear(memory: Any, rel: str, text: str | None) -> tuple[int, list[str]]:
    """The spool, the index, the as-of cache, the logs and the caches in memory (on the
    writer thread). Returns (spool files changed, log files changed)."""
    needles = [rel.encode("utf-8")] if text is None else _needles(text)
    spool_files = 0
    for key, info in list(memory.spool.sessions.items()):
        if text is None and info.state.get("path") == rel:
            memory.spool.drop(key)
            memory.index.delete_spool_session(key)
            spool_files += 1
    if text is not None:
        spool_files += memory.spool.scrub(needles, MARK)
    memory.capturer.reindex_spool()
    memory.index.rebuild(memory.wiki_dir)
    memory.index.checkpoint()
    shutil.rmtree(Path(memory.settings.index_path).parent / "as-of", ignore_errors=True)
    logs = _scrub_logs(memory.settings.logs_dir, needles)
    rank.clear_caches()
    sectionmemo.clear()  # no copy of the purged text stays in this process's memo
    for fn in memory.on_purge:
        fn(rel)
    return spool_files, logs


def _closing(
    memory: Any, ident: Identity | None, rel: str, text: str | None, found: dict[str, Any]
) -> None:
    """The purge's closing audit line, with what was done in each place; then the
    pending file goes (a kill between the two writes the line again at the next start)."""
    memory.audited(
        ident,
        "purge",
        rel,
        "ok",
        text_only=text is not None,
        commits_rewritten=found["commits_rewritten"],
        versions=found["versions"],
        refs=len(found["refs"]),
        spool_files=found["spool_files"],
        logs=len(found["logs"]),
        remotes=sorted(found["remotes"]),
        deleted_means=MEANING,
        **({"finished_at_start": True} if found.get("finished_at_start") else {}),
    )
    (memory.settings.data_dir / PENDING).unlink(missing_ok=True)


def purge_page(
    memory: Any, path: str, who: Identity | str | None, text: str | None = None
) -> dict[str, Any]:
    """Purge the page at ``path`` (``text`` None) or every occurrence of ``text`` in it,
    for ``who`` (None: the server itself). ``memory`` is the
    :class:`~wiki_memory.core.memory.Memory` (which imports this module for its start).

    Before history is rewritten, ``purge.start`` goes to the audit log (the page's id, no
    path, no text) and the purge is noted in ``<data dir>/purge-pending.json`` (0600):
    a purge stopped after that point (a kill, a crash) is finished by the next start
    (:func:`finish_pending`). The closing ``purge`` line has the count of each place.

    Returns ``{"path", "text_only", "commits_rewritten", "versions", "refs", "remotes",
    "spool_files", "logs", "deleted_means"}``. Raises Forbidden (``grant: admin``) for a
    caller who is not the owner or an admin, PathRefused for a path that names no page,
    BadRequest for an empty ``text``, NotFound when neither the working tree nor any
    commit holds the page (or the text), unless the start just finished a stopped purge
    of it (its answer is returned, with ``finished_at_start: true``).
    """
    ident = None if who is None else memory.scope.identity(who)
    asked = clean_rel(path)
    if not may_admin(ident):
        memory.audited(ident, "purge", asked, "denied")
        raise Forbidden("only the wiki's owner and admins may purge", grant="admin")
    if text is not None and not text.strip():
        raise BadRequest("text must not be empty", field="text")
    rel, _full = memory.scope.locate(path)
    memory.writer.flush()

    def job() -> WriteResult:
        page_id = None
        if text is None:
            try:
                page_id = parse_metadata((memory.wiki_dir / rel).read_bytes()).get("id")
            except OSError:
                page_id = None
        pending = {"path": rel, "text": text, "page_id": page_id, "time": now_iso()}
        atomic_write(memory.settings.data_dir / PENDING, json.dumps(pending, default=str).encode())
        memory.audited(ident, "purge.start", "", "ok", page_id=page_id, text_only=text is not None)
        pause(PURGE_PAUSE_ENV, "purge", "started")
        report = _rewrite(memory, rel, text, page_id)
        pause(PURGE_PAUSE_ENV, "purge", "rewritten")
        spool_files, logs = _clear(memory, rel, text)
        pause(PURGE_PAUSE_ENV, "purge", "cleared")
        return WriteResult(value=(report, spool_files, logs))

    report, spool_files, logs = memory.writer.call(job, timeout=3600).value
    if not report.commits and not report.versions and not spool_files:
        (memory.settings.data_dir / PENDING).unlink(missing_ok=True)
        earlier = _finished.get(memory, {}).pop(rel, None)
        if earlier is not None:
            _closing(memory, ident, rel, text, earlier)  # every purge.start has its close
            return earlier
        memory.audited(ident, "purge", rel, "not_found")
        raise not_found(asked)
    out = _answer(rel, text, report, spool_files, logs)
    _closing(memory, ident, rel, text, out)
    return out


def _answer(
    rel: str, text: str | None, report: PurgeReport, spool_files: int, logs: list[str]
) -> dict[str, Any]:
    return {
        "path": rel,
        "text_only": text is not None,
        "commits_rewritten": len(report.commits),
        "versions": report.versions,
        "refs": report.refs,
        "remotes": report.remotes,
        "spool_files": spool_files,
        "logs": logs,
        "deleted_means": MEANING,
    }


def finish_pending(memory: Any, phase: str) -> None:
    """Finish a purge a kill or crash stopped (``<data dir>/purge-pending.json``), at
    start: ``phase`` ``"history"`` (before the start commits files changed on disk, so
    nothing purged is committed back) rewrites history and the working tree again;
    ``"rest"`` (once the index is ready) clears the spool, index, logs and caches and
    writes the closing audit line with ``finished_at_start: true``. Both are idempotent.
    A failure is logged and the file kept: the next start tries again."""
    path = memory.settings.data_dir / PENDING
    try:
        pending = json.loads(path.read_bytes())
        rel, text = clean_rel(pending["path"]), pending.get("text")
        if text is not None and not isinstance(text, str):
            raise TypeError("text is not a string")
    except FileNotFoundError:
        return
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.error("%s cannot be read (%s): remove it after checking the purge", path, exc)
        return
    try:
        if phase == "history":
            memory.writer.call(
                lambda: WriteResult(value=_rewrite(memory, rel, text, pending.get("page_id"))),
                timeout=3600,
            )
            return
        spool_files, logs = memory.writer.call(
            lambda: WriteResult(value=_clear(memory, rel, text)), timeout=3600
        ).value
    except Exception as exc:  # noqa: BLE001 - the start goes on; the next one tries again
        log.error("a stopped purge could not be finished (%s): the next start tries again", exc)
        return
    found = {**_answer(rel, text, PurgeReport(), spool_files, logs), "finished_at_start": True}
    _finished.setdefault(memory, {})[rel] = found
    _closing(memory, None, rel, text, found)
    log.warning("finished a purge that was stopped (see the audit log's purge lines)")
