"""Supersession as the index sees it: which page replaced which, chains, broken links.

One rule (docs/knowledge.md) for whichever side a person or the server wrote: a page
with ``state: superseded`` and ``superseded_by: X``, or a page (not forgotten) whose
``supersedes`` names a page, makes an edge *older → newer*. The older page's own
``superseded_by`` wins over another page's ``supersedes``. Names are resolved like
wikilinks (a path, ``[[Title]]``, a title or an alias; :mod:`wiki_memory.wiki.links`),
among the pages the caller may see.

A ``superseded_by`` that names no page (``missing``), a forgotten page (``forgotten``),
or that is part of a cycle (``cycle``) is *broken*: the page counts as current (a broken
supersession never hides a page) and ``doctor`` names it. A chain resolves to its head:
the first page following the edges that is not validly superseded.

Read with :func:`chains` on any index connection (the live one or an ``as_of`` one), so
an ``as_of`` query sees the supersessions committed then.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import apsw

from wiki_memory.identity import Identity, visible_sql
from wiki_memory.index.graph import lookup_names, resolver_for
from wiki_memory.index.schema import chunks
from wiki_memory.states import page_state
from wiki_memory.wiki import copies
from wiki_memory.wiki import links as wl

__all__ = ["Chains", "chains", "names_of", "resolve_names", "same_subject"]


def names_of(value: Any) -> list[str]:
    """The page names a ``supersedes``/``superseded_by`` value holds: a string or a list
    of strings, each a path, a title or a ``[[wikilink]]`` (its ``|alias`` and
    ``#heading`` dropped)."""
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for v in items:
        if not isinstance(v, str):
            continue
        s = v.strip()
        if s.startswith("[[") and s.endswith("]]"):
            s = s[2:-2]
        s = s.split("|", 1)[0].split("#", 1)[0].strip()
        if s and s not in out:
            out.append(s)
    return out


@dataclass
class Chains:
    """What :func:`chains` found. ``by``: older path → the page that directly replaced
    it (valid edges only); ``head``: older path → the head of its chain; ``broken``:
    path → ``(reason, target as written)`` with reason ``missing``, ``forgotten`` or
    ``cycle``; ``states``: path → state of every page read."""

    by: dict[str, str] = field(default_factory=dict)
    head: dict[str, str] = field(default_factory=dict)
    broken: dict[str, tuple[str, str]] = field(default_factory=dict)
    states: dict[str, str] = field(default_factory=dict)
    #: conflict copy path -> ``(the page it copies, whose version)``: a copy ranks after
    #: its page as a superseded page does (it is in ``by`` and ``head`` too)
    copies: dict[str, tuple[str, str]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.by or self.broken)

    def mark(self, path: str) -> dict[str, Any]:
        """``{"state": "superseded", "superseded_by": head}`` for a validly superseded
        page, ``{"conflict_of": page, "conflict_side": whose}`` for a conflict copy, else
        ``{}`` (a current page, or a broken supersession: shown as current)."""
        c = self.copies.get(path)
        if c is not None:
            return {"conflict_of": c[0], "conflict_side": c[1]}
        h = self.head.get(path)
        return {"state": "superseded", "superseded_by": h} if h else {}


#: the rows that may take part: a cheap substring test before the JSON is read, answered by
#: its partial index (the planner would otherwise pick the owner index of the scope's
#: condition and read every page's frontmatter on every recall)
_ROWS = (
    "SELECT path, meta FROM pages AS p INDEXED BY pages_supersede"
    " WHERE instr(p.meta, 'supersede') > 0"
)


def chains(conn: apsw.Connection, who: Identity | None = None) -> Chains:
    """The supersessions among the pages of ``conn`` that ``who`` may see (None: all)."""
    cond, args = visible_sql("p", who)
    metas: dict[str, dict[str, Any]] = {}
    for path, meta in conn.execute(f"{_ROWS} AND {cond}", args):
        try:
            m = json.loads(meta or "{}")
        except ValueError:
            continue
        if isinstance(m, dict):
            metas[path] = m
    out = Chains()
    if not metas:
        _copies(conn, who, out)
        return out
    wanted: dict[tuple[str, str], str] = {}  # (src, name) -> key
    for path, m in metas.items():
        for k in ("superseded_by", "supersedes"):
            for name in names_of(m.get(k)):
                wanted[(path, name)] = wl.target_key(name, path)
    keys = set(wanted.values())
    if who is None:
        names, files = lookup_names(conn, keys)
        resolver = wl.Resolver(names, files)
    else:
        resolver = resolver_for(conn, keys, who, forgotten=False)  # "forgotten" is named

    def resolve(src: str, name: str) -> str | None:
        return resolver.resolve_key(wanted[(src, name)], src).path

    # the states of every page named, for "forgotten" and the newer side's own state
    named = {p for p in (resolve(s, n) for s, n in wanted) if p}
    states = {p: page_state(m) for p, m in metas.items()}
    states.update(_states(conn, named - set(states)))
    out.states = states
    edges: dict[str, str] = {}
    own: dict[str, str] = {}  # older -> written target, for a broken own superseded_by
    for path, m in metas.items():
        if states[path] != "superseded":
            continue
        targets = names_of(m.get("superseded_by"))
        if not targets:
            continue
        own[path] = targets[0]
        new = resolve(path, targets[0])
        if new is None or new == path:
            out.broken[path] = ("missing", targets[0])
        elif states.get(new) == "forgotten":
            out.broken[path] = ("forgotten", targets[0])
        else:
            edges[path] = new
    for path, m in metas.items():
        if states[path] == "forgotten":
            continue
        for name in names_of(m.get("supersedes")):
            old = resolve(path, name)
            if old is None or old == path or old in own or states.get(old) == "forgotten":
                continue
            edges.setdefault(old, path)
    # cycles: every page on one is broken (shown as current)
    for start in list(edges):
        seen: list[str] = []
        p: str | None = start
        while p is not None and p in edges and p not in seen:
            seen.append(p)
            p = edges[p]
        if p is not None and p in seen:
            for q in seen[seen.index(p) :]:
                out.broken.setdefault(q, ("cycle", own.get(q, edges[q])))
    for old, new in edges.items():
        if old not in out.broken:
            out.by[old] = new
    for old in out.by:
        p = old
        hops = 0
        while p in out.by and hops <= len(out.by):
            p = out.by[p]
            hops += 1
        out.head[old] = p
    _copies(conn, who, out)
    return out


#: paths that may be conflict copies (docs/git.md, "Conflict copies"), by name only: read
#: from the primary key's index alone, so the rows' frontmatter is not scanned
_COPY_PATHS = (
    "SELECT path FROM pages WHERE instr(path, 'onflict') > 0 "
    "OR path GLOB '* [2-9].md' OR path GLOB '* [1-9][0-9].md'"
)


def _rows(
    conn: apsw.Connection, paths: Iterable[str], cond: str, args: list[Any]
) -> dict[str, tuple[str, dict[str, Any]]]:
    """path -> (title, frontmatter) of the pages among ``paths`` that pass ``cond``."""
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for chunk in chunks(sorted(set(paths))):
        marks = ",".join("?" * len(chunk))
        sql = f"SELECT p.path, p.title, p.meta FROM pages AS p WHERE p.path IN ({marks}) AND {cond}"
        for path, title, meta in conn.execute(sql, [*chunk, *args]):
            try:
                m = json.loads(meta or "{}")
            except ValueError:
                m = {}
            out[path] = (title or "", m if isinstance(m, dict) else {})
    return out


def _copies(conn: apsw.Connection, who: Identity | None, out: Chains) -> None:
    """Fill ``out.copies`` (and ``by``, ``head``) with the conflict copies ``who`` may see
    whose page is there and visible too: a copy ranks after its page (invariant 14)."""
    named = [
        p
        for (p,) in conn.execute(_COPY_PATHS)
        if copies.named_copy(p) is not None or copies.icloud_original(p) is not None
    ]
    if not named:
        return
    cond, args = visible_sql("p", who)
    rows = _rows(conn, named, cond, list(args))
    if not rows:
        return
    wanted: dict[str, tuple[str, str, bool]] = {}  # copy -> (page, whose, iCloud-named)
    for path, (_title, m) in rows.items():
        found = copies.marks(path, {k: m.get(k) for k in copies.MARK_KEYS if k in m})
        if found is not None:
            wanted[path] = (found[0], found[1], False)
            continue
        orig = copies.icloud_original(path)
        if orig is not None:
            wanted[path] = (orig, "iCloud", True)
    if not wanted:
        return
    pages = _rows(conn, {w[0] for w in wanted.values()}, cond, list(args))
    for path, (orig, side, icloud) in wanted.items():
        if orig == path or orig not in pages:
            continue
        if icloud:
            title, m = rows[path]
            if not copies.same_page(m, title, pages[orig][1], pages[orig][0]):
                continue
        out.copies[path] = (orig, side)
        out.by[path] = orig
        out.head[path] = out.head.get(orig, orig)


def _states(conn: apsw.Connection, paths: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for chunk in chunks(sorted(set(paths))):
        marks = ",".join("?" * len(chunk))
        for path, meta in conn.execute(
            f"SELECT path, meta FROM pages WHERE path IN ({marks})", list(chunk)
        ):
            try:
                m = json.loads(meta or "{}")
            except ValueError:
                m = {}
            out[path] = page_state(m if isinstance(m, dict) else {})
    return out


def resolve_names(
    conn: apsw.Connection, names: Iterable[str], src: str, who: Identity | None
) -> dict[str, str | None]:
    """Each name (a path, a title, an alias, a ``[[wikilink]]``) → the page it names
    among those ``who`` may see, resolved from ``src`` like a wikilink written there;
    None when it names none (or several)."""
    keys = {n: wl.target_key(names_of(n)[0] if names_of(n) else n, src) for n in names}
    if who is None:
        found, files = lookup_names(conn, set(keys.values()))
        resolver = wl.Resolver(found, files)
    else:
        resolver = resolver_for(conn, set(keys.values()), who)
    return {n: resolver.resolve_key(k, src).path for n, k in keys.items()}


def same_subject(
    conn: apsw.Connection, project: str, subject: str, who: Identity | None
) -> list[str]:
    """Pages of ``project`` ``who`` may see whose frontmatter ``subject`` equals
    ``subject`` (compared as page names are: :func:`wiki_memory.wiki.links.name_key`)."""
    cond, args = visible_sql("p", who)
    want = wl.name_key(subject)
    sql = (
        "SELECT p.path, json_extract(p.meta, '$.subject') FROM pages AS p "
        f"WHERE p.project = ? AND json_type(p.meta, '$.subject') = 'text' AND {cond}"
    )
    return sorted(p for p, s in conn.execute(sql, [project, *args]) if wl.name_key(s) == want)
