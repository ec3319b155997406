"""The derived search index: an apsw SQLite database with FTS5 beside the wiki.

Everything in ``index.db`` can be deleted and rebuilt from ``wiki/`` (and the spool)
with :meth:`Index.rebuild`. The markdown files are the truth; the index only mirrors
them (invariant 1).

This module owns :class:`Index`, the one door the rest of the package uses: it holds
the database's connections (:class:`~wiki_memory.index.db.Database`) and hands each
call to the module that does the work, on this thread's connection:

- :mod:`~wiki_memory.index.schema`: tables, :data:`SCHEMA_VERSION`, the ``meta`` table;
- :mod:`~wiki_memory.index.db`: per-thread connections, the write lock, reopening;
- :mod:`~wiki_memory.index.files`: which files are pages, walking and reading them;
- :mod:`~wiki_memory.index.pages`: a page's rows, written and read;
- :mod:`~wiki_memory.index.graph`: link resolution, links, backlinks, names;
- :mod:`~wiki_memory.index.search`: ranked search of sections and of the spool;
- :mod:`~wiki_memory.index.build`: syncing paths, reconciling, rebuilding.

The names other modules import from here (:class:`SectionHit`, :class:`SpoolHit`,
:class:`SearchError`, :func:`is_indexable`, :func:`read_wiki_root`,
:data:`SCHEMA_VERSION`, :data:`BM25_WEIGHTS`) are re-exported from those modules.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Unpack

import apsw

from wiki_memory.errors import DiskFull
from wiki_memory.identity import Identity
from wiki_memory.index import browse, build, graph, pages, search, stem, supersede
from wiki_memory.index import vectors as vecs
from wiki_memory.index.db import Database
from wiki_memory.index.files import is_indexable
from wiki_memory.index.schema import BM25_WEIGHTS, SCHEMA_VERSION, read_wiki_root, set_meta
from wiki_memory.index.search import (
    SearchError,
    SectionFilters,
    SectionHit,
    SpoolFilters,
    SpoolHit,
)
from wiki_memory.index.spoolqueue import SpoolQueue
from wiki_memory.index.stem import DEFAULT_LANGUAGES

__all__ = [
    "Index",
    "SectionHit",
    "SpoolHit",
    "SearchError",
    "is_indexable",
    "read_wiki_root",
    "SCHEMA_VERSION",
    "BM25_WEIGHTS",
]


class Index:
    """The search index of one wiki, stored at ``db_path`` (usually ``<data_dir>/index.db``).

    Thread-safe: each thread gets its own connection. Opening creates the file and
    schema when missing; a file with another schema version is emptied and
    :attr:`needs_rebuild` is set (the caller then runs :meth:`rebuild`).

    ``vectors``: store and search dense vectors of sections (the ``vectors`` setting);
    ignored when the extra is not installed (:attr:`vectors_on` says what holds).
    ``vectors_model``: which model embeds them (the ``vectors_model`` setting, one of
    :data:`wiki_memory.index.vectors.MODELS`; with ``vectors`` it becomes the process's
    model; ValueError for another name). An index built with another choice is marked for a
    rebuild.
    """

    def __init__(
        self,
        db_path: Path | str,
        stem_languages: Iterable[str] = DEFAULT_LANGUAGES,
        vectors: bool = False,
        vectors_model: str = vecs.MODELS[0],
    ) -> None:
        langs = stem.languages(stem_languages)
        if vectors:
            vecs.select(vectors_model)
        on = bool(vectors) and vecs.available()
        self._db = Database(db_path, langs, on)
        self.db_path = self._db.path
        self.stem_languages = langs
        """Snowball stemmers of the ``stem_languages`` setting (unknown names left out);
        the query side stems with these and with every page ``lang`` indexed."""
        self.vectors_on = on
        """Dense vectors are stored at index time and searched (:meth:`dense`)."""
        self._matrix = vecs.Matrix()
        self._spool_rows = SpoolQueue(self._write_spool)
        """Spool rows written after the reply (:meth:`queue_spool`); every spool read
        and change below flushes it first."""
        if not self._db.needs_rebuild and self._stored_languages() not in (None, langs):
            self._db.needs_rebuild = True  # the setting changed: stems must be redone
        want = vecs.model_id() if on else ""
        if not self._db.needs_rebuild and self._meta("vectors") not in (None, want):
            self._db.needs_rebuild = True  # vectors turned on or off: store or drop them

    def _meta(self, key: str) -> str | None:
        row = self._conn().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _stored_languages(self) -> tuple[str, ...] | None:
        value = self._meta("stem_languages")
        return None if value is None else tuple(x for x in value.split(",") if x)

    def dense(self, text: str) -> tuple[Any, Any] | None:
        """``(rowids, cosine similarities)`` of every section that has a vector with the
        vector of ``text`` (numpy arrays of equal length, in rowid order; unfiltered: the
        caller applies the scope, :func:`wiki_memory.index.nearest.dense_sections`).
        None when vectors are off or ``text`` has no token the model knows."""
        if not self.vectors_on:
            return None
        q = vecs.model().embed([text])[0]
        if not q.any():
            return None
        return self._matrix.scores(self._conn(), q)

    def vector_bytes(self) -> int:
        """Bytes the in-memory vectors hold now (0 when off or not loaded yet)."""
        return self._matrix.nbytes()

    def query_languages(self) -> tuple[str, ...]:
        """The stemmers a query is stemmed with: the setting's, then every Snowball
        language named by an indexed page's frontmatter ``lang``, read from the partial
        index ``pages_lang`` (only the pages that name one), so a page's ``lang`` counts
        from the recall after it is indexed."""
        rows = (
            self._conn()
            .execute(
                "SELECT DISTINCT json_extract(meta, '$.lang') FROM pages "
                "WHERE json_extract(meta, '$.lang') IS NOT NULL"
            )
            .fetchall()
        )
        return stem.languages([*self.stem_languages, *(r[0] for r in rows)])

    @property
    def needs_rebuild(self) -> bool:
        """True when the index was created empty or emptied (new file, other schema
        version, damaged file) and no :meth:`rebuild` has run since."""
        return self._db.needs_rebuild

    @needs_rebuild.setter
    def needs_rebuild(self, value: bool) -> None:
        self._db.needs_rebuild = value

    # -- connections --

    def _conn(self) -> apsw.Connection:
        """This thread's connection (for the index's own modules, e.g. ``signals``).

        Raises :class:`SearchError` (503, ``Retry-After``) while the file is damaged and
        not rebuilt yet: a read of it could be a short answer, never an honest one."""
        if self._db.damaged is not None:
            raise SearchError(
                "the search index is being rebuilt from the files; retry",
                headers={"Retry-After": "5"},
            )
        return self._db.conn()

    # -- damage --

    @property
    def damaged(self) -> str | None:
        """Why the index file is taken to be damaged (a CorruptError met at run time),
        or None. Set it to None once the rebuild is done."""
        return self._db.damaged

    @damaged.setter
    def damaged(self, value: str | None) -> None:
        self._db.damaged = value

    def on_damage(self, fn: Callable[[str], None]) -> None:
        """Call ``fn(why)`` once, from the thread that met it, when a query or write
        meets damage in the file (:meth:`~wiki_memory.index.db.Database.corrupted`)."""
        self._db.on_damage = fn

    def note_damage(self, why: str) -> None:
        """Report damage found outside a query (the periodic quick check): as a
        CorruptError met by a query would be."""
        self._db.corrupted(apsw.CorruptError(why))

    def quick_check(self) -> list[str]:
        """SQLite's quick check of the file: ``[]`` when sound, else what it found."""
        return self._db.quick_check()

    def reset(self) -> None:
        """Replace the file by an empty one of this schema; the caller rebuilds it."""
        self._db.reset()

    def close(self) -> None:
        """Write the queued spool rows, then close every connection this object opened
        (in all threads)."""
        self._spool_rows.close()
        self._db.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- pages --

    def upsert_page(self, path: str, raw: bytes, mtime: float | None = None) -> bool:
        """Index the page at wiki-relative ``path`` with file bytes ``raw``.

        ``mtime`` is the file's modification time in seconds (``stat().st_mtime``),
        or None. Returns False, without re-indexing, when the stored sha256 of the
        bytes is the same (watcher echoes of the server's own writes are cheap);
        True when the page was (re)indexed. Raises ValueError for a path that is
        absolute or contains ``..``. The page's rows change in one transaction.
        """
        pages.check_rel(path)
        with self._db.writing() as conn:
            self._db.record(("upsert", path, raw, mtime))
            return pages.upsert(
                conn, path, raw, mtime, langs=self._db.langs, vectors=self._db.vectors
            )

    def set_wiki_root(self, wiki_dir: Path | str) -> None:
        """Record the wiki folder the index holds (so a tool run without ``--wiki`` can
        tell that the index belongs to another folder, e.g. a ``serve --wiki`` vault)."""
        with self._db.writing() as conn:
            set_meta(conn, "wiki_root", os.path.abspath(wiki_dir))

    def paths(self) -> dict[str, str]:
        """Every indexed page: path → sha256 hex of its bytes."""
        return pages.hashes(self._conn())

    def page_stats(self) -> dict[str, tuple[int, float | None]]:
        """Every indexed page: path → ``(size in bytes, mtime in seconds since the epoch)``
        as the file was when last indexed (mtime None when unknown)."""
        return pages.stats(self._conn())

    def count_pages(self) -> int:
        """How many pages are indexed."""
        return pages.count(self._conn())

    def rows(self) -> set[tuple[str, str, str]]:
        """Every section as ``(path, anchor, sha256 of its text)``: equal sets mean equal indexes."""
        return pages.section_rows(self._conn())

    def page_diagnostics(self) -> list[dict[str, Any]]:
        """Every parse diagnostic of every indexed page, by path: dicts with ``path``,
        ``kind``, ``line`` (1-based, or None) and ``message``."""
        return pages.diagnostics(self._conn())

    # -- files --

    def sync_paths(self, wiki_dir: Path | str, rel_paths: Iterable[str]) -> int:
        """Bring the index in line with the files at ``rel_paths`` under ``wiki_dir``.

        Each path (wiki-relative, or absolute inside ``wiki_dir``) is checked with
        ``lstat``: an indexable ``.md`` file is upserted (hash-compared, so unchanged
        files cost a read); another regular file is recorded as an attachment (for link
        resolution); a missing path is removed, as a page, a file and as a directory (a
        renamed directory reports only itself); a directory is reconciled: every page
        below it is upserted (skipped when size and mtime match the index) and index
        rows below it whose file is gone are removed. Symlinks are never followed and
        count as missing, as do paths resolving outside ``wiki_dir`` and files with more
        than one hard link (their other name may be outside the wiki). Ignored names
        (see :func:`is_indexable`) are skipped. Links that name a page or file that
        appeared or went away are resolved again in the same transaction. Returns how
        many pages were added, changed or removed.
        """
        return build.sync_paths(self._db, wiki_dir, rel_paths)

    def stamps(self, wiki_dir: Path | str) -> build.Stamps:
        """Every page and other file under ``wiki_dir`` with its lstat, as the walk of
        :meth:`sync_paths` of ``"."`` finds them; reads nothing of the index (so it can
        run beside the quick check at start)."""
        return build.stamps(wiki_dir)

    def catch_up(self, wiki_dir: Path | str, walked: build.Stamps) -> int:
        """:meth:`sync_paths` of ``"."`` over a walk :meth:`stamps` took beforehand: every
        page whose size or mtime differs from the index is indexed again, rows of files
        gone are removed. Returns pages added, changed or removed."""
        return build.catch_up(self._db, wiki_dir, walked)

    def rebuild(self, wiki_dir: Path | str, progress: bool = False) -> int:
        """Re-index every page under ``wiki_dir`` from the files; returns the page count.

        Builds ``<db>.new`` from scratch, then copies it over the live database in one
        transaction with SQLite's backup API, so concurrent readers (threads and
        other processes) see the complete old index until the switch and the
        complete new one after. Page writes made through this object during the
        rebuild are replayed onto the new index first; the spool rows are kept.
        ``progress=True`` shows a tqdm bar on stderr. Only one rebuild runs at a
        time (a file lock beside the database). Clears :attr:`needs_rebuild`. Raises
        :class:`~wiki_memory.errors.DiskFull` when the disk is too full for the new file
        (it is removed; the old index stays).
        """
        try:
            return build.rebuild(self._db, wiki_dir, progress)
        except apsw.FullError as exc:
            raise DiskFull("the disk is full: the index was not rebuilt; free disk space") from exc

    def checkpoint(self) -> None:
        """Copy the write-ahead log into the database and truncate it to zero bytes (after
        a purge, so no old frame keeps purged text)."""
        self._conn().wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_TRUNCATE)

    # -- search --

    def search(self, match: str, **filters: Unpack[SectionFilters]) -> list[SectionHit]:
        """Run an FTS5 ``MATCH`` expression (from :func:`~wiki_memory.index.query.build_match`).

        Returns at most ``limit`` sections (default 50), best first, ranked by weighted
        bm25 (:data:`BM25_WEIGHTS`). ``filters``:
        :class:`~wiki_memory.index.search.SectionFilters`: ``project`` and ``kinds`` (page
        kinds, e.g. ``["note", "session"]``; an empty list allows none) and
        ``exclude_dirs`` (wiki-relative directories whose pages are left out, e.g. other
        people's ``people/<user>``) filter inside the SQL, before ranking and the limit;
        an unknown filter raises TypeError. An empty ``match`` gives ``[]``. Raises
        :class:`SearchError` when SQLite fails (bad expression, I/O): an error is
        never reported as zero hits.
        """
        return search.search(self._conn(), match, **filters)

    def query(
        self,
        text: str,
        *,
        mode: Literal["auto", "and", "or"] = "auto",
        **filters: Unpack[SectionFilters],
    ) -> list[SectionHit]:
        """Search free text safely (see :mod:`wiki_memory.index.query`).

        ``mode="and"``: every word must match; ``"or"``: any word; ``"auto"``
        (default): AND first, and when that finds fewer than ``max(1, limit // 5)``
        sections, the OR results are appended (AND hits stay first, no duplicates).
        Text with nothing searchable (``""``, ``*``, punctuation) gives ``[]``.
        Filters as in :meth:`search`. Raises :class:`SearchError` when the engine fails.
        """
        return search.query(self._conn(), text, mode=mode, **filters)

    # -- spool --

    def add_spool(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Add (or replace, by ``(session_key, obs_id)``) uncompiled observations.

        Each row needs ``session_key``, ``obs_id`` and ``text``; ``project``,
        ``harness``, ``session_id``, ``user`` and ``ts`` (ISO-8601) are optional.
        Returns how many rows were written. Raises KeyError for a missing key.
        """
        self._spool_rows.flush()
        return self._write_spool(rows)

    def _write_spool(self, rows: Iterable[Mapping[str, Any]]) -> int:
        with self._db.writing() as conn:
            return search.add_spool(conn, rows)

    def queue_spool(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Queue rows for :meth:`add_spool` and return at once: a background thread
        writes them, many per transaction (:mod:`wiki_memory.index.spoolqueue`). Every
        spool read and change of this object writes the queued rows first, so they are
        found by any search made after this returns."""
        self._spool_rows.put(rows)

    def delete_spool_session(self, session_key: str) -> int:
        """Remove every spooled observation of ``session_key`` (after it was compiled)."""
        self._spool_rows.flush()
        with self._db.writing() as conn:
            return search.delete_spool_session(conn, session_key)

    def replace_spool(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Replace the whole spool table with ``rows`` (same keys as :meth:`add_spool`)."""
        self._spool_rows.flush()
        with self._db.writing() as conn:
            return search.replace_spool(conn, rows)

    def search_spool(self, match: str, **filters: Unpack[SpoolFilters]) -> list[SpoolHit]:
        """Run an FTS5 ``MATCH`` expression over the spool; ``filters``
        (:class:`~wiki_memory.index.search.SpoolFilters`: project, user, limit) apply
        before ranking; an unknown filter raises TypeError.

        Returns at most ``limit`` observations (default 50), best first. Raises
        :class:`SearchError` when SQLite fails.
        """
        self._spool_rows.flush()
        return search.search_spool(self._conn(), match, **filters)

    def query_spool(
        self, text: str, *, mode: Literal["and", "or"] = "and", **filters: Unpack[SpoolFilters]
    ) -> list[SpoolHit]:
        """:meth:`search_spool` for free text (built safely with ``build_match``)."""
        self._spool_rows.flush()
        return search.query_spool(self._conn(), text, mode=mode, **filters)

    # -- reading pages --

    def page_meta(self, path: str, who: Identity | None = None) -> dict[str, Any] | None:
        """The ``pages`` row of ``path`` as a dict (JSON columns decoded), or None (also
        when ``who`` may not see it; None is the server itself).

        Keys: path, id, title, kind, project, tags, aliases, updated, created, hash,
        size, mtime, meta, diagnostics, owner.
        """
        return pages.page_meta(self._conn(), path, who)

    def list_pages(
        self,
        who: Identity | None = None,
        parts: bool = True,
        **filters: Unpack[pages.PageFilters],
    ) -> list[dict[str, Any]]:
        """Pages, most recently updated first (then by path), as :meth:`page_meta` dicts.

        ``filters``: :class:`~wiki_memory.index.pages.PageFilters` (project, kind, since,
        limit, offset). ``since`` is an ISO-8601 string compared with the page's ``updated`` (else
        ``created``, else mtime), which is returned under ``updated``. Pages ``who`` may
        not see are left out in the SQL, so they take no place in ``limit``/``offset``;
        so are a long session's parts when ``parts`` is False (the listings people and
        agents see, :meth:`wiki_memory.core.reader.Reader.list_pages`).
        """
        return pages.list_pages(self._conn(), who=who, parts=parts, **filters)

    def folder_listing(
        self, folder: str, limit: int = 500, offset: int = 0, who: Identity | None = None
    ) -> dict[str, Any]:
        """A folder's subfolders and own pages as ``who`` sees them (``limit=0``: only
        its subfolders)
        (:func:`wiki_memory.index.browse.folder_listing`)."""
        return browse.folder_listing(self._conn(), folder, limit, offset, who)

    def tagged_pages(
        self, tag: str, limit: int = 100, offset: int = 0, who: Identity | None = None
    ) -> tuple[list[dict[str, Any]], int]:
        """Pages tagged ``tag`` that ``who`` may see, and their number
        (:func:`wiki_memory.index.browse.tagged_pages`)."""
        return browse.tagged_pages(self._conn(), tag, limit, offset, who)

    def most_linked(
        self, project: str, limit: int = 10, who: Identity | None = None
    ) -> list[dict[str, Any]]:
        """A project's pages with the most visible linking pages
        (:func:`wiki_memory.index.browse.most_linked`)."""
        return browse.most_linked(self._conn(), project, limit, who)

    def sections_of(self, path: str) -> list[dict[str, Any]]:
        """The sections of ``path`` in page order: dicts with anchor, heading, ord, line, hash, text."""
        return pages.sections_of(self._conn(), path)

    def pinned_pages(self, project: str, who: Identity | None = None) -> list[dict[str, Any]]:
        """Pages that frontmatter ``pinned`` pins (:func:`wiki_memory.identity.is_pinned`)
        whose project is ``project`` or none, that ``who`` may see; by path. Dicts with
        ``path``, ``title`` (the path when untitled) and ``meta`` (the frontmatter)."""
        return pages.pinned_pages(self._conn(), project, who)

    # -- links --

    def chains(self, who: Identity | None = None) -> supersede.Chains:
        """Which pages replaced which, as ``who`` may see them
        (:func:`wiki_memory.index.supersede.chains`)."""
        return supersede.chains(self._conn(), who)

    def resolve_names(
        self, names: Iterable[str], src: str, who: Identity | None = None
    ) -> dict[str, str | None]:
        """Page names resolved like wikilinks written in ``src``, among what ``who`` may
        see (:func:`wiki_memory.index.supersede.resolve_names`)."""
        return supersede.resolve_names(self._conn(), names, src, who)

    def same_subject(self, project: str, subject: str, who: Identity | None = None) -> list[str]:
        """Pages of ``project`` with this frontmatter ``subject``
        (:func:`wiki_memory.index.supersede.same_subject`)."""
        return supersede.same_subject(self._conn(), project, subject, who)

    def subject_groups(
        self,
        project: str | None,
        who: Identity | None = None,
        only: Iterable[str] | None = None,
        cache: dict[str, Any] | None = None,
    ) -> list[list[dict[str, Any]]]:
        """Current notes of ``project`` named alike, grouped
        (:func:`wiki_memory.index.subjects.subject_groups`)."""
        from wiki_memory.index.subjects import subject_groups

        return subject_groups(self._conn(), project, who, only, cache)

    def links_from(self, path: str) -> list[dict[str, Any]]:
        """Outgoing links of ``path`` as written: dicts with target, fragment, alias, embed, line."""
        return graph.links_from(self._conn(), path)

    def outlinks(self, path: str, who: Identity | None = None) -> list[dict[str, Any]]:
        """Every link of ``path`` with where it leads, in file order, as ``who`` sees it.

        Dicts: ``target`` (as written, ``""`` for a same-page reference), ``fragment``,
        ``alias``, ``embed``, ``line``, ``in_frontmatter``, ``status`` (``resolved``,
        ``unresolved``, ``ambiguous``, ``attachment``), ``path`` (the page or file it
        leads to; None when unresolved, ambiguous or a missing attachment) and
        ``candidates`` (paths, for an ambiguous link; else ``[]``). For a caller ``who``
        every link is resolved again among the pages and files ``who`` may see
        (:func:`~wiki_memory.index.graph.resolver_for`), so a hidden page is never named
        and never changes where a link leads (a link to it alone reads as unresolved).
        """
        return graph.outlinks(self._conn(), path, who)

    def backlinks(self, path: str, who: Identity | None = None) -> list[dict[str, Any]]:
        """Links from other pages that resolve to the page ``path`` (same-page references
        left out), ordered by source path and line; only from pages ``who`` may see.
        Dicts: ``src_path``, ``title`` (of the linking page), ``target``, ``fragment``,
        ``alias``, ``embed``, ``line``."""
        return graph.backlinks(self._conn(), path, who)

    def link_stats(self) -> dict[str, int]:
        """Counts over the whole index: ``pages``, ``links`` (links and embeds with a
        target, same-page references left out), ``embeds``, ``resolved`` (to a page),
        ``unresolved``, ``ambiguous``, ``attachments`` (links to files that are not
        pages), ``missing_attachments``, ``same_page`` references, ``aliases`` and
        ``tags`` (per page, summed) and ``files`` (attachment files found)."""
        return graph.link_stats(self._conn())

    def problem_links(self) -> list[dict[str, Any]]:
        """Links that lead nowhere: unresolved, ambiguous, and attachments whose file is
        missing. Dicts: ``src_path``, ``line``, ``target``, ``fragment``, ``embed``,
        ``status`` (``unresolved``, ``ambiguous``, ``missing_attachment``), ``candidates``."""
        return graph.problem_links(self._conn())

    def links_to(self, title_or_stem: str, who: Identity | None = None) -> list[dict[str, Any]]:
        """Backlinks: links that lead to the page named ``title_or_stem``.

        ``title_or_stem`` may be a page path (with or without ``.md``), title, file stem or
        alias, resolved like a link target (exact names only, never a fuzzy match); links
        to any page it names count. When it names no page, the links written with that
        target (unresolved) are returned. Pages ``who`` may not see neither count as
        named nor lend their links. Dicts with src_path, target, fragment, alias, embed,
        line.
        """
        return graph.links_to(self._conn(), title_or_stem, who)

    def names_for(
        self, keys: Iterable[str], who: Identity | None = None
    ) -> list[tuple[str, str, str]]:
        """``(key, path, source)`` rows of the ``names`` table for ``keys`` (casefolded
        link targets), pages ``who`` may not see left out; ``source`` is ``title``,
        ``stem``, ``alias`` or ``path``."""
        return graph.names_for(self._conn(), keys, who)

    def forgotten_paths(self, paths: Iterable[str]) -> set[str]:
        """The indexed pages among ``paths`` that are forgotten."""
        return graph.forgotten_paths(self._conn(), paths)
