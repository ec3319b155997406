"""Which project an event belongs to: one order, used by the hook, the server's capture
and the brief (docs/hooks.md, "Which project").

Standard library only and cheap to import: the hook program (``python -S``) loads this
same module. :func:`resolve_project` looks at the file system of the machine it runs on
(the hook's, for events a hook sends; the server's, for a ``cwd`` an HTTP client sends
without a project), never runs git, and reads at most one small TOML file per call.

The order, first match wins:

1. an **explicit** project (an event's ``project``, a tool's ``project`` argument);
2. ``project = "…"`` in the nearest ``.wiki-memory.toml`` at or above ``cwd``;
3. the **git repository** holding ``cwd``: the nearest ``.git`` at or above it; a linked
   worktree (``.git`` is a file naming ``…/.git/worktrees/<name>``) maps to its main
   repository; the repository's own ``.wiki-memory.toml`` ``project`` wins over its
   folder name;
4. otherwise (a scratch folder, ``$HOME``, no ``cwd``): the session's **current** project
   (``session_project``), or none.

A folder's name alone never becomes a project: only a configuration file or a
repository makes one.

**A repository's id** (:func:`repo_identity`, docs/hooks.md "A project is its
repository"): what makes a repository the same one when it is renamed, moved or cloned
again, and two repositories that share a folder name different ones. The hook works it
out once per repository (a cached file, off the event's hot path) and sends it with
every event as ``repo_id``; the server maps ids to projects (``repo_id`` in
``projects/<p>/index.md``). In order:

- the **root commit** (``git rev-list --max-parents=0 HEAD``, 1 s at most): ``root:<sha>``,
  the smallest when there are several; not in a shallow clone (its oldest commit is
  not the root), which uses
- the **origin URL**, normalised (``git@host:Owner/api.git``, ``https://host/Owner/api``
  and ``ssh://git@host/Owner/api`` are all ``origin:host/owner/api``);
- a repository **with no commit** yet: a provisional id, ``new:<random>``, kept in
  ``.git/wiki-memory-id``; the hook sends it as ``repo_prev`` beside the real id at the
  first commit, and the server joins the two;
- else none (the folder's name, as before).
"""

from __future__ import annotations

import os

#: the per-repository configuration file
REPO_CONFIG = ".wiki-memory.toml"


class Resolution:
    """A resolved project: ``name`` (None: no project) and ``source``, one of
    ``explicit``, ``config``, ``git``, ``session``, ``none``; ``root`` is the folder the
    name came from (the configuration file's or the repository's), when there is one.
    (A plain class: ``dataclasses`` costs the hook milliseconds to import.)"""

    __slots__ = ("name", "source", "root")

    def __init__(self, name: str | None, source: str, root: str | None = None) -> None:
        self.name = name
        self.source = source
        self.root = root

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Resolution) and (self.name, self.source, self.root) == (
            other.name,
            other.source,
            other.root,
        )

    def __hash__(self) -> int:
        return hash((self.name, self.source, self.root))

    def __repr__(self) -> str:
        return f"Resolution({self.name!r}, {self.source!r}, {self.root!r})"


def config_project(folder: str) -> str | None:
    """``project`` of ``<folder>/.wiki-memory.toml`` (top-level key), else None.

    Read with a one-line pattern, not a TOML parser (this runs in every hook call);
    ``project`` must be a quoted string on a line of its own, before any table."""
    try:
        with open(os.path.join(folder, REPO_CONFIG), encoding="utf-8", errors="replace") as f:
            text = f.read(65536)
    except OSError:
        return None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            return None  # a table began: ``project`` is a top-level key only
        key, eq, value = line.partition("=")
        if not eq or key.strip() != "project":
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] in "\"'" and value[0] in value[1:]:
            name = value[1 : value.index(value[0], 1)].strip()
            return name or None
        return None
    return None


def _main_worktree(top: str) -> str:
    """The main repository's folder for a repository root ``top``: ``top`` itself unless
    ``top/.git`` is a file naming a linked worktree's git dir (``…/.git/worktrees/x``)."""
    dotgit = os.path.join(top, ".git")
    if not os.path.isfile(dotgit):
        return top
    try:
        with open(dotgit, encoding="utf-8", errors="replace") as f:
            line = f.readline().strip()
    except OSError:
        return top
    if not line.startswith("gitdir:"):
        return top
    gitdir = line[len("gitdir:") :].strip()
    if not os.path.isabs(gitdir):
        gitdir = os.path.normpath(os.path.join(top, gitdir))
    common = gitdir
    try:
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as f:
            c = f.readline().strip()
        common = os.path.normpath(c if os.path.isabs(c) else os.path.join(gitdir, c))
    except OSError:
        return top  # a submodule (no commondir): its own repository
    if os.path.basename(common) == ".git":
        return os.path.dirname(common)
    return top


def _upward(d: str) -> list[str]:
    out = [d]
    while True:
        parent = os.path.dirname(d)
        if parent == d:
            return out
        out.append(parent)
        d = parent


def resolve_project(
    cwd: str | None,
    explicit: str | None = None,
    session_project: str | None = None,
) -> Resolution:
    """The project of an event in ``cwd`` (see the module docstring for the order).

    ``cwd``: an absolute folder on this machine (or None); ``explicit``: a project named
    by the caller; ``session_project``: the session's current project. Never raises for
    a folder that does not exist or cannot be read (it then has no configuration and
    no repository)."""
    if explicit and explicit.strip():
        return Resolution(explicit.strip(), "explicit")
    if cwd and os.path.isabs(cwd):
        start = os.path.normpath(cwd)
        for d in _upward(start):
            if os.path.isfile(os.path.join(d, REPO_CONFIG)):
                name = config_project(d)
                if name:
                    return Resolution(name, "config", d)
        for d in _upward(start):
            if os.path.exists(os.path.join(d, ".git")):
                main = _main_worktree(d)
                name = config_project(main) if main != d else None
                return Resolution(name or os.path.basename(main) or None, "git", main)
    if session_project:
        return Resolution(session_project, "session")
    return Resolution(None, "none")


