"""Which projects a caller may read, and which project a call is about.

:class:`ProjectAccess` joins the one access rule (:mod:`wiki_memory.core.scope`) with the
one project rule (:func:`wiki_memory.core.projects.resolve_project`): an explicit brief,
recall and every face's ``project`` argument go through it (capture takes the sender's
project: docs/hooks.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from wiki_memory.capture.observation import project_name
from wiki_memory.capture.spool import Spool
from wiki_memory.core.projects import UnknownProject, resolve_project
from wiki_memory.core.scope import ScopeRule
from wiki_memory.errors import BadRequest
from wiki_memory.identity import Identity, creation_refusal, may_read

#: how a write's 404 ``unknown_project`` says to start the project it names
CREATE_HINT = "pass create_project: true (CLI: --new-project) to create it"


@dataclass
class ProjectAccess:
    """The projects of one memory as callers see them: ``scope`` (the access rule),
    ``spool`` (running sessions, whose project exists before its first page),
    ``projects()`` (folder names under ``wiki/projects/``) and
    ``session_visible(key, who)``."""

    scope: ScopeRule
    spool: Spool
    projects: Callable[[], list[str]]
    session_visible: Callable[[str, Identity], bool]
    #: the setting ``project_creation`` (:func:`wiki_memory.identity.creation_refusal`)
    creation: str = "members"

    def readable_projects(self, user: Identity | None) -> list[str]:
        """The projects ``user`` may read, sorted: folders under ``wiki/projects/`` and
        the projects of running sessions ``user`` may see (a first session's project
        exists before its page is compiled)."""
        who = self.scope.identity(user)
        names = set(self.projects())
        for key, info in list(self.spool.sessions.items()):
            if info.project and info.project not in names and self.session_visible(key, who):
                names.add(info.project)
        return sorted(p for p in names if may_read(who, f"projects/{p}/index.md", None))

    def listing(self, user: Identity | None) -> str:
        """The projects ``user`` may read, as the end of a message: ``your projects: a,
        b`` (``none yet``); for a caller who reads every project (the owner, an admin)
        ``projects: a, b``, or ``there are no projects yet``."""
        who = self.scope.identity(user)
        names = self.readable_projects(who)
        if who.every_project:
            return f"projects: {', '.join(names)}" if names else "there are no projects yet"
        return f"your projects: {', '.join(names) if names else 'none yet'}"

    def resolve_project(
        self,
        explicit: str | None,
        *,
        user: Identity | None,
        cwd: str | Path | None = None,
        current: str | None = None,
        personal: bool = False,
        create: bool | None = None,
    ) -> str | None:
        """The project a call is about, by the one rule of
        :func:`wiki_memory.core.projects.resolve_project` over the projects ``user`` may
        read. Raises :class:`~wiki_memory.core.projects.UnknownProject` (404, naming the
        field and listing them) for an explicit name that matches none.

        ``personal``: the call writes into the caller's own folder (a personal handoff),
        where the project is only a label and needs no grant (docs/team-server.md): an
        explicit name that matches no readable project is then kept as given, once it
        is already a clean project name (:func:`~wiki_memory.capture.observation.project_name`;
        BadRequest otherwise).

        ``create``: None for a read; False for a write that did not ask to create a
        project, whose 404 then says how to (:data:`CREATE_HINT`) when ``user`` may create
        one; True for a write that asked (its caller,
        :class:`wiki_memory.core.newproject.ProjectStart`, creates it)."""
        who = self.scope.identity(user)
        known = self.readable_projects(who)
        try:
            return resolve_project(explicit, cwd=cwd, known=known, current=current)
        except UnknownProject as exc:
            if not personal or explicit is None:
                how = ""
                if create is False and creation_refusal(who, self.creation) is None:
                    how = CREATE_HINT
                raise UnknownProject(
                    exc.name, known, reads_all=who.every_project, how=how
                ) from None
            try:
                name = project_name(explicit)
            except ValueError:
                name = ""
            if name != explicit:
                raise BadRequest(
                    f"project: {explicit!r} is not a valid project name", field="project"
                ) from None
            return name
