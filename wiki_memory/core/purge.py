"""Purge: the one real delete (docs/operations.md, "Purge"; invariant 7's exception).

:func:`purge_page` removes a page (or one text inside it) from the working tree, from
every commit of git history (:func:`wiki_memory.wiki.purge.purge_history`: the branch
rewritten, reflogs expired, old objects pruned), from the index (rebuilt from scratch, so
no freed SQLite page keeps it), from the spool, from the access and server logs and from
the as-of cache, and from the caches of page text in memory (recall's, the web view's
rendered pages: :attr:`~wiki_memory.core.memory.Memory.on_purge`), from the use record
and from the audit log (rewritten, the value as ``[purged]``). Copies of the value
outside the page go too, in the same history rewrite: a file name that holds it (the page
gets a neutral name, ``purged-<8 hex>.md``, and every link to it follows), and commit
messages. A whole page's path, title and file name are purged the same way, and links to
it become ``[purged]``. One more audit line says what was purged, how many copies each
place held and where copies may remain. The wiki's owner and admins only, and it is the one action
an admin may take on another user's personal page.

A purge is announced before history is rewritten (``purge.start`` in the audit log, with
the page's id and neither path nor text, and ``<data dir>/purge-pending.json``): one a
kill or crash stopped is finished by the next start (:func:`finish_pending`).
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
import secrets
import shutil
import weakref
from pathlib import Path
from typing import Any
from urllib.parse import quote

from wiki_memory.audit import now_iso
from wiki_memory.core.admin import require_admin
from wiki_memory.core.pausepoint import pause
from wiki_memory.core.scope import not_found
from wiki_memory.core.syncguard import add_tombstones
from wiki_memory.core.writer import WriteResult
from wiki_memory.errors import BadRequest, NotFound
from wiki_memory.identity import Identity
from wiki_memory.index import pagetail, sectionmemo
from wiki_memory.plainfile import atomic_write, forget_hashes, scrub_files
from wiki_memory.recall import rank
from wiki_memory.wiki.links import name_key, target_key
from wiki_memory.wiki.names import file_stem
from wiki_memory.wiki.page import parse_metadata
from wiki_memory.wiki.paths import clean_rel
from wiki_memory.wiki.purge import MARK, PurgeReport, Rewrite, purge_history
from wiki_memory.wiki.sessionparts import session_parts
from wiki_memory.wiki.verbatim import slugify

__all__ = ["MEANING", "PENDING", "PURGE_PAUSE_ENV", "finish_pending", "purge_page"]

log = logging.getLogger("wiki_memory.purge")

#: what "deleted" means, written into the purge's audit entry and printed by the CLI
MEANING = (
    "removed from this data directory: the working tree, every commit of every local "
    "branch, tag and remote-tracking ref (history rewritten, reflogs expired, unreachable "
    "objects pruned; file names holding it renamed, links to the page and commit "
    "messages rewritten), git's index, the index, the spool, the use record, the access, "
    "server and audit logs, the as-of cache and the caches in memory; copies may remain in git remotes, in other people's clones, in backups made "
    "before now, and in exports"
)


def _scrub_files(folder: Path, needles: list[bytes], skip: str = "") -> dict[str, int]:
    """Replace ``needles`` by the mark in every file of ``folder`` (not below it) but
    those whose name starts with ``skip``, in place (a handler appending to one keeps its
    descriptor). Returns file name -> how many occurrences were replaced."""
    return scrub_files(folder, needles, MARK, skip=skip, fsync=False)


def _count_files(folder: Path, needles: list[bytes]) -> dict[str, int]:
    """How many times ``needles`` occur in each regular file under ``folder`` (relative
    path -> count, files with none left out)."""
    out: dict[str, int] = {}
    for f in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if f.is_file() and not f.is_symlink():
            data = f.read_bytes()
            if n := sum(data.count(x) for x in needles):
                out[str(f.relative_to(folder))] = n
    return out


def _meta(memory: Any, rel: str) -> dict[str, Any]:
    """The frontmatter of the page's working copy (``{}`` when there is none)."""
    try:
        meta = parse_metadata((memory.wiki_dir / rel).read_bytes())
    except OSError:
        return {}
    return meta


