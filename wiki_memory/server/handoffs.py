"""HTTP routes for handoffs (``/v1/handoffs``) and the brief (``/v1/brief``).

Thin: each route validates its JSON, calls :class:`wiki_memory.core.handoffs.HandoffService`
or :func:`wiki_memory.core.brief.build_brief` with the caller the authentication middleware built (``caller(request)``)
and the ``harness``/``session_id`` named in the body. Errors are the app's one table
(:data:`wiki_memory.errors.TABLE`):

- 400 bad JSON or field (``field`` names it), 404 no such handoff (or one the caller may
  not see), 403 not the creator (cancel), 409 the state forbids it
  (``{"error": "claimed"|"offered"|"done"|"cancelled"|"expired"|"not_claimed", "message",
  "state", "holder"?}``: ``state`` is the handoff's status), 503 with ``Retry-After`` when an outside git holds the wiki
  too long (the change is on disk; retrying is safe).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from wiki_memory.core.brief import DEFAULT_BUDGET, build_brief
from wiki_memory.core.briefagent import check_loaded
from wiki_memory.core.repos import MAX_ID
from wiki_memory.errors import BadRequest, NotFound
from wiki_memory.server.http import (
    body_project,
    caller,
    int_field,
    parse_json,
    read_body,
    read_json,
    str_field,
    write_project,
)

if TYPE_CHECKING:
    from wiki_memory.core.memory import Memory

VERBS = ("claim", "complete", "cancel", "release")


def routes(memory: Memory) -> list[Any]:
    """The Starlette routes of this face, over the handoff service ``memory`` owns
    (``memory.handoffs``); errors reach the app's one handler."""
    svc = memory.handoffs
    limit = memory.settings.max_body_bytes

    async def body_of(request: Request, optional: bool = False) -> dict[str, Any]:
        if optional:
            raw = await read_body(request, limit)
            if not raw.strip():
                return {}
            body = parse_json(raw)
        else:
            body = await read_json(request, limit)
        if not isinstance(body, dict):
            raise BadRequest("a JSON object is expected", field="body")
        return body

    async def call(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        # errors reach the app's one handler (wiki_memory.errors.TABLE)
        return await run_in_threadpool(fn, *args, **kw)

    def ident(body: dict[str, Any]) -> dict[str, str | None]:
        return {"harness": str_field(body, "harness"), "session_id": str_field(body, "session_id")}

    async def create(request: Request) -> Response:
        body = await body_of(request)
        title = str_field(body, "title", required=True)
        kw: dict[str, Any] = {"title": title, **ident(body)}
        for name in ("to", "visibility", "where_we_left_off", "what_failed", "session_page"):
            kw[name] = str_field(body, name)
        for name in ("open_questions", "next_steps", "files"):
            v = body.get(name)
            if v is not None and not isinstance(v, str | list):
                raise BadRequest(f"{name} must be a string or a list", field=name)
            kw[name] = v
        exp = body.get("expires")
        if exp is not None and (isinstance(exp, bool) or not isinstance(exp, str | int | float)):
            raise BadRequest("expires must be ISO-8601 text", field="expires")
        kw["expires"] = exp
        if body.get("expires_in_seconds") is not None:
            kw["expires_in_seconds"] = int_field(body, "expires_in_seconds", 0, 1, 10 * 365 * 86400)
        if kw["session_page"] is not None:
            from wiki_memory.wiki.paths import PathRefused, clean_rel

            try:
                kw["session_page"] = clean_rel(kw["session_page"])
            except PathRefused as exc:
                raise PathRefused(exc.message, field="session_page") from None
        user = caller(request)
        personal = str_field(body, "visibility") == "personal"

        def run() -> Any:
            with write_project(memory, body, user, op="handoff.create", personal=personal) as (
                project,
                who,
            ):
                return svc.create(who, project=project, **kw)

        res = await call(run)
        return JSONResponse({"handoff": res}, 201)

    async def list_(request: Request) -> Response:
        q = dict(request.query_params)
        res = await call(
            svc.list_handoffs,
            caller(request),
            project=q.get("project") or None,
            status=q.get("status") or None,
            limit=int_field(q, "limit", 200, 1, 5000),
        )
        return JSONResponse({"handoffs": res})

    async def show(request: Request) -> Response:
        res = await call(svc.show, caller(request), request.path_params["hid"])
        return JSONResponse({"handoff": res})

    async def action(request: Request) -> Response:
        verb = request.path_params["verb"]
        hid = request.path_params["hid"]
        if verb not in VERBS:
            raise NotFound(f"no such action: {verb} ({', '.join(VERBS)})")
        body = await body_of(request, optional=True)
        user = caller(request)
        if verb == "claim":
            res = await call(svc.claim, user, hid, **ident(body))
        elif verb == "complete":
            res = await call(svc.complete, user, hid, note=str_field(body, "note"), **ident(body))
        elif verb == "release":
            res = await call(svc.release, user, hid, **ident(body))
        else:
            res = await call(svc.cancel, user, hid, reason=str_field(body, "reason"))
        return JSONResponse(res)

    async def brief(request: Request) -> Response:
        body = await body_of(request)
        max_offers = body.get("max_offers")
        budget = int_field(body, "budget_tokens", DEFAULT_BUDGET, 0, 1_000_000)
        offers = None if max_offers is None else int_field(body, "max_offers", 0, 0, 100)
        shared = body.get("shared", False)
        if not isinstance(shared, bool):
            raise BadRequest("shared must be true or false", field="shared")
        loaded = check_loaded(body.get("instruction_files"))
        # the shared brief (``brief --write``) is nobody's session: no handoff is leased
        who = {} if shared else ident(body)
        rid, name = str_field(body, "repo_id"), str_field(body, "project")
        if rid and name:
            # the hook's repository: its project, not the folder name's (core/repos.py);
            # its origin names the folder a new one of a taken name gets (api-<owner>)
            origin = str_field(body, "repo_origin")
            origin = origin if origin and len(origin) <= MAX_ID else None
            placed = memory.repos.place(name, rid, origin=origin, reserve=False)[0]
            body = {**body, "project": placed}
        if str_field(body, "project"):
            # an explicit name: any case, one the caller may read (404 unknown_project)
            project = await call(body_project, memory, body, caller(request), required=True)
        else:
            if not (str_field(body, "cwd") or str_field(body, "session_id")):
                str_field(body, "project", required=True)  # 400: a project, or a cwd or session
            # a hook that found no project: the session's current project, else none:
            # the brief of a session with no project, its user's own (core/brief.py);
            # the server never looks at its own disk at the caller's cwd
            project = await call(
                memory.capturer.project_of,
                caller(request),
                str_field(body, "harness"),
                str_field(body, "session_id"),
            )
        res = await call(
            build_brief,
            memory,
            caller(request),
            project=project,
            budget_tokens=budget,
            max_offers=offers,
            source=str_field(body, "source"),
            loaded=loaded,
            shared=shared,
            **who,
        )
        return JSONResponse({**res, "project": project})

    return [
        Route("/v1/handoffs", create, methods=["POST"]),
        Route("/v1/handoffs", list_, methods=["GET"]),
        Route("/v1/handoffs/{hid}", show, methods=["GET"]),
        Route("/v1/handoffs/{hid}/{verb}", action, methods=["POST"]),
        Route("/v1/brief", brief, methods=["POST"]),
    ]
