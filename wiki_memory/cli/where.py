"""Where a CLI write goes: the working directory and its repository's id, sent with
``remember`` and ``handoff create`` as the hook sends them with each event (docs/cli.md,
"Starting a project").

With ``--project`` the name is sent as given (an unknown one is a 404 saying how to
create it: ``--new-project``). Without it the command sends its working directory
(``cwd``) and, inside a git repository that no ``.wiki-memory.toml`` names a project
for, the repository's id (``repo_id``: its root commit, else its origin) and folder
name: the write is filed under that repository's project, created if new
(:mod:`wiki_memory.core.newproject`).
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["where"]


def where(project: str | None, new_project: bool = False) -> dict[str, Any]:
    """The body fields naming a write's project: ``project``, ``cwd``, ``repo_id`` and
    ``create_project`` (only those that apply). Runs ``git rev-list`` once (at most
    1 s) inside a repository when no project is named."""
    from wiki_memory.capture.project import repo_identity, resolve_project

    cwd = os.getcwd()
    body: dict[str, Any] = {"cwd": cwd}
    if new_project:
        body["create_project"] = True
    if project:
        body["project"] = project
        return body
    found = resolve_project(cwd)
    if found.source == "git" and found.root and found.name:
        ident = repo_identity(found.root)
        if ident.get("id"):
            body["repo_id"] = ident["id"]
            body["project"] = found.name
    return body