def _names(memory: Any, rel: str, meta: dict[str, Any]) -> set[str]:
    """The link keys that mean the page ``rel``: its path always; its file name while no
    other page of the working tree has it (a link ``[[setup]]`` may mean another
    ``setup.md``: it is left alone); its title unless the index resolves it to another
    page."""
    stem = posixpath.basename(rel)
    stem = stem[:-3] if stem.lower().endswith(".md") else stem
    keys = {target_key(rel)}
    key = name_key(stem)
    twins = [
        f
        for f in memory.wiki_dir.rglob("*.md")
        if ".git" not in f.parts and name_key(f.stem) == key and f != memory.wiki_dir / rel
    ]
    if not twins:
        keys.add(key)
    title = str(meta.get("title") or "")
    if title:
        try:  # resolved from a folder no page is in: no nearer page wins
            found = memory.index.resolve_names([title], "\x00/x.md", None).get(title)
        except Exception:  # noqa: BLE001 - no index answer: the title is the page's
            found = None
        if found in (None, rel):
            keys.add(name_key(title))
    return keys


def _plan(
    rel: str, text: str | None, meta: dict[str, Any], names: set[str]
) -> tuple[Rewrite, list[str]]:
    """The history rewrite beside the page's bytes, and the values to take out of every
    other place (logs, audit log, use record), for a purge of ``rel`` (whole when
    ``text`` is None); ``names``: the link keys that mean the page (:func:`_names`)."""
    folder, name = posixpath.split(rel)
    stem = name[:-3] if name.lower().endswith(".md") else name
    title = str(meta.get("title") or "")
    keys = set(names)
    if text is None:
        whole = [rel, quote(rel)]

        def whole_msg(msg: bytes, touched: bool) -> bytes:
            msg = msg.replace(rel.encode("utf-8"), MARK)
            for v in [stem, title] if touched else []:
                if v:  # as a word: "index" in "Reindex" is not the page's name
                    word = re.escape(v.encode("utf-8"))
                    msg = re.sub(rb"(?<![\w-])" + word + rb"(?![\w-])", MARK, msg)
            return msg

        return Rewrite(link_keys=frozenset(keys), message=whole_msg), whole
    values = [text, quote(text), json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]]
    slug = file_stem(text)
    if slug == "Untitled" and "untitled" not in text.casefold():
        slug = text  # the text has no file-name form (only characters names drop)
    dashed = slugify(text)  # the form earlier releases named session pages with
    if dashed == "session" and "session" not in text.casefold():
        dashed = slug
    forms = sorted({f.casefold() for f in (text, slug, dashed)}, key=len, reverse=True)

    def holds(file_name: str) -> bool:
        """Whether a file name (its stem) holds the text or one of its file-name forms."""
        return any(f in file_name.casefold() for f in forms)

    if not holds(stem):
        # the file name does not hold it: messages change beside the page, and links by
        # a title that held it now name the file
        def text_msg(msg: bytes, _touched: bool) -> bytes:
            for v in sorted(set(values), key=len, reverse=True):
                msg = msg.replace(v.encode("utf-8"), MARK)
            return msg

        by_title = {name_key(title)} & keys if text.casefold() in title.casefold() else set()
        by_title.discard(name_key(stem))
        target = stem if name_key(stem) in keys else rel[:-3]  # another page has its name
        return (
            Rewrite(
                link_keys=frozenset(by_title), link_target=target, message=text_msg, holds=holds
            ),
            values,
        )
    new_name = f"purged-{secrets.token_hex(4)}.md"
    new_rel = posixpath.join(folder, new_name)
    if title and text.casefold() not in title.casefold():
        keys.discard(name_key(title))  # a title without the text still names the page
    subs = [(rel, new_rel), (quote(rel), new_rel), (stem, new_name[:-3])]
    subs += [(v, MARK.decode()) for v in sorted(set(values), key=len, reverse=True)]
    subs += [(slug, MARK.decode()), (dashed, MARK.decode())]

    def renamed_msg(msg: bytes, _touched: bool) -> bytes:
        for old, new in subs:
            msg = msg.replace(old.encode("utf-8"), new.encode("utf-8"))
        return msg

    return (
        Rewrite(
            new_name=new_name,
            link_keys=frozenset(keys),
            link_target=new_name[:-3],
            message=renamed_msg,
            holds=holds,
        ),
        [rel, quote(rel), stem, *values, slug, dashed],
    )


