"""``POST /v1/agent-files``: import the harnesses' instruction and memory files a client
read on its machine (docs/agent-files.md, docs/api.md). The core decides everything
(:func:`wiki_memory.core.agentimport.import_files`); this module only reads the body and
finds the project the body names (by its ``repo_id`` first, as a hook's events)."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from wiki_memory.core.agentimport import check_files, import_files
from wiki_memory.core.memory import Memory
from wiki_memory.core.projects import UnknownProject
from wiki_memory.core.repos import MAX_ID
from wiki_memory.errors import BadRequest
from wiki_memory.identity import Identity
from wiki_memory.server.http import body_project, caller, read_json, str_field, write_project

__all__ = ["ROUTES"]

#: a request carries up to this many times the largest page
BODY_PAGES = 8


async def agent_files(request: Request) -> Response:
    """``{"files": [{"source", "scope", "text", "harness"?}], "project"?, "repo_id"?,
    "cwd"?, "create_project"?, "dry_run"?}`` -> ``{"project", "dry_run", "files":
    [...]}``; 200 (a dry run too)."""
    memory: Memory = request.app.state.memory
    body = await read_json(request, memory.settings.max_body_bytes * BODY_PAGES)
    if not isinstance(body, dict):
        raise BadRequest("a JSON object is expected", field="body")
    dry = body.get("dry_run", False)
    if not isinstance(dry, bool):
        raise BadRequest("dry_run must be true or false", field="dry_run")
    files: Any = body.get("files")
    user = caller(request)
    wants_project = isinstance(files, list) and any(
        isinstance(f, dict) and not str(f.get("source", "")).startswith("~/") for f in files
    )
    rid = body.get("repo_id") if isinstance(body.get("repo_id"), str) else None

    def run() -> dict[str, Any]:
        check_files(files)  # a malformed body is named before any project is looked up
        if not wants_project:
            return import_files(memory, user, files, project=None, dry_run=dry)
        if dry:
            return preview(memory, body, user, files, rid)
        with write_project(memory, body, user, op="page.write") as (project, who):
            return import_files(memory, who, files, project=project, repo_id=rid)

    return JSONResponse(await run_in_threadpool(run))


def preview(
    memory: Memory, body: dict[str, Any], user: Identity, files: Any, rid: Any
) -> dict[str, Any]:
    """A dry run's project, found as the brief finds it (the repository's binding, else
    the name), binding and creating nothing; a project not made yet answers each of its
    files ``new``."""
    name = str_field(body, "project")
    if rid and name:
        origin = str_field(body, "repo_origin")
        origin = origin if origin and len(origin) <= MAX_ID else None
        name = memory.repos.place(name, rid, origin=origin, reserve=False)[0]
    try:
        project = body_project(memory, {**body, "project": name}, user, required=True)
    except UnknownProject:
        if not name:
            raise
        return import_files(memory, user, files, project=name, dry_run=True, new_project=True)
    return import_files(memory, user, files, project=project, repo_id=rid, dry_run=True)


ROUTES = [Route("/v1/agent-files", agent_files, methods=["POST"])]
