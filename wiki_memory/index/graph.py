"""The link graph in the index: resolving links, and reading links, backlinks and names.

Owns the ``links``, ``names`` and ``file_keys`` tables' meaning: :class:`Dirty` (name keys
and pages whose links must be resolved again before a write transaction ends),
:func:`resolve_dirty` and :func:`resolve_all` (which write ``links.status`` and
``resolved_path``), and the read side behind :class:`~wiki_memory.index.store.Index`'s
``outlinks``, ``backlinks``, ``links_to``, ``links_from``, ``link_stats``,
``problem_links`` and ``names_for``. Resolution follows :mod:`wiki_memory.wiki.links`
(exact names, never fuzzy). Reads for a caller ``who`` resolve again among the pages and
files ``who`` may see (:func:`resolver_for`), so a hidden page is never named and never
changes where a link leads. Every function works on the connection it is given (the
live database or the one a rebuild fills).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import apsw

from wiki_memory.identity import Identity, may_read, visible_sql
from wiki_memory.index.schema import chunks, scalar
from wiki_memory.states import shown_sql
from wiki_memory.wiki import links as wl


class Dirty:
    """Names whose links must be resolved again before the transaction ends.

    ``keys``: name keys that gained or lost a page or file; ``srcs``: pages whose own
    outgoing links were (re)inserted.
    """

    __slots__ = ("keys", "srcs")

    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.srcs: set[str] = set()

    def __bool__(self) -> bool:
        return bool(self.keys or self.srcs)


# --- resolution --------------------------------------------------------------------------


def lookup_names(
    conn: apsw.Connection, keys: Iterable[str]
) -> tuple[dict[str, list[tuple[str, str]]], dict[str, list[str]]]:
    """The ``names`` and ``file_keys`` rows of ``keys``, grouped by key (for a Resolver):
    ``({key: [(path, source)]}, {key: [file path]})``."""
    names: dict[str, list[tuple[str, str]]] = {}
    files: dict[str, list[str]] = {}
    for chunk in chunks(sorted(set(keys))):
        marks = ",".join("?" * len(chunk))
        for k, p, src in conn.execute(
            f"SELECT key, path, source FROM names WHERE key IN ({marks})", list(chunk)
        ):
            names.setdefault(k, []).append((p, src))
        for k, p in conn.execute(
            f"SELECT key, path FROM file_keys WHERE key IN ({marks})", list(chunk)
        ):
            files.setdefault(k, []).append(p)
    return names, files


def visible_paths(conn: apsw.Connection, paths: Iterable[str], who: Identity | None) -> set[str]:
    """The indexed pages among ``paths`` that ``who`` may see (None: all indexed)."""
    cond, args = visible_sql("p", who)
    out: set[str] = set()
    for chunk in chunks(sorted(set(paths))):
        marks = ", ".join("?" * len(chunk))
        sql = f"SELECT p.path FROM pages AS p WHERE p.path IN ({marks}) AND {cond}"
        out.update(r[0] for r in conn.execute(sql, [*chunk, *args]))
    return out


def forgotten_paths(conn: apsw.Connection, paths: Iterable[str]) -> set[str]:
    """The indexed pages among ``paths`` that are forgotten (``state: forgotten``)."""
    out: set[str] = set()
    for chunk in chunks(sorted(set(paths))):
        marks = ", ".join("?" * len(chunk))
        sql = f"SELECT p.path FROM pages AS p WHERE p.path IN ({marks}) AND NOT {shown_sql('p', 'list')}"
        out.update(r[0] for r in conn.execute(sql, list(chunk)))
    return out


def _named(names: Mapping[str, Sequence[tuple[str, str]]]) -> set[str]:
    return {p for rows in names.values() for p, _s in rows}


def resolver_for(
    conn: apsw.Connection, keys: Iterable[str], who: Identity, forgotten: bool = True
) -> wl.Resolver:
    """A link resolver over the names and attachment files of ``keys`` that ``who``
    may see (the scope rule), so hidden pages take no part in any resolution; a link to
    a forgotten page reads ``forgotten`` (``forgotten`` False: leads to it, for a rule
    that names the forgotten page itself, such as a broken supersession)."""
    names, files = lookup_names(conn, keys)
    shown = visible_paths(conn, _named(names), who)
    names = {k: [(p, s) for p, s in v if p in shown] for k, v in names.items()}
    files = {k: [p for p in v if may_read(who, p, None)] for k, v in files.items()}
    gone = forgotten_paths(conn, _named(names)) if forgotten else set()
    return wl.Resolver(names, files, gone)


def candidates(conn: apsw.Connection, keys: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Every page (or attachment) each target key names, sorted: the candidates of an
    ambiguous link with that key. One set per key, so they are not stored per link."""
    wanted = set(keys)
    if not wanted:
        return {}
    names, files = lookup_names(conn, wanted)
    resolver = wl.Resolver(names, files)
    return {k: resolver.paths(k) for k in wanted}


