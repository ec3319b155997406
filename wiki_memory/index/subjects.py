"""Pages that share a subject: the current notes of one project named alike (by title,
alias or frontmatter ``subject``), the candidates the contradiction detector compares
(:mod:`wiki_memory.wiki.contradict`, docs/knowledge.md "Contradictions")."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import apsw

from wiki_memory.identity import Identity, visible_sql
from wiki_memory.wiki import links as wl

__all__ = ["NOTE_KINDS", "subject_groups"]

#: the kinds of page compared: notes agents remember and pages people write
NOTE_KINDS = ("note", "page")
#: the states a page compared may not have
_RETIRED = ("superseded", "forgotten", "archived")


def _keys(title: Any, aliases: Any, meta: dict[str, Any]) -> set[str]:
    names: list[Any] = [title, meta.get("subject")]
    if isinstance(aliases, list):
        names.extend(aliases)
    return {wl.name_key(n) for n in names if isinstance(n, str) and n.strip()}


def _rows(conn: apsw.Connection, where: str, args: list[Any], who: Identity | None) -> list[Any]:
    cond, vis = visible_sql("p", who)
    sql = (
        "SELECT p.path, p.project, p.title, p.aliases, p.meta FROM pages AS p WHERE "
        f"p.kind IN ({','.join('?' * len(NOTE_KINDS))}) AND {cond} AND {where}"
    )
    return list(conn.execute(sql, [*NOTE_KINDS, *vis, *args]))


def _subjects(conn: apsw.Connection, project: str, cache: dict[str, Any] | None) -> Any:
    """``project``'s pages by the name key of their frontmatter ``subject`` (read once
    per ``cache``: a recall asks for each note it returns)."""
    if cache is not None and project in cache:
        return cache[project]
    by: dict[str, set[str]] = {}
    for p, subject in conn.execute(
        "SELECT path, json_extract(meta, '$.subject') FROM pages WHERE "
        "project = ? AND json_type(meta, '$.subject') = 'text'",
        [project],
    ):
        by.setdefault(wl.name_key(str(subject)), set()).add(p)
    if cache is not None:
        cache[project] = by
    return by


def _peers(
    conn: apsw.Connection, only: list[str], who: Identity | None, cache: dict[str, Any] | None
) -> list[Any]:
    """The rows of ``only`` and of every note named like one of them, in its project."""
    mine = _rows(conn, f"p.path IN ({','.join('?' * len(only))})", list(only), who)
    if not mine:
        return []
    keys: set[str] = set()
    projects: set[str] = set()
    for _path, project, title, aliases, meta_json in mine:
        try:
            keys |= _keys(title, json.loads(aliases or "[]"), json.loads(meta_json or "{}"))
        except ValueError:
            continue
        projects.add(project)
    if not keys:
        return mine
    marks = ",".join("?" * len(keys))
    paths = {
        p
        for (p,) in conn.execute(
            f"SELECT DISTINCT path FROM names WHERE key IN ({marks}) "
            "AND source IN ('title', 'title_other', 'alias', 'stem')",
            sorted(keys),
        )
    }
    pmarks = ",".join("?" * len(projects))
    for project in projects:
        if project is None:
            continue
        by = _subjects(conn, project, cache)
        for key in keys:
            paths |= by.get(key, set())
    paths -= set(only)
    if not paths:
        return mine
    more = _rows(
        conn,
        f"p.path IN ({','.join('?' * len(paths))}) AND p.project IN ({pmarks})",
        [*sorted(paths), *sorted(projects)],
        who,
    )
    return mine + more


def subject_groups(
    conn: apsw.Connection,
    project: str | None,
    who: Identity | None,
    only: Iterable[str] | None = None,
    cache: dict[str, Any] | None = None,
) -> list[list[dict[str, Any]]]:
    """Groups of two or more current notes of one project that ``who`` may see and that
    share a name key (title, alias or ``subject``; :func:`wiki_memory.wiki.links.name_key`).
    Each row: ``{"path", "project", "title", "meta"}``; groups and rows sorted by path.
    Without ``only``: every group of ``project``. With ``only`` (paths): just the groups
    holding one of them, found through the ``names`` table (a few small queries, so
    recall can ask for the notes it returns; ``cache``, a dict kept for one recall,
    holds each project's subjects once); ``project`` may then be None. A page is
    in every group of its names, so a pair may be in two groups (the caller compares
    each pair once)."""
    want = list(dict.fromkeys(only)) if only is not None else None
    if want is not None:
        found = _peers(conn, want, who, cache) if want else []
    else:
        found = _rows(conn, "p.project = ?", [project], who)
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for path, proj, title, aliases, meta_json in found:
        try:
            meta = json.loads(meta_json or "{}")
            names = json.loads(aliases or "[]")
        except ValueError:
            continue
        if not isinstance(meta, dict) or str(meta.get("state") or "").lower() in _RETIRED:
            continue
        if proj is None or meta.get("conflict_of"):
            continue  # outside a project; a conflict copy is its page's other version
        row = {"path": path, "project": proj, "title": title, "meta": meta}
        for key in _keys(title, names, meta):
            by_key.setdefault((str(proj), key), []).append(row)
    groups = []
    seen: set[tuple[str, ...]] = set()
    for _key, rows in sorted(by_key.items()):
        paths = tuple(sorted({str(r["path"]) for r in rows}))
        if len(paths) < 2 or paths in seen:
            continue
        if want is not None and not set(want) & set(paths):
            continue
        seen.add(paths)
        uniq = {str(r["path"]): r for r in rows}
        groups.append([uniq[p] for p in paths])
    return groups
