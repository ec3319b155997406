"""The read-only web view's pages: their handlers and :func:`routes`, which builds one
app's view (docs/web.md). The browsing handlers (home, projects, pages, handoffs,
folders, tags) are :mod:`.browse`'s; search, pages, history and sessions are here.

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
import re
import threading
import time
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlencode

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from wiki_memory.capture.observation import ts_offset
from wiki_memory.core.contradictions import find_contradictions
from wiki_memory.errors import BadRequest, NotFound
from wiki_memory.identity import Identity
from wiki_memory.index.store import SearchError, is_indexable
from wiki_memory.plainfile import page_hash
from wiki_memory.recall.query import RecallQuery
from wiki_memory.recall.terms import match_forms
from wiki_memory.states import page_state
from wiki_memory.web import search as web_search
from wiki_memory.web.browse import BrowseView
from wiki_memory.web.context import (
    CATCH_ALL,
    CONTEXTS,
    SECURITY_HEADERS,
    WebFace,
    allowed_methods,
    error_page,
    load_static,
    make_env,
    no_route,
    static_file,
    template_dir,
)
from wiki_memory.web.links import Resolver, Target, escape, link_key, tag_url
from wiki_memory.web.render import (
    RenderCache,
    cut_text,
    render_markdown,
    render_value,
    targets_fingerprint,
)
from wiki_memory.web.replies import spooled
from wiki_memory.web.session import (
    CSRF_COOKIE,
    KEY_FILE,
    MAX_FORM_BYTES,
    PUBLIC_PATHS,
    PUBLIC_PREFIXES,
    SESSION_COOKIE,
    SESSION_SECONDS,
    SignIn,
    load_key,
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

#: the date filters of the search page: name → (label, seconds back from now)
SEARCH_WITHIN = {
    "day": ("past day", 86400),
    "week": ("past week", 7 * 86400),
    "month": ("past month", 31 * 86400),
    "year": ("past year", 366 * 86400),
}

_REV_RE = re.compile(r"[0-9a-f]{7,40}")


# --------------------------------------------------------------------------- routes


def routes(memory: Memory, tokens: TokenStore) -> list[Any]:
    """The Starlette routes of the web view (registers its context for the middleware).

    Creates ``auth/web-cookie.key`` on first use; nothing else is written."""
    tdir = template_dir()
    static, version = load_static(tdir)
    ctx = WebFace(
        memory=memory,
        tokens=tokens,
        key=load_key(tokens.auth_dir),
        env=make_env(tdir),
        static=static,
        static_version=version,
    )
    ctx.env.globals["static_version"] = version
    CONTEXTS[tokens] = ctx
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


#: page views built at once (each holds a few copies of its page while it is built)
PAGE_BUILDS = threading.BoundedSemaphore(2)


class _NotFound(Exception):
    pass


def _session_of(parsed: ParsedPage) -> dict[str, Any] | None:
    """``{"speaker", "agent", "offset"}`` of a session page (frontmatter ``type:
    session``: its ``user``, ``harness`` and the UTC offset of ``started`` in minutes),
    which the renderer shows as a conversation with local times; else None."""
    meta = parsed.metadata if isinstance(parsed.metadata, dict) else {}
    if str(meta.get("type") or "") != "session":
        return None
    started = meta.get("started")
    offset = None
    if isinstance(started, datetime) and started.utcoffset() is not None:
        offset = int(started.utcoffset().total_seconds() // 60)  # type: ignore[union-attr]
    elif isinstance(started, str):
        offset = ts_offset(started)
    return {
        "speaker": str(meta.get("user") or ""),
        "agent": str(meta.get("harness") or ""),
        "offset": offset,
    }


def _tag_links(value: Any) -> str:
    """Frontmatter ``tags`` (a list or one string) as links to their tag pages."""
    tags = value if isinstance(value, list) else str(value or "").replace(",", " ").split()
    links = [
        f'<a class="tag" href="{escape(tag_url(str(t)))}">#{escape(str(t).lstrip("#"))}</a>'
        for t in tags
        if str(t).strip("# ")
    ]
    return ", ".join(links) or '<span class="muted">—</span>'


class _View(BrowseView):
    """The page handlers: browsing (:class:`~wiki_memory.web.browse.BrowseView`) plus
    search, pages, their history and sessions."""

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
        cursor = _int_param(request.query_params.get("cursor"))
        # the cursors of the pages before this one, so "previous" returns exactly there
        back = [c for c in map(_int_param, request.query_params.get("back", "").split(",")) if c]
        back = [c for c in back if c < cursor][-50:]
        next_cursor = None
        total = 0
        if within not in SEARCH_WITHIN:
            within = ""
        groups: list[web_search.Group] = []
        kinds: list[str] = []
        projects: list[str] = []
        error, error_status = None, 503
        omitted = 0
        matches = 0
        shown_from = 0  # the rank of the first match shown (a cursor is a walk's)
        since: int | None = None
        if q:
            if within:
                # a walk keeps the window it began with (the next and previous links carry
                # it): a cursor belongs to its query, filters included
                since = _int_param(request.query_params.get("since")) or None
                if since is None or since > time.time():
                    since = int(time.time() - SEARCH_WITHIN[within][1])
            try:
                question = RecallQuery(
                    q,
                    project=project,
                    kinds=[kind] if kind else None,
                    since=since,
                    budget_tokens=SEARCH_BUDGET_TOKENS,
                    cursor=cursor,
                )
                res = self.memory.recall(question, user=user)
            except SearchError:
                error = "The search engine failed; try again in a moment."
            except BadRequest as exc:
                error, error_status = f"Bad search: {exc}", 400
            else:  # recall filtered by the reader before ranking
                omitted = res.omitted
                matches = len(res.items)
                next_cursor = res.next_cursor
                total = res.total
                shown_from = res.cursor
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
        prev_url = None
        walk = {"since": str(since)} if q and since is not None else {}
        if cursor:
            prev = back[-1] if back else 0
            prev_url = link(
                cursor=str(prev) if prev else "", back=",".join(map(str, back[:-1])), **walk
            )
        next_url = None
        if next_cursor is not None:
            next_url = link(
                cursor=str(next_cursor), back=",".join(map(str, [*back, cursor])), **walk
            )
        clear = {
            "project": link(project="") if project else None,
            "kind": link(kind="") if kind else None,
            "within": link(within="") if within else None,
        }
        return self._html(
            request,
            "search.html",
            200 if error is None else error_status,
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
            first=shown_from + 1,
            last=shown_from + matches,
            total=total,
            prev_url=prev_url,
            next_url=next_url,
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
        digest = page_hash(raw)
        parsed = self._parsed(rel, raw, digest)
        targets = self._targets(user, rel, parsed.links)
        key = ("html", rel, digest, targets_fingerprint(targets))
        html = self.ctx.cache.get(key)
        if html is None:
            resolver = self.resolver_cls(self.memory, user)

            def lazy(target: str) -> Target:
                return resolver.resolve_many(rel, [target]).get(link_key(target), Target(None))

            settings = self.memory.settings
            rendered = render_markdown(
                parsed.body,
                rel,
                targets,
                lazy,
                _session_of(parsed),
                max_links=settings.max_links_per_reply,
                max_bytes=settings.max_page_html_bytes,
            )
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
        # a page view holds a few copies of its page while it is built: bounded how
        # many are built at once, so fifty readers of a big page do not hold fifty
        with PAGE_BUILDS:
            return spooled(self._build_page_view(request, rel, via_session))

    def _build_page_view(
        self, request: Request, rel: str, via_session: str | None = None
    ) -> Response:
        user = self._user(request)
        try:
            raw = self._read(user, rel)
        except _NotFound:
            # a session the reader may not see answers like one that does not exist
            return self._not_found(request, "No such session." if via_session else "No such page.")
        if (gone := self._forgotten(request, rel, raw)) is not None:
            return gone
        meta_row = self.memory.page_meta(rel, user)
        self.memory.use.note("read", [rel], user.user or None)  # the use record
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
            source=self._source(raw) if source else None,
            backlinks=self._backlinks(user, rel),
            project=str(project) if project else None,
            via_session=via_session,
            version=None,
            **self._state(user, rel, m if isinstance(m, dict) else {}),
        )

    def _source(self, raw: bytes) -> str:
        """A page's text for the source view, cut like its rendered body
        (``max_page_html_bytes``) with a last line saying so."""
        limit = self.memory.settings.max_page_html_bytes
        text = raw.decode("utf-8", "replace")
        if len(raw) <= limit:
            return text
        part = cut_text(text, limit)
        return part + (
            f"\n\n[… the first {len(part.encode()):,} of {len(raw):,} bytes: read the whole "
            "page in its file or through the API (GET /v1/pages/… with a cursor)]\n"
        )

    def _state(self, user: Any, rel: str, meta: dict[str, Any]) -> dict[str, Any]:
        """The page's state as recall sees it: ``superseded`` (with the head of its
        chain) only when the supersession holds; a broken one is shown as current, with
        its cause (:mod:`wiki_memory.index.supersede`)."""
        state = page_state(meta)
        if state == "forgotten":
            return {"state": state, "superseded_by": None, "broken": None, "contradicts": []}
        chains = self.memory.reader.chains(user)
        copy = chains.copies.get(rel)
        if copy is not None:  # a conflict copy: ranked after its page, named as such
            return {
                "state": "conflict copy",
                "superseded_by": None,
                "broken": None,
                "conflict_of": copy[0],
                "conflict_side": copy[1],
                "contradicts": [],
            }
        head = chains.head.get(rel)
        flags = find_contradictions(self.memory.index, self.memory.scope, user, None, [rel])
        return {
            "state": "superseded" if head else "current",
            "superseded_by": head,
            "broken": chains.broken.get(rel),
            # the notes it disagrees with, that this reader may read (both are kept)
            "contradicts": [
                {"path": f["b"], "says": f["b_says"]}
                if f["a"] == rel
                else {"path": f["a"], "says": f["a_says"]}
                for f in flags
            ],  # fmt: skip
        }

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
        parsed = self._parsed(rel, raw, page_hash(raw))
        try:  # only versions the reader may see (a page may have been personal once)
            commits = self.memory.page_history(rel, user, limit=200)
        except (NotFound, PathRefused):
            return self._not_found(request)
        rev = request.query_params.get("rev", "")
        if rev and (gone := self._forgotten(request, rel, raw)) is not None:
            return gone  # a version or a diff would show its text
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


def _int_param(value: str | None) -> int:
    """A non-negative integer query parameter (0 for anything else)."""
    try:
        return max(0, int(value or 0))
    except ValueError:
        return 0
