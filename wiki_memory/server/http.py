"""Request helpers every ``/v1`` route shares: reading a bounded JSON or raw body,
checked integer and string fields, and :class:`ApiError` for an error a route raises
by code (answered through :data:`wiki_memory.errors.TABLE` by the app's one handler)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from wiki_memory.audit import audit_result
from wiki_memory.errors import WikiMemoryError

if TYPE_CHECKING:
    from wiki_memory.core.memory import Memory

__all__ = [
    "ApiError",
    "body_project",
    "parse_json",
    "read_body",
    "read_json",
    "int_field",
    "str_field",
]


class ApiError(WikiMemoryError):
    """An error a route raises by code: answered as :data:`wiki_memory.errors.TABLE`
    says for ``code`` (``status`` is stated at the raise site for the reader and must
    agree with the table; a test checks every one)."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        field = extra.pop("field", None)
        headers = extra.pop("headers", None)
        super().__init__(message, field=field, headers=headers, **extra)
        self.stated_status = status
        self._code = code

    @property
    def error_code(self) -> str:
        return self._code


async def read_json(request: Request, limit: int) -> Any:
    """The request body as JSON; raises ApiError 413 over ``limit`` bytes, 400 when invalid."""
    return json_body(await read_body(request, limit))


def json_body(raw: bytes) -> Any:
    """``raw`` (a request body) as JSON; raises ApiError 400 when it is empty or invalid."""
    if not raw.strip():
        raise ApiError(400, "bad_request", "the request body is empty; JSON expected", field="body")
    return parse_json(raw)


def parse_json(raw: bytes) -> Any:
    """``raw`` (a request body) as JSON; raises ApiError 400 ``bad_json`` when it is not."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise ApiError(400, "bad_json", "the body is nested too deeply", field="body") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(
            400, "bad_json", f"the body is not valid JSON: {exc}", field="body"
        ) from None


async def read_body(request: Request, limit: int) -> bytes:
    """The raw request body; raises ApiError 413 over ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, "too_large", f"request body is over the limit of {limit} bytes")
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, "too_large", f"request body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def int_field(d: Any, name: str, default: int, lo: int = 0, hi: int = 10**7) -> int:
    v = d.get(name, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int | str):
        raise ApiError(400, "bad_request", f"{name} must be an integer", field=name)
    try:
        n = int(v)
    except ValueError:
        raise ApiError(400, "bad_request", f"{name} must be an integer", field=name) from None
    if n < lo or n > hi:
        raise ApiError(400, "bad_request", f"{name} must be between {lo} and {hi}", field=name)
    return n


def str_field(d: Any, name: str, required: bool = False) -> str | None:
    v = d.get(name)
    if v is None or v == "":
        if required:
            raise ApiError(400, "bad_request", f"{name} is required", field=name)
        return None if v is None else ""
    if not isinstance(v, str):
        raise ApiError(400, "bad_request", f"{name} must be a string", field=name)
    return v


def body_project(
    memory: Memory,
    body: Any,
    user: Any,
    *,
    required: bool,
    personal: bool = False,
    op: str | None = None,
) -> str | None:
    """The project a request body is about: its ``project`` (any case) and ``cwd``, by the
    core's one rule (``Memory.resolve_project``, docs/mcp.md "Project"). Raises
    UnknownProject (404, listing the caller's projects) for a name that matches none, and
    ApiError 400 when ``required`` and nothing names one. ``personal``: the body writes
    into the caller's own folder, where any clean name is a label (``Memory.resolve_project``).
    ``op``: the body asks for a write of that audit operation; a refused name is then a
    ``not_found`` line of the audit log (a write refused before it reaches the core)."""
    explicit = str_field(body, "project")
    cwd = str_field(body, "cwd")
    try:
        found = memory.resolve_project(explicit, user=user, cwd=cwd, personal=personal)
    except WikiMemoryError as exc:
        if op is not None:
            memory.audited(user, op, f"projects/{explicit or ''}", audit_result(exc))
        raise
    if found is None and required:
        known = ", ".join(memory.readable_projects(user)) or "none yet"
        raise ApiError(
            400,
            "bad_request",
            f"project is required (or a cwd inside a project's repository); your projects: {known}",
            field="project",
        )
    return found
