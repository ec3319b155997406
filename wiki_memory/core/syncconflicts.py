"""Sync conflicts as a person meets them (docs/git.md, "Conflict copies").

* :func:`merge_notes`: after a merge, one line per conflict copy naming whose version is
  where, as seen from this replica: the copy this merge made (this replica's version
  stays at the page, the remote's is in the copy), the copy kept beside a person's save,
  and a copy another replica's merge made that arrives here (whose copy then holds this
  replica's own version, or neither side's).
* :func:`list_conflicts` and :func:`resolve_conflict`: the ``sync-conflicts`` operations
  (CLI ``wiki-memory sync-conflicts [resolve]``, ``GET /v1/sync-conflicts``,
  ``POST /v1/sync-conflicts/resolve``): every conflict copy the caller may see (sync's and
  those file-sync tools left, :mod:`wiki_memory.wiki.copies`), and keeping one side: the
  page as it is, or the copy's version (its marks taken off) at the page's path; the copy
  is removed, in one commit, through the scope rule.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dulwich.objects import Blob

from wiki_memory.core.writer import Author, WriteResult
from wiki_memory.errors import BadRequest, NotFound
from wiki_memory.identity import Identity
from wiki_memory.plainfile import page_hash, read_plain
from wiki_memory.wiki import copies
from wiki_memory.wiki.frontmatter import FrontmatterError, set_keys
from wiki_memory.wiki.git import author_email_for
from wiki_memory.wiki.merge import replace_if_unchanged
from wiki_memory.wiki.page import parse_metadata

__all__ = [
    "KEEP",
    "blob_reader",
    "list_conflicts",
    "merge_notes",
    "resolve_conflict",
    "stored_notes",
]

#: what ``resolve`` may keep
KEEP = ("page", "copy")
#: the notes' key in the sync state (``wiki/.git/wiki-memory-sync.json``): copy -> line
NOTES = "conflict_notes"


def merge_notes(
    remote: str,
    made: dict[str, str],
    beside: dict[str, str],
    arrived: list[str],
    before: Callable[[str], bytes | None],
    wiki_dir: Path,
) -> tuple[dict[str, str], dict[str, str]]:
    """The conflicts and their lines after a merge with ``remote``: ``made`` (page ->
    copy) the merge's own copies, ``beside`` (page -> copy) the incoming versions kept
    beside a person's save, ``arrived`` the files the merge wrote that may be copies
    another replica made; ``before(page)`` this replica's version of a page before the
    merge (None: none). Returns (the conflicts, page -> copy, with each arrived copy whose
    page has none yet; copy -> its line)."""
    notes: dict[str, str] = {}
    out = dict(made)
    for page, copy in made.items():
        notes[copy] = f"{page} keeps this replica's version; {remote}'s version is in {copy}"
    for page, copy in beside.items():
        out.setdefault(page, copy)
        notes[copy] = (
            f"{page} keeps the save made on this replica during the sync; the version "
            f"that came from {remote} is in {copy}"
        )
    for rel in arrived:
        found = copies.named_copy(rel)
        if found is None or rel in notes or not rel.endswith(".md"):
            continue
        try:
            data = (wiki_dir / rel).read_bytes()
        except OSError:
            continue
        page = found[0]
        side = str(parse_metadata(data).get("conflict_side") or found[1])
        mine = before(page)
        try:
            own = mine is not None and copies.mark_bytes(mine, page, side) == data
        except FrontmatterError:
            own = False
        if own:
            notes[rel] = (
                f"{page} now holds the version another replica kept when it merged with "
                f"{side}; this replica's own version is in {rel}"
            )
        else:
            notes[rel] = (
                f"{page} holds the version another replica kept when it merged with "
                f"{side}; the version from {side} is in {rel} (neither is this replica's)"
            )
        out.setdefault(page, rel)
    return out, notes


def blob_reader(repo: Any, files: dict[bytes, tuple[int, Any]]) -> Callable[[str], bytes | None]:
    """``before`` for :func:`merge_notes`: a page's bytes in the flat tree ``files`` of
    ``repo`` (None: absent, or not a blob)."""

    def read(page: str) -> bytes | None:
        entry = files.get(page.encode("utf-8", "surrogateescape"))
        obj = repo[entry[1]] if entry is not None else None
        return bytes(obj.data) if isinstance(obj, Blob) else None

    return read


def marked(data: bytes, page: str, side: str) -> bytes:
    """A page's version as its conflict copy (:func:`wiki_memory.wiki.copies.mark_bytes`);
    ``data`` as it is for a file that is no page or whose frontmatter cannot be edited."""
    if not page.lower().endswith(".md"):
        return data
    try:
        return copies.mark_bytes(data, page, side)
    except FrontmatterError:
        return data


def stored_notes(wiki_dir: Path) -> dict[str, str]:
    """The lines sync wrote for its conflict copies (copy -> line), from the sync state."""
    try:
        state = json.loads((Path(wiki_dir) / ".git" / "wiki-memory-sync.json").read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    notes = state.get(NOTES) if isinstance(state, dict) else None
    return {str(k): str(v) for k, v in notes.items()} if isinstance(notes, dict) else {}


def _line(copy: str, page: str, side: str, notes: dict[str, str]) -> str:
    return notes.get(copy) or f"{page}: the version from {side} is in {copy}"


def list_conflicts(memory: Any, who: Identity | None) -> dict[str, Any]:
    """Every conflict copy ``who`` (None: the owner) may see whose page ``who`` may see
    too: ``{"conflicts": [{"copy", "page", "side", "line"}]}`` sorted by copy path;
    ``line`` says whose version is where (sync's own line when it made the copy)."""
    ident = who if who is not None else memory.scope.local_owner
    found = memory.index.chains(ident).copies
    notes = stored_notes(memory.wiki_dir)
    rows = [
        {"copy": c, "page": p, "side": s, "line": _line(c, p, s, notes)}
        for c, (p, s) in sorted(found.items())
    ]
    return {"conflicts": rows}


def _unmarked(data: bytes, side: str) -> bytes:
    """A copy's bytes without its marks: ``conflict_of`` and ``conflict_side`` removed and
    the copy's title (:func:`wiki_memory.wiki.copies.copy_title`) back to the page's."""
    if not data.startswith(b"---"):
        return data
    meta = parse_metadata(data)
    updates: dict[str, Any] = {}
    title = meta.get("title")
    suffix = f" (conflict copy from {side})"
    if isinstance(title, str) and title.endswith(suffix):
        updates["title"] = title[: -len(suffix)]
    return set_keys(data, updates, remove=[k for k in copies.MARK_KEYS if k in meta])


def resolve_conflict(memory: Any, copy: str, keep: str, who: Identity | None) -> dict[str, Any]:
    """Resolve the conflict of the copy at ``copy`` for ``who`` (None: the owner):
    ``keep="page"`` keeps the page as it is, ``keep="copy"`` writes the copy's version
    (its marks off) at the page's path; either way the copy is removed, in one commit
    authored by ``who`` (made before this returns). Returns ``{"page", "copy", "kept"}``.

    Raises BadRequest (``keep``) for another ``keep``; NotFound when ``copy`` is no
    conflict copy ``who`` may see (or its page is not there); Forbidden when ``who`` may
    read but not write the page or the copy; BadRequest when the
    copy's frontmatter cannot be edited or the page changed meanwhile."""
    if keep not in KEEP:
        raise BadRequest("keep must be 'page' or 'copy'", field="keep")
    ident = who if who is not None else memory.scope.local_owner
    copy_rel, copy_full = memory.scope.check_target(ident, copy)
    found = memory.index.chains(ident).copies.get(copy_rel)
    if found is None:
        raise NotFound(f"{copy} is no conflict copy (`wiki-memory sync-conflicts` lists them)")
    page_rel, page_full = memory.scope.check_target(ident, found[0])
    side = found[1]
    user = ident.user or memory.owner

    def job() -> WriteResult:
        cur_copy = read_plain(copy_full)
        if cur_copy is None:
            raise NotFound(f"{copy} is gone")
        memory.scope.check_write(ident, copy_rel, cur_copy, None)
        written = [copy_rel]
        if keep == "copy":
            cur_page = read_plain(page_full)
            try:
                new = _unmarked(cur_copy, side)
            except FrontmatterError as exc:
                raise BadRequest(
                    f"cannot edit the copy's frontmatter: {exc}", field="copy"
                ) from None
            memory.scope.check_write(ident, page_rel, cur_page, new)
            if new != cur_page and not replace_if_unchanged(page_full, new, cur_page):
                raise BadRequest(f"{page_rel} changed meanwhile: try again", field="copy")
            memory.server_hashes[page_rel] = page_hash(new)
            written.insert(0, page_rel)
        copy_full.unlink()
        memory.index.sync_paths(memory.wiki_dir, written)
        return WriteResult(
            paths=written,
            author=Author(user, author_email_for(user)),
            message=f"Resolve sync conflict of {page_rel}: keep the {keep}'s version",
            commit_now=True,
        )

    memory.writer.call(job, timeout=60)
    memory.audited(ident, "sync-conflicts.resolve", copy_rel, "ok", keep=keep)
    return {"page": page_rel, "copy": copy_rel, "kept": keep}
