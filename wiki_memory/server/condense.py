"""``POST /v1/admin/condense`` and ``POST /v1/admin/uncondense`` (docs/api.md): cold
session pages condensed to their durable facts and back, for the wiki's owner and admins
(:mod:`wiki_memory.core.condense` decides who may and does the work)."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from wiki_memory.core.condense import condense_sessions, uncondense
from wiki_memory.errors import BadRequest
from wiki_memory.server.http import caller, read_json

__all__ = ["condense", "uncondense_page"]


async def _body(request: Request) -> dict[str, Any]:
    body = await read_json(request, request.app.state.memory.settings.max_body_bytes)
    if not isinstance(body, dict):
        raise BadRequest("the body must be an object")
    return body


async def condense(request: Request) -> Response:
    """``POST /v1/admin/condense``: ``{"older_than_days"?: number, "dry_run"?: bool,
    "project"?: str}`` → :func:`wiki_memory.core.condense.condense_sessions`'s answer."""
    body = await _body(request)
    days = body.get("older_than_days")
    if days is not None and (isinstance(days, bool) or not isinstance(days, int | float)):
        raise BadRequest("older_than_days must be a number", field="older_than_days")
    dry = body.get("dry_run", False)
    if not isinstance(dry, bool):
        raise BadRequest("dry_run must be a boolean", field="dry_run")
    project = body.get("project")
    if project is not None and not isinstance(project, str):
        raise BadRequest("project must be a string", field="project")
    memory = request.app.state.memory
    who = caller(request)
    res = await run_in_threadpool(
        lambda: condense_sessions(
            memory, who, older_than_days=days, dry_run=dry, project=project or None
        )
    )
    return JSONResponse(res)


async def uncondense_page(request: Request) -> Response:
    """``POST /v1/admin/uncondense``: ``{"path": str}`` →
    :func:`wiki_memory.core.condense.uncondense`'s answer."""
    body = await _body(request)
    if not isinstance(body.get("path"), str):
        raise BadRequest("path must be a string", field="path")
    memory = request.app.state.memory
    res = await run_in_threadpool(uncondense, memory, caller(request), body["path"])
    return JSONResponse(res)