def _resolve_rows(
    conn: apsw.Connection,
    rows: Sequence[tuple[int, str, str, str]],
    names: Mapping[str, Sequence[tuple[str, str]]],
    files: Mapping[str, Sequence[str]],
) -> None:
    """Set status and resolved_path of link rows ``(rowid, src, target, key)``."""
    resolver = wl.Resolver(names, files, forgotten_paths(conn, _named(names)))
    updates = []
    for rowid, src, _target, key in rows:
        res = resolver.resolve_key(key, src)
        updates.append((res.status, res.path, rowid))
    conn.executemany("UPDATE links SET status = ?, resolved_path = ? WHERE rowid = ?", updates)


def resolve_dirty(conn: apsw.Connection, dirty: Dirty) -> None:
    """Resolve again every link whose target key is in ``dirty.keys`` or whose page is in
    ``dirty.srcs``, then empty ``dirty``. Called inside the write transaction that made
    the change."""
    if not dirty:
        return
    rows: dict[int, tuple[int, str, str, str]] = {}
    keys = sorted(dirty.keys)
    for chunk in chunks(keys):
        marks = ",".join("?" * len(chunk))
        for r in conn.execute(
            f"SELECT rowid, src_path, target, target_key FROM links "
            f"WHERE target_key IN ({marks}) AND target != ''",
            list(chunk),
        ):
            rows[r[0]] = r
    for src in sorted(dirty.srcs):
        for r in conn.execute(
            "SELECT rowid, src_path, target, target_key FROM links "
            "WHERE src_path = ? AND target != ''",
            (src,),
        ):
            rows[r[0]] = r
    dirty.keys.clear()
    dirty.srcs.clear()
    if not rows:
        return
    names, files = lookup_names(conn, (r[3] for r in rows.values()))
    _resolve_rows(conn, list(rows.values()), names, files)


def resolve_all(conn: apsw.Connection) -> None:
    """Resolve every link (after a rebuild filled the tables)."""
    names: dict[str, list[tuple[str, str]]] = {}
    for k, p, src in conn.execute("SELECT key, path, source FROM names"):
        names.setdefault(k, []).append((p, src))
    files: dict[str, list[str]] = {}
    for k, p in conn.execute("SELECT key, path FROM file_keys"):
        files.setdefault(k, []).append(p)
    rows: list[Any] = conn.execute(
        "SELECT rowid, src_path, target, target_key FROM links WHERE target != ''"
    ).fetchall()
    _resolve_rows(conn, rows, names, files)


# --- reading the graph (see the Index methods of the same names) --------------------------


def links_from(conn: apsw.Connection, path: str) -> list[dict[str, Any]]:
    """Outgoing links of ``path`` as written, in file order: dicts with target,
    fragment, alias, embed, line (:meth:`~wiki_memory.index.store.Index.links_from`)."""
    cur = conn.execute(
        "SELECT target, fragment, alias, embed, line FROM links WHERE src_path = ? "
        "ORDER BY line, rowid",
        (path,),
    )
    return [
        {"target": t, "fragment": f, "alias": a, "embed": bool(e), "line": ln}
        for t, f, a, e, ln in cur
    ]