#: a test's kill point: purge stops (sleeps) at the step this names
PURGE_PAUSE_ENV = "WIKI_MEMORY_PURGE_PAUSE_AT"
#: the purge under way, in the data directory: removed once its closing audit line is written
PENDING = "purge-pending.json"
#: what purge_page found to purge, for a second purge of a page a stopped one finished at
#: start (so that one answers with what was done, not 404)
_finished: weakref.WeakKeyDictionary[Any, dict[str, dict[str, Any]]] = weakref.WeakKeyDictionary()


def _plan_for(memory: Any, rel: str, text: str | None) -> tuple[dict[str, Any], Rewrite, list[str]]:
    """The page's frontmatter, the history rewrite and the values to take out of every
    other place, worked out from the working tree (:func:`_plan`)."""
    meta = _meta(memory, rel)
    rewrite, values = _plan(rel, text, meta, _names(memory, rel, meta))
    return meta, rewrite, values


def _rewrite(
    memory: Any, rel: str, text: str | None, page_id: Any, rewrite: Rewrite
) -> PurgeReport:
    """History and the working tree (on the writer thread)."""
    report: PurgeReport = purge_history(
        memory.wiki_dir, rel, None if text is None else text.encode("utf-8"), rewrite
    )
    # what sync honours whatever history a hub shows later: ids, never a path or text
    add_tombstones(
        memory.wiki_dir, {str(page_id)} if page_id is not None else set(), set(report.blobs)
    )
    memory.git.reopen()
    memory.server_hashes.pop(rel, None)
    return report


def _clear(
    memory: Any, rel: str, text: str | None, rewrite: Rewrite, values: list[str]
) -> tuple[int, dict[str, int], dict[str, int], int]:
    """The spool, the index, the as-of cache, the logs, the use record, the audit log and
    the caches in memory (on the writer thread). Returns (spool files changed, log file ->
    occurrences, use-record file -> occurrences, audit lines rewritten)."""
    needles = sorted({v.encode("utf-8") for v in values if v}, key=len, reverse=True)
    spool_files = 0
    for key, info in list(memory.spool.sessions.items()):
        if text is None and info.state.get("path") == rel:
            memory.spool.drop(key)
            memory.index.delete_spool_session(key)
            spool_files += 1
    if rewrite.new_name is not None:  # a session page's spool follows its new name
        new_rel = posixpath.join(posixpath.dirname(rel), rewrite.new_name).encode()
        memory.spool.scrub([rel.encode("utf-8")], new_rel)
    spool_files += memory.spool.scrub(needles, MARK)
    spool_files += memory.capturer.held.scrub(needles, MARK)  # events waiting for an id
    memory.capturer.reindex_spool()
    memory.index.rebuild(memory.wiki_dir)
    memory.index.checkpoint()
    shutil.rmtree(Path(memory.settings.index_path).parent / "as-of", ignore_errors=True)
    logs = _scrub_files(memory.settings.logs_dir, needles, skip="audit")
    # the use record: counted, then purged through its owner (today's rows live in
    # memory too), then any other file of it scrubbed
    use_dir = Path(memory.settings.data_dir) / "use"
    memory.use.flush()
    found = _count_files(use_dir, needles)
    renamed_to = (
        None
        if rewrite.new_name is None
        else posixpath.join(posixpath.dirname(rel), rewrite.new_name)
    )
    memory.use.purge(rel, None if text is None else needles, renamed_to)
    use = {**found, **_scrub_files(use_dir, needles)}
    audit_lines = memory.audit.redact(values, MARK.decode())
    rank.clear_caches()
    sectionmemo.clear()  # no copy of the purged text stays in this process's memo
    pagetail.clear()  # nor in the remembered parts of long pages
    forget_hashes()  # nor among the bytes whose hashes are remembered
    for fn in memory.on_purge:
        fn(rel)
    return spool_files, logs, use, audit_lines


