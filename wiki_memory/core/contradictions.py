"""Contradictions flagged, never decided (docs/knowledge.md, "Contradictions").

Among the current notes of one project that share a subject, each pair the detector
(:mod:`wiki_memory.wiki.contradict`) finds incompatible is a flag. A flag is shown only
to a caller who may read both pages: the groups come from the index filtered by the
scope rule in SQL, and each page is read through :meth:`ScopeRule.read`, so a page the
caller may not see is in no flag and no count. Nothing is hidden: recall returns both
sides, each naming the other under ``contradicts``. A pair is left alone when one page
supersedes or is superseded by the other (a correction is not a contradiction) or when
either marks the other ``compatible_with`` (a path or a name, as a person writes it).
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from wiki_memory.errors import NotFound
from wiki_memory.identity import Identity
from wiki_memory.index.store import Index
from wiki_memory.wiki import links as wl
from wiki_memory.wiki.contradict import contradiction, note_of
from wiki_memory.wiki.page import parse_page

__all__ = ["contradictions_for", "find_contradictions", "flags_by_page"]

#: the most pages of one subject compared pairwise (a larger group: its newest ones)
MAX_GROUP = 12


def _names(meta: Any, path: str, key: str) -> set[str]:
    value = meta.get(key) if isinstance(meta, dict) else None
    values = value if isinstance(value, list) else [value]
    out = set()
    for v in values:
        if isinstance(v, str) and v.strip():
            name = v.strip().removeprefix("[[").removesuffix("]]").split("|")[0]
            out.add(wl.name_key(name.removesuffix(".md")))
    return out


def _apart(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """True when one page supersedes the other or either marks the other compatible."""
    for x, y in ((a, b), (b, a)):
        marks = set()
        for key in ("supersedes", "superseded_by", "compatible_with"):
            marks |= _names(x["meta"], x["path"], key)
        own = {wl.name_key(str(y["path"]).removesuffix(".md")),
               wl.name_key(str(y["path"]).rsplit("/", 1)[-1].removesuffix(".md")),
               wl.name_key(str(y["title"] or ""))}  # fmt: skip
        if marks & own:
            return True
    return False


def find_contradictions(
    index: Index,
    scope: Any,
    who: Identity | None,
    project: str | None,
    only: list[str] | None = None,
    cache: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The flags among ``project``'s current notes that ``who`` may read both sides of:
    ``[{"a", "b", "kind", "a_says", "b_says", "values"}]`` (paths ``a`` < ``b``;
    ``kind`` one of numbers, versions, dates, paths, products, negation; ``*_says`` the
    sentence of each page that says it; ``values`` the two values as written), sorted by ``a`` then ``b``. With ``only`` (paths), the flags of those pages
    (``project`` may then be None: each page's own project; ``cache``: a dict one
    recall keeps across its items, :func:`wiki_memory.index.subjects.subject_groups`).
    Reads each compared page once; raises nothing for a page gone meanwhile."""
    ident = scope.identity(who)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    notes: dict[str, Any] = {}
    for group in index.subject_groups(project, ident, only, cache):
        rows = group[-MAX_GROUP:]
        for a, b in combinations(rows, 2):
            key = (a["path"], b["path"])
            if key in out or _apart(a, b):
                continue
            if only is not None and a["path"] not in only and b["path"] not in only:
                continue
            sides = []
            for row in (a, b):
                if row["path"] not in notes:
                    try:
                        page = scope.read(ident, row["path"])
                    except NotFound:
                        notes[row["path"]] = None
                    else:
                        parsed = parse_page(page.data, page.rel)
                        notes[row["path"]] = note_of(parsed.metadata, parsed.body, row["title"])
                sides.append(notes[row["path"]])
            if sides[0] is None or sides[1] is None:
                continue
            flag = contradiction(sides[0], sides[1])
            if flag is not None:
                out[key] = {"a": key[0], "b": key[1], "kind": flag.kind,
                            "a_says": flag.a_says, "b_says": flag.b_says,
                            "values": [flag.a, flag.b]}  # fmt: skip
    return [out[k] for k in sorted(out)]


def flags_by_page(flags: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Page -> the pages it contradicts, from :func:`find_contradictions`' flags."""
    by: dict[str, list[str]] = {}
    for f in flags:
        by.setdefault(f["a"], []).append(f["b"])
        by.setdefault(f["b"], []).append(f["a"])
    return {p: sorted(set(v)) for p, v in by.items()}


def contradictions_for(
    memory: Any, who: Identity | None, project: str | None
) -> list[dict[str, Any]]:
    """The flags of ``project`` (None: of every project ``who`` may read) that ``who``
    may read both sides of, each with its ``project`` (:func:`find_contradictions`).
    Raises NotFound for a named project ``who`` may not read, as for a missing one."""
    readable = memory.readable_projects(who)
    if project is not None and project not in readable:
        raise NotFound(f"no project {project!r}")
    out = []
    for name in [project] if project is not None else readable:
        for flag in find_contradictions(memory.index, memory.scope, who, name):
            out.append({"project": name, **flag})
    return out
