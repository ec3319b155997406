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
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wiki_memory.core.scope import not_found
from wiki_memory.core.syncguard import add_tombstones
from wiki_memory.core.writer import WriteResult
from wiki_memory.errors import BadRequest, Forbidden
from wiki_memory.identity import Identity, may_admin
from wiki_memory.recall import rank
from wiki_memory.wiki.page import parse_metadata
from wiki_memory.wiki.paths import clean_rel
from wiki_memory.wiki.purge import MARK, PurgeReport, purge_history

if TYPE_CHECKING:
    from wiki_memory.core.memory import Memory

__all__ = ["MEANING", "purge_page"]

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


def purge_page(
    memory: Memory, path: str, who: Identity | str | None, text: str | None = None
) -> dict[str, Any]:
    """Purge the page at ``path`` (``text`` None) or every occurrence of ``text`` in it,
    for ``who`` (None: the server itself).

    Returns ``{"path", "text_only", "commits_rewritten", "versions", "refs", "remotes",
    "spool_files", "logs", "deleted_means"}``. Raises Forbidden (``grant: admin``) for a
    caller who is not the owner or an admin, PathRefused for a path that names no page,
    BadRequest for an empty ``text``, NotFound when neither the working tree nor any
    commit holds the page (or the text).
    """
    ident = None if who is None else memory.scope.identity(who)
    asked = clean_rel(path)
    if not may_admin(ident):
        memory.audited(ident, "purge", asked, "denied")
        raise Forbidden("only the wiki's owner and admins may purge", grant="admin")
    if text is not None and not text.strip():
        raise BadRequest("text must not be empty", field="text")
    rel, _full = memory.scope.locate(path)
    needles = [rel.encode("utf-8")] if text is None else _needles(text)
    memory.writer.flush()

    def job() -> WriteResult:
        page_id = None
        if text is None:
            try:
                page_id = parse_metadata((memory.wiki_dir / rel).read_bytes()).get("id")
            except OSError:
                page_id = None
        report: PurgeReport = purge_history(
            memory.wiki_dir, rel, None if text is None else text.encode("utf-8")
        )
        # what sync honours whatever history a hub shows later: ids, never a path or text
        add_tombstones(
            memory.wiki_dir, {str(page_id)} if page_id is not None else set(), set(report.blobs)
        )
        memory.git.reopen()
        memory.server_hashes.pop(rel, None)
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
        memory.use.purge(rel, None if text is None else needles)
        rank.clear_caches()
        for fn in memory.on_purge:
            fn(rel)
        return WriteResult(value=(report, spool_files, logs))

    report, spool_files, logs = memory.writer.call(job, timeout=3600).value
    if not report.commits and not report.versions and not spool_files:
        memory.audited(ident, "purge", rel, "not_found")
        raise not_found(asked)
    out = {
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
    memory.audited(
        ident,
        "purge",
        rel,
        "ok",
        text_only=text is not None,
        commits_rewritten=len(report.commits),
        remotes=sorted(report.remotes),
        deleted_means=MEANING,
    )
    return out
