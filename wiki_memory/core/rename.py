"""Renaming a page (``page_edit`` / ``POST /v1/edit`` with ``op: rename``; docs/api.md
"Precise edits").

The page moves to its new path with its old file name added to frontmatter ``aliases``
(when the name changes), so every link by the old name still resolves. Links to it are
rewritten only in pages the caller may write (the scope rule,
:meth:`wiki_memory.core.scope.ScopeRule.writable`), and only links that would stop
naming the page: those spelling the old file name (when it changed) or the old folder.
A move to another folder under the same file name therefore rewrites only links that
spell the old folder out (``[[projects/a/Plan]]``); ``[[Plan]]`` follows the page.
Pages the caller may not write (another user's personal page, a project with a
read-only grant) are left untouched and keep resolving through the alias.

Everything is written on the writer thread in one job and committed at once as the
caller: the new file, the old one removed, and every rewritten page (one commit for
shared pages; the writer commits a personal page of the caller's apart, as it does for
every write). A person's save of a linking page in between is kept: the rewrite runs
again on their text.

A session page's parts move with it in the same job and commit
(:mod:`wiki_memory.core.renameparts`); a part alone is not renamed.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from wiki_memory.core.pages import page_path_for_write
from wiki_memory.core.renameparts import plan_part_moves, refuse_part_rename, relink_parts_line
from wiki_memory.core.scope import not_found
from wiki_memory.core.writer import Author, WriteResult
from wiki_memory.errors import BadRequest, Conflict
from wiki_memory.identity import Identity
from wiki_memory.plainfile import page_hash, read_plain
from wiki_memory.wiki.frontmatter import FrontmatterError, set_keys
from wiki_memory.wiki.git import author_email_for
from wiki_memory.wiki.links import page_name_keys, rename_links
from wiki_memory.wiki.merge import replace_if_unchanged
from wiki_memory.wiki.names import new_name_refusal
from wiki_memory.wiki.page import parse_metadata
from wiki_memory.wiki.paths import PathRefused
from wiki_memory.wiki.personal import frontmatter_of

__all__ = ["rename_page"]

_FILE_KEYS = ("path", "suffix", "stem")


def _stem(rel: str) -> str:
    return rel.rsplit("/", 1)[-1][:-3]


def _file_keys(rel: str) -> dict[str, str]:
    """The link keys a page has from its path alone: key -> ``path``/``suffix``/``stem``."""
    return {k: src for k, src in page_name_keys(rel, "", ()) if src in _FILE_KEYS}


def _with_alias(data: bytes, alias: str) -> bytes:
    meta = parse_metadata(data)
    raw = meta.get("aliases")
    have = [str(a) for a in raw] if isinstance(raw, list) else ([str(raw)] if raw else [])
    if alias in have:
        return data
    try:
        return set_keys(data, {"aliases": [*have, alias]})
    except FrontmatterError:
        raise BadRequest(
            "the page's frontmatter cannot be edited safely; fix it, then rename", field="path"
        ) from None


def _take_away(old_full: Path, new_full: Path, current: bytes, old: str) -> None:
    """Remove the old file if it still holds ``current``: it is first moved aside under a
    name the watcher and git ignore (atomic), then compared, so a person's save that
    lands at any moment is either the file moved aside (put back, the new file removed,
    Conflict) or a new file at the old path after the move (theirs, kept and committed
    as their edit)."""
    aside = old_full.with_name(f".{old_full.name}.{secrets.token_hex(4)}.wm-tmp")
    os.rename(old_full, aside)
    if read_plain(aside) == current:
        os.unlink(aside)
        return
    if not os.path.lexists(old_full):
        os.rename(aside, old_full)
    else:  # saved twice meanwhile: the newest stays, the one moved aside goes
        os.unlink(aside)
    os.unlink(new_full)
    raise Conflict(f"{old} changed while it was renamed; try again", page_hash(current))


def _rewrite(text: str, src: str, old: str, new: str) -> str:
    """``text`` (page ``src``) with links to ``old`` that would stop naming the page
    pointed at ``new`` (see the module)."""
    gone = {k: s for k, s in _file_keys(old).items() if k not in _file_keys(new)}
    by_stem = [k for k, s in gone.items() if s == "stem"]
    by_path = [k for k, s in gone.items() if s != "stem"]
    if by_stem:
        text = rename_links(text, by_stem, _stem(new), src)
    if by_path:
        text = rename_links(text, by_path, new[:-3], src)
    return text


def rename_page(
    memory: Any, rel: str, new_path: str, ident: Identity, *, face: str = "api"
) -> WriteResult:
    """Move the page ``rel`` to ``new_path`` for ``ident`` (see the module); runs on the
    writer thread (called from :func:`wiki_memory.core.edits.edit_page`'s job). Returns
    the job's WriteResult (every path written, the caller as author, ``commit_now``), its
    ``value`` ``{"op", "path", "from", "hash", "changed", "rewritten", "kept"}`` and, for
    a session page with parts, ``parts`` (their new paths). Raises NotFound,
    Forbidden, PathRefused/PathNotWritable (400), BadRequest, Conflict (``new_path``
    exists)."""
    scope = memory.scope
    new = page_path_for_write(new_path)
    old, old_full = scope.write_check(ident, rel, "page.rename")
    new, new_full = scope.write_check(ident, new, "page.rename")
    if new == old:
        raise BadRequest("new_path is the page's own path", field="new_path")
    refuse_part_rename(memory.wiki_dir, old, new)
    if os.path.lexists(new_full):
        raise Conflict(f"{new} already exists", None)
    why = new_name_refusal(memory.settings.wiki_dir, new)
    if why is not None:
        raise PathRefused(why, rule="portable_name")
    current = read_plain(old_full)
    if current is None:
        raise not_found(rel)
    scope.check_write(ident, old, current, None)
    moved = current if _stem(old) == _stem(new) else _with_alias(current, _stem(old))
    parts = plan_part_moves(memory, ident, old, new)
    moved = relink_parts_line(moved, old, new) if parts else moved
    moved = scope.stamp_owner(ident, new, moved)
    scope.check_write(ident, new, current, moved)  # a pinned page stays pinned: no pin change
    sources = sorted({b["src_path"] for b in memory.index.backlinks(old, ident)} - {old})
    if not replace_if_unchanged(new_full, moved, None):
        raise Conflict(f"{new} already exists", None)
    _take_away(old_full, new_full, current, old)
    moves: list[tuple[str, str]] = []
    for part in parts:  # each part beside the new page, written as the page is
        if replace_if_unchanged(part.new_full, part.moved, None):
            _take_away(part.old_full, part.new_full, part.current, part.old)
            moves.append((part.old, part.new))
            memory.server_hashes[part.new] = page_hash(part.moved)
            memory.server_hashes.pop(part.old, None)
            memory.index.upsert_page(part.new, part.moved)
            memory.index.sync_paths(memory.wiki_dir, [part.old])
    rewritten: list[str] = []
    kept = 0
    for src in sources:
        full = memory.wiki_dir / src
        for _ in range(20):
            data = read_plain(full)
            if data is None:
                break
            if not scope.writable(ident, src, frontmatter_of(data, src)):
                kept += 1
                break
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                break
            after = _rewrite(text, src, old, new).encode("utf-8")
            if after == data:
                break
            if replace_if_unchanged(full, after, data):
                memory.server_hashes[src] = page_hash(after)
                memory.index.upsert_page(src, after)
                rewritten.append(src)
                break
    memory.server_hashes[new] = page_hash(moved)
    memory.server_hashes.pop(old, None)
    memory.index.upsert_page(new, moved)
    memory.index.sync_paths(memory.wiki_dir, [old])
    memory.use.move([(old, new), *moves])  # the page's use rows follow it
    for p in (old, new, *(x for m in moves for x in m), *rewritten):
        memory.audited(ident, "page.rename", p, "ok")
    out = {
        "op": "rename",
        "path": new,
        "from": old,
        "hash": page_hash(moved),
        "changed": True,
        "rewritten": rewritten,
        "kept": kept,
    }
    if moves:
        out["parts"] = [new_part for _, new_part in moves]
    return WriteResult(
        paths=[old, new, *(x for m in moves for x in m), *rewritten],
        author=Author(ident.user, author_email_for(ident.user)),
        message=f"Rename {old} to {new} ({face})",
        value=out,
        commit_now=True,
    )
