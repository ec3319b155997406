"""The ``/v1`` endpoints of the JSON API (docs/api.md), one module-level function each.

Each reaches the core through the app's state (``request.app.state.memory``, set by
:func:`wiki_memory.server.app.create_app`) and passes the caller's identity down to it;
none decides who may see or write a page (the core's one scope rule does) or maps an error
to a status (the app's one exception handler does). :data:`ROUTES` is the table
``create_app`` mounts.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from wiki_memory.audit import dumps
from wiki_memory.core import pins, syncconflicts
from wiki_memory.core.edits import edit_page
from wiki_memory.core.forget import forget_page, forget_query
from wiki_memory.core.memory import Memory
from wiki_memory.core.pages import INLINE_SCAN_CHARS, page_path_for_write, redact_page_text
from wiki_memory.core.purge import purge_page
from wiki_memory.core.recaller import MAX_BUDGET_TOKENS
from wiki_memory.core.remember import remember as remember_note
from wiki_memory.core.unrendered import discard_unrendered, list_unrendered
from wiki_memory.errors import (
    BadRequest,
    Conflict,
    PreconditionRequired,
    WikiMemoryError,
    rule_for,
)
from wiki_memory.mcp.callers import TZ_HEADER
from wiki_memory.plainfile import page_hash
from wiki_memory.recall.query import RecallQuery
from wiki_memory.server.condense import condense, uncondense_page
from wiki_memory.server.http import (
    body_project,
    caller,
    int_field,
    json_body,
    parse_json,
    read_body,
    read_json,
    str_field,
    write_project,
)
from wiki_memory.web.replies import spooled

__all__ = [
    "CAPTURE_THREADS",
    "INLINE_BYTES",
    "INLINE_EVENTS",
    "PAGE_BUILDS",
    "ROUTES",
    "list_reply",
]

#: page replies built at once (``GET /v1/pages/{path}``)
PAGE_BUILDS = 2
#: threads that run the captures of longer lists (each waits for its group's fsync there)
CAPTURE_THREADS = 16
#: most events of a request captured on the event loop itself (the fsync awaited) ...
INLINE_EVENTS = 4
#: ... and most bytes of its body: the scan of a longer one runs in a thread, since every
#: other request would wait for a scan on the loop (the sanitizer takes 0.1-0.3 s per MiB;
#: a bench observation is about 0.6 KB). The same bound as a page's text
INLINE_BYTES = INLINE_SCAN_CHARS


def list_reply(results: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The per-item entries of a list's reply to ``POST /v1/observations`` (docs/api.md)
    and how many items were refused. An accepted item is ``{"status": 202, "id",
    "duplicate", "session_key"}``; a refused one is ``{"status": <the status the error
    would have alone>, "error", "message", "field"?, ...}`` from the one error table."""
    items: list[dict[str, Any]] = []
    refused = 0
    for r in results:
        err = r.get("refused")
        if isinstance(err, WikiMemoryError):
            items.append({"status": rule_for(err).status, **err.body()})
            refused += 1
        else:
            items.append({"status": 202, **r})
    return items, refused


def _version() -> str:
    from wiki_memory import __version__

    return __version__


async def health(request: Request) -> Response:
    memory: Memory = request.app.state.memory
    commits = memory.commit_status(detail=False)
    return JSONResponse(
        {
            "ok": commits["ok"],
            "version": _version(),
            "commits": commits,
            "watcher": memory.watcher_alive(),
        }
    )


async def observations(request: Request) -> Response:
    memory: Memory = request.app.state.memory
    raw = await read_body(request, memory.settings.max_body_bytes)
    body = json_body(raw)
    user = caller(request)
    if len(raw) <= INLINE_BYTES and (not isinstance(body, list) or len(body) <= INLINE_EVENTS):
        # a few events: their CPU work here, on the loop, costs less than a hop to a
        # thread and back; only the fsync is waited for elsewhere
        result = await memory.capturer.capture_async(body, user, raw)
    else:
        ctx = contextvars.copy_context()  # the request's context goes along
        result = await asyncio.get_running_loop().run_in_executor(
            request.app.state.capture_pool, ctx.run, memory.capture, body, user, raw
        )
    if isinstance(body, list):
        items, refused = list_reply(result)
        return JSONResponse({"accepted": items, "refused": refused}, 207 if refused else 202)
    r = result[0]
    held = {"held": True} if r.get("held") else {}
    return JSONResponse({"id": r["id"], "duplicate": r["duplicate"], **held}, 202)


