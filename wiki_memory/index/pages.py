"""Page rows: turning a page's bytes into index rows, removing them, and reading them back.

Owns what the ``pages``, ``sections``, ``fts`` and ``sections_apart`` tables (and a page's ``links`` and
``names`` rows, and the ``files``/``file_keys`` rows of attachments) hold for each file:
:func:`prepare` parses and normalises one page (pure CPU, so a rebuild runs it in helper
processes), :func:`insert_prepared` writes prepared pages with a few ``executemany``
calls, :func:`upsert`/:func:`delete`/:func:`delete_under` keep one page current (links
that named it resolved again, :mod:`wiki_memory.index.graph`), :func:`file_add`/
:func:`file_delete` record attachments. The read side backs
:class:`~wiki_memory.index.store.Index`'s ``page_meta``, ``list_pages``, ``sections_of``,
``pinned_pages``, ``paths``, ``rows`` and friends. Every function works on the
connection it is given, inside the caller's transaction.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

import apsw

from wiki_memory.identity import Identity, is_pinned, personal_owner, visible_sql
from wiki_memory.index import pagediff, pagetail, sectionrows
from wiki_memory.index import vectors as vec
from wiki_memory.index.files import read_file
from wiki_memory.index.graph import Dirty, resolve_dirty
from wiki_memory.index.schema import (
    APART_SQL,
    INSERT_FTS,
    INSERT_LINK,
    INSERT_NAME,
    INSERT_PAGE,
    INSERT_SECTION,
    UPDATED,
    given_sql,
    scalar,
)
from wiki_memory.index.stem import DEFAULT_LANGUAGES, language
from wiki_memory.index.text import index_text
from wiki_memory.plainfile import page_hash
from wiki_memory.states import page_state, shown_sql
from wiki_memory.wiki import copies
from wiki_memory.wiki import links as wl
from wiki_memory.wiki.oddnames import on_disk
from wiki_memory.wiki.page import Diagnostic, ParsedPage, Section, parse_page
from wiki_memory.wiki.paths import name_key
from wiki_memory.wiki.personal import page_owner
from wiki_memory.wiki.sessionparts import not_part_sql

# --- values ----------------------------------------------------------------------------


def as_text(value: Any) -> str | None:
    """A stored text value: None for None or ``""``, ISO-8601 for dates, else ``str``."""
    if value is None or value == "":
        return None
    iso = getattr(value, "isoformat", None)
    return str(iso()) if callable(iso) else str(value)


def _str_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Iterable):
        return [str(v) for v in value if v is not None and str(v) != ""]
    return [str(value)]


def _parse(raw: bytes, path: str) -> ParsedPage:
    """parse_page, but a parser bug never stops indexing: the page becomes plain text."""
    try:
        return parse_page(raw, path)
    except Exception as exc:  # noqa: BLE001 - indexing must go on; the problem is recorded
        text = raw.decode("utf-8", errors="replace")
        return ParsedPage(
            metadata={},
            body=text,
            body_line=1,
            title=_stem(path),
            sections=[Section("", "", 0, text, 1)],
            diagnostics=[Diagnostic("parse-error", None, f"{type(exc).__name__}: {exc}")],
        )


def _stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].removesuffix(".md")


def _project_from_path(path: str) -> str | None:
    parts = path.split("/")
    if len(parts) >= 3 and parts[0] == "projects" and parts[1]:
        return parts[1]
    return None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def check_rel(path: str) -> str:
    """``path`` itself; raises ValueError when it is empty, absolute, has ``\\`` or ``..``."""
    if not path or path.startswith("/") or "\\" in path or ".." in path.split("/"):
        raise ValueError(f"not a wiki-relative path: {path!r}")
    return path


# --- writing a page's rows ---------------------------------------------------------------


def upsert(
    conn: apsw.Connection,
    path: str,
    raw: bytes,
    mtime: float | None,
    dirty: Dirty | None = None,
    langs: tuple[str, ...] = DEFAULT_LANGUAGES,
    vectors: bool = False,
) -> bool:
    """Index one page's bytes (skipped when the hash is unchanged; of a page indexed
    before, only the sections that changed, :mod:`wiki_memory.index.pagediff`). Links touched by the
    change are resolved again before returning, or added to ``dirty`` for the caller.
    ``langs``: the Snowball stemmers for a page without a known frontmatter ``lang``;
    ``vectors``: also store its sections' dense vectors (:mod:`wiki_memory.index.vectors`)."""
    digest = page_hash(raw)
    row = conn.execute("SELECT hash, mtime FROM pages WHERE path = ?", (path,)).fetchone()
    if row is not None and row[0] == digest:
        if mtime is not None and row[1] != mtime:
            conn.execute("UPDATE pages SET mtime = ? WHERE path = ?", (mtime, path))
        return False
    local = dirty if dirty is not None else Dirty()
    prep = prepare(path, raw, mtime, digest, langs, grown=row is not None)
    kept = pagetail.unchanged(path, digest, row[0]) if row is not None else None
    if row is None or not pagediff.update_changed(conn, prep, local, vectors, kept):
        if row is not None:
            delete(conn, path, local)
        insert_prepared(conn, [prep], local, vectors)
    if dirty is None:
        resolve_dirty(conn, local)
    return True


