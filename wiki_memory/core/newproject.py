"""Starting a project by writing: which project a write (a note, a handoff) goes to, and
when that write may create it (docs/api.md "New projects").

An unknown project name never becomes a project by itself, so a typo cannot make one:
the write answers ``404 unknown_project`` saying how to go on. A write creates the
project it names when

- the caller asks (``create_project: true`` on ``POST /v1/remember``,
  ``POST /v1/handoffs`` and the MCP tools ``memory_remember`` and ``handoff_create``;
  ``--new-project`` in the CLI) and holds the right to create projects
  (:func:`wiki_memory.identity.creation_refusal`: the owner and admins, members unless
  ``project_creation = "admins"``); or
- the caller sends its working directory's repository id (``repo_id``, as the hook and
  the CLI do): the write is filed under that repository's project
  (:meth:`wiki_memory.core.repos.RepoMap.place`, the rule capture follows), created
  if new; or its working directory (``cwd``) names the project (a repository or a
  ``.wiki-memory.toml``: :func:`wiki_memory.core.projects.resolve_project`).

With a ``repo_id`` the name is only the repository's display name: a name alone never
reaches another repository's project (same name, another id: ``api-2``). Creating a
project on a team server gives a member a write grant on it (audited
``project.create``), as capture does. A name that is taken by a project the caller may
not read cannot be created (404, saying so). Whether the caller may write an existing
project is decided by the write itself, through the one scope rule.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from wiki_memory.audit import audit_result
from wiki_memory.core.pages import project_folder
from wiki_memory.core.projects import UnknownProject, folder_project
from wiki_memory.core.repos import MAX_ID, Binding
from wiki_memory.errors import BadRequest, Forbidden, WikiMemoryError
from wiki_memory.identity import Identity, creation_refusal

__all__ = ["ProjectStart", "check_repo_id"]


def check_repo_id(value: Any) -> str | None:
    """``value`` as a repository id (``root:<sha>``, ``origin:<host/owner/name>``,
    ``new:<hex>``): None when absent; raises BadRequest (``field="repo_id"``) for one
    that is not a string of 1 to :data:`~wiki_memory.core.repos.MAX_ID` characters
    without spaces."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > MAX_ID or any(c.isspace() for c in value):
        raise BadRequest(
            f"repo_id must be a repository id without spaces, at most {MAX_ID} characters",
            field="repo_id",
        )
    return value


class ProjectStart:
    """The project of each write, started when the write may start it (the module's
    rule). ``memory``: the :class:`~wiki_memory.core.memory.Memory` (its scope, projects,
    spool, repository map, settings and audit log)."""

    def __init__(self, memory: Any) -> None:
        self.memory = memory

    @contextmanager
    def writing(
        self,
        user: Identity | None,
        *,
        explicit: str | None,
        op: str,
        cwd: str | Path | None = None,
        repo_id: str | None = None,
        create: bool = False,
        personal: bool = False,
    ) -> Iterator[tuple[str | None, Identity]]:
        """Around one write: yields the project it goes to (None when nothing names one;
        the face then asks for ``project``) and the caller to write it as: ``user`` (None:
        :data:`~wiki_memory.identity.ANONYMOUS`), holding the write grant on a project
        created for the write (its new grant); a repository
        binding made for it is written when the block ends without an error, and undone
        when it raises. Raises UnknownProject (404) for an unknown name without
        ``create``; Forbidden (403, ``grant``) when the caller may not create projects;
        BadRequest naming ``project`` or ``repo_id`` for a value that cannot be one. A
        refusal is an audit line of ``op``."""
        m = self.memory
        ident = m.scope.identity(user)
        binding = None
        try:
            project, binding, made = self._choose(
                ident, explicit, cwd, check_repo_id(repo_id), create, personal
            )
            if made:
                self._start(ident, project)
        except WikiMemoryError as exc:
            if binding is not None:
                m.repos.release(binding)
            m.audited(ident, op, f"projects/{explicit or ''}", audit_result(exc))
            raise
        if made and ident.grant(project) != "write":
            # the caller of this request, with the grant just given
            grants = {**(ident.grants or {}), project: "write"}
            ident = dataclasses.replace(ident, grants=grants)
        try:
            yield project, ident
        except BaseException:
            if binding is not None:
                m.repos.release(binding)
            raise
        else:
            if binding is not None:
                m.repos.bind(binding, ident.user or m.owner)

    # -- the rule ----------------------------------------------------------------------
    def _choose(
        self,
        ident: Identity,
        explicit: str | None,
        cwd: str | Path | None,
        repo_id: str | None,
        create: bool,
        personal: bool,
    ) -> tuple[Any, Binding | None, bool]:
        """``(project, binding to make, whether the write creates the project)``."""
        m = self.memory
        if explicit is not None and not explicit.strip():
            explicit = None
        if repo_id is not None and not personal:
            name = project_folder(explicit) if explicit is not None else None
            if name is None:
                here = folder_project(cwd)
                name = here[0] if here is not None else m.repos.project_of_id(repo_id)
            if name is None:
                raise BadRequest(
                    "repo_id needs project (the repository's folder name)", field="project"
                )
            project, binding = m.repos.place(name, repo_id)
            return project, binding, self._taken(project) is None
        try:
            found = m.resolve_project(
                explicit, user=ident, cwd=cwd, personal=personal, create=create
            )
        except UnknownProject as exc:
            if not create or explicit is None:
                raise
            name = project_folder(explicit)
            if name != explicit.strip():
                raise BadRequest(
                    f"project: {explicit!r} is not a valid project name (try {name!r})",
                    field="project",
                ) from None
            if self._taken(name) is not None:
                # a project the caller may not read holds the name
                raise UnknownProject(
                    exc.name,
                    m.readable_projects(ident),
                    how="its name is taken: choose another name, or ask an admin for a grant",
                ) from None
            return name, None, True
        if found is None or personal:
            return found, None, False
        return found, None, self._taken(found) is None

    def _start(self, ident: Identity, project: str) -> None:
        """Create ``project`` for ``ident`` (the creation rule, the grant, the audit)."""
        m = self.memory
        lacking = creation_refusal(ident, m.settings.project_creation)
        if lacking is not None:
            raise Forbidden(
                f"you may not create project {project}: it needs {lacking}",
                field="project",
                grant=lacking,
                project=project,
            )
        if ident.grant(project) != "write" and m.scope.directory is not None:
            m.scope.directory.grant(ident.user, project)
        m.audited(ident, "project.create", f"projects/{project}", "ok", grant="write")

    def _session_projects(self) -> set[str]:
        return {i.project for i in list(self.memory.spool.sessions.values()) if i.project}

    def _taken(self, name: str) -> str | None:
        """The existing project ``name`` is (any case): a folder under
        ``wiki/projects/`` or a running session's project; None when it is new."""
        want = name.casefold()
        for p in [*self.memory.projects(), *self._session_projects()]:
            if p.casefold() == want:
                return str(p)
        return None