async def recall(request: Request) -> Response:
    memory: Memory = request.app.state.memory
    body = await read_json(request, memory.settings.max_body_bytes)
    if not isinstance(body, dict):
        raise BadRequest("a JSON object is expected", field="body")
    if body.get("query") is None:
        raise BadRequest("query is required (a string)", field="query")
    query = str_field(body, "query") or ""
    budget = int_field(
        body, "budget_tokens", memory.settings.default_budget_tokens, 0, MAX_BUDGET_TOKENS
    )
    cursor = int_field(body, "cursor", 0, 0, (1 << 53) - 1)  # a walk cursor (core.recaller)
    project = await run_in_threadpool(body_project, memory, body, caller(request), required=False)
    kinds = body.get("kinds")  # [] allows no kind; a wrong type is a 400 from Filters
    if kinds is None and isinstance(body.get("kind"), str):
        kinds = [body["kind"]]
    question = RecallQuery(
        query,
        project=project,
        kinds=kinds,
        tags=body.get("tags"),
        since=body.get("since"),
        until=body.get("until"),
        as_of=body.get("as_of"),
        now=body.get("now"),
        tz=body.get("tz") or request.headers.get(TZ_HEADER),
        budget_tokens=budget,
        cursor=cursor,
    )
    res = await run_in_threadpool(memory.recall, question, user=caller(request))
    return JSONResponse(res.to_json())


async def expand(request: Request) -> Response:
    memory: Memory = request.app.state.memory
    body = await read_json(request, memory.settings.max_body_bytes)
    if not isinstance(body, dict):
        raise BadRequest("a JSON object is expected", field="body")
    ids = body.get("ids")
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise BadRequest("ids must be a list of strings", field="ids")
    budget = int_field(
        body, "budget_tokens", memory.settings.default_budget_tokens, 0, MAX_BUDGET_TOKENS
    )
    res = await run_in_threadpool(memory.expand, ids, budget, caller(request))
    return JSONResponse(res)


async def use(request: Request) -> Response:
    """``GET /v1/use?days=N``: the caller's own rows of the use record."""
    memory: Memory = request.app.state.memory
    days = int_field(dict(request.query_params), "days", 30, 1, 400)
    rows = await run_in_threadpool(memory.reader.use_rows, caller(request), days)
    return JSONResponse({"days": days, "rows": rows})


async def feedback(request: Request) -> Response:
    """``POST /v1/feedback``: ``{"path", "verdict": "helped" | "not_helpful"}``, the
    caller's verdict on a page it may read (docs/api.md, docs/knowledge.md "Strength")."""
    from wiki_memory.core.feedback import give_feedback

    memory: Memory = request.app.state.memory
    body = await read_json(request, memory.settings.max_body_bytes)
    if not isinstance(body, dict):
        raise BadRequest("a JSON object is expected", field="body")
    path = str_field(body, "path", required=True)
    verdict = str_field(body, "verdict", required=True)
    res = await run_in_threadpool(give_feedback, memory, str(path), str(verdict), caller(request))
    return JSONResponse(res)


async def contradictions(request: Request) -> Response:
    """``GET /v1/contradictions?project=P``: the contradiction flags the caller may read
    both sides of (docs/api.md)."""
    from wiki_memory.core.contradictions import contradictions_for

    memory: Memory = request.app.state.memory
    project = request.query_params.get("project") or None
    found = await run_in_threadpool(contradictions_for, memory, request.state.identity, project)
    return JSONResponse({"contradictions": found})


async def pages(request: Request) -> Response:
    memory: Memory = request.app.state.memory
    q = request.query_params
    res = await run_in_threadpool(
        memory.list_pages,
        project=q.get("project") or None,
        kind=q.get("kind") or None,
        since=q.get("since") or None,
        limit=int_field(dict(q), "limit", 100, 1, 1000),
        offset=int_field(dict(q), "offset", 0),
        user=caller(request),
    )
    return JSONResponse({"pages": res})


async def page(request: Request) -> Response:
    memory: Memory = request.app.state.memory
    path = request.path_params["path"]
    q = request.query_params
    # a reply holds a few copies of its content while it is built: bounded how
    # many are built at once (docs/team-server.md, slow readers)
    async with request.app.state.page_builds:
        res = await run_in_threadpool(
            memory.read_page,
            path,
            int_field(dict(q), "cursor", 0),
            int_field(dict(q), "max_bytes", 64 * 1024, 1, 4 * 1024 * 1024),
            caller(request),
        )
        return spooled(JSONResponse(res))