def prepare(
    path: str,
    raw: bytes,
    mtime: float | None,
    digest: str | None = None,
    langs: tuple[str, ...] = DEFAULT_LANGUAGES,
    grown: bool = False,
) -> tuple[Any, ...]:
    """Parse and normalise one page (pure CPU work: runs in worker processes on rebuild).

    Each section also gets its other word forms (stemmed with the page's frontmatter
    ``lang`` when Snowball knows it, else with ``langs``) and its day, as ISO date and
    as words (:mod:`wiki_memory.index.dates`). ``grown``: the page may have grown at its
    end since this process last prepared it; parse and turn only its new part where
    that applies (:mod:`wiki_memory.index.pagetail`)."""
    part = pagetail.parse(path, raw) if grown else None
    parsed = part.parsed if part is not None else _parse(raw, path)
    meta = parsed.metadata if isinstance(parsed.metadata, dict) else {}
    if page_state(meta) == "forgotten":
        return _prepare_forgotten(path, raw, mtime, meta, digest)
    stem = _stem(path)
    title = parsed.title or as_text(meta.get("title")) or stem
    meta, title, is_copy = copies.mark_parsed(path, meta, title)  # never a link target
    tags = _str_list(parsed.tags)
    aliases = _str_list(parsed.aliases)
    project = as_text(meta.get("project")) or _project_from_path(path)
    kind = as_text(meta.get("type")) or "page"
    diagnostics = [_diagnostic(d) for d in parsed.diagnostics]
    page_row = _page_row(
        path,
        raw,
        mtime,
        digest,
        meta,
        page_id=as_text(meta.get("id")) or name_key(path),  # kept by a case-only rename
        title=title,
        kind=kind,
        project=project,
        tags=tags,
        aliases=aliases,
        stored=meta,
        diagnostics=diagnostics,
    )
    fts_page = (index_text(title), index_text("\n".join(aliases)), index_text(" ".join(tags)))
    page_lang = language(meta.get("lang"))
    stem_langs = (page_lang,) if page_lang else langs
    digest = digest or page_hash(raw)
    sections = part.rows(meta, stem_langs, digest) if part is not None else None
    if sections is None:
        secs = parsed.sections or [Section("", "", 0, parsed.body, parsed.body_line)]
        sections = sectionrows.rows(meta, secs, stem_langs)
    links = [
        (
            path,
            link.target,
            link.fragment,
            link.alias,
            int(bool(link.embed)),
            link.line,
            wl.target_key(link.target, path) if link.target else "",
            int(bool(link.in_frontmatter)),
            wl.UNRESOLVED if link.target else wl.RESOLVED,
            None if link.target else path,
        )
        for link in parsed.links
    ]
    keys = wl.page_name_keys(path, title, aliases)
    names = [ks for ks in keys if not is_copy or ks[1] == "path"]  # a copy: by path only
    return (path, page_row, project, kind, fts_page, sections, links, names)


def _page_row(
    path: str,
    raw: bytes,
    mtime: float | None,
    digest: str | None,
    meta: Mapping[str, Any],
    *,
    page_id: str,
    title: str,
    kind: str,
    project: str | None,
    stored: Mapping[str, Any],
    tags: list[str] | None = None,
    aliases: list[str] | None = None,
    diagnostics: list[dict[str, Any]] | None = None,
) -> tuple[Any, ...]:
    """One row of the ``pages`` table, its columns in the table's order
    (:mod:`wiki_memory.index.schema`): ``page_id``, ``title``, ``kind``, ``project`` as
    given; ``updated`` and ``created`` come from ``meta`` (the frontmatter), the hash (``digest``,
    else computed), size and owner from ``path`` and ``raw``; ``stored`` is the frontmatter
    the row keeps; ``tags``, ``aliases`` and ``diagnostics`` are stored as JSON lists
    (empty when None)."""
    return (
        path,
        page_id,
        title,
        kind,
        project,
        _json(tags or []),
        _json(aliases or []),
        as_text(meta.get("updated")),
        as_text(meta.get("created")),
        digest or page_hash(raw),
        len(raw),
        mtime,
        _json(stored),
        _json(diagnostics or []),
        personal_owner(path, meta) or page_owner(path, raw),
    )


