"""Which project a call is about: one rule for every face (case C53, docs/mcp.md "Project").

:func:`resolve_project` is the rule; the MCP tools' and HTTP calls' defaults call it, so
that reads and writes from one folder agree. (Capture and the hook's brief take the
project the sender resolved on its own machine, by the same order in
:mod:`wiki_memory.capture.project`: the server never looks at its own disk at an event's
``cwd``; docs/hooks.md.) In order:

1. an explicit ``project``: it must name a project the caller may read, compared
   case-insensitively (``Atlas`` is ``atlas``), or be the folder name of the working
   directory's repository or configuration, which maps to that folder's project
   (``atlas-service`` → ``atlas`` when ``/…/atlas-service/.wiki-memory.toml`` says
   ``project = "atlas"``); anything else raises :class:`UnknownProject`, never a new
   project;
2. ``project = "…"`` in the nearest ``.wiki-memory.toml`` at or above ``cwd``;
3. the git repository holding ``cwd`` (the nearest directory with a ``.git`` directory or
   file, found without running git; a linked worktree maps to its main repository): the
   project its root's ``.wiki-memory.toml`` names, else the root folder's name;
4. otherwise (a scratch directory, ``$HOME``): the session's ``current`` project, else
   None. A folder name is never made into a project without a repository or a
   configuration behind it.

Everything here reads the file system at ``cwd`` (the caller's machine when the server is
local; a team server sees only what exists on its own disk, so remote clients pass
``project``). Standard library plus the project's name rule
(:func:`wiki_memory.capture.observation.project_name`).
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Iterable
from pathlib import Path

from wiki_memory.capture.observation import ObservationError, project_name
from wiki_memory.core.pages import project_folder
from wiki_memory.errors import NotFound

#: the per-repository configuration file (the hooks read the same one)
CONFIG_NAME = ".wiki-memory.toml"


class UnknownProject(NotFound):
    """404 ``unknown_project``: an explicit project name that matches no project the
    caller may read. The message names the field, suggests the closest names ("did you
    mean"), says ``how`` to go on when given (on a write: how to create the project) and
    lists the readable projects; ``projects`` (in the HTTP body) lists them too.
    ``reads_all``: the caller reads every project (the owner, an admin), so the name
    matches no project at all and the message says so, not "may read"."""

    code = "unknown_project"

    def __init__(
        self, name: str, known: Iterable[str], *, reads_all: bool = False, how: str = ""
    ) -> None:
        names = sorted(set(known), key=str.casefold)
        close = difflib.get_close_matches(name.casefold(), [n.casefold() for n in names], 3, 0.6)
        folded = {n.casefold(): n for n in names}
        hint = f" (did you mean {' or '.join(folded[c] for c in close)}?)" if close else ""
        if reads_all:
            head = f"project {name!r} does not exist{hint}"
            listing = f"projects: {', '.join(names)}" if names else "there are no projects yet"
        else:
            head = f"project {name!r} is not a project you may read{hint}"
            listing = f"your projects: {', '.join(names) if names else 'none yet'}"
        super().__init__(
            f"{head}; {how + '; ' if how else ''}{listing}",
            field="project",
            projects=names,
        )
        self.name = name
        self.suggestions = [folded[c] for c in close]


def config_project(cwd: str | Path) -> tuple[Path, str] | None:
    """The nearest ``.wiki-memory.toml`` at or above ``cwd`` that names a project:
    ``(its directory, the project)``; None when there is none (a file that does not parse,
    or has no ``project`` string, is passed over)."""
    d = Path(os.path.abspath(cwd))
    for folder in (d, *d.parents):
        cfg = folder / CONFIG_NAME
        if cfg.is_file():
            try:
                data = tomllib.loads(cfg.read_text(encoding="utf-8"))
            except (OSError, ValueError, UnicodeDecodeError):
                continue
            name = data.get("project")
            if isinstance(name, str) and name.strip():
                return folder, name.strip()
    return None


def repository_root(cwd: str | Path) -> Path | None:
    """The root of the git repository holding ``cwd``, without running git: the nearest
    directory with ``.git``; for a linked worktree (``.git`` a file whose ``gitdir`` has a
    ``commondir``) the main repository's root. None outside any repository."""
    d = Path(os.path.abspath(cwd))
    for folder in (d, *d.parents):
        dot = folder / ".git"
        if dot.is_dir():
            return folder
        if dot.is_file():
            return _main_of_worktree(folder, dot) or folder
    return None


def _main_of_worktree(folder: Path, dot: Path) -> Path | None:
    try:
        line = dot.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not line.startswith("gitdir:"):
        return None
    gitdir = Path(line[len("gitdir:") :].strip())
    if not gitdir.is_absolute():
        gitdir = folder / gitdir
    common = gitdir / "commondir"
    try:
        rel = common.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None  # a submodule: its own repository
    main_git = (gitdir / rel).resolve() if not Path(rel).is_absolute() else Path(rel)
    return main_git.parent if main_git.name == ".git" else None


def folder_project(cwd: str | Path | None) -> tuple[str, str] | None:
    """Rules 2 and 3 for ``cwd``: ``(project, folder name)`` where the folder is the one
    whose configuration or repository decided it; None outside any configuration or
    repository (or without ``cwd``)."""
    if not cwd:
        return None
    found = config_project(cwd)
    root = repository_root(cwd)
    if found is not None and (root is None or found[0] == root or root in found[0].parents):
        # the configuration at or below the repository root decides
        return _clean(found[1]), found[0].name
    if root is not None:
        own = config_project(root)
        if own is not None and own[0] == root:
            return _clean(own[1]), Path(os.path.abspath(cwd)).name
        return _clean(root.name), root.name
    if found is not None:
        return _clean(found[1]), found[0].name
    return None


def _clean(name: str) -> str:
    try:
        return project_name(name)
    except ObservationError:
        return name


def resolve_project(
    explicit: str | None,
    *,
    cwd: str | Path | None,
    known: Iterable[str],
    current: str | None = None,
) -> str | None:
    """The project of a call (the module's rule, 1 to 4). ``known``: the projects the
    caller may read. An explicit name comes back spelled as the known project is; a
    project decided by ``cwd`` comes back as the known one when they differ in case only.
    Raises :class:`UnknownProject` for an explicit name that matches nothing, and
    BadRequest (``field="project"``) for one that is a path or starts with a dot."""
    names = list(known)
    folded = {n.casefold(): n for n in names}
    here = folder_project(cwd)
    if explicit is not None and explicit.strip():
        project_folder(explicit)  # a path or a dot-name is a 400 naming the field
        want = explicit.strip()
        if want.casefold() in folded:
            return folded[want.casefold()]
        if here is not None and want.casefold() in (here[1].casefold(), here[0].casefold()):
            return folded.get(here[0].casefold(), here[0])
        raise UnknownProject(want, names)
    if here is not None:
        return folded.get(here[0].casefold(), here[0])
    if current:
        return folded.get(current.casefold(), current)
    return None