def outlinks(conn: apsw.Connection, path: str, who: Identity | None = None) -> list[dict[str, Any]]:
    """Every link of ``path`` with where it leads, as ``who`` sees it: dicts with target,
    fragment, alias, embed, line, in_frontmatter, status, path, candidates
    (:meth:`~wiki_memory.index.store.Index.outlinks`)."""
    rows: list[Any] = conn.execute(
        "SELECT target, fragment, alias, embed, line, in_frontmatter, status, "
        "resolved_path, target_key FROM links WHERE src_path = ? ORDER BY line, rowid",
        (path,),
    ).fetchall()
    cands = candidates(conn, {r[8] for r in rows if r[6] == wl.AMBIGUOUS})
    resolver = None
    if who is not None:
        resolver = resolver_for(conn, {r[8] for r in rows if r[0]}, who)
    out = []
    for t, f, a, e, ln, fm, st, rp, k in rows:
        cand = list(cands.get(k, ())) if st == wl.AMBIGUOUS else []
        if resolver is not None and t:
            res = resolver.resolve_key(k, path)
            st, rp, cand = res.status, res.path, list(res.candidates)
        out.append(
            {
                "target": t,
                "fragment": f,
                "alias": a,
                "embed": bool(e),
                "line": ln,
                "in_frontmatter": bool(fm),
                "status": st,
                "path": rp,
                "candidates": cand,
            }
        )
    return out


def backlinks(
    conn: apsw.Connection, path: str, who: Identity | None = None
) -> list[dict[str, Any]]:
    """Links from other pages resolving to ``path``, from pages ``who`` may see: dicts
    with src_path, title, target, fragment, alias, embed, line
    (:meth:`~wiki_memory.index.store.Index.backlinks`)."""
    cond, args = visible_sql("p", who)
    cols = "l.src_path, p.title, l.target, l.fragment, l.alias, l.embed, l.line, l.target_key"
    if who is None:
        rows: list[Any] = conn.execute(
            f"SELECT {cols} FROM links AS l JOIN pages AS p ON p.path = l.src_path "
            "WHERE l.resolved_path = ? AND l.target != '' AND l.status = 'resolved' "
            "ORDER BY l.src_path, l.line, l.rowid",
            (path,),
        ).fetchall()
    else:
        # every link that names this page, resolved again among what ``who`` sees
        keys = [r[0] for r in conn.execute("SELECT key FROM names WHERE path = ?", (path,))]
        marks = ", ".join("?" * len(keys)) or "NULL"
        found: list[Any] = conn.execute(
            f"SELECT {cols} FROM links AS l JOIN pages AS p ON p.path = l.src_path "
            f"WHERE l.target != '' AND (l.resolved_path = ? OR l.target_key IN ({marks})) "
            f"AND {cond} ORDER BY l.src_path, l.line, l.rowid",
            (path, *keys, *args),
        ).fetchall()
        resolver = resolver_for(conn, {r[7] for r in found}, who)
        rows = []
        for r in found:
            res = resolver.resolve_key(str(r[7]), str(r[0]))
            if res.status == wl.RESOLVED and res.path == path:
                rows.append(r)
    return [
        {
            "src_path": s,
            "title": ti,
            "target": t,
            "fragment": f,
            "alias": a,
            "embed": bool(e),
            "line": ln,
        }
        for s, ti, t, f, a, e, ln, _k in rows
    ]


def link_stats(conn: apsw.Connection) -> dict[str, int]:
    """Counts over the whole index, by name (:meth:`~wiki_memory.index.store.Index.link_stats`)."""
    out: dict[str, int] = {
        "pages": scalar(conn, "SELECT count(*) FROM pages"),
        "files": scalar(conn, "SELECT count(*) FROM files"),
        "same_page": scalar(conn, "SELECT count(*) FROM links WHERE target = ''"),
        "links": scalar(conn, "SELECT count(*) FROM links WHERE target != ''"),
        "embeds": scalar(conn, "SELECT count(*) FROM links WHERE target != '' AND embed"),
        "aliases": scalar(conn, "SELECT coalesce(sum(json_array_length(aliases)), 0) FROM pages"),
        "tags": scalar(conn, "SELECT coalesce(sum(json_array_length(tags)), 0) FROM pages"),
    }
    for status in (wl.RESOLVED, wl.UNRESOLVED, wl.AMBIGUOUS):
        out[status] = scalar(
            conn, f"SELECT count(*) FROM links WHERE target != '' AND status = '{status}'"
        )
    out["attachments"] = scalar(
        conn, "SELECT count(*) FROM links WHERE target != '' AND status = 'attachment'"
    )
    out["missing_attachments"] = scalar(
        conn,
        "SELECT count(*) FROM links WHERE status = 'attachment' AND resolved_path IS NULL",
    )
    return out