#: frontmatter a forgotten page keeps in the index: who may see it and its state
_FORGOTTEN_KEEPS = (
    "state",
    "forgotten_by",
    "forgotten_at",
    "type",
    "project",
    "visibility",
    "user",
)


def _prepare_forgotten(
    path: str, raw: bytes, mtime: float | None, meta: Mapping[str, Any], digest: str | None
) -> tuple[Any, ...]:
    """A forgotten page as the index keeps it: a ``pages`` row (its file's stem for a
    title; of its frontmatter only what scope and state need) and the names of its path,
    so that a link to it reads as forgotten; no section, no word, no vector, no link of
    its own (it is nobody's backlink)."""
    stem = _stem(path)
    kept = {k: meta[k] for k in _FORGOTTEN_KEEPS if k in meta}
    kind = as_text(meta.get("type")) or "page"
    project = as_text(meta.get("project")) or _project_from_path(path)
    page_row = _page_row(
        path,
        raw,
        mtime,
        digest,
        meta,
        page_id=as_text(meta.get("id")) or path,
        title=stem,
        kind=kind,
        project=project,
        stored=kept,
    )
    names = wl.page_name_keys(path, "", [])
    return (path, page_row, project, kind, ("", "", ""), [], [], names)


def prepare_file(job: tuple[str, str, float | None, tuple[str, ...]]) -> tuple[Any, ...] | None:
    """:func:`prepare` for ``(root, rel, mtime, langs)``; None when the file cannot be read
    (gone, or no longer a regular file)."""
    root, rel, mtime, langs = job
    raw = read_file(on_disk(Path(root), rel))
    if raw is None:
        return None
    return prepare(rel, raw, mtime, langs=langs)


def _next_rowid(conn: apsw.Connection) -> int:
    row: Any = conn.execute("SELECT coalesce(max(rowid), 0) FROM sections").fetchone()
    return int(row[0]) + 1


def insert_prepared(
    conn: apsw.Connection,
    preps: Sequence[tuple[Any, ...]],
    dirty: Dirty | None = None,
    vectors: bool = False,
) -> None:
    """Insert prepared pages (none of them indexed yet) with a few ``executemany`` calls;
    ``vectors``: embed their sections and store the vectors too (in this process: the
    model is loaded once, not in each rebuild helper)."""
    if not preps:
        return
    rowid = first = _next_rowid(conn)
    pages: list[tuple[Any, ...]] = []
    secs: list[tuple[Any, ...]] = []
    fts: list[tuple[Any, ...]] = []
    links: list[tuple[Any, ...]] = []
    names: list[tuple[Any, ...]] = []
    for path, page_row, project, kind, page_fts, sections, plinks, pnames in preps:
        pages.append(page_row)
        for ordinal, sec in enumerate(sections):
            srow, frow = sectionrows.table_rows(rowid, path, ordinal, project, kind, page_fts, sec)
            secs.append(srow)
            fts.append(frow)
            rowid += 1
        links.extend(plinks)
        names.extend((k, path, src) for k, src in pnames)
        if dirty is not None:
            dirty.srcs.add(path)
            dirty.keys.update(k for k, _ in pnames)
    conn.executemany(INSERT_PAGE, pages)
    conn.executemany(INSERT_SECTION, secs)
    conn.executemany(INSERT_FTS, fts)
    conn.execute(APART_SQL, (first, rowid - 1))
    if vectors:
        vec.write(conn, [(r[0], r[3], r[2], r[7]) for r in secs])
    if links:
        conn.executemany(INSERT_LINK, links)
    conn.executemany(INSERT_NAME, names)


def delete(conn: apsw.Connection, path: str, dirty: Dirty | None = None) -> bool:
    """Remove a page's rows. Links elsewhere that named it are resolved again."""
    keys = [r[0] for r in conn.execute("SELECT key FROM names WHERE path = ?", (path,))]
    vec.delete_path(conn, path)
    for table in ("fts", "sections_apart"):
        conn.execute(
            f"DELETE FROM {table} WHERE rowid IN (SELECT rowid FROM sections WHERE path = ?)",
            (path,),
        )
    conn.execute("DELETE FROM sections WHERE path = ?", (path,))
    conn.execute("DELETE FROM links WHERE src_path = ?", (path,))
    conn.execute("DELETE FROM names WHERE path = ?", (path,))
    conn.execute("DELETE FROM pages WHERE path = ?", (path,))
    gone = bool(conn.changes())
    if keys:
        local = dirty if dirty is not None else Dirty()
        local.keys.update(keys)
        local.srcs.discard(path)
        if dirty is None:
            resolve_dirty(conn, local)
    return gone


