"""Pages a person moved or renamed (a file manager, Obsidian, ``git mv`` without a
commit): found when their change is committed, so the use record's rows follow them
(:meth:`wiki_memory.core.userecord.UseRecord.move`; docs/knowledge.md, "The use record").

The server sees a move as a page gone and a page new. A new page is the gone one moved
when its bytes equal what the commit before held at the gone path, or, edited on the way,
when both carry the same frontmatter ``id``. A folder moved reaches here as the folder
gone: its pages are the deleted files git sees below it.
"""

from __future__ import annotations

from typing import Any

from wiki_memory.plainfile import read_plain
from wiki_memory.wiki.oddnames import on_disk
from wiki_memory.wiki.page import parse_metadata

__all__ = ["follow_moves", "moves_among"]


def _id_of(data: bytes) -> str | None:
    try:
        v = parse_metadata(data).get("id")
    except Exception:  # noqa: BLE001 - unreadable frontmatter: no id
        return None
    return str(v) if isinstance(v, str | int) and str(v) else None


def moves_among(memory: Any, paths: list[str]) -> list[tuple[str, str]]:
    """The ``(old, new)`` page moves among ``paths`` (wiki paths about to be committed
    as a person's change; see the module). Reads git's HEAD; never raises for a page it
    cannot read (it is then no move)."""
    wiki = memory.wiki_dir
    new = [p for p in paths if p.endswith(".md") and on_disk(wiki, p).is_file()]
    gone = [p for p in paths if not on_disk(wiki, p).exists()]
    new = [p for p in new if not memory.git.tracked(p)]
    if not new or not gone:
        return []
    folders = [g.rstrip("/") + "/" for g in gone if not g.endswith(".md")]
    pages = {g for g in gone if g.endswith(".md")}
    if folders:
        pages |= {
            d
            for d in memory.git.dirty_paths()
            if d.endswith(".md") and d.startswith(tuple(folders)) and not on_disk(wiki, d).exists()
        }
    before: dict[str, bytes] = {}
    for g in sorted(pages):
        try:
            old = memory.git.read_at(g)
        except Exception:  # noqa: BLE001 - not in HEAD, or unreadable: no move
            old = None
        if old is not None:
            before[g] = old
    out: list[tuple[str, str]] = []
    for n in new:
        data = read_plain(on_disk(wiki, n))
        if data is None:
            continue
        same = next((g for g, old in before.items() if old == data), None)
        if same is None and (ident := _id_of(data)) is not None:
            same = next((g for g, old in before.items() if _id_of(old) == ident), None)
        if same is not None:
            out.append((same, n))
            del before[same]
    return out


def follow_moves(memory: Any, paths: list[str]) -> list[tuple[str, str]]:
    """Move the use record's rows of every page moved among ``paths``
    (:func:`moves_among`); returns the moves. A failure is logged, never raised: the
    commit it precedes matters more."""
    import logging

    try:
        moves = moves_among(memory, paths)
        memory.use.move(moves)
    except Exception:  # noqa: BLE001
        logging.getLogger("wiki_memory.core").exception("the use record could not follow a move")
        return []
    return moves