async def put_page(request: Request) -> Response:
    """``PUT /v1/pages/{path}``: write a whole page with a compare-and-set (docs/api.md).

    The path is in the URL, so the caller's right to write it is decided before the
    body is read (a refused caller's body is never parsed or scanned), and a text
    over a few KiB is scanned for secrets in a worker thread, off the event loop."""
    memory: Memory = request.app.state.memory
    path = page_path_for_write(request.path_params["path"])
    user = caller(request)
    await run_in_threadpool(memory.scope.write_check, user, path)
    raw = await read_body(request, memory.settings.max_body_bytes)
    supersedes: Any = None
    if request.headers.get("content-type", "").startswith("application/json"):
        body = parse_json(raw)
        if not isinstance(body, dict) or not isinstance(body.get("text"), str):
            raise BadRequest("text must be a string", field="text")
        text = body["text"]
        supersedes = body.get("supersedes")
    else:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise BadRequest("the page must be UTF-8", field="body") from None
    if len(text) <= INLINE_SCAN_CHARS:
        data, redacted = redact_page_text(text)
    else:
        data, redacted = await run_in_threadpool(redact_page_text, text)
    if_match = (request.headers.get("if-match") or "").strip()
    create_only = request.headers.get("if-none-match", "").strip() == "*" or not if_match
    if if_match == "*":
        raise BadRequest("If-Match needs the page's hash", field="If-Match")
    expected = if_match.removeprefix("W/").strip('"') or None
    try:
        res = await run_in_threadpool(
            memory.write_page,
            path,
            data,
            user=user.user,
            message=f"Write {path}",
            expected_hash=expected,
            create_only=create_only,
            who=user,
            supersedes=supersedes,
        )
    except Conflict as exc:
        # only ever for a page the caller may see: the scope rule answers 404 first
        cur = exc.current_hash
        if not if_match and request.headers.get("if-none-match") is None:
            raise PreconditionRequired(
                f"{path} exists: send If-Match with its hash to replace it", hash=cur
            ) from None
        raise Conflict(str(exc), hash=cur) from None
    digest = res.value or page_hash(data)
    status = 201 if expected is None and res.value is not None else 200
    path = res.paths[0] if res.paths else path  # the existing file's own spelling
    reply: dict[str, Any] = {"path": path, "hash": digest, "redacted": redacted}
    if not res.indexed:
        reply["indexed"] = False  # written and committed; indexed again later
    return JSONResponse(
        reply,
        status,
        headers={"ETag": f'"{digest}"'},
    )


async def remember(request: Request) -> Response:
    """``POST /v1/remember``: save a note in ``projects/<project>/notes/`` (docs/api.md)."""
    memory: Memory = request.app.state.memory
    body = await read_json(request, memory.settings.max_body_bytes)
    if not isinstance(body, dict):
        raise BadRequest("a JSON object is expected", field="body")
    # every field is checked by the core (BadRequest naming the field)
    text: Any = body.get("text")
    user = caller(request)

    def run() -> Any:
        with write_project(memory, body, user, op="page.write") as (project, who):
            return remember_note(
                memory,
                text,
                project=project,
                title=body.get("title"),
                tags=body.get("tags"),
                user=who,
                harness=body.get("harness"),
                session_id=body.get("session_id"),
                supersedes=body.get("supersedes"),
                if_new=body.get("if_new") is True,
            )

    res = await run_in_threadpool(run)
    # 201 only when a note was written: a duplicate or an if_new refusal adds none
    return JSONResponse(res, 201 if res.get("written", True) and not res.get("duplicate") else 200)


async def reindex(request: Request) -> Response:
    memory: Memory = request.app.state.memory
    n = await run_in_threadpool(memory.reindex, caller(request))
    return JSONResponse({"pages": n})


async def pin(request: Request) -> Response:
    """``POST /v1/admin/pin``: ``{"path", "pinned": bool}`` (owner and admins)."""
    memory: Memory = request.app.state.memory
    body = await read_json(request, memory.settings.max_body_bytes)
    if not isinstance(body, dict) or not isinstance(body.get("path"), str):
        raise BadRequest("path must be a string", field="path")
    pinned = body.get("pinned", True)
    if not isinstance(pinned, bool):
        raise BadRequest("pinned must be true or false", field="pinned")
    res = await run_in_threadpool(pins.set_pinned, memory, body["path"], pinned, caller(request))
    return JSONResponse(res)


