"""A project is its repository: repository ids mapped to project folders (docs/hooks.md,
"A project is its repository").

The hook sends each event's repository id (``repo_id``: the root commit, else the
normalised origin URL, else a provisional id; :func:`wiki_memory.capture.project.repo_identity`).
The mapping lives in the wiki, so it replicates and survives backup and export:
``repo_id`` (a string, or a list once ids were joined) in the frontmatter of
``projects/<p>/index.md``, with ``repo_origin`` (the origin's ``host/owner/name``) and
``display`` (the repository's folder name). The server never reads the client's disk.

Placing an event of id ``I`` whose hook named the project ``api`` (the folder's name):

1. ``I`` is bound to a project: that project (renamed, moved or cloned again: the same);
2. ``repo_prev`` (the provisional id of a repository before its first commit) is bound:
   that project, and ``I`` is joined to it;
3. its origin (``repo_origin``, or the id of a shallow clone, ``origin:<host/owner/name>``)
   is that of a bound repository: that project (a shallow clone and a full clone of one
   remote; a fork, another origin with the same root commit, is caught by rule 1);
4. else the first of ``api``, ``api-<owner>`` (the owner in its origin's URL, when it
   has one: ``api-acme`` for ``github.com/acme/api``), ``api-2``, ``api-3`` … that
   does not exist yet (created
   with ``I``) or exists with no id (existing pages stay where they are: the first
   repository captured into it by a caller with a write grant binds it; ``doctor`` lists
   each binding, which can be undone by removing the keys by hand). A project bound to
   another id is never shared: same name, different id is another folder.

Grants are per folder, so a grant on ``api`` is not a grant on ``api-2``. An event
without an id whose name is a repository's folder is filed by that name only into a
project with no id, else it waits for its session's id (:mod:`wiki_memory.core.idwait`).
A project named by ``.wiki-memory.toml`` is never re-placed (the hook sends no id then).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from wiki_memory.capture.observation import Observation, ObservationError, project_name
from wiki_memory.core.writer import Author, WriteResult
from wiki_memory.wiki.frontmatter import set_keys
from wiki_memory.wiki.frontmatter_read import find_closing_fence
from wiki_memory.wiki.git import author_email_for

__all__ = ["Binding", "RepoMap", "candidates", "frontmatter_of", "ids_of", "owner_of", "MAX_ID"]

MAX_ID = 200
"""The longest ``repo_id`` accepted (a root commit is ``root:`` + 40 or 64 hex)."""


def owner_of(origin: str | None) -> str | None:
    """The owner in a normalised origin ``host/owner/name`` (the folder just above the
    repository's name: ``gitlab.com/group/sub/api`` gives ``sub``), else None."""
    if not origin:
        return None
    parts = [p for p in origin.split("/") if p]
    return parts[-2] if len(parts) >= 3 else None


def candidates(name: str, origin: str | None) -> Iterator[str]:
    """The folders a new repository named ``name`` may take, in order: ``name``, then
    ``name-<owner>`` when its origin names an owner (``api-acme`` for
    ``github.com/acme/api``), then ``name-2``, ``name-3`` … (endless)."""
    yield name
    owner = owner_of(origin)
    if owner:
        try:
            cand = project_name(f"{name}-{owner}")
        except ObservationError:
            cand = ""
        if cand and cand != name:
            yield cand
    n = 2
    while True:
        yield f"{name}-{n}"
        n += 1


def ids_of(meta: dict[str, Any]) -> list[str]:
    """The repository ids a project's ``index.md`` frontmatter binds (``repo_id``)."""
    v = meta.get("repo_id")
    if isinstance(v, str) and v:
        return [v]
    if isinstance(v, list):
        return [x for x in v if isinstance(x, str) and x]
    return []


def frontmatter_of(raw: bytes | None) -> dict[str, Any]:
    """The YAML frontmatter of a page's bytes ({} when there is none or it is broken)."""
    if not raw:
        return {}
    lines = raw.decode("utf-8", "replace").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    end = find_closing_fence(lines)
    if end is None:
        return {}
    try:
        meta = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError:
        return {}
    return meta if isinstance(meta, dict) else {}


@dataclass(frozen=True)
class Binding:
    """A repository id to bind to ``project`` once its event is accepted."""

    project: str
    repo_id: str
    origin: str | None
    display: str
    #: only a new origin for an id bound before (a fork)
    fork: bool = False


class RepoMap:
    """Repository id → project folder, read from the wiki at first use and kept current
    by this server's own bindings (a hand edit of ``repo_id`` counts after a restart)."""

    def __init__(self, memory: Any) -> None:
        self.memory = memory
        self._lock = threading.Lock()
        self._ids: dict[str, str] | None = None
        #: project -> its ids (the projects that have an index.md with ids)
        self._bound: dict[str, list[str]] = {}
        #: origin (``host/owner/name``) -> the project a repository of it is bound to
        self._origins: dict[str, str] = {}

    def _load(self) -> dict[str, str]:
        if self._ids is not None:
            return self._ids
        ids: dict[str, str] = {}
        bound: dict[str, list[str]] = {}
        for p in self.memory.projects():
            meta = self.meta(p)
            got = ids_of(meta)
            if got:
                bound[p] = got
                for i in got:
                    ids.setdefault(i, p)
                    if i.startswith("origin:"):
                        self._origins.setdefault(i[7:], p)
                if isinstance(meta.get("repo_origin"), str):
                    self._origins.setdefault(meta["repo_origin"], p)
        self._ids, self._bound = ids, bound
        return ids

    def meta(self, project: str) -> dict[str, Any]:
        """The frontmatter of ``projects/<project>/index.md`` ({} when absent)."""
        path = self.memory.settings.wiki_dir / "projects" / project / "index.md"
        try:
            return frontmatter_of(path.read_bytes())
        except OSError:
            return {}

    def project_of_id(self, repo_id: str | None) -> str | None:
        """The project ``repo_id`` is bound to, else None."""
        if not repo_id:
            return None
        with self._lock:
            return self._load().get(repo_id)

    def bound(self, project: str) -> bool:
        """True when ``project`` is bound to a repository id (or reserved for one)."""
        with self._lock:
            self._load()
            return bool(self._bound.get(project))

    def bindings(self) -> dict[str, list[str]]:
        """Project → the repository ids bound to it."""
        with self._lock:
            self._load()
            return {p: list(v) for p, v in self._bound.items()}

    def place(
        self,
        name: str,
        repo_id: str,
        prev: str | None = None,
        origin: str | None = None,
        reserve: bool = True,
    ) -> tuple[str, Binding | None]:
        """The project of an event of ``repo_id`` whose hook named ``name`` (the module's
        rule), and the binding to make when it is accepted (None: already bound), reserved
        until :meth:`bind` or :meth:`release` (``reserve`` False: only the answer, for
        the brief)."""
        with self._lock:
            ids = self._load()
            if repo_id in ids:
                p = ids[repo_id]
                if origin and origin not in self._origins and reserve:
                    # the same root commit and another origin: a fork, the same project
                    # (recorded as repo_forks, which doctor names)
                    self._origins[origin] = p
                    return p, Binding(p, repo_id, origin, name, fork=True)
                return p, None
            if origin is None and repo_id.startswith("origin:"):
                origin = repo_id[7:]
            if prev and prev in ids:
                b = Binding(ids[prev], repo_id, origin, name)
            elif origin and origin in self._origins:
                # a shallow clone (its id is the origin) and a full clone of the same
                # remote (its id the root commit) are one repository
                b = Binding(self._origins[origin], repo_id, origin, name)
            else:
                # a folder with no id is free (existing pages stay, it takes this id); one
                # reserved a moment ago counts as bound before its index.md is written
                free = next(c for c in candidates(name, origin) if not self._bound.get(c))
                b = Binding(free, repo_id, origin, name)
            if not reserve:
                return b.project, None
            # reserved at once: two new repositories of one name never share a folder
            ids[repo_id] = b.project
            self._bound.setdefault(b.project, []).append(repo_id)
            if origin:
                self._origins.setdefault(origin, b.project)
            return b.project, b

    def release(self, b: Binding) -> None:
        """Undo the reservation of a binding whose event was refused."""
        with self._lock:
            ids = self._load()
            if b.origin and self._origins.get(b.origin) == b.project:
                del self._origins[b.origin]
            if b.fork:
                return  # a fork's origin on an id bound before: only the origin goes
            if ids.get(b.repo_id) == b.project:
                del ids[b.repo_id]
            left = [i for i in self._bound.get(b.project, []) if i != b.repo_id]
            if left:
                self._bound[b.project] = left
            else:
                self._bound.pop(b.project, None)

    def bind(self, b: Binding, author: str) -> None:
        """Write the binding ``b`` (reserved by :meth:`place`) into
        ``projects/<p>/index.md`` on the writer thread (committed with the next group)."""
        m = self.memory
        rel = f"projects/{b.project}/index.md"
        full = m.settings.wiki_dir / rel

        def fn(current: bytes | None) -> bytes | None:
            meta = frontmatter_of(current)
            have = ids_of(meta)
            if b.repo_id in have:
                forks = [f for f in meta.get("repo_forks") or [] if isinstance(f, str)]
                if not b.origin or b.origin == meta.get("repo_origin") or b.origin in forks:
                    return None
                return set_keys(current or b"", {"repo_forks": [*forks, b.origin]})
            want: Any = b.repo_id if not have else [*have, b.repo_id]
            updates: dict[str, Any] = {"repo_id": want}
            if not have:
                updates["display"] = meta.get("display") or b.display
                if b.origin:
                    updates["repo_origin"] = b.origin
            if current is None:
                head = {"type": "project", "title": b.project, **updates}
                return ("---\n" + yaml.safe_dump(head, sort_keys=False) + "---\n").encode()
            return set_keys(current, updates)

        def job() -> WriteResult:
            full.parent.mkdir(parents=True, exist_ok=True)
            _cur, new = m._cas_write(rel, full, fn)
            if new is None:
                return WriteResult(value=None)
            m.index.upsert_page(rel, new)
            return WriteResult(
                paths=[rel],
                author=Author(author, author_email_for(author)),
                message=f"project {b.project}: repository {b.repo_id[:20]} bound",
            )

        m.writer.submit(job)

    def apply(self, obs: Observation) -> Binding | None:
        """Place ``obs`` (an event that carries ``repo_id``) in its repository's project:
        sets ``obs.project``; returns the binding to make once it is accepted."""
        if not obs.repo_id or not obs.project or obs.project_from == "config":
            return None
        project, binding = self.place(obs.project, obs.repo_id, obs.repo_prev, obs.repo_origin)
        obs.project = project
        return binding
