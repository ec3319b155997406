"""The schema of ``index.db`` and the small SQL helpers every part of the index shares.

Owns: :data:`SCHEMA_VERSION` (``PRAGMA user_version``; on any other version the tables
are dropped, recreated empty and the index is marked for a rebuild), the ``CREATE``
statements (split into tables and secondary indexes, so a rebuild can create the
indexes after its bulk insert), the ``meta`` table (:func:`set_meta`,
:func:`read_wiki_root`), and whole-database operations: dropping every table, copying
one database into another with the backup API, removing a database's files.

Tables (docs/index.md has the full description)
    ``pages``     one row per page; ``kind`` from frontmatter ``type`` else
                  ``"page"``, ``project`` from frontmatter ``project`` else the
                  path ``projects/<project>/...``, ``id`` from frontmatter ``id``
                  else the path, NFC and case folded (a case-only rename keeps
                  it); ``tags``/``aliases``/``meta``/``diagnostics`` JSON;
                  ``owner`` the folded user a personal page belongs to alone
                  (:func:`wiki_memory.identity.personal_owner`), NULL when shared.
    ``sections``  one row per section (heading or block id) with the original text.
    ``fts``       FTS5 (contentless, ``contentless_delete=1``) with rowid =
                  ``sections.rowid``, columns title, aliases, tags, heading, body
                  holding :func:`wiki_memory.index.text.index_text` of each value,
                  ``stems`` (other word forms of heading and body) and ``dates``
                  (the section's day as words).
    ``links``     outgoing wikilinks as written (``target_key`` = casefolded target)
                  with their status and resolved path; an ambiguous link's
                  candidates are worked out from ``names`` when read, not stored.
    ``names``     casefolded title, file stem, aliases and path (no ``.md``) of each
                  page, for backlinks.
    ``files``/``file_keys``  files that are not pages (attachments) and their name keys.
    ``meta``      ``wiki_root``: the wiki folder the index was built from.
    ``spool``/``spool_fts``  uncompiled observations, so a running session is
                  searchable before its page is written.
    ``sections_apart``  the rowids of sections recall's count of matches cannot take
                  from FTS5 alone (:data:`APART_SQL`): every other section is counted
                  for a caller who sees every shared page without joining its rows.
    ``vectors``   with the ``vectors`` extra: one compact dense vector per section
                  (rowid = ``sections.rowid``; :mod:`wiki_memory.index.vectors`),
                  empty without it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

import apsw

from wiki_memory.index import sectionwords

#: 12: a forgotten page keeps no words, links or title; 13: an id-less page's id is its
#: folded path (a case-only rename keeps it); 14: pages with a frontmatter ``subject``
#: indexed (the contradiction check of each recalled note reads them); 15: the pages whose
#: frontmatter names a supersession indexed apart (every recall reads them, see UPGRADES);
#: 16: each section's near-duplicate words and numbers stored (``words``, ``nums``:
#: :mod:`wiki_memory.index.sectionwords`), filled in place from 15
SCHEMA_VERSION = 16
"""Bump when the schema or what is stored in it changes: old indexes are then rebuilt."""

BM25_WEIGHTS = {
    "title": 10.0,
    "aliases": 8.0,
    "tags": 4.0,
    "heading": 3.0,
    "body": 1.0,
    "stems": 0.5,
    "dates": 1.0,
}
"""bm25 column weights, in FTS column order (``stems``: other word forms of heading and
body, :mod:`wiki_memory.index.stem`; ``dates``: the section's day as words,
:mod:`wiki_memory.index.dates`)."""

UPDATED = "COALESCE(p.updated, p.created, strftime('%Y-%m-%dT%H:%M:%SZ', p.mtime, 'unixepoch'))"
"""SQL for a page's ``updated`` (alias ``p`` for ``pages``): frontmatter ``updated``, else
``created``, else the file's mtime, as ISO-8601 UTC."""

HEAD_ONLY_SQL = (
    "(s.anchor LIKE '^%' AND s.text GLOB '[*][*][0-9][0-9]:[0-9][0-9]:[0-9][0-9][*][*] · *' "
    "AND trim(substr(s.text, instr(s.text || char(10), char(10)) + 1), "
    "' ' || char(9, 10, 11, 12, 13)) = '')"
)
"""SQL that holds for a section (alias ``s``) that is a timeline entry with nothing but
its head line (``**09:01:39** · session end``): the compiler's words, on every page of
its kind. Recall neither ranks nor counts these."""

