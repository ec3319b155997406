"""The read side of the core: pages, listings, the link graph, expand and history, each
through the one scope rule (:mod:`wiki_memory.core.scope`) and the index's filtered
queries. :class:`Reader` is built by :class:`~wiki_memory.core.memory.Memory`, which
hands its methods to every face."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Unpack

from wiki_memory.capture.observation import observation_text
from wiki_memory.capture.spool import Spool
from wiki_memory.config import Settings
from wiki_memory.core.historyowners import UNREADABLE, CommitOwners
from wiki_memory.core.scope import ScopeRule, frontmatter_of, not_found
from wiki_memory.core.sessions import conflict_copy_path
from wiki_memory.core.strength import Strength
from wiki_memory.core.userecord import UseRecord
from wiki_memory.errors import BadRequest, NotFound
from wiki_memory.identity import Identity, may_read
from wiki_memory.index.pages import PageFilters
from wiki_memory.index.store import Index
from wiki_memory.index.supersede import Chains
from wiki_memory.plainfile import page_hash
from wiki_memory.recall.filters import parse_time
from wiki_memory.recall.pack import pack
from wiki_memory.states import refuse_forgotten, shown
from wiki_memory.wiki.git import CommitInfo, GitStore
from wiki_memory.wiki.paths import PathRefused
from wiki_memory.wiki.sessionparts import entry_pages

__all__ = ["Reader"]

_SES_RE = re.compile(r"ses_([0-9a-f]{16})")
_SHORT_RE = re.compile(r"[0-9a-f]{8}")


class Reader:
    """Read operations over one wiki for a caller (a user name, an
    :class:`~wiki_memory.identity.Identity`, or None for an anonymous caller who sees
    shared pages only). ``handle(anchor)`` registers short recall ids that
    :meth:`expand` resolves."""

    def __init__(
        self, settings: Settings, index: Index, scope: ScopeRule, spool: Spool, git: GitStore
    ) -> None:
        self.wiki_dir = settings.wiki_dir
        self.part_events = settings.session_part_events
        self.index = index
        self.scope = scope
        self.spool = spool
        self.git = git
        #: whose each path of a listed commit was (history views; commits never change)
        self.commit_owners = CommitOwners(git)
        #: the most links, backlinks, attachments and link diagnostics one page reply
        #: names (setting ``max_links_per_reply``); more are flagged, never sent
        self.max_links = settings.max_links_per_reply
        #: short recall handle -> anchor (see :meth:`handle`)
        self._handles: dict[str, str] = {}
        #: which pages each user was served, per day (wiki_memory.core.userecord)
        self.use = UseRecord(settings.data_dir)
        #: pages' strength from the use record, read by recall (wiki_memory.core.strength)
        self.strength = Strength(self.use)

    def handle(self, anchor: str) -> str:
        """A short, stable id for an anchor (``h`` + 10 hex of its SHA-1), remembered so
        that :meth:`expand` can resolve it; expand also takes anchors and paths."""
        hid = "h" + hashlib.sha1(anchor.encode("utf-8")).hexdigest()[:10]
        self._handles[hid] = anchor
        if len(self._handles) > 100_000:
            self._handles.pop(next(iter(self._handles)))
        return hid

    def chains(self, user: Identity | None) -> Chains:
        """Which pages replaced which, as ``user`` sees them
        (:mod:`wiki_memory.index.supersede`)."""
        return self.index.chains(self.scope.identity(user))

    def visible(self, path: str, user: Identity | None) -> bool:
        """True when ``user`` may see the indexed page at ``path`` (by the scope rule, on
        its path and indexed frontmatter); False for a page the index does not hold.
        ``user`` None is an anonymous caller (shared pages only)."""
        return self.index.page_meta(path, self.scope.identity(user)) is not None

    def use_rows(self, user: Identity | None, days: int = 30) -> list[dict[str, Any]]:
        """The caller's own rows of the use record for the last ``days`` days
        (:meth:`wiki_memory.core.userecord.UseRecord.rows`), of the pages it may still
        see; an anonymous caller has none."""
        who = self.scope.identity(user)
        if not who.user:
            return []
        return [r for r in self.use.rows(who.user, days) if self.visible(r["path"], who)]

    def expand(
        self, ids: list[str], budget_tokens: int, user: Identity | None = None
    ) -> dict[str, Any]:
        """Whole sections or pages for handles from recall, packed under ``budget_tokens``.

        Returns ``{items: [{id, path, anchor, text, tokens}], used_tokens, budget_tokens,
        omitted: [ids that did not fit], missing: [ids not found]}``. Pages ``user`` may
        not see, and forgotten pages, are reported missing.
        """
        if budget_tokens < 0:
            raise BadRequest("budget_tokens must be >= 0", field="budget_tokens")
        cands: list[dict[str, Any]] = []
        missing: list[str] = []
        who = self.scope.identity(user)
        for raw_id in ids:
            target = self._handles.get(str(raw_id), str(raw_id))
            text = self._expand_one(target, who)
            if text is None:
                missing.append(str(raw_id))
                continue
            if target.startswith("spool:"):
                cands.append({"id": raw_id, "path": None, "anchor": None, "text": text})
                continue
            path, _, anchor = target.partition("#")
            cands.append({"id": raw_id, "path": path, "anchor": target, "text": text})
        packed = pack(cands, budget_tokens)
        served = [str(it["path"]) for it in packed.items if it.get("path")]
        self.use.note("expanded", served, who.user or None)
        if any(it.get("path") for it in packed.items):
            chains = self.index.chains(who)  # a superseded page stays marked (invariant 14)
            for it in packed.items:
                if it.get("path"):
                    it.update(chains.mark(it["path"]))
        return {
            "items": packed.items,
            "used_tokens": packed.used_tokens,
            "budget_tokens": budget_tokens,
            "omitted": packed.omitted_ids,
            "missing": missing,
        }

    def session_visible(self, session_key: str, user: Identity | None) -> bool:
        """May ``user`` see a session's observations? Only when it may see the session's
        page (the scope rule on its path and indexed frontmatter: a person may mark a
        session page ``visibility: personal``); a session with no page yet is its
        project's, seen by whoever may read that project."""
        info = self.spool.sessions.get(session_key)
        path = info.state.get("path") if info is not None else None
        if not isinstance(path, str) or not path:
            if info is None or not info.project:
                return True
            # no page yet: the project's grants decide (a page there would be its project's)
            return may_read(self.scope.identity(user), f"projects/{info.project}/sessions/-", None)
        row = self.index.page_meta(path)
        return may_read(self.scope.identity(user), path, row["meta"] if row else None)

    def _expand_one(self, item_id: str, who: Identity | None) -> str | None:
        if item_id.startswith("spool:"):
            obs_id = item_id[6:]
            key_prefix = obs_id.rsplit("-", 1)[0]
            for key in self.spool.sessions:
                if key.startswith(key_prefix) and self.session_visible(key, who):
                    for o in self.spool.observations(key):
                        if o.obs_id == obs_id:
                            return observation_text(o)
            return None
        path, _, anchor = item_id.partition("#")
        # a long session's entry may be on one of its parts (wiki/sessionparts.py)
        pages = entry_pages(self.wiki_dir, path, anchor, self.part_events) if anchor else [path]
        for where in pages:
            try:
                page = self.scope.read(who, where)
            except (PathRefused, NotFound):
                continue
            if not shown(page.meta, "recall"):  # a forgotten page: nothing of it
                continue
            if not anchor:
                return page.data.decode("utf-8", errors="replace")
            for sec in self.index.sections_of(page.rel):
                if sec["anchor"] == anchor:
                    return str(sec["text"])
        return None

    def list_pages(
        self, user: Identity | None = None, **filters: Unpack[PageFilters]
    ) -> list[dict[str, Any]]:
        """Pages from the index, newest first: ``[{path, id, title, kind, project, updated}]``.
        ``filters``: :class:`~wiki_memory.index.pages.PageFilters` (project, kind, since,
        limit 100, offset 0). Pages ``user`` may not see are left out in the SQL (they
        take no place in ``limit``/``offset``; None: an anonymous caller). ``since``
        (ISO-8601, or epoch seconds as text) keeps pages updated at or after it; anything
        else raises :class:`~wiki_memory.recall.filters.FilterError` naming ``since``.
        A long session is listed once, by its page (whose summary links its parts): its
        part pages are left out here, the one listing every face (HTTP, MCP, CLI, web)
        reads (docs/sessions.md, "Parts")."""
        since = filters.get("since")
        if since is not None:
            when = parse_time(since, "since")
            try:
                float(since)
            except ValueError:
                pass  # an ISO string: compared as written, like the stored ones
            else:  # epoch seconds: as the ISO-8601 UTC text the index compares
                since = datetime.fromtimestamp(when or 0.0, UTC).strftime("%Y-%m-%dT%H:%M:%S")
                filters["since"] = since
        who = self.scope.identity(user)
        rows = self.index.list_pages(who, parts=False, **filters)
        return marked_rows(rows, self.index.chains(who))

    def read_page(
        self,
        path: str,
        cursor: int = 0,
        max_bytes: int = 64 * 1024,
        user: Identity | None = None,
    ) -> dict[str, Any]:
        """One page, paged by a byte cursor that never splits a UTF-8 character.

        Returns ``{path, metadata, title, diagnostics, content, cursor, next_cursor,
        truncated, total_bytes, hash, links, backlinks, attachments, links_truncated,
        backlinks_truncated}`` (``truncated``: the content goes on at ``next_cursor``;
        the other two: lists cut at :attr:`max_links`, see :meth:`page_links`):

        - ``links``: outgoing links and note embeds, in file order, each ``{target,
          fragment, alias, embed, line, in_frontmatter, status, path, candidates,
          fragment_found}``; ``status`` is ``resolved`` (``path`` is the page),
          ``unresolved`` (``target`` keeps the literal text) or ``ambiguous``
          (``candidates`` lists the pages). Same-page references (``[[#Heading]]``) are
          not links to another page and are left out. ``fragment_found`` is None without
          a fragment or target page, else whether the heading or block exists.
        - ``backlinks``: ``{path, title, line, fragment, alias, embed}`` of every link
          from another page that resolves to this one.
        - ``attachments``: links and embeds of files that are not pages (``![[a.png|400]]``):
          ``{target, alias, embed, line, path, exists}``.
        - ``diagnostics``: the parser's (unreadable frontmatter, duplicate keys, ...) plus
          ``unresolved_link``, ``ambiguous_link``, ``missing_attachment``,
          ``missing_fragment`` (a warning: the link still resolves) and ``merge_conflict``
          (a ``.server-copy.md`` beside the page holds the server's unmerged version),
          each ``{kind, line, message[, key]}``.

        The scope rule decides on the file read (:meth:`wiki_memory.core.scope.ScopeRule.read`):
        paths through symlinks, files with more than one hard link and pages ``user``
        may not see answer NotFound, exactly as missing ones. Raises PathRefused (outside
        ``wiki/``), NotFound, Gone (a forgotten page: its text is not served,
        :func:`wiki_memory.states.refuse_forgotten`), or BadRequest for a bad cursor.
        """
        who = self.scope.identity(user)
        page = self.scope.read(who, path)
        rel, data = page.rel, page.data
        refuse_forgotten(rel, page.meta, data)
        if cursor < 0 or cursor > len(data):
            raise BadRequest("cursor out of range", field="cursor")
        if cursor < len(data) and (data[cursor] & 0xC0) == 0x80:
            raise BadRequest(
                "cursor is inside a UTF-8 character; use a next_cursor value", field="cursor"
            )
        end = min(len(data), cursor + max(1, max_bytes))
        while end < len(data) and (data[end] & 0xC0) == 0x80:
            end -= 1
        if end == cursor and cursor < len(data):
            # max_bytes is smaller than the next character: return that one character whole
            end += 1
            while end < len(data) and (data[end] & 0xC0) == 0x80:
                end += 1
        chunk = data[cursor:end]
        if cursor == 0:  # a read of the page, once per read (the use record)
            self.use.note("read", [rel], who.user or None)
        meta = self.index.page_meta(rel) or {}
        graph = self.page_links(rel, who)
        return {
            "path": rel,
            "metadata": meta.get("meta", {}),
            "title": meta.get("title"),
            "diagnostics": list(meta.get("diagnostics", [])) + graph["diagnostics"],
            "content": chunk.decode("utf-8", errors="replace"),
            "cursor": cursor,
            "next_cursor": end if end < len(data) else None,
            "truncated": end < len(data),
            "total_bytes": len(data),
            "hash": page_hash(data),
            "links": graph["links"],
            "backlinks": graph["backlinks"],
            "attachments": graph["attachments"],
            "links_truncated": graph["links_truncated"],
            "backlinks_truncated": graph["backlinks_truncated"],
        }

    def page_links(self, path: str, user: Identity | None = None) -> dict[str, Any]:
        """The link graph around one indexed page: ``{links, backlinks, attachments,
        diagnostics, links_truncated, backlinks_truncated}`` as in :meth:`read_page`
        (empty lists for a page not indexed), as ``user`` sees it: pages it may not see
        are never named (a link to one reads as unresolved; a backlink from one is left
        out). Each list holds at most :attr:`max_links` entries, the first in file order
        (backlinks: by source path); ``links_truncated`` says links, attachments or link
        diagnostics were left out, ``backlinks_truncated`` that backlinks were."""
        who = self.scope.identity(user)
        cap = max(1, self.max_links)
        cut = False
        from wiki_memory.wiki.links import ATTACHMENT, fragment_found

        links: list[dict[str, Any]] = []
        attachments: list[dict[str, Any]] = []
        diags: list[dict[str, Any]] = []
        anchors: dict[str, tuple[list[str], list[str]]] = {}

        def parts_of(p: str) -> tuple[list[str], list[str]]:
            if p not in anchors:
                secs = self.index.sections_of(p)
                anchors[p] = (
                    [
                        s["heading"]
                        for s in secs
                        if s["heading"] and not s["anchor"].startswith("^")
                    ],
                    [s["anchor"] for s in secs if s["anchor"].startswith("^")],
                )
            return anchors[p]

        for lk in self.index.outlinks(path, who):
            if len(links) >= cap or len(attachments) >= cap or len(diags) >= cap:
                cut = True
                break
            if lk["status"] == ATTACHMENT:
                attachments.append(
                    {
                        "target": lk["target"],
                        "alias": lk["alias"],
                        "embed": lk["embed"],
                        "line": lk["line"],
                        "path": lk["path"],
                        "exists": lk["path"] is not None,
                    }
                )
                if lk["path"] is None:
                    diags.append(
                        {
                            "kind": "missing_attachment",
                            "line": lk["line"],
                            "message": f"no file named {lk['target']!r} in the wiki",
                            "key": lk["target"],
                        }
                    )
                continue
            found: bool | None = None
            if lk["fragment"] and lk["path"]:
                headings, blocks = parts_of(lk["path"])
                found = fragment_found(lk["fragment"], headings, blocks)
                if not found:
                    diags.append(
                        {
                            "kind": "missing_fragment",
                            "line": lk["line"],
                            "message": f"{lk['path']} has no heading or block "
                            f"{lk['fragment']!r}; the link leads to the page",
                            "key": lk["fragment"],
                        }
                    )
            if not lk["target"]:
                continue  # a same-page reference: not a link to a page
            lk["fragment_found"] = found
            links.append(lk)
            if lk["status"] == "unresolved":
                diags.append(
                    {
                        "kind": "unresolved_link",
                        "line": lk["line"],
                        "message": f"no page named {lk['target']!r} (yet)",
                        "key": lk["target"],
                    }
                )
            elif lk["status"] == "ambiguous":
                diags.append(
                    {
                        "kind": "ambiguous_link",
                        "line": lk["line"],
                        "message": f"{lk['target']!r} names {len(lk['candidates'])} pages: "
                        + ", ".join(lk["candidates"][:5]),
                        "key": lk["target"],
                    }
                )
        backlinks = [
            {
                "path": b["src_path"],
                "title": b["title"],
                "line": b["line"],
                "fragment": b["fragment"],
                "alias": b["alias"],
                "embed": b["embed"],
            }
            for b in self.index.backlinks(path, who)
            if b["src_path"] != path
        ]
        back_cut = len(backlinks) > cap
        del backlinks[cap:]
        copy = conflict_copy_path(path)
        if copy != path and (self.wiki_dir / copy).is_file():
            diags.append(
                {
                    "kind": "merge_conflict",
                    "line": None,
                    "message": f"a hand edit and the server changed the same lines; the "
                    f"server's version is in {copy}",
                    "key": copy,
                }
            )
        return {
            "links": links,
            "backlinks": backlinks,
            "attachments": attachments,
            "diagnostics": diags,
            "links_truncated": cut,
            "backlinks_truncated": back_cut,
        }

    def page_history(self, path: str, user: Identity | None, limit: int = 200) -> list[CommitInfo]:
        """The commits that changed a page, newest first (at most ``limit``), that
        ``user`` may see: the page must be visible now (else NotFound, as for a missing
        page), and a commit whose version of the page was hidden from ``user`` (it was
        personal then) is left out. Case-only renames are followed, each older version
        judged at the path it had then (``GitStore.page_log``)."""
        who = self.scope.identity(user)
        page = self.scope.read(who, path)
        return [
            self._as_seen(c, who)
            for rel, c in self.git.page_log(page.rel, limit=limit)
            if self._version_ok(rel, c, who)
        ]

    def _as_seen(self, c: CommitInfo, who: Identity) -> CommitInfo:
        """``c`` as ``who`` may be told of it: its changed paths that ``who`` may see
        (each judged by the one rule on its version in ``c``, or in the parent for a
        path ``c`` deleted), and a message composed from those paths alone. A commit's
        own message may name pages (or, before this release, titles) of every page its
        author wrote in the same few seconds, so it is never shown."""
        seen = [p for p in c.paths if self._path_seen(p, c, who)]
        head = ", ".join(seen[:3]) + (f" (+{len(seen) - 3} more)" if len(seen) > 3 else "")
        return replace(c, paths=seen, message=f"Changed {head}" if seen else "")

    def _path_seen(self, rel: str, c: CommitInfo, who: Identity) -> bool:
        if not may_read(who, rel, {}):
            return False
        owner = self.commit_owners.owner(rel, c)
        return owner != UNREADABLE and who.owns(owner)

    def page_version(self, path: str, sha: str, user: Identity | None) -> bytes | None:
        """The page's bytes as committed in ``sha`` (None where it did not exist then),
        for ``user``: NotFound unless :meth:`page_history` lists that commit."""
        who = self.scope.identity(user)
        rel, commit = self._visible_commit(path, sha, who)
        return self.git.read_at(rel, commit.sha)

    def page_diff(self, path: str, sha: str, user: Identity | None) -> str:
        """The unified diff of the page in commit ``sha`` against its first parent, for
        ``user``: NotFound unless both versions are ones it may see."""
        who = self.scope.identity(user)
        rel, commit = self._visible_commit(path, sha, who)
        for parent in commit.parents[:1]:
            old = self.git.read_at(rel, parent)
            if old is not None and not may_read(who, rel, frontmatter_of(old, rel)):
                raise not_found(rel)
        return self.git.diff(rel, commit.sha)

    def _visible_commit(self, path: str, sha: str, who: Identity) -> tuple[str, CommitInfo]:
        page = self.scope.read(who, path)
        for rel, c in self.git.page_log(page.rel, limit=100_000):
            if c.sha.startswith(sha) and self._version_ok(rel, c, who):
                return rel, c
        raise not_found(page.rel)

    def _version_ok(self, rel: str, commit: CommitInfo, who: Identity) -> bool:
        """True when ``who`` may see the page ``rel`` as committed in ``commit``, judged
        by the one rule on that version's path and frontmatter; a commit that removed it
        is judged on the version it removed (its first parent's)."""
        data = self.git.read_at(rel, commit.sha)
        if data is None and commit.parents:
            data = self.git.read_at(rel, commit.parents[0])
        if data is None:
            return may_read(who, rel, {})
        return may_read(who, rel, frontmatter_of(data, rel))

    # -- names a face looks things up by ---------------------------------------------
    def page_meta(self, path: str, user: Identity | None) -> dict[str, Any] | None:
        """The index's row of the page at ``path`` as ``user`` sees it (path, id, title,
        kind, project, tags, aliases, updated, created, hash, size, mtime, meta,
        diagnostics, owner), or None when it is not indexed or ``user`` may not see it."""
        return self.index.page_meta(path, self.scope.identity(user))

    def names_for(
        self, keys: Iterable[str], user: Identity | None = None
    ) -> list[tuple[str, str, str]]:
        """``(key, path, source)`` rows of the index's names for casefolded link keys
        (source: title, stem, alias or path), pages ``user`` may not see left out: what
        a face resolves wikilinks with."""
        return self.index.names_for(keys, self.scope.identity(user))

    def forgotten_paths(self, paths: Iterable[str]) -> set[str]:
        """The pages among ``paths`` that are forgotten: a link to one reads as forgotten."""
        return self.index.forgotten_paths(paths)

    def folder(
        self, folder: str, user: Identity | None, limit: int = 500, offset: int = 0
    ) -> dict[str, Any]:
        """What the wiki folder ``folder`` (``""``: the top; ``a/b``, no trailing ``/``)
        holds that ``user`` may see, by the one scope rule applied in the index's SQL:
        ``{"folders": [name], "pages": [{path, title, kind, updated}], "pages_total": n}``
        (subfolders holding a visible page; pages by title, ``limit`` from ``offset``;
        ``limit=0``: the subfolders only, ``pages_total`` None)."""
        return self.index.folder_listing(folder, limit, offset, self.scope.identity(user))

    def tagged(
        self, tag: str, user: Identity | None, limit: int = 100, offset: int = 0
    ) -> tuple[list[dict[str, Any]], int]:
        """Pages tagged ``tag`` (or a nested tag below it) that ``user`` may see, newest
        first, and how many there are: ``([{path, title, kind, project, updated}], n)``."""
        return self.index.tagged_pages(tag, limit, offset, self.scope.identity(user))

    def most_linked(
        self, project: str, user: Identity | None, limit: int = 10
    ) -> list[dict[str, Any]]:
        """The pages of ``project`` most linked to by pages ``user`` may see (only pages
        ``user`` may see are named): ``[{path, title, kind, links}]``."""
        return self.index.most_linked(project, limit, self.scope.identity(user))

    def projects(self) -> list[str]:
        """Sorted names of the project folders under ``wiki/projects/`` (real folders
        only: no symbolic links, no dot-folders)."""
        try:
            with os.scandir(self.wiki_dir / "projects") as entries:
                names = [
                    e.name
                    for e in entries
                    if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")
                ]
        except OSError:
            names = []
        return sorted(names)

    def project_exists(self, name: str, user: Identity | None) -> bool:
        """True when ``user`` may read project ``name`` (its grants: a project without
        one answers like one that does not exist) and ``wiki/projects/<name>`` is a real
        folder, or an indexed page ``user`` may see belongs to project ``name``."""
        if not may_read(self.scope.identity(user), f"projects/{name}/-", None):
            return False
        if name in self.projects():
            return True
        return bool(self.list_pages(project=name, limit=1, user=user))

    def session_page(self, sid: str, user: Identity | None) -> str | None:
        """The wiki path of a session's page named by its page id (``ses_<16 hex>``), its
        short id (the 8 hex in the file name) or the harness's session id; with several
        sessions of one harness id, ``user``'s own first, then the newest. None when none
        is known. Whether ``user`` may see it is decided when the page is read."""
        who = self.scope.identity(user)
        sessions = self.spool.sessions
        m = _SES_RE.fullmatch(sid)
        prefix = m.group(1) if m else (sid if _SHORT_RE.fullmatch(sid) else None)
        if prefix:
            for key, info in list(sessions.items()):
                if key.startswith(prefix) and info.state.get("path"):
                    return str(info.state["path"])
            for p in sorted((self.wiki_dir / "projects").glob(f"*/sessions/*-{prefix[:8]}.md")):
                rel = p.relative_to(self.wiki_dir).as_posix()
                meta = self.index.page_meta(rel, who)
                if m is None or (meta and (meta.get("id") == sid)):
                    return rel
            return None
        matches = [
            info
            for info in list(sessions.values())
            if info.session_id == sid and info.state.get("path")
        ]
        matches.sort(key=lambda i: (i.user != who.user, -i.started))
        return str(matches[0].state["path"]) if matches else None


def marked_rows(rows: list[dict[str, Any]], chains: Chains) -> list[dict[str, Any]]:
    """Listing rows (each with ``path``) with every superseded page marked (``state``,
    ``superseded_by``: the head of its chain). The order is kept: listings page by an
    offset, and a row moved across a page's end would be skipped or repeated; newest
    first already puts a correction before what it corrects (retiring a page leaves its
    ``updated`` as it was)."""
    if not chains.head:
        return rows
    return [{**r, **chains.mark(r["path"])} if r["path"] in chains.head else r for r in rows]