def _under(conn: apsw.Connection, table: str, prefix_dir: str) -> list[str]:
    prefix = prefix_dir.strip("/")
    if prefix in ("", "."):
        return [r[0] for r in conn.execute(f"SELECT path FROM {table}")]
    return [
        r[0]
        for r in conn.execute(
            f"SELECT path FROM {table} WHERE path >= ? AND path < ?", (prefix + "/", prefix + "0")
        )
    ]


def delete_under(conn: apsw.Connection, prefix_dir: str, dirty: Dirty | None = None) -> int:
    """Remove every page and attachment file below ``prefix_dir``; returns the page count."""
    local = dirty if dirty is not None else Dirty()
    paths = _under(conn, "pages", prefix_dir)
    for p in paths:
        delete(conn, p, local)
    for f in _under(conn, "files", prefix_dir):
        file_delete(conn, f, local)
    if dirty is None:
        resolve_dirty(conn, local)
    return len(paths)


# --- attachments (files that are not pages) ----------------------------------------


def file_add(
    conn: apsw.Connection, path: str, size: int, mtime: float | None, dirty: Dirty
) -> bool:
    """Record the attachment file ``path`` (``size`` bytes, ``mtime`` seconds); True when
    it is new (its name keys then go into ``dirty``), False when only updated."""
    row = conn.execute("SELECT size, mtime FROM files WHERE path = ?", (path,)).fetchone()
    if row is not None:
        if (row[0], row[1]) != (size, mtime):
            conn.execute("UPDATE files SET size = ?, mtime = ? WHERE path = ?", (size, mtime, path))
        return False
    conn.execute("INSERT INTO files(path, size, mtime) VALUES (?,?,?)", (path, size, mtime))
    keys = wl.file_name_keys(path)
    conn.executemany("INSERT INTO file_keys(key, path) VALUES (?,?)", [(k, path) for k in keys])
    dirty.keys.update(keys)
    return True


def file_delete(conn: apsw.Connection, path: str, dirty: Dirty) -> bool:
    """Forget the attachment file ``path`` (its name keys go into ``dirty``); True if known."""
    keys = [r[0] for r in conn.execute("SELECT key FROM file_keys WHERE path = ?", (path,))]
    conn.execute("DELETE FROM file_keys WHERE path = ?", (path,))
    conn.execute("DELETE FROM files WHERE path = ?", (path,))
    gone = bool(conn.changes())
    dirty.keys.update(keys)
    return gone