APART_SQL = f"""
INSERT INTO sections_apart(rowid)
SELECT s.rowid FROM (
    SELECT rowid, path, anchor, text, count(*) OVER (PARTITION BY path, anchor) AS n
    FROM sections WHERE rowid BETWEEN ? AND ?
) AS s JOIN pages AS p ON p.path = s.path
WHERE s.n > 1 OR p.owner IS NOT NULL OR json_type(p.meta, '$.state') IS NOT NULL
   OR {HEAD_ONLY_SQL}
"""
"""Fills ``sections_apart`` for the sections with rowids from the first to the second
argument (whole pages: a page's sections are written together): a section is apart
when its page repeats its anchor (recall's items are one per anchor), its page belongs
to one user (``owner``, :func:`wiki_memory.identity.visible_sql`), its page names any
``state`` (:func:`wiki_memory.states.shown_sql` decides which hide it: any state at all
is apart, so that rule stays in its one place), or it is a bare timeline head
(:data:`HEAD_ONLY_SQL`). Every other section is one recall item of a shared page that
every caller who sees every shared page may read."""

#: the row inserts of a page's index rows, column for column (index/pages.py writes a
#: page's rows, index/pagediff.py the changed part of a page again)
INSERT_PAGE = (
    "INSERT INTO pages(path, id, title, kind, project, tags, aliases, updated, created, "
    "hash, size, mtime, meta, diagnostics, owner) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)
INSERT_SECTION = (
    "INSERT INTO sections(rowid, path, anchor, heading, ord, line, hash, text, project, kind, "
    "day, t0, t1, words, nums) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)
INSERT_FTS = (
    "INSERT INTO fts(rowid, title, aliases, tags, heading, body, stems, dates) "
    "VALUES (?,?,?,?,?,?,?,?)"
)
INSERT_LINK = (
    "INSERT INTO links(src_path, target, fragment, alias, embed, line, target_key, "
    "in_frontmatter, status, resolved_path) VALUES (?,?,?,?,?,?,?,?,?,?)"
)
INSERT_NAME = "INSERT INTO names(key, path, source) VALUES (?,?,?)"

SCHEMA = """
CREATE TABLE pages(
    path TEXT PRIMARY KEY,
    id TEXT,
    title TEXT,
    kind TEXT,
    project TEXT,
    tags TEXT,          -- JSON list
    aliases TEXT,       -- JSON list
    updated TEXT,       -- frontmatter 'updated' (ISO-8601) or NULL
    created TEXT,       -- frontmatter 'created' or NULL
    hash TEXT,          -- sha256 hex of the file's bytes
    size INTEGER,       -- bytes
    mtime REAL,         -- seconds since the epoch, as stat() gave it (NULL if unknown)
    meta TEXT,          -- JSON object: the frontmatter
    diagnostics TEXT,   -- JSON list of {kind, line, message}
    owner TEXT          -- folded user the page belongs to alone, NULL when shared
                        -- (wiki_memory.identity.personal_owner)
);
CREATE INDEX pages_project_kind ON pages(project, kind);
CREATE INDEX pages_kind ON pages(kind);
CREATE INDEX pages_owner ON pages(owner);
CREATE INDEX pages_lang ON pages(json_extract(meta, '$.lang'))
    WHERE json_extract(meta, '$.lang') IS NOT NULL;  -- Index.query_languages reads these
CREATE INDEX pages_subject ON pages(project, json_extract(meta, '$.subject'))
    WHERE json_type(meta, '$.subject') = 'text';  -- index.subjects reads these
CREATE INDEX pages_supersede ON pages(path)
    WHERE instr(meta, 'supersede') > 0;  -- index.supersede reads these (INDEXED BY)
CREATE TABLE sections(
    rowid INTEGER PRIMARY KEY,
    path TEXT NOT NULL,
    anchor TEXT,
    heading TEXT,
    ord INTEGER,        -- 0-based position in the page
    line INTEGER,       -- 1-based line in the file
    hash TEXT,          -- sha256 hex of the section text (UTF-8)
    text TEXT,          -- original text, for snippets
    project TEXT,       -- copy of pages.project (filter without a join)
    kind TEXT,          -- copy of pages.kind
    day TEXT,           -- the day the section happened (YYYY-MM-DD, UTC) or NULL
                        -- (wiki_memory.index.dates.section_days)
    t0 REAL,            -- its time range, first and last instant (epoch seconds) or
    t1 REAL,            -- NULL (wiki_memory.index.dates.section_spans)
    words TEXT,         -- recall's near-duplicate words of the section, distinct, in
                        -- one fixed order, space-joined (index.sectionwords.columns)
    nums TEXT           -- those of them that keep alike texts apart (digits, names
                        -- of environments), sorted, space-joined
);
CREATE INDEX sections_path ON sections(path);
CREATE VIRTUAL TABLE fts USING fts5(
    title, aliases, tags, heading, body, stems, dates,
    tokenize = "unicode61 remove_diacritics 2",
    content = '', contentless_delete = 1
);
CREATE TABLE links(
    src_path TEXT NOT NULL,
    target TEXT,        -- as written (page part; '' for a same-page reference)
    fragment TEXT,
    alias TEXT,
    embed INTEGER,
    line INTEGER,
    target_key TEXT,    -- links.target_key(target): NFC, case-folded, no .md, ./ ../ applied
    in_frontmatter INTEGER,
    status TEXT,        -- 'resolved' | 'unresolved' | 'ambiguous' | 'attachment'
    resolved_path TEXT  -- the page (or attachment file) it leads to, else NULL
);
CREATE INDEX links_src ON links(src_path);
CREATE INDEX links_target ON links(target_key);
CREATE INDEX links_resolved ON links(resolved_path);
CREATE TABLE names(
    key TEXT NOT NULL,  -- links.name_key of the path, a path suffix, stem, title or alias
    path TEXT NOT NULL,
    source TEXT         -- 'path' | 'suffix' | 'stem' | 'title' | 'alias'
);
CREATE INDEX names_key ON names(key);
CREATE INDEX names_path ON names(path);
CREATE TABLE meta(
    key TEXT PRIMARY KEY,   -- 'wiki_root': the wiki folder the index was built from
    value TEXT
);
CREATE TABLE files(
    path TEXT PRIMARY KEY,  -- a file that is not a page (an attachment: image, pdf, ...)
    size INTEGER,
    mtime REAL
);
CREATE TABLE file_keys(
    key TEXT NOT NULL,      -- links.name_key of the path and of each trailing part of it
    path TEXT NOT NULL
);
CREATE INDEX file_keys_key ON file_keys(key);
CREATE INDEX file_keys_path ON file_keys(path);
CREATE TABLE spool(
    rowid INTEGER PRIMARY KEY,
    session_key TEXT NOT NULL,
    obs_id TEXT NOT NULL,
    project TEXT,
    harness TEXT,
    session_id TEXT,
    user TEXT,
    ts TEXT,
    text TEXT,
    UNIQUE(session_key, obs_id)
);
CREATE INDEX spool_project ON spool(project);
CREATE VIRTUAL TABLE spool_fts USING fts5(
    body,
    tokenize = "unicode61 remove_diacritics 2",
    content = '', contentless_delete = 1
);
CREATE TABLE sections_apart(
    rowid INTEGER PRIMARY KEY   -- sections.rowid (APART_SQL)
);
CREATE TABLE vectors(
    rowid INTEGER PRIMARY KEY,  -- sections.rowid
    v BLOB NOT NULL             -- float32 scale + int8 codes (wiki_memory.index.vectors)
);
"""


def statements(sql: str) -> list[str]:
    """``sql`` split into whole statements (SQLite's own ``sqlite3_complete`` decides)."""
    out: list[str] = []
    acc = ""
    for line in sql.splitlines(keepends=True):
        acc += line
        if apsw.complete(acc):
            out.append(acc.strip())
            acc = ""
    return out


# A rebuild creates the secondary indexes after the bulk insert (one sort each instead of
# a B-tree update per row).
_STATEMENTS = statements(SCHEMA)
SCHEMA_TABLES = "\n".join(st for st in _STATEMENTS if not st.startswith("CREATE INDEX"))
SCHEMA_INDEXES = "\n".join(st for st in _STATEMENTS if st.startswith("CREATE INDEX"))


#: one in-place upgrade step: SQL, or a function run on the connection (inside the
#: opener's write transaction)
Step = str | Callable[[apsw.Connection], None]

#: version -> the step that brings an index of that version to the next one without a
#: rebuild (what is stored stays; a secondary index or a derived column is added). A
#: version not here, or a chain that does not reach :data:`SCHEMA_VERSION`, rebuilds.
UPGRADES: dict[int, Step] = {
    14: "CREATE INDEX IF NOT EXISTS pages_supersede ON pages(path)"
    " WHERE instr(meta, 'supersede') > 0",
    15: sectionwords.fill,
}


def run_step(conn: apsw.Connection, step: Step) -> None:
    """Run one step of :data:`UPGRADES` on ``conn``."""
    if isinstance(step, str):
        conn.execute(step)
    else:
        step(conn)


def upgrade_path(version: int) -> list[Step] | None:
    """The steps of :data:`UPGRADES` from ``version`` to :data:`SCHEMA_VERSION`, in
    order (:func:`run_step` runs one); ``[]`` when it is current; None when no chain
    reaches it (then rebuild)."""
    out: list[Step] = []
    while version != SCHEMA_VERSION:
        step = UPGRADES.get(version)
        if step is None:
            return None
        out.append(step)
        version += 1
    return out


def drop_all(conn: apsw.Connection) -> None:
    """Drop every table of ``conn`` (virtual tables first, so their shadow tables go with them)."""
    objects: list[Any] = conn.execute(
        "SELECT name, sql FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    ).fetchall()
    virtual = [n for n, sql in objects if (sql or "").upper().startswith("CREATE VIRTUAL")]
    for name in virtual:
        conn.execute(f'DROP TABLE IF EXISTS "{name}"')
    for name, _ in objects:
        if name not in virtual:
            conn.execute(f'DROP TABLE IF EXISTS "{name}"')


# --- the meta table --------------------------------------------------------------------


def set_meta(conn: apsw.Connection, key: str, value: str) -> None:
    """Set ``meta[key] = value`` (inside the caller's transaction)."""
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def read_wiki_root(db_path: Path | str) -> Path | None:
    """The wiki folder the index at ``db_path`` was built or last reconciled from (its
    ``meta`` table, see :meth:`~wiki_memory.index.store.Index.set_wiki_root`); None when
    unknown, absent or unreadable. Opens the file read-only and never creates or migrates it."""
    if not os.path.exists(db_path):
        return None
    try:
        conn = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'wiki_root'").fetchone()
        finally:
            conn.close()
    except apsw.Error:
        return None
    return Path(str(row[0])) if row else None


# --- small helpers ---------------------------------------------------------------------


def scalar(conn: apsw.Connection, sql: str) -> int:
    """The integer in the first column of the first row of ``sql``."""
    row: Any = conn.execute(sql).fetchone()
    return int(row[0])


def given_sql(*conds: tuple[str, Any]) -> tuple[list[str], list[Any]]:
    """The optional filters of a query: ``conds`` are ``(sql, value)`` pairs, each ``sql``
    a condition with one ``?`` (``"p.kind = ?"``); those whose value is not None give
    ``(conditions, arguments)``, in order, to join with ``AND`` and bind. A value of None
    means "not asked", never ``IS NULL``."""
    where = [sql for sql, value in conds if value is not None]
    args = [value for _, value in conds if value is not None]
    return where, args


def chunks(items: Sequence[Any], n: int = 500) -> Iterator[Sequence[Any]]:
    """``items`` in slices of at most ``n`` (SQLite bounds the ``?`` of one statement)."""
    for i in range(0, len(items), n):
        yield items[i : i + n]


# --- whole databases -------------------------------------------------------------------


def copy_database(src: apsw.Connection, dst: apsw.Connection) -> None:
    """Replace ``dst``'s content with ``src``'s in one write transaction (backup API).

    Readers of ``dst`` (WAL) keep their snapshot until the copy commits. A busy
    destination (another process writing) is retried for up to a minute.
    """
    deadline = time.monotonic() + 60
    while True:
        try:
            with dst.backup("main", src, "main") as backup:
                while not backup.done:
                    backup.step(-1)
            break
        except (apsw.BusyError, apsw.LockedError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    with suppress(apsw.Error):
        dst.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)


def remove_db(path: Path | str) -> None:
    """Delete the database file ``path`` and its ``-wal``, ``-shm`` and ``-journal`` files."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        with suppress(FileNotFoundError):
            os.remove(f"{path}{suffix}")