def _answer(
    rel: str,
    text: str | None,
    rewrite: Rewrite,
    report: PurgeReport,
    cleared: tuple[int, dict[str, int], dict[str, int], int],
) -> dict[str, Any]:
    """The purge's reply (:func:`purge_page`)."""
    spool_files, logs, use, audit_lines = cleared
    removed = {
        "page_versions": report.versions,
        "file_names": report.file_names,
        "links": report.links,
        "commit_messages": report.messages,
        "spool_files": spool_files,
        "logs": logs,
        "use_record": sum(use.values()),
        "audit_lines": audit_lines,
    }
    return {
        "path": _neutral(rel, rewrite, text),
        "text_only": text is not None,
        "renamed": rewrite.new_name is not None,
        "commits_rewritten": len(report.commits),
        "versions": report.versions,
        "refs": report.refs,
        "remotes": report.remotes,
        "spool_files": spool_files,
        "logs": sorted(logs),
        "removed": removed,
        "deleted_means": MEANING,
    }


def _closing(memory: Any, ident: Identity | None, found: dict[str, Any]) -> None:
    """The purge's closing audit line, with what was done in each place; then the
    pending file goes (a kill between the two writes the line again at the next start)."""
    memory.audited(
        ident,
        "purge",
        found["path"],
        "ok",
        text_only=found["text_only"],
        commits_rewritten=found["commits_rewritten"],
        versions=found["versions"],
        refs=len(found["refs"]),
        spool_files=found["spool_files"],
        logs=len(found["logs"]),
        removed=found["removed"],
        audit_lines_redacted=found["removed"]["audit_lines"],
        remotes=sorted(found["remotes"]),
        deleted_means=MEANING,
        **({"finished_at_start": True} if found.get("finished_at_start") else {}),
    )
    (memory.settings.data_dir / PENDING).unlink(missing_ok=True)


def purge_page(
    memory: Any, path: str, who: Identity | None, text: str | None = None
) -> dict[str, Any]:
    """Purge the page at ``path`` (``text`` None) or every occurrence of ``text`` in it,
    for ``who`` (None: the server itself). ``memory`` is the
    :class:`~wiki_memory.core.memory.Memory` (which imports this module for its start).

    Before history is rewritten, ``purge.start`` goes to the audit log (the page's id, no
    path, no text) and the purge is noted in ``<data dir>/purge-pending.json`` (0600): a
    purge stopped after that point (a kill, a crash) is finished by the next start
    (:func:`finish_pending`).

    Returns ``{"path" (the page's new name after a rename, ``<folder>/[purged]`` for a
    whole page), "text_only", "renamed", "commits_rewritten", "versions", "refs",
    "remotes", "spool_files", "logs", "removed", "deleted_means"}``; ``removed`` counts
    the copies per place: ``page_versions``, ``file_names`` (commits that held the old
    name), ``links`` (versions of other pages whose links changed), ``commit_messages``,
    ``spool_files``, ``logs`` (file -> occurrences), ``use_record`` (occurrences),
    ``audit_lines``; ``parts``: a session page's part pages, purged with it (the same
    text, or whole) each as a page of its own. Raises Forbidden (``grant: admin``) for a caller who is not the owner
    or an admin, PathRefused for a path that names no page, BadRequest for an empty
    ``text``, NotFound when neither the working tree nor any commit holds the page (or the
    text), unless the start just finished a stopped purge of it (its answer is returned,
    with ``finished_at_start: true``).
    """
    asked = clean_rel(path)
    ident = require_admin(memory, who, "purge", asked, "only the wiki's owner and admins may purge")
    if text is not None and not text.strip():
        raise BadRequest("text must not be empty", field="text")
    rel, _full = memory.scope.locate(path)
    # a long session's parts go with it (wiki/sessionparts.py): each as a page of its own
    parts = session_parts(memory.wiki_dir, rel)
    if not parts:
        return _purge_one(memory, asked, rel, ident, who, text)
    out: dict[str, Any] | None = None
    for page in [rel, *parts]:
        try:
            done = _purge_one(memory, asked if page == rel else page, page, ident, who, text)
        except NotFound:
            continue  # a text purge: this part never held it
        if out is None:
            out = done
        if page != rel:
            out.setdefault("parts", []).append(done["path"])
    if out is None:
        raise not_found(asked)
    return out


