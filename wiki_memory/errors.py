"""The one error hierarchy and the one table that maps it to every face.

Every error a caller can act on is a :class:`WikiMemoryError` with a machine-readable
``code``; :data:`TABLE` gives, per code, the HTTP status (``/v1`` answers
``{"error": code, "message": ..., **extra}``), the CLI exit status, and nothing else
decides either. The MCP tools raise a tool error whose text starts with ``code:``.
Modules lower in the package define their own errors as subclasses (``PathRefused``,
``GitBusy``, ``ObservationError``...), so this module imports nothing of the package.

A caller who may not see a page gets exactly :class:`NotFound`, the same as for a page
that does not exist (invariant 9): never ``forbidden``, ``conflict`` or
``precondition_required``, and never a hash.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "TABLE",
    "Rule",
    "WikiMemoryError",
    "BadRequest",
    "BadPath",
    "Unauthorized",
    "UserNameTwin",
    "Forbidden",
    "CaptureRefused",
    "NotFound",
    "MethodNotAllowed",
    "StateConflict",
    "Conflict",
    "TooLarge",
    "PreconditionRequired",
    "Unavailable",
    "DiskFull",
    "SyncRefused",
    "rule_for",
    "http_status",
    "exit_status",
]


@dataclass(frozen=True)
class Rule:
    """How one error code shows on each face: ``status`` (HTTP), ``exit`` (CLI exit
    status), ``meaning`` (one line for docs/api.md)."""

    status: int
    exit: int
    meaning: str


#: code -> Rule. Codes not listed (a handoff's own state codes) use their class's rule.
TABLE: dict[str, Rule] = {
    "bad_request": Rule(400, 2, "a field is missing or wrong; `field` names it"),
    "bad_json": Rule(400, 2, "the body is not JSON"),
    "bad_path": Rule(400, 2, "the path can name no page (outside the wiki, `..`, NUL...)"),
    "unauthorized": Rule(401, 6, "no valid bearer token"),
    "user_name_twin": Rule(
        401, 6, "the token's user name equals an older user's after folding; revoke it"
    ),
    "forbidden": Rule(
        403, 6, "the caller sees the page but may not do this; `grant` names what it lacks"
    ),
    "capture_refused": Rule(
        403, 6, "capture into a project the caller may not write (404 where it may not read it)"
    ),
    "not_found": Rule(404, 4, "no such page, handoff or route, or one the caller may not see"),
    "unknown_project": Rule(
        404, 4, "no project the caller may read has this name; `projects` lists those it may"
    ),
    "method_not_allowed": Rule(405, 2, "the route exists, not with this method"),
    "state": Rule(409, 3, "the handoff's state forbids it; `error` names the state"),
    "conflict": Rule(412, 5, "the page changed since the caller read it; `hash` is current"),
    "too_large": Rule(413, 2, "the body is over the size limit"),
    "wrong_host": Rule(
        421, 2, "the Host header names no address of this server (setting `allowed_hosts`)"
    ),
    "precondition_required": Rule(428, 5, "the page exists: send If-Match with its hash"),
    "sync_refused": Rule(
        409, 3, "a sync waits for an admin: a purge needs `--after-purge`, or the remote moved"
    ),
    "busy": Rule(503, 7, "git is held by another program; retry after `Retry-After` s"),
    "unavailable": Rule(503, 7, "the search engine or a git remote failed; retry"),
    "disk_full": Rule(
        507, 7, "the data directory's disk is full: nothing was stored; free space, then retry"
    ),
    "internal": Rule(500, 1, "a bug: the server log has the traceback"),
}


class WikiMemoryError(Exception):
    """Base of every error a face turns into an answer.

    ``code`` (class attribute, a key of :data:`TABLE`); ``message`` (safe to show a
    client: no server paths, no secrets); ``field`` (the request field at fault, or
    None); ``extra`` (more keys of the JSON body); ``headers`` (HTTP headers to send).
    """

    code = "internal"

    def __init__(
        self,
        message: str = "",
        *,
        field: str | None = None,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.headers = headers or {}
        self.extra = extra

    @property
    def error_code(self) -> str:
        """The code sent as ``error`` (a subclass may refine it per instance)."""
        return self.code

    @property
    def rule_code(self) -> str:
        """The :data:`TABLE` row that gives the status (the ``error`` code unless a
        subclass answers one code with two statuses)."""
        return self.error_code

    def public_message(self) -> str:
        """The message a client is shown."""
        return str(self)

    def body(self) -> dict[str, Any]:
        """The JSON body: ``{"error", "message", "field"?, **extra}``."""
        out: dict[str, Any] = {"error": self.error_code, "message": self.public_message()}
        if self.field is not None:
            out["field"] = self.field
        out.update(self.extra)
        return out


class BadRequest(WikiMemoryError, ValueError):
    """400: a field is missing or has a wrong value; ``field`` names it."""

    code = "bad_request"


class BadJson(BadRequest):
    """400: the request body is not JSON (or is nested too deeply to read)."""

    code = "bad_json"


class BadPath(BadRequest):
    """400: a path names nothing a client may read or write."""

    code = "bad_path"

    def public_message(self) -> str:
        return f"path refused: {self}"


class Unauthorized(WikiMemoryError):
    """401: no valid bearer token."""

    code = "unauthorized"


class UserNameTwin(Unauthorized):
    """401: the token's user name equals an older user's after the identity fold (case
    and width); refused until the data directory's owner revokes it."""

    code = "user_name_twin"