def _diagnostic(d: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(d) and not isinstance(d, type):
        return dataclasses.asdict(d)
    return {"kind": str(d), "line": None, "message": str(d)}


# --- reading pages (see the Index methods of the same names) -------------------------------

PAGE_COLUMNS = tuple(
    "path id title kind project tags aliases updated created hash size mtime meta diagnostics owner".split()
)
"""The columns of ``pages``, in order: the keys of :func:`page_meta`'s dicts."""


def _page_dict(row: Sequence[Any]) -> dict[str, Any]:
    out = dict(zip(PAGE_COLUMNS, row, strict=True))
    for key, empty in (("tags", []), ("aliases", []), ("meta", {}), ("diagnostics", [])):
        value = out.get(key)
        out[key] = json.loads(value) if value else empty
    return out


def page_meta(
    conn: apsw.Connection, path: str, who: Identity | None = None
) -> dict[str, Any] | None:
    """The ``pages`` row of ``path`` as a dict with :data:`PAGE_COLUMNS` keys (JSON decoded),
    or None, also when ``who`` may not see it (:meth:`~wiki_memory.index.store.Index.page_meta`)."""
    cond, args = visible_sql("p", who)
    row = conn.execute(
        f"SELECT {', '.join('p.' + c for c in PAGE_COLUMNS)} FROM pages AS p "
        f"WHERE p.path = ? AND {cond}",
        (path, *args),
    ).fetchone()
    return None if row is None else _page_dict(row)


class PageFilters(TypedDict, total=False):
    """The filters of a page listing, as keyword arguments (each optional): ``project``
    and ``kind`` (the page's equals it; None: any), ``since`` (ISO-8601 text compared with
    the page's ``updated``, else ``created``, else mtime; None: any time), ``limit`` (at
    most this many rows; default 100) and ``offset`` (rows skipped first; default 0).
    :func:`list_pages` holds the defaults; the layers above pass these on unchanged."""

    project: str | None
    kind: str | None
    since: str | None
    limit: int
    offset: int


def list_pages(
    conn: apsw.Connection,
    project: str | None = None,
    kind: str | None = None,
    since: str | None = None,
    limit: int = 100,
    offset: int = 0,
    who: Identity | None = None,
    parts: bool = True,
) -> list[dict[str, Any]]:
    """Pages ``who`` may see, most recently updated first, as :func:`page_meta` dicts
    (:meth:`~wiki_memory.index.store.Index.list_pages`); ``parts`` False leaves a long
    session's part pages out (:func:`wiki_memory.wiki.sessionparts.not_part_sql`)."""
    cond, args = visible_sql("p", who)
    given, given_args = given_sql(
        ("p.project = ?", project), ("p.kind = ?", kind), (f"{UPDATED} >= ?", since)
    )
    where = [cond, shown_sql("p", "list"), *given]
    if not parts:
        where.append(not_part_sql("p"))
    args.extend([*given_args, int(limit), int(offset)])
    sql = f"""
        SELECT p.path, p.id, p.title, p.kind, p.project, p.tags, p.aliases,
               {UPDATED} AS updated, p.created, p.hash, p.size, p.mtime, p.meta,
               p.diagnostics, p.owner
        FROM pages AS p {"WHERE " + " AND ".join(where) if where else ""}
        ORDER BY updated DESC, p.path LIMIT ? OFFSET ?
    """
    return [_page_dict(row) for row in conn.execute(sql, args)]


def sections_of(conn: apsw.Connection, path: str) -> list[dict[str, Any]]:
    """The sections of ``path`` in page order: dicts with anchor, heading, ord, line, hash, text."""
    cur = conn.execute(
        "SELECT anchor, heading, ord, line, hash, text FROM sections WHERE path = ? ORDER BY ord",
        (path,),
    )
    keys = ("anchor", "heading", "ord", "line", "hash", "text")
    return [dict(zip(keys, row, strict=True)) for row in cur]


def pinned_pages(
    conn: apsw.Connection, project: str, who: Identity | None = None
) -> list[dict[str, Any]]:
    """Pinned pages of ``project`` (or of none) that ``who`` may see, by path: dicts with
    path, title, meta (:meth:`~wiki_memory.index.store.Index.pinned_pages`)."""
    cond, args = visible_sql("p", who)
    pin = "json_extract(p.meta, '$.pinned')"
    kind = "json_type(p.meta, '$.pinned')"
    rows = conn.execute(
        "SELECT p.path, p.title, p.meta FROM pages AS p "
        "WHERE (p.project = ? OR p.project IS NULL) "
        f"AND ({kind} = 'true' OR ({kind} = 'integer' AND {pin} = 1) "
        f"OR ({kind} = 'text' AND lower(trim({pin})) IN ('true', 'yes'))) "
        f"AND {cond} AND {shown_sql('p', 'brief')} ORDER BY p.path",
        (project, *args),
    ).fetchall()
    out = []
    for path, title, meta in rows:
        m = json.loads(str(meta)) if meta else {}
        if is_pinned(m):  # the SQL narrows; the rule decides
            out.append({"path": path, "title": title or path, "meta": m})
    return out


def hashes(conn: apsw.Connection) -> dict[str, str]:
    """Every indexed page: path → sha256 hex of its bytes."""
    return {p: h for p, h in conn.execute("SELECT path, hash FROM pages")}


def stats(conn: apsw.Connection) -> dict[str, tuple[int, float | None]]:
    """Every indexed page: path → ``(size in bytes, mtime in seconds)`` as last indexed."""
    return {p: (s, m) for p, s, m in conn.execute("SELECT path, size, mtime FROM pages")}


def count(conn: apsw.Connection) -> int:
    """How many pages are indexed."""
    return scalar(conn, "SELECT count(*) FROM pages")


def section_rows(conn: apsw.Connection) -> set[tuple[str, str, str]]:
    """Every section as ``(path, anchor, sha256 of its text)``."""
    return {(p, a, h) for p, a, h in conn.execute("SELECT path, anchor, hash FROM sections")}


def diagnostics(conn: apsw.Connection) -> list[dict[str, Any]]:
    """Every parse diagnostic of every page, by path then as stored: dicts with path,
    kind, line (1-based or None) and message."""
    out: list[dict[str, Any]] = []
    for p, d in conn.execute(
        "SELECT path, diagnostics FROM pages WHERE diagnostics != '[]' ORDER BY path"
    ):
        for item in json.loads(d):
            out.append({"path": p, **item})
    return out