def git_dir(root: str) -> str | None:
    """The git directory of the repository at ``root`` (``root/.git``, or the one a
    ``.git`` file names); None when there is none."""
    dotgit = os.path.join(root, ".git")
    if os.path.isdir(dotgit):
        return dotgit
    try:
        with open(dotgit, encoding="utf-8", errors="replace") as f:
            line = f.readline().strip()
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    gd = line[len("gitdir:") :].strip()
    return gd if os.path.isabs(gd) else os.path.normpath(os.path.join(root, gd))


def origin_url(gitdir: str) -> str | None:
    """``url`` of ``[remote "origin"]`` in ``gitdir/config``, read without git."""
    try:
        with open(os.path.join(gitdir, "config"), encoding="utf-8", errors="replace") as f:
            text = f.read(1 << 20)
    except OSError:
        return None
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            section = line.replace(" ", "").replace("'", '"').lower()
            continue
        if section == '[remote"origin"]':
            key, eq, value = line.partition("=")
            if eq and key.strip().lower() == "url":
                return value.strip().strip('"') or None
    return None


def normal_origin(url: str) -> str | None:
    """``host/owner/name`` of a remote URL (scheme, user, port, ``.git`` and case of the
    host dropped; the path lower-cased, as the big hosts treat it): ``origin:`` + this is
    an id. None for a local path."""
    u = url.strip()
    if not u:
        return None
    if "://" in u:
        rest = u.split("://", 1)[1]
        host, _, path = rest.partition("/")
    elif ":" in u and not u.startswith("/") and "/" not in u.split(":", 1)[0]:
        host, _, path = u.partition(":")  # scp form: git@host:owner/name
    else:
        return None  # a local path: no identity beyond this machine
    host = host.rsplit("@", 1)[-1].split(":", 1)[0].lower()
    path = path.strip("/")
    if path.endswith(".git"):
        path = path[:-4]
    if not host or not path:
        return None
    return f"{host}/{path.lower()}"


def repo_identity(root: str, timeout: float = 1.0) -> dict[str, str]:
    """The id of the repository at ``root`` (see the module docstring) and what goes
    with it: ``{"id": ..., "origin": "host/owner/name" (when there is one), "kind":
    "root"|"origin"|"new", "prev": provisional id joined now}``; ``{}`` when there is none.
    Runs ``git rev-list`` (at most ``timeout`` seconds): never on an event's hot path."""
    gd = git_dir(root)
    if gd is None or not os.path.isfile(os.path.join(gd, "HEAD")):
        return {}  # not a repository git would know (a bare ``.git`` folder)
    out: dict[str, str] = {}
    url = origin_url(gd)
    origin = normal_origin(url) if url else None
    if origin:
        out["origin"] = origin
    shallow = os.path.exists(os.path.join(gd, "shallow"))
    roots: list[str] = []
    unborn = False
    if not shallow:
        import subprocess

        try:
            r = subprocess.run(
                ["git", "-C", root, "rev-list", "--max-parents=0", "HEAD"],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
            roots = [x for x in r.stdout.split() if len(x) >= 40]
            unborn = r.returncode != 0 and not roots and _unborn(gd)
        except (OSError, subprocess.SubprocessError):
            return {}  # no git, or too slow: tried again at the next look
    prov_file = os.path.join(gd, "wiki-memory-id")
    if roots:
        out["id"], out["kind"] = "root:" + min(roots), "root"
    elif origin:
        out["id"], out["kind"] = "origin:" + origin, "origin"
    elif unborn:
        out["id"], out["kind"] = _provisional(prov_file), "new"
        return out
    else:
        return {}
    try:
        with open(prov_file, encoding="utf-8") as f:
            prev = f.read().strip()
        if prev.startswith("new:"):
            out["prev"] = prev  # made before the first commit: the server joins the two
    except OSError:
        pass
    return out


def has_head(root: str) -> bool:
    """True when ``root`` holds a repository with a ``HEAD`` (one that can have an id)."""
    gd = git_dir(root)
    return gd is not None and os.path.isfile(os.path.join(gd, "HEAD"))


def _unborn(gd: str) -> bool:
    """True when HEAD names a branch that has no commit yet (a new repository)."""
    try:
        with open(os.path.join(gd, "HEAD"), encoding="utf-8") as f:
            head = f.read().strip()
    except OSError:
        return False
    if not head.startswith("ref:"):
        return False
    ref = head[4:].strip()
    if os.path.exists(os.path.join(gd, ref)):
        return False
    try:
        with open(os.path.join(gd, "packed-refs"), encoding="utf-8") as f:
            return not any(line.rstrip().endswith(" " + ref) for line in f)
    except OSError:
        return True


def _provisional(path: str) -> str:
    """The provisional id kept in ``path`` (made on first use)."""
    try:
        with open(path, encoding="utf-8") as f:
            got = f.read().strip()
        if got.startswith("new:"):
            return got
    except OSError:
        pass
    made = "new:" + os.urandom(12).hex()
    try:
        with open(path, "x", encoding="utf-8") as f:
            f.write(made + "\n")
    except FileExistsError:
        return _provisional(path)
    except OSError:
        pass
    return made


__all__ = [
    "REPO_CONFIG",
    "Resolution",
    "config_project",
    "git_dir",
    "has_head",
    "normal_origin",
    "origin_url",
    "repo_identity",
    "resolve_project",
]