async def forget(request: Request) -> Response:
    """``POST /v1/forget``: ``{"path"}``, or ``{"query", "project"?, "dry_run"?}`` (a dry
    run unless ``dry_run`` is false); any caller who may write the page
    (docs/operations.md, docs/knowledge.md)."""
    memory: Memory = request.app.state.memory
    body = await read_json(request, memory.settings.max_body_bytes)
    if isinstance(body, dict) and "query" in body:
        if "path" in body:
            raise BadRequest("give path or query, not both", field="query")
        query, project, dry = body["query"], body.get("project"), body.get("dry_run", True)
        if not isinstance(query, str):
            raise BadRequest("query must be a string", field="query")
        if project is not None and not isinstance(project, str):
            raise BadRequest("project must be a string", field="project")
        if not isinstance(dry, bool):
            raise BadRequest("dry_run must be true or false", field="dry_run")
        res = await run_in_threadpool(
            lambda: forget_query(memory, query, caller(request), project=project, dry_run=dry)
        )
        return JSONResponse(res)
    if not isinstance(body, dict) or not isinstance(body.get("path"), str):
        raise BadRequest("path must be a string", field="path")
    res = await run_in_threadpool(forget_page, memory, body["path"], caller(request))
    return JSONResponse(res)


async def edit(request: Request) -> Response:
    """``POST /v1/edit``: a precise edit of one page, ``{"op", "path", "text"?,
    "section"?, "hash"?, "new_path"?, "edit_id"?}`` (docs/api.md "Precise edits";
    :func:`wiki_memory.core.edits.edit_page` decides everything)."""
    memory: Memory = request.app.state.memory
    body = await read_json(request, memory.settings.max_body_bytes + 64 * 1024)
    if not isinstance(body, dict):
        raise BadRequest("a JSON object is expected", field="body")
    fields = {n: str_field(body, n) for n in ("section", "hash", "new_path", "edit_id")}
    text = body.get("text")
    if text is not None and not isinstance(text, str):
        raise BadRequest("text must be a string", field="text")
    res = await run_in_threadpool(
        lambda: edit_page(
            memory,
            str(str_field(body, "op", required=True)),
            str(str_field(body, "path", required=True)),
            who=caller(request),
            text=text,
            section=fields["section"],
            expected_hash=fields["hash"],
            new_path=fields["new_path"],
            edit_id=fields["edit_id"],
        )
    )
    return JSONResponse(res, 200)


async def purge(request: Request) -> Response:
    """``POST /v1/admin/purge``: ``{"path", "text"?}`` (owner and admins;
    docs/operations.md)."""
    memory: Memory = request.app.state.memory
    body = await read_json(request, memory.settings.max_body_bytes)
    if not isinstance(body, dict) or not isinstance(body.get("path"), str):
        raise BadRequest("path must be a string", field="path")
    text = body.get("text")
    if text is not None and not isinstance(text, str):
        raise BadRequest("text must be a string", field="text")
    res = await run_in_threadpool(purge_page, memory, body["path"], caller(request), text)
    return JSONResponse(res)


async def sync(request: Request) -> Response:
    """``POST /v1/admin/sync``: ``{"remote"?, "after_purge"?, "accept_deletions"?,
    "rewrite_hub"?}`` (owner and admins);
    ``{"reports": [...], "status": {...}}`` (docs/operations.md, "Sync")."""
    memory: Memory = request.app.state.memory
    body = await read_json(request, memory.settings.max_body_bytes)
    if not isinstance(body, dict):
        raise BadRequest("the body must be an object")
    remote = body.get("remote")
    if remote is not None and not isinstance(remote, str):
        raise BadRequest("remote must be a string", field="remote")
    flags = {k: body.get(k, False) for k in ("after_purge", "accept_deletions", "rewrite_hub")}
    for key in [k for k, v in flags.items() if not isinstance(v, bool)]:
        raise BadRequest(f"{key} must be a boolean", field=key)
    who = caller(request)
    reports = await run_in_threadpool(lambda: memory.sync.sync(remote, who=who, **flags))
    status = await run_in_threadpool(memory.sync.status)
    return JSONResponse({"reports": [r.to_json() for r in reports], "status": status})


