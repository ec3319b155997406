"""The read-only web view's pages: their handlers and :func:`routes`, which builds one
app's view (docs/web.md).

Routes (all ``GET``/``HEAD`` but the two forms): ``/`` (projects with their latest
sessions and open handoffs), ``/p/<project>`` (sessions, notes and handoffs, newest first,
paged), ``/pages`` (every page, paged), ``/page/<path>`` (a page rendered from markdown),
``/page/<path>/history`` (its git log; ``?rev=<sha>`` shows that commit's diff,
``&view=version`` the page as it was), ``/search?q=`` (recall's results), ``/handoffs`` (by
state), ``/session/<id>`` (a session page by its page id, harness session id or short
id), ``/login`` (``GET`` form, ``POST`` sign-in), ``/logout`` (``POST``), ``/static/...``.

Nothing here writes to ``wiki/`` or git: handlers only read, through the core. Templates
escape every value, markdown is rendered with ``html=False`` (:mod:`.render`), every
response carries a CSP allowing no script (:mod:`.context`), page paths go through
:func:`wiki_memory.wiki.paths.clean_rel`. Signing in is :mod:`.session`; the names other
modules take from here (``make_session_cookie``, ``error_page``, ...) are re-exported.
"""

from __future__ import annotations

import functools
import hashlib
import re
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlencode

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from wiki_memory.errors import BadRequest, NotFound
from wiki_memory.identity import Identity
from wiki_memory.index.store import SearchError, is_indexable
from wiki_memory.recall.terms import match_forms
from wiki_memory.states import page_state
from wiki_memory.web import render as web_render
from wiki_memory.web import search as web_search
from wiki_memory.web.context import (
    _CONTEXTS,
    CATCH_ALL,
    SECURITY_HEADERS,
    _Web,
    allowed_methods,
    error_page,
    html_page,
    load_static,
    make_env,
    no_route,
    static_file,
    template_dir,
)
from wiki_memory.web.render import (
    RenderCache,
    Resolver,
    Target,
    crumbs,
    folder_url,
    render_markdown,
    render_value,
    targets_fingerprint,
)
from wiki_memory.web.session import (
    CSRF_COOKIE,
    KEY_FILE,
    MAX_FORM_BYTES,
    PUBLIC_PATHS,
    PUBLIC_PREFIXES,
    SESSION_COOKIE,
    SESSION_SECONDS,
    SignIn,
    _load_key,
    make_session_cookie,
    read_session_cookie,
    unauthorized,
    user_from_cookie,
)
from wiki_memory.wiki.page import ParsedPage, parse_page
from wiki_memory.wiki.paths import PathRefused, clean_rel

if TYPE_CHECKING:
    from wiki_memory.auth import TokenStore
    from wiki_memory.core.memory import Memory

__all__ = [
    # this module's own
    "HANDOFF_STATES",
    "PAGE_SIZE",
    "SEARCH_BUDGET_TOKENS",
    "routes",
    # re-exported: wiki_memory.server.app, tests and bench/ take them from here
    "CATCH_ALL",
    "CSRF_COOKIE",
    "KEY_FILE",
    "MAX_FORM_BYTES",
    "PUBLIC_PATHS",
    "PUBLIC_PREFIXES",
    "RenderCache",
    "Resolver",
    "SECURITY_HEADERS",
    "SESSION_COOKIE",
    "SESSION_SECONDS",
    "allowed_methods",
    "error_page",
    "make_session_cookie",
    "read_session_cookie",
    "template_dir",
    "unauthorized",
    "user_from_cookie",
]

#: how many tokens recall may spend on one search page (cl100k tokens)
SEARCH_BUDGET_TOKENS = 8000
PAGE_SIZE = 25
#: a folder page lists at most this many of its pages (then pages on); with its
#: subfolders (:data:`FOLDER_MAX_SUBFOLDERS`) and the tree no page has 500 links
FOLDER_PAGE_SIZE = 250
#: the handoffs page shows the newest this many (two links each: under 500 links)
HANDOFFS_SHOWN = 200
FOLDER_MAX_SUBFOLDERS = 150

#: the date filters of the search page: name → (label, seconds back from now)
SEARCH_WITHIN = {
    "day": ("past day", 86400),
    "week": ("past week", 7 * 86400),
    "month": ("past month", 31 * 86400),
    "year": ("past year", 366 * 86400),
}

HANDOFF_STATES = ("offered", "open", "claimed", "done", "cancelled", "expired")
_REV_RE = re.compile(r"[0-9a-f]{7,40}")


