"""Request helpers every ``/v1`` route shares: reading a bounded JSON or raw body,
checked integer and string fields. A bad request raises one of the typed errors of
:mod:`wiki_memory.errors` (answered through its table by the app's one handler)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from wiki_memory.errors import BadJson, BadRequest, TooLarge
from wiki_memory.identity import Identity, of_request
from wiki_memory.mcp.callers import asked_project

if TYPE_CHECKING:
    from wiki_memory.core.memory import Memory

__all__ = [
    "body_project",
    "caller",
    "write_project",
    "parse_json",
    "read_body",
    "read_json",
    "int_field",
    "str_field",
]


def caller(request: Request) -> Identity:
    """The caller of ``request``: the :class:`~wiki_memory.identity.Identity` the
    authentication middleware built for it, the one value every route hands to the core
    (:func:`wiki_memory.identity.of_request`; ANONYMOUS on an open path)."""
    return of_request(request.scope)


async def read_json(request: Request, limit: int) -> Any:
    """The request body as JSON; raises TooLarge (413) over ``limit`` bytes, BadRequest (400) when invalid."""
    return json_body(await read_body(request, limit))


def json_body(raw: bytes) -> Any:
    """``raw`` (a request body) as JSON; raises BadRequest (400) when it is empty or invalid."""
    if not raw.strip():
        raise BadRequest("the request body is empty; JSON expected", field="body")
    return parse_json(raw)


def parse_json(raw: bytes) -> Any:
    """``raw`` (a request body) as JSON; raises BadJson (400) when it is not."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise BadJson("the body is nested too deeply", field="body") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadJson(f"the body is not valid JSON: {exc}", field="body") from None


async def read_body(request: Request, limit: int) -> bytes:
    """The raw request body; raises TooLarge (413) over ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"request body is over the limit of {limit} bytes")
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLarge(f"request body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def int_field(d: Any, name: str, default: int, lo: int = 0, hi: int = 10**7) -> int:
    v = d.get(name, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int | str):
        raise BadRequest(f"{name} must be an integer", field=name)
    try:
        n = int(v)
    except ValueError:
        raise BadRequest(f"{name} must be an integer", field=name) from None
    if n < lo or n > hi:
        raise BadRequest(f"{name} must be between {lo} and {hi}", field=name)
    return n


def str_field(d: Any, name: str, required: bool = False) -> str | None:
    v = d.get(name)
    if v is None or v == "":
        if required:
            raise BadRequest(f"{name} is required", field=name)
        return None if v is None else ""
    if not isinstance(v, str):
        raise BadRequest(f"{name} must be a string", field=name)
    return v


def body_project(
    memory: Memory,
    body: Any,
    user: Identity | None,
    *,
    required: bool,
    personal: bool = False,
    op: str | None = None,
) -> str | None:
    """The project a request body is about: its ``project`` (any case) and ``cwd``, by the
    core's one rule (``Memory.resolve_project``, docs/mcp.md "Project"). Raises
    UnknownProject (404, listing the caller's projects) for a name that matches none, and
    BadRequest (400) when ``required`` and nothing names one. ``personal``: the body writes
    into the caller's own folder, where any clean name is a label (``Memory.resolve_project``).
    ``op``: the body asks for a write of that audit operation; a refused name is then a
    ``not_found`` line of the audit log (a write refused before it reaches the core)."""
    return asked_project(
        memory,
        user,
        str_field(body, "project"),
        str_field(body, "cwd"),
        required=required,
        personal=personal,
        op=op,
        missing=lambda: no_project(memory, user),
    )


def no_project(memory: Memory, user: Identity | None) -> BadRequest:
    """The 400 for a body that names no project where one is required."""
    return BadRequest(
        "project is required (or a cwd inside a project's repository); "
        + memory.project_access.listing(user),
        field="project",
    )


def _bool(d: Any, name: str) -> bool:
    v = d.get(name)
    if v is None:
        return False
    if not isinstance(v, bool):
        raise BadRequest(f"{name} must be true or false", field=name)
    return v


@contextmanager
def write_project(
    memory: Memory, body: Any, user: Identity | None, *, op: str, personal: bool = False
) -> Iterator[tuple[str, Identity]]:
    """Around a write a request body asks for: the project it goes to and the caller to
    write it as (holding the grant of a project created for it), by its
    ``project``, ``cwd``, ``repo_id`` and ``create_project``
    (:meth:`wiki_memory.core.newproject.ProjectStart.writing`: an unknown name is a 404
    ``unknown_project`` saying how to create it, unless ``create_project`` is true and
    the caller may create projects). Raises BadRequest (400) when nothing names one."""
    with memory.project_start.writing(
        user,
        explicit=str_field(body, "project"),
        op=op,
        cwd=str_field(body, "cwd"),
        repo_id=body.get("repo_id"),
        create=_bool(body, "create_project"),
        personal=personal,
    ) as (found, who):
        if found is None:
            raise no_project(memory, user)
        yield found, who