def _purge_one(
    memory: Any,
    asked: str,
    rel: str,
    ident: Identity | None,
    who: Identity | None,
    text: str | None,
) -> dict[str, Any]:
    """:func:`purge_page` of one page ``rel`` (``asked``: the path as asked for)."""
    del who
    meta, rewrite, values = _plan_for(memory, rel, text)
    memory.writer.flush()

    def job() -> WriteResult:
        page_id = meta.get("id") if text is None else None
        pending = {"path": rel, "text": text, "page_id": page_id, "time": now_iso()}
        atomic_write(memory.settings.data_dir / PENDING, json.dumps(pending, default=str).encode())
        memory.audited(ident, "purge.start", "", "ok", page_id=page_id, text_only=text is not None)
        pause(PURGE_PAUSE_ENV, "purge", "started")
        report = _rewrite(memory, rel, text, page_id, rewrite)
        _note_report(memory, pending, report)
        pause(PURGE_PAUSE_ENV, "purge", "rewritten")
        cleared = _clear(memory, rel, text, rewrite, values)
        pause(PURGE_PAUSE_ENV, "purge", "cleared")
        return WriteResult(value=(report, cleared))

    report, cleared = memory.writer.call(job, timeout=3600).value
    spool_files, logs, use, audit_lines = cleared
    earlier = (
        None if report.commits or report.versions else _finished.get(memory, {}).pop(rel, None)
    )
    if earlier is not None:
        # the start finished a stopped purge of this page: that is the answer, with what
        # this one still found in the logs and records (a request naming it since)
        now = _answer(rel, text, rewrite, report, cleared)["removed"]
        for place in ("spool_files", "use_record", "audit_lines"):
            earlier["removed"][place] += now[place]
        earlier["removed"]["logs"] = {**earlier["removed"]["logs"], **now["logs"]}
        _closing(memory, ident, earlier)  # every purge.start has its close
        return earlier
    if not (report.commits or report.versions or spool_files or logs or use or audit_lines):
        (memory.settings.data_dir / PENDING).unlink(missing_ok=True)
        memory.audited(ident, "purge", _neutral(rel, rewrite, text), "not_found")
        raise not_found(asked)
    out = _answer(rel, text, rewrite, report, cleared)
    _closing(memory, ident, out)
    return out


def _neutral(rel: str, rewrite: Rewrite, text: str | None) -> str:
    """The page's path as the purge's answer and audit line name it: its new name after
    a rename, ``<folder>/[purged]`` for a whole page (its name may be the value)."""
    folder = posixpath.dirname(rel)
    if rewrite.new_name is not None:
        return posixpath.join(folder, rewrite.new_name)
    if text is None:
        return posixpath.join(folder, MARK.decode())
    return rel


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
        _meta_now, rewrite, values = _plan_for(memory, rel, text)
        if phase == "history":
            page_id = pending.get("page_id")
            report = memory.writer.call(
                lambda: WriteResult(value=_rewrite(memory, rel, text, page_id, rewrite)),
                timeout=3600,
            ).value
            if report.commits or report.versions or "report" not in pending:
                _note_report(memory, pending, report)  # a rewrite done again finds nothing
            return
        cleared = memory.writer.call(
            lambda: WriteResult(value=_clear(memory, rel, text, rewrite, values)), timeout=3600
        ).value
    except Exception as exc:  # noqa: BLE001 - the start goes on; the next one tries again
        log.error("a stopped purge could not be finished (%s): the next start tries again", exc)
        return
    done = _stored_report(pending.get("report"))
    found = {**_answer(rel, text, rewrite, done, cleared), "finished_at_start": True}
    _finished.setdefault(memory, {})[rel] = found
    _closing(memory, None, found)
    log.warning("finished a purge that was stopped (see the audit log's purge lines)")


#: the counts of a history rewrite the pending file keeps for the closing line
_REPORT_FIELDS = ("commits", "versions", "refs", "remotes", "file_names", "links", "messages")


def _note_report(memory: Any, pending: dict[str, Any], report: PurgeReport) -> None:
    """Keep what the history rewrite did in the pending file, so that a purge killed after
    its rewrite closes at the next start with the real counts, not zeros (the rewrite
    done again then finds nothing left)."""
    pending["report"] = {k: getattr(report, k) for k in _REPORT_FIELDS}
    atomic_write(memory.settings.data_dir / PENDING, json.dumps(pending, default=str).encode())


def _stored_report(raw: Any) -> PurgeReport:
    """The :class:`PurgeReport` :func:`_note_report` kept (an empty one when none, or
    one of another shape)."""
    if not isinstance(raw, dict):
        return PurgeReport()
    try:
        return PurgeReport(**{k: raw[k] for k in _REPORT_FIELDS if k in raw})
    except TypeError:
        return PurgeReport()