class Forbidden(WikiMemoryError, PermissionError):
    """403: the caller may see the page or handoff but not do this. Never raised for a
    page the caller may not see (that is :class:`NotFound`)."""

    code = "forbidden"


class CaptureRefused(WikiMemoryError):
    """Capture into an existing project the caller may not write: one code,
    ``capture_refused``, with status 403 where the caller may read the project and 404
    where not (``hidden``), plus ``project`` and ``grant`` (what it lacks) in the body.
    The hook treats it as final: the event is dropped and counted, never retried."""

    code = "capture_refused"

    def __init__(self, project: str, *, hidden: bool, lacking: str) -> None:
        super().__init__(
            f"capture refused for project {project}: it needs {lacking}",
            project=project,
            grant=lacking,
        )
        self.hidden = hidden

    @property
    def rule_code(self) -> str:
        return "not_found" if self.hidden else self.code


class NotFound(WikiMemoryError, LookupError):
    """404: the named page, section, session, handoff or route does not exist, or the
    caller may not see it (the two answer alike)."""

    code = "not_found"


class MethodNotAllowed(WikiMemoryError):
    """405: the route exists, but not with this method."""

    code = "method_not_allowed"


class StateConflict(WikiMemoryError):
    """409: the state of a record (a handoff) forbids the action; subclasses name the
    state in :attr:`error_code`."""

    code = "state"


class Conflict(WikiMemoryError):
    """412: a compare-and-set failed: the page changed since the caller read it.

    ``current_hash`` is the sha256 hex of the bytes now on disk (None when absent)."""

    code = "conflict"

    def __init__(self, message: str, current_hash: str | None = None, **extra: Any) -> None:
        super().__init__(message, **extra)
        self.current_hash = current_hash


class SyncRefused(WikiMemoryError):
    """409: a sync would undo a purge or drop another server's commits; an admin decides
    (``sync --after-purge``, docs/operations.md)."""

    code = "sync_refused"


class PreconditionRequired(WikiMemoryError):
    """428: the page exists and the write named no hash to replace."""

    code = "precondition_required"


class WrongHost(WikiMemoryError):
    """421: the request's ``Host`` is not one this server answers for
    (``allowed_hosts``, docs/team-server.md)."""

    code = "wrong_host"


class TooLarge(WikiMemoryError):
    """413: the request body is over the size limit."""

    code = "too_large"


class Unavailable(WikiMemoryError):
    """503: a part of the server (the search engine, git) cannot answer now."""

    code = "unavailable"


class DiskFull(WikiMemoryError):
    """507: the write could not be stored because the disk (or the user's quota) is full.
    Nothing of the request was acknowledged; ``Retry-After`` says when to try again."""

    code = "disk_full"

    def __init__(self, message: str = "", *, retry_after: int = 30) -> None:
        super().__init__(
            message or "the disk is full: nothing was stored; free disk space, then retry",
            headers={"Retry-After": str(retry_after)},
        )


def rule_for(exc: BaseException) -> Rule:
    """The :data:`TABLE` rule of an error: by its code, else by its class's code, else
    ``internal`` (an error outside the hierarchy is a bug)."""
    if isinstance(exc, WikiMemoryError):
        rule = TABLE.get(exc.rule_code) or TABLE.get(type(exc).code)
        if rule is None:
            for cls in type(exc).__mro__:
                code = getattr(cls, "code", None)
                if isinstance(code, str) and code in TABLE:
                    return TABLE[code]
        return rule or TABLE["internal"]
    return TABLE["internal"]


def http_status(exc: BaseException) -> int:
    """The HTTP status :data:`TABLE` gives ``exc``."""
    return rule_for(exc).status


def exit_status(code: str | None, status: int | None = None) -> int:
    """The CLI exit status for an error ``code`` a server answered (or, when the code is
    unknown, for its HTTP ``status``): see :data:`TABLE`."""
    if code in TABLE:
        return TABLE[code].exit
    for rule in TABLE.values():
        if rule.status == status:
            return rule.exit
    return 1
