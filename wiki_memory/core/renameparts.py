"""A long session's parts move with its session page (docs/sessions.md, "Parts").

Renaming a session page (:mod:`wiki_memory.core.rename`) that has parts
(:mod:`wiki_memory.wiki.sessionparts`) moves each part beside the new page, in the same
job and commit: ``<old stem>.part-002.md`` becomes ``<new stem>.part-002.md``, its
``part_of`` names the new page, its ``Part N of [[...]]`` line links it, and the session
page's ``Timeline continues in:`` line links the parts' new names; each part's old file
name is added to its ``aliases`` (as the page's is), so links by the old names resolve.
A part itself is not renamed alone (its name says which session and part it is): the
request names the session page instead, or is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wiki_memory.errors import BadRequest, Conflict
from wiki_memory.identity import Identity
from wiki_memory.plainfile import read_plain
from wiki_memory.wiki.frontmatter import FrontmatterError, set_keys
from wiki_memory.wiki.page import parse_metadata
from wiki_memory.wiki.sessionparts import (
    is_part_path,
    part_owner,
    part_path,
    session_of_part,
    session_parts,
)

__all__ = ["PartMove", "plan_part_moves", "refuse_part_rename", "relink_parts_line"]


@dataclass
class PartMove:
    """One part to move: ``old``/``new`` wiki-relative paths, their files, the part's
    bytes as read (``current``) and as written at ``new`` (``moved``)."""

    old: str
    new: str
    old_full: Path
    new_full: Path
    current: bytes
    moved: bytes


def refuse_part_rename(wiki_dir: Path, old: str, new: str) -> None:
    """BadRequest when ``old`` is a session part on disk under ``wiki_dir`` (it moves
    with its session page; :func:`~wiki_memory.wiki.sessionparts.part_owner`: a note
    merely named like one is renamed as any page) or ``new`` would be named as one
    (``<stem>.part-002.md``)."""
    session, k = part_owner(wiki_dir, old)
    if k > 1:
        raise BadRequest(
            f"{old} is part {k} of the session page {session}; rename that page, and its "
            "parts follow it",
            field="path",
        )
    if is_part_path(new):
        raise BadRequest(
            "a name ending in .part-NNN.md is a session part's; choose another", field="new_path"
        )


def _stem(rel: str) -> str:
    return rel.removesuffix(".md")


def relink_parts_line(data: bytes, old: str, new: str) -> bytes:
    """The session page ``data`` with its links to its parts (``[[<old stem>.part-NNN]]``)
    naming the parts beside ``new``."""
    link = re.compile(rb"\[\[" + re.escape(_stem(old).encode()) + rb"(\.part-\d{3,}\]\])")
    return link.sub(lambda m: b"[[" + _stem(new).encode() + m.group(1), data)


def _moved_part(data: bytes, old_session: str, new_session: str, alias: str) -> bytes:
    link = re.compile(rb"\[\[" + re.escape(_stem(old_session).encode()) + rb"(\]\]|\|)")
    data = link.sub(lambda m: b"[[" + _stem(new_session).encode() + m.group(1), data)
    raw = parse_metadata(data).get("aliases")
    have = [str(a) for a in raw] if isinstance(raw, list) else ([str(raw)] if raw else [])
    try:
        return set_keys(
            data,
            {"part_of": new_session, **({} if alias in have else {"aliases": [*have, alias]})},
        )
    except FrontmatterError:
        raise BadRequest(
            f"the frontmatter of part {alias} cannot be edited safely; fix it, then rename",
            field="path",
        ) from None


def plan_part_moves(memory: Any, ident: Identity, old: str, new: str) -> list[PartMove]:
    """The parts of the session page ``old`` on disk and where each goes beside ``new``
    (``[]``: it has none). Raises Forbidden/PathRefused (the scope rule, as for the page),
    Conflict (a part's new path exists), BadRequest (a part's frontmatter unusable)."""
    out: list[PartMove] = []
    for rel in session_parts(memory.wiki_dir, old):
        k = session_of_part(rel)[1]
        dest = part_path(new, k)
        rel, old_full = memory.scope.write_check(ident, rel, "page.rename")
        dest, new_full = memory.scope.write_check(ident, dest, "page.rename")
        if new_full.exists() or new_full.is_symlink():
            raise Conflict(f"{dest} already exists (part {k} of the renamed session)", None)
        current = read_plain(old_full)
        if current is None:
            continue
        alias = _stem(rel).rsplit("/", 1)[-1]
        out.append(PartMove(rel, dest, old_full, new_full, current, b""))
        out[-1].moved = _moved_part(current, old, new, alias)
    return out