def problem_links(conn: apsw.Connection) -> list[dict[str, Any]]:
    """Links that lead nowhere: dicts with src_path, line, target, fragment, embed,
    status, candidates (:meth:`~wiki_memory.index.store.Index.problem_links`)."""
    rows: list[Any] = conn.execute(
        "SELECT src_path, line, target, fragment, embed, status, target_key FROM links "
        "WHERE target != '' AND (status IN ('unresolved', 'ambiguous') "
        "OR (status = 'attachment' AND resolved_path IS NULL)) ORDER BY src_path, line, rowid"
    ).fetchall()
    cands = candidates(conn, {r[6] for r in rows if r[5] == wl.AMBIGUOUS})
    return [
        {
            "src_path": sp,
            "line": ln,
            "target": t,
            "fragment": f,
            "embed": bool(e),
            "status": "missing_attachment" if st == wl.ATTACHMENT else st,
            "candidates": list(cands.get(k, ())) if st == wl.AMBIGUOUS else [],
        }
        for sp, ln, t, f, e, st, k in rows
    ]


def links_to(
    conn: apsw.Connection, title_or_stem: str, who: Identity | None = None
) -> list[dict[str, Any]]:
    """Links leading to the page named ``title_or_stem`` (else written with that target):
    dicts with src_path, target, fragment, alias, embed, line
    (:meth:`~wiki_memory.index.store.Index.links_to`)."""
    key = wl.target_key(title_or_stem)
    paths = sorted({r[0] for r in conn.execute("SELECT path FROM names WHERE key = ?", (key,))})
    if who is not None:
        shown = visible_paths(conn, paths, who)
        paths = [p for p in paths if p in shown]
    cond, args = visible_sql("p", who)
    if paths:
        marks = ", ".join("?" * len(paths))
        cur = conn.execute(
            "SELECT l.src_path, l.target, l.fragment, l.alias, l.embed, l.line "
            "FROM links AS l JOIN pages AS p ON p.path = l.src_path "
            f"WHERE l.resolved_path IN ({marks}) AND l.target != '' "
            f"AND l.status = 'resolved' AND {cond} ORDER BY l.src_path, l.line",
            [*paths, *args],
        )
    else:
        cur = conn.execute(
            "SELECT l.src_path, l.target, l.fragment, l.alias, l.embed, l.line "
            "FROM links AS l JOIN pages AS p ON p.path = l.src_path "
            f"WHERE l.target_key = ? AND {cond} ORDER BY l.src_path, l.line",
            (key, *args),
        )
    return [
        {"src_path": s, "target": t, "fragment": f, "alias": a, "embed": bool(e), "line": ln}
        for s, t, f, a, e, ln in cur
    ]


def names_for(
    conn: apsw.Connection, keys: Iterable[str], who: Identity | None = None
) -> list[tuple[str, str, str]]:
    """``(key, path, source)`` rows of ``names`` for ``keys``, pages ``who`` may not see
    left out (:meth:`~wiki_memory.index.store.Index.names_for`)."""
    cond, args = visible_sql("p", who)
    uniq = sorted(set(keys))
    out: list[tuple[str, str, str]] = []
    for chunk in chunks(uniq):
        marks = ", ".join("?" * len(chunk))
        out.extend(
            (str(k), str(p), str(s or ""))
            for k, p, s in conn.execute(
                "SELECT n.key, n.path, n.source FROM names AS n JOIN pages AS p "
                f"ON p.path = n.path WHERE n.key IN ({marks}) AND {cond}",
                [*chunk, *args],
            )
        )
    return out
