"""What the HTTP and MCP faces read from a caller the same way, without the MCP SDK: the
headers a stdio bridge, the CLI and the hooks send (lower case, as Starlette's headers
are looked up), and :func:`asked_project`, the project a call names. The HTTP face
imports this module, so a server that never answers ``/mcp`` never loads the SDK
(``wiki_memory.mcp.app``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from wiki_memory.audit import audit_result
from wiki_memory.errors import BadRequest, WikiMemoryError

if TYPE_CHECKING:
    from wiki_memory.core.memory import Memory
    from wiki_memory.identity import Identity

#: header a stdio bridge sends: a stable id for its process (the default session id)
BRIDGE_HEADER = "x-wiki-memory-bridge"
#: header a stdio bridge sends: the harness ``install-mcp`` wrote into its arguments
HARNESS_HEADER = "x-wiki-memory-harness"
#: header a stdio bridge sends: its working directory, percent-encoded (the project)
CWD_HEADER = "x-wiki-memory-cwd"
#: the repository id of the bridge's working directory (as the hook sends ``repo_id``)
REPO_HEADER = "x-wiki-memory-repo"
#: header a stdio bridge, the CLI and the hooks send: the client's time zone
TZ_HEADER = "x-wiki-memory-tz"


def asked_project(
    memory: Memory,
    user: Identity | None,
    explicit: str | None,
    cwd: str | None,
    *,
    required: bool,
    personal: bool,
    op: str | None,
    missing: Callable[[], BadRequest],
) -> str | None:
    """The project a call of the MCP or HTTP face is about, by the core's one rule
    (``Memory.resolve_project``): the ``explicit`` name (any case), else the one ``cwd``
    (a working directory) lies in; None when nothing names one and it is not
    ``required``. ``personal``: a write into ``user``'s own folder, where any clean name
    is a label. ``op``: the call is a write of that audit operation, and a refused name is
    also an audit line (``not_found``, ...). Raises what ``resolve_project`` raises
    (UnknownProject listing ``user``'s projects, BadRequest for a path-like name), and
    ``missing()`` (each face words its own) when ``required`` and nothing names one."""
    try:
        found = memory.resolve_project(explicit, user=user, cwd=cwd, personal=personal)
    except WikiMemoryError as exc:
        if op is not None:
            memory.audited(user, op, f"projects/{explicit or ''}", audit_result(exc))
        raise
    if found is None and required:
        raise missing()
    return found