# --------------------------------------------------------------------------- routes


def routes(memory: Memory, tokens: TokenStore) -> list[Any]:
    """The Starlette routes of the web view (registers its context for the middleware).

    Creates ``auth/web-cookie.key`` on first use; nothing else is written."""
    tdir = template_dir()
    static, version = load_static(tdir)
    ctx = _Web(
        memory=memory,
        tokens=tokens,
        key=_load_key(tokens.auth_dir),
        env=make_env(tdir),
        static=static,
        static_version=version,
    )
    ctx.env.globals["static_version"] = version
    _CONTEXTS[tokens] = ctx
    memory.on_purge.append(lambda _rel: ctx.cache.clear())
    v = _View(ctx)
    sign_in = SignIn(ctx)
    return [
        Route("/", v.home, methods=["GET"]),
        Route("/login", sign_in.login, methods=["GET", "POST"]),
        Route("/logout", sign_in.logout, methods=["GET", "POST"]),
        Route(
            "/static/{name}",
            functools.partial(static_file, ctx),
            methods=["GET"],
            name="static_file",
        ),
        Route("/p/{project}", v.project, methods=["GET"]),
        Route("/pages", v.all_pages, methods=["GET"]),
        Route("/f", v.folder, methods=["GET"]),
        Route("/f/{folder:path}", v.folder, methods=["GET"]),
        Route("/tag/{tag:path}", v.tag, methods=["GET"]),
        Route("/page/{path:path}", v.page, methods=["GET"]),
        Route("/search", v.search, methods=["GET"]),
        Route("/handoffs", v.handoffs, methods=["GET"]),
        Route("/session/{sid}", v.session, methods=["GET"]),
        # last: any other GET gets the view's 404 page (with its security headers)
        Route(CATCH_ALL, functools.partial(no_route, ctx), methods=["GET"], name="no_route"),
    ]


def _fetch(
    memory: Memory, who: Identity, project: str | None, kind: str | None, limit: int, offset: int
) -> Any:
    return memory.list_pages(project=project, kind=kind, limit=limit, offset=offset, user=who)


class _NotFound(Exception):
    pass


def _session_of(parsed: ParsedPage) -> dict[str, str] | None:
    """``{"speaker", "agent"}`` of a session page (frontmatter ``type: session``: its
    ``user`` and ``harness``), which the renderer shows as a conversation; else None."""
    meta = parsed.metadata if isinstance(parsed.metadata, dict) else {}
    if str(meta.get("type") or "") != "session":
        return None
    return {"speaker": str(meta.get("user") or ""), "agent": str(meta.get("harness") or "")}


def _tag_links(value: Any) -> str:
    """Frontmatter ``tags`` (a list or one string) as links to their tag pages."""
    tags = value if isinstance(value, list) else str(value or "").replace(",", " ").split()
    links = [
        f'<a class="tag" href="{web_render.escape(web_render.tag_url(str(t)))}">'
        f"#{web_render.escape(str(t).lstrip('#'))}</a>"
        for t in tags
        if str(t).strip("# ")
    ]
    return ", ".join(links) or '<span class="muted">—</span>'


