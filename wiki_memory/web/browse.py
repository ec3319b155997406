"""The web view's browsing pages (docs/web.md): home (projects with their latest sessions
and open handoffs), a project's lists, every page, handoffs by state, folders with their
tree and tags. :class:`BrowseView` is the base of :mod:`wiki_memory.web.views`' handler
class, which adds search, pages, history and sessions and builds the routes; its helpers
(the reader, visible rows, paging) serve both. Handlers only read, through the core.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from wiki_memory.errors import Gone
from wiki_memory.identity import Identity, of_request
from wiki_memory.states import refuse_forgotten
from wiki_memory.web.context import html_page
from wiki_memory.web.links import Resolver, crumbs, folder_url
from wiki_memory.wiki.page import parse_page
from wiki_memory.wiki.paths import PathRefused, clean_rel

if TYPE_CHECKING:
    from wiki_memory.core.memory import Memory
    from wiki_memory.web.context import WebFace

__all__ = ["HANDOFF_STATES", "PAGE_SIZE", "BrowseView"]

PAGE_SIZE = 25
#: a folder page lists at most this many of its pages (then pages on); with its
#: subfolders (:data:`FOLDER_MAX_SUBFOLDERS`) and the tree no page has 500 links
FOLDER_PAGE_SIZE = 250
#: the handoffs page shows the newest this many (two links each: under 500 links)
HANDOFFS_SHOWN = 200
FOLDER_MAX_SUBFOLDERS = 150

HANDOFF_STATES = ("offered", "open", "claimed", "done", "cancelled", "expired")


def _fetch(
    memory: Memory, who: Identity, project: str | None, kind: str | None, limit: int, offset: int
) -> Any:
    return memory.list_pages(project=project, kind=kind, limit=limit, offset=offset, user=who)


class BrowseView:
    """The browsing handlers and the helpers every handler uses. Sync handlers run in
    Starlette's thread pool (one index connection per thread)."""

    def __init__(self, ctx: WebFace) -> None:
        self.ctx = ctx
        self.memory = ctx.memory
        self.resolver_cls = Resolver

    # -- helpers -----------------------------------------------------------------------

    def _html(
        self,
        request: Request,
        template: str,
        status: int = 200,
        headers: dict[str, str] | None = None,
        **values: Any,
    ) -> HTMLResponse:
        return html_page(self.ctx, request, template, status, headers, **values)

    def _not_found(self, request: Request, message: str = "No such page.") -> HTMLResponse:
        return self._html(request, "error.html", 404, title="Not found", message=message)

    def _forgotten(self, request: Request, rel: str, raw: bytes) -> HTMLResponse | None:
        """A 410 notice in place of a forgotten page (or a version or diff of it): who
        forgot it, when, and how it comes back; never its text. None for any other page."""
        try:
            refuse_forgotten(rel, parse_page(raw, rel).metadata, raw)
        except Gone as exc:
            by, at = exc.extra.get("forgotten_by"), exc.extra.get("forgotten_at")
            msg = (
                f"{rel} is forgotten{f' by {by}' if by else ''}{f' at {at}' if at else ''}: "
                "its text is not shown, and it is left out of recall, briefs and listings. "
                "Git keeps its history; whoever may write it brings it back by removing "
                "state: forgotten from its file."
            )
            return self._html(request, "error.html", 410, title="Forgotten", message=msg)
        return None

    def _user(self, request: Request) -> Identity:
        """The reader as the sign-in built them (a signed-out reader never gets here;
        a request with no caller sees only shared pages)."""
        return of_request(request.scope)

    def _visible_rows(
        self,
        user: Identity,
        fetch: Callable[[int, int], list[dict[str, Any]]],
        offset: int,
        want: int,
        keep: Callable[[dict[str, Any]], bool] = lambda r: True,
    ) -> tuple[list[dict[str, Any]], int | None]:
        """Up to ``want`` visible rows from raw offset ``offset`` on; and the raw offset
        of the next page (None at the end). Hidden rows never count towards a page."""
        out: list[dict[str, Any]] = []
        raw = offset
        batch = max(want * 2, 50)
        while len(out) < want:
            rows = fetch(batch, raw)
            for i, row in enumerate(rows):
                if keep(row):
                    out.append(row)
                    if len(out) == want:
                        nxt = raw + i + 1
                        more = fetch(1, nxt)
                        return out, (nxt if more else None)
            if len(rows) < batch:
                return out, None
            raw += len(rows)
        return out, None

    def _projects(self) -> list[str]:
        return self.memory.projects()

    @staticmethod
    def _offset(request: Request, name: str) -> int:
        try:
            return max(0, min(10**7, int(request.query_params.get(name, "0"))))
        except ValueError:
            return 0

    # -- lists -------------------------------------------------------------------------

    def home(self, request: Request) -> Response:
        user = self._user(request)
        projects = []
        for name in self._projects():
            if not self.memory.project_exists(name, user):
                continue  # a project without a grant is not named (docs/team-server.md)
            sessions, _ = self._visible_rows(
                user, functools.partial(_fetch, self.memory, user, name, "session"), 0, 5
            )
            waiting, _ = self._visible_rows(
                user,
                functools.partial(_fetch, self.memory, user, name, "handoff"),
                0,
                5,
                keep=lambda r: (r.get("meta") or {}).get("status") in ("open", "offered"),
            )
            latest = self.memory.list_pages(project=name, limit=1, user=user)
            projects.append(
                {
                    "name": name,
                    "sessions": sessions,
                    "handoffs": waiting,
                    "updated": latest[0]["updated"] if latest else None,
                }
            )
        projects.sort(key=lambda p: p["updated"] or "", reverse=True)
        recent, _ = self._visible_rows(
            user, lambda lim, off: self.memory.list_pages(limit=lim, offset=off, user=user), 0, 15
        )
        me = user.user

        def for_me(r: dict[str, Any]) -> bool:
            m = r.get("meta") or {}
            to = m.get("to")
            return m.get("status") in ("open", "offered") and to in (None, "", "any", me)

        waiting, _ = self._visible_rows(
            user,
            lambda lim, off: self.memory.list_pages(
                kind="handoff", limit=lim, offset=off, user=user
            ),
            0,
            10,
            keep=for_me,
        )
        top = self.memory.folder("", user=user, limit=1)
        folders = [
            {"name": n, "url": folder_url(n)} for n in top["folders"][:FOLDER_MAX_SUBFOLDERS]
        ]
        return self._html(
            request,
            "home.html",
            title="Home",
            projects=projects,
            recent=recent,
            waiting=waiting,
            folders=folders,
            top_pages=top["pages_total"],
        )

    def project(self, request: Request) -> Response:
        user = self._user(request)
        name = request.path_params["project"]
        try:
            if "/" in name or clean_rel(name) != name:
                raise PathRefused("not a project name")
        except PathRefused:
            return self._not_found(request, "No such project.")
        if not self.memory.project_exists(name, user):
            return self._not_found(request, "No such project.")
        lists = {}
        for key, kind, keep in (
            ("handoffs", "handoff", None),
            ("sessions", "session", None),
            ("notes", None, lambda r: r.get("kind") not in ("session", "handoff")),
        ):
            off = self._offset(request, key)

            def fetch(lim: int, o: int, kind: str | None = kind) -> list[dict[str, Any]]:
                return self.memory.list_pages(
                    project=name, kind=kind, limit=lim, offset=o, user=user
                )

            rows, nxt = self._visible_rows(
                user, fetch, off, PAGE_SIZE, keep=keep or (lambda r: True)
            )
            more = None
            if nxt is not None:
                q = dict(request.query_params)
                q[key] = str(nxt)
                more = "?" + urlencode(q)
            first = None
            if off:
                q = dict(request.query_params)
                q.pop(key, None)
                first = "?" + urlencode(q) if q else request.url.path
            lists[key] = {"rows": rows, "more": more, "first": first}
        linked = self.memory.most_linked(name, user, limit=10)
        return self._html(
            request,
            "project.html",
            title=name,
            project=name,
            lists=lists,
            linked=linked,
            folder=folder_url(f"projects/{name}"),
        )

    def all_pages(self, request: Request) -> Response:
        user = self._user(request)
        off = self._offset(request, "offset")
        rows, nxt = self._visible_rows(
            user, lambda lim, o: self.memory.list_pages(limit=lim, offset=o, user=user), off, 50
        )
        return self._html(
            request,
            "pages.html",
            title="All pages",
            rows=rows,
            more=f"?offset={nxt}" if nxt is not None else None,
            first="/pages" if off else None,
        )

    def handoffs(self, request: Request) -> Response:
        user = self._user(request)
        project = request.query_params.get("project") or None
        rows, more = self._visible_rows(
            user,
            lambda lim, off: self.memory.list_pages(
                project=project, kind="handoff", limit=lim, offset=off, user=user
            ),
            0,
            HANDOFFS_SHOWN,
        )
        groups: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            status = str((r.get("meta") or {}).get("status") or "open")
            groups.setdefault(status, []).append(r)
        order = [s for s in HANDOFF_STATES if s in groups] + sorted(
            s for s in groups if s not in HANDOFF_STATES
        )
        return self._html(
            request,
            "handoffs.html",
            title="Handoffs",
            groups=[(s, groups[s]) for s in order],
            project=project,
            total=len(rows),
            cut=more is not None,
        )

    # -- browsing ----------------------------------------------------------------------

    def _tree(self, user: Identity, folder: str) -> list[dict[str, Any]]:
        """The folder tree with the path to ``folder`` expanded: ``[{name, url, depth,
        current, open}]`` for the top folders and, below each folder on the path, its
        subfolders (at most :data:`FOLDER_MAX_SUBFOLDERS` // 3 a level)."""
        parts = [p for p in folder.split("/") if p]
        out: list[dict[str, Any]] = []
        cap = FOLDER_MAX_SUBFOLDERS // 3

        def level(prefix: str, depth: int) -> None:
            listing = self.memory.folder(prefix, user=user, limit=0)
            for name in listing["folders"][:cap]:
                full = f"{prefix}/{name}" if prefix else name
                on_path = depth < len(parts) and parts[depth] == name
                out.append(
                    {
                        "name": name,
                        "url": folder_url(full),
                        "depth": depth,
                        "current": full == folder,
                        "open": on_path,
                    }
                )
                if on_path and full != folder:
                    level(full, depth + 1)

        level("", 0)
        return out

    def folder(self, request: Request) -> Response:
        """``/f/<folder>``: the folder's subfolders and pages the reader may see (through
        the index's scope filter), paged by :data:`FOLDER_PAGE_SIZE`, with linked
        breadcrumbs and the folder tree expanded to it."""
        user = self._user(request)
        raw = request.path_params.get("folder", "").strip("/")
        folder = ""
        if raw:
            try:
                folder = clean_rel(raw)
            except PathRefused:
                return self._not_found(request, "No such folder.")
        off = self._offset(request, "offset")
        listing = self.memory.folder(folder, user=user, limit=FOLDER_PAGE_SIZE, offset=off)
        if folder and not listing["folders"] and not listing["pages_total"]:
            return self._not_found(request, "No such folder.")
        total = listing["pages_total"]
        more = f"?offset={off + FOLDER_PAGE_SIZE}" if off + FOLDER_PAGE_SIZE < total else None
        first = folder_url(folder) if off else None
        subfolders = [
            {"name": n, "url": folder_url(f"{folder}/{n}" if folder else n)}
            for n in listing["folders"][:FOLDER_MAX_SUBFOLDERS]
        ]
        return self._html(
            request,
            "folder.html",
            title=folder.rsplit("/", 1)[-1] if folder else "All folders",
            folder=folder,
            crumbs=crumbs(folder, is_folder=True)[:-1] if folder else [],
            tree=self._tree(user, folder),
            subfolders=subfolders,
            hidden_folders=max(0, len(listing["folders"]) - FOLDER_MAX_SUBFOLDERS),
            pages=listing["pages"],
            total=total,
            offset=off,
            more=more,
            first=first,
        )

    def tag(self, request: Request) -> Response:
        """``/tag/<tag>``: the pages the reader may see with that tag (or a nested tag
        below it), newest first, paged."""
        user = self._user(request)
        tag = request.path_params["tag"].strip().lstrip("#").strip("/")[:200]
        off = self._offset(request, "offset")
        rows, total = self.memory.tagged(tag, user=user, limit=100, offset=off)
        return self._html(
            request,
            "tag.html",
            title=f"#{tag}",
            tag=tag,
            rows=rows,
            total=total,
            more=f"?offset={off + 100}" if off + 100 < total else None,
            first=request.url.path if off else None,
        )