async def unrendered(request: Request) -> Response:
    """``GET /v1/admin/unrendered``: accepted events on no page as themselves (owner and
    admins; :func:`wiki_memory.core.unrendered.list_unrendered`)."""
    memory: Memory = request.app.state.memory
    rows = await run_in_threadpool(list_unrendered, memory, caller(request))
    return JSONResponse({"sessions": rows, "events": sum(r["events"] for r in rows)})


async def discard(request: Request) -> Response:
    """``POST /v1/admin/unrendered/discard``: ``{"session"}`` (owner and admins;
    :func:`wiki_memory.core.unrendered.discard_unrendered`)."""
    memory: Memory = request.app.state.memory
    body = await read_json(request, memory.settings.max_body_bytes)
    if not isinstance(body, dict) or not isinstance(body.get("session"), str):
        raise BadRequest("session must be a string", field="session")
    res = await run_in_threadpool(discard_unrendered, memory, caller(request), body["session"])
    return JSONResponse(res)


async def audit(request: Request) -> Response:
    """``GET /v1/audit?user=&since=&limit=``: the audit log (owner and admins)."""
    memory: Memory = request.app.state.memory
    q = request.query_params
    lines = await run_in_threadpool(
        pins.read_audit,
        memory,
        caller(request),
        q.get("user") or None,
        q.get("since") or None,
        int_field(dict(q), "limit", 1000, 1, 100_000),
    )
    return Response(dumps({"lines": lines}), media_type="application/json")


async def sync_conflicts(request: Request) -> Response:
    """``GET /v1/sync-conflicts``: the conflict copies the caller may see, one line each
    naming whose version is where (docs/git.md, "Conflict copies")."""
    memory: Memory = request.app.state.memory
    res = await run_in_threadpool(syncconflicts.list_conflicts, memory, caller(request))
    return JSONResponse(res)


async def resolve_conflict(request: Request) -> Response:
    """``POST /v1/sync-conflicts/resolve``: ``{"copy", "keep": "page"|"copy"}``; any
    caller who may write the page and the copy."""
    memory: Memory = request.app.state.memory
    body = await read_json(request, memory.settings.max_body_bytes)
    if not isinstance(body, dict) or not isinstance(body.get("copy"), str):
        raise BadRequest("copy must be a string", field="copy")
    res = await run_in_threadpool(
        syncconflicts.resolve_conflict,
        memory,
        body["copy"],
        str(body.get("keep", "")),
        caller(request),
    )
    return JSONResponse(res)


ROUTES = [
    Route("/v1/health", health, methods=["GET"]),
    # the name load balancers and people try first; same answer, open like /v1/health
    Route("/health", health, methods=["GET"]),
    Route("/v1/observations", observations, methods=["POST"]),
    Route("/v1/recall", recall, methods=["POST"]),
    Route("/v1/expand", expand, methods=["POST"]),
    Route("/v1/pages", pages, methods=["GET"]),
    Route("/v1/pages/{path:path}", page, methods=["GET"]),
    Route("/v1/pages/{path:path}", put_page, methods=["PUT"]),
    Route("/v1/remember", remember, methods=["POST"]),
    Route("/v1/admin/reindex", reindex, methods=["POST"]),
    Route("/v1/admin/pin", pin, methods=["POST"]),
    Route("/v1/forget", forget, methods=["POST"]),
    Route("/v1/edit", edit, methods=["POST"]),
    Route("/v1/admin/purge", purge, methods=["POST"]),
    Route("/v1/admin/sync", sync, methods=["POST"]),
    Route("/v1/audit", audit, methods=["GET"]),
    Route("/v1/admin/unrendered", unrendered, methods=["GET"]),
    Route("/v1/admin/unrendered/discard", discard, methods=["POST"]),
    Route("/v1/sync-conflicts", sync_conflicts, methods=["GET"]),
    Route("/v1/sync-conflicts/resolve", resolve_conflict, methods=["POST"]),
    Route("/v1/use", use, methods=["GET"]),
    Route("/v1/feedback", feedback, methods=["POST"]),
    Route("/v1/contradictions", contradictions, methods=["GET"]),
    Route("/v1/admin/condense", condense, methods=["POST"]),
    Route("/v1/admin/uncondense", uncondense_page, methods=["POST"]),
]