class _View:
    """The page handlers. Sync handlers run in Starlette's thread pool (one index
    connection per thread)."""

    def __init__(self, ctx: _Web) -> None:
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

    def _user(self, request: Request) -> Identity:
        """The reader as the scope rule sees them (a signed-out reader never gets here;
        an unknown one sees only shared pages)."""
        u = getattr(request.state, "user", None)
        who = self.memory.scope.identity("" if u is None else str(u))
        assert who is not None
        return who

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
            {"name": n, "url": web_render.folder_url(n)}
            for n in top["folders"][:FOLDER_MAX_SUBFOLDERS]
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
            folder=web_render.folder_url(f"projects/{name}"),
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

    # -- search ------------------------------------------------------------------------

    def search(self, request: Request) -> Response:
        """``/search?q=&project=&kind=&within=``: recall's results (same ranking and scope)
        grouped per page, snippets as text with the matched forms marked, and the
        filters as links (:mod:`wiki_memory.web.search`)."""
        user = self._user(request)
        q = request.query_params.get("q", "").strip()[:500]
        project = request.query_params.get("project") or None
        kind = request.query_params.get("kind") or None
        within = request.query_params.get("within") or ""
        if within not in SEARCH_WITHIN:
            within = ""
        groups: list[web_search.Group] = []
        kinds: list[str] = []
        projects: list[str] = []
        error = None
        omitted = 0
        matches = 0
        if q:
            since = None
            if within:
                since = time.time() - SEARCH_WITHIN[within][1]
            try:
                res = self.memory.recall(
                    q,
                    project=project,
                    budget_tokens=SEARCH_BUDGET_TOKENS,
                    user=user,
                    kinds=[kind] if kind else None,
                    since=since,
                )
            except SearchError:
                error = "The search engine failed; try again in a moment."
            except BadRequest as exc:
                error = f"Bad search: {exc}"
            else:  # recall filtered by the reader before ranking
                omitted = res.omitted
                matches = len(res.items)
                forms = match_forms(q)
                groups = web_search.group(res.items, forms, q)
                kinds = sorted({g.kind for g in groups} | ({kind} if kind else set()))
                projects = sorted(
                    {g.project for g in groups if g.project} | ({project} if project else set())
                )
        base = {"q": q, "project": project or "", "kind": kind or "", "within": within}

        def link(**change: str) -> str:
            params = {k: v for k, v in {**base, **change}.items() if v}
            return "/search?" + urlencode(params)

        filters = {
            "project": [(p, link(project=p), p == project) for p in projects],
            "kind": [(k, link(kind=k), k == kind) for k in kinds],
            "within": [(w, link(within=w), w == within) for w in SEARCH_WITHIN],
        }
        clear = {
            "project": link(project="") if project else None,
            "kind": link(kind="") if kind else None,
            "within": link(within="") if within else None,
        }
        return self._html(
            request,
            "search.html",
            200 if error is None else 503,
            title=f"Search: {q}" if q else "Search",
            q=q,
            project=project or "",
            kind=kind or "",
            within=within,
            within_labels={w: v[0] for w, v in SEARCH_WITHIN.items()},
            groups=groups,
            matches=matches,
            filters=filters,
            clear=clear,
            error=error,
            omitted=omitted,
        )

    # -- pages -------------------------------------------------------------------------

    def _read(self, user: Identity, rel: str) -> bytes:
        """The bytes of a ``.md`` page the reader may see, through the core's scope rule
        (no symlink on the way, a single-link regular file); else _NotFound."""
        if not is_indexable(rel):
            raise _NotFound(rel)
        try:
            return self.memory.scope.read(user, rel).data
        except (NotFound, PathRefused):
            raise _NotFound(rel) from None

    def _targets(self, user: Identity, rel: str, links: Iterable[Any]) -> dict[str, Target]:
        resolver = self.resolver_cls(self.memory, user)
        return resolver.resolve_many(rel, [lk.target for lk in links if lk.target])

    def _parsed(self, rel: str, raw: bytes, digest: str) -> ParsedPage:
        """``parse_page`` of the bytes, cached by their hash (it is most of a page view)."""
        key = ("parsed", rel, digest)
        parsed = self.ctx.cache.get(key)
        if parsed is None:
            parsed = parse_page(raw, rel)
            self.ctx.cache.put(key, parsed, len(raw))
        return cast(ParsedPage, parsed)

    def _render_page(self, user: Identity, rel: str, raw: bytes) -> dict[str, Any]:
        """Everything the page template shows of one page's bytes."""
        digest = hashlib.sha256(raw).hexdigest()
        parsed = self._parsed(rel, raw, digest)
        targets = self._targets(user, rel, parsed.links)
        key = ("html", rel, digest, targets_fingerprint(targets))
        html = self.ctx.cache.get(key)
        if html is None:
            resolver = self.resolver_cls(self.memory, user)

            def lazy(target: str) -> Target:
                return resolver.resolve_many(rel, [target]).get(
                    web_render.link_key(target), Target(None)
                )

            rendered = render_markdown(parsed.body, rel, targets, lazy, _session_of(parsed))
            html = rendered.html
            if rendered.cacheable:
                self.ctx.cache.put(key, html)
        meta = parsed.metadata if isinstance(parsed.metadata, dict) else {}
        props = [
            (str(k), Markup(_tag_links(v) if k == "tags" else render_value(v, rel, targets)))
            for k, v in meta.items()
        ]
        return {
            "rel": rel,
            "meta": meta,
            "page_title": parsed.title or str(meta.get("title") or rel.rsplit("/", 1)[-1]),
            "props": props,
            "body": Markup(html),
            "diagnostics": [d.as_dict() for d in parsed.diagnostics],
            "kind": str(meta.get("type") or "page"),
        }

    def _backlinks(self, user: Identity, rel: str) -> list[dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        # the core's link graph as this reader sees it: only pages it may see link here,
        # each with its title
        for link in self.memory.page_links(rel, user)["backlinks"]:
            src = link["path"]
            if src == rel or src in out:
                continue
            out[src] = {"path": src, "title": link.get("title") or src}
        return sorted(out.values(), key=lambda b: (str(b["title"]).casefold(), b["path"]))

    def _page_view(self, request: Request, rel: str, via_session: str | None = None) -> Response:
        user = self._user(request)
        try:
            raw = self._read(user, rel)
        except _NotFound:
            # a session the reader may not see answers like one that does not exist
            return self._not_found(request, "No such session." if via_session else "No such page.")
        meta_row = self.memory.page_meta(rel, user)
        view = self._render_page(user, rel, raw)
        m = view["meta"]
        source = request.query_params.get("view") == "source"
        hl = request.query_params.get("hl", "").strip()[:500]
        if hl and not source:  # from search's "+N more in this page": its words marked
            view = {
                **view,
                "body": Markup(web_search.mark_html(str(view["body"]), match_forms(hl))),
            }
        project = m.get("project") or (meta_row or {}).get("project")
        return self._html(
            request,
            "page.html",
            title=view["page_title"],
            view=view,
            source=raw.decode("utf-8", "replace") if source else None,
            backlinks=self._backlinks(user, rel),
            project=str(project) if project else None,
            via_session=via_session,
            version=None,
            state=page_state(m if isinstance(m, dict) else {}),
        )

    def page(self, request: Request) -> Response:
        path = request.path_params["path"]
        history = path.endswith("/history") and path.removesuffix("/history").endswith(".md")
        if history:
            path = path.removesuffix("/history")
        try:
            rel = clean_rel(path)
        except PathRefused as exc:
            return self._html(
                request, "error.html", 400, title="Path refused", message=f"Path refused: {exc}"
            )
        if history:
            return self._history(request, rel)
        return self._page_view(request, rel)

    def _history(self, request: Request, rel: str) -> Response:
        user = self._user(request)
        try:
            raw = self._read(user, rel)
        except _NotFound:
            return self._not_found(request)
        parsed = self._parsed(rel, raw, hashlib.sha256(raw).hexdigest())
        try:  # only versions the reader may see (a page may have been personal once)
            commits = self.memory.page_history(rel, user, limit=200)
        except (NotFound, PathRefused):
            return self._not_found(request)
        rev = request.query_params.get("rev", "")
        selected = None
        diff_lines: list[tuple[str, str]] = []
        version = None
        if rev:
            if not _REV_RE.fullmatch(rev):
                return self._not_found(request, "No such version.")
            selected = next((c for c in commits if c.sha.startswith(rev)), None)
            if selected is None:
                return self._not_found(request, "No such version of this page.")
            if request.query_params.get("view") == "version":
                try:
                    old = self.memory.page_version(rel, selected.sha, user)
                except NotFound:
                    return self._not_found(request, "No such version of this page.")
                if old is None:
                    version = {"missing": True}
                else:
                    version = self._render_page(user, rel, old)
                    version["missing"] = False
            else:
                try:
                    text = self.memory.page_diff(rel, selected.sha, user)
                except NotFound:
                    return self._not_found(request, "No such version of this page.")
                for line in text.splitlines():
                    if line.startswith(("+++", "---", "diff ", "index ", "new file", "deleted")):
                        cls = "meta"
                    elif line.startswith("@@"):
                        cls = "hunk"
                    elif line.startswith("+"):
                        cls = "add"
                    elif line.startswith("-"):
                        cls = "del"
                    else:
                        cls = "ctx"
                    diff_lines.append((cls, line))
        return self._html(
            request,
            "history.html",
            title=f"History: {parsed.title or rel}",
            rel=rel,
            page_title=parsed.title or rel,
            commits=commits,
            selected=selected,
            diff_lines=diff_lines,
            version=version,
        )

    # -- sessions ----------------------------------------------------------------------

    def _session_path(self, user: Identity, sid: str) -> str | None:
        return self.memory.session_page(sid, user)

    def session(self, request: Request) -> Response:
        sid = request.path_params["sid"]
        rel = self._session_path(self._user(request), sid)
        if rel is None:
            return self._not_found(request, "No such session.")
        try:
            rel = clean_rel(rel)
        except PathRefused:
            return self._not_found(request, "No such session.")
        return self._page_view(request, rel, via_session=sid)
