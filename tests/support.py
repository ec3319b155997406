"""What many test files share, importable from any room's folder (``tests/`` is on
``sys.path`` through its ``conftest.py``): the checkout, the real input in ``../shared``,
polling, running the CLI as a user does, and an in-process ``Memory``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from dulwich.repo import Repo

from wiki_memory.config import load_settings
from wiki_memory.core.memory import Memory
from wiki_memory.datadir import ensure_layout
from wiki_memory.identity import Identity

#: The project checkout (the folder holding ``pyproject.toml``).
REPO = Path(__file__).resolve().parents[1]
#: The real input (harness payloads, vaults, LoCoMo, the failure cases); never copied here.
SHARED = Path(os.environ.get("WIKI_MEMORY_SHARED", REPO.parent / "shared"))

T = TypeVar("T")


def shared_path(*parts: str) -> Path:
    """Return a path under ../shared, or skip the calling test when it is absent."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"real input not available: {p} is missing (../shared is absent)")
    return p


def access_lines(
    data_dir: Path, needle: str = "", at_least: int = 1, timeout: float = 30.0
) -> list[str]:
    """The lines of ``<data_dir>/logs/access.log`` that contain ``needle``, once there are
    ``at_least`` of them: the server writes a request's line after it has sent the
    response, so a client that reads the log at once can be ahead of it. Raises
    AssertionError when fewer turn up within ``timeout`` seconds."""
    log = data_dir / "logs" / "access.log"

    def lines() -> list[str]:
        text = log.read_text(errors="replace") if log.exists() else ""
        found = [ln for ln in text.splitlines() if needle in ln]
        return found if len(found) >= at_least else []

    return wait_for(lines, timeout, f"{at_least} access-log line(s) with {needle!r}")


def wait_for(
    fn: Callable[[], T], timeout: float = 30.0, what: str = "", *, interval: float = 0.05
) -> T:
    """Poll ``fn`` every ``interval`` seconds until it returns something truthy and return
    that; raise AssertionError after ``timeout`` seconds with the last value it returned."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"{what or 'condition'} not met within {timeout}s (last: {last!r})")


def run_cli(
    data_dir: Path, *args: str, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``wiki-memory --data-dir DATA_DIR ARGS...`` as a user would (this interpreter,
    the installed package), with ``WIKI_MEMORY_HOME`` pointing at the same folder."""
    return subprocess.run(
        [sys.executable, "-m", "wiki_memory.cli.main", "--data-dir", str(data_dir), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "WIKI_MEMORY_HOME": str(data_dir), **(env or {})},
    )


def make_memory(
    data: Path, owner: str = "alice", files: dict[str, str] | None = None, **settings: Any
) -> Memory:
    """Start an in-process ``Memory`` over ``data`` (made if missing) owned by ``owner``,
    after writing ``files`` (wiki-relative path → text) into its wiki.

    Defaults suit tests: no watcher, a 0.02 s commit delay; ``settings`` override any
    ``load_settings`` keyword. The caller stops it."""
    settings = {"watch": False, "commit_delay_seconds": 0.02, **settings}
    s = load_settings(data, **settings)
    ensure_layout(s)
    for rel, text in (files or {}).items():
        p = s.wiki_dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    m = Memory(s, owner_user=owner)
    m.start()
    return m


def as_user(holder: Any, name: str | None) -> Identity:
    """The caller ``name`` as a door builds it, for a test that calls the core directly
    (the core takes an :class:`~wiki_memory.identity.Identity`, never a name): the owner's
    name is the owner, another name has the role and grants of the memory's directory
    (``ScopeRule.named``). ``holder``: a Memory, or anything holding one as ``memory``
    (a handoff service)."""
    memory = getattr(holder, "memory", holder)
    return memory.scope.named(name)


def quiet(m: Memory, timeout: float = 15.0) -> None:
    """Wait until ``m``'s watcher has nothing pending and its writer has committed: two
    looks one settle period (``hand_edit_settle_seconds`` + 0.25 s) apart that agree."""
    w = m.watcher
    assert w is not None, "quiet() needs a Memory started with watch=True"
    settle = m.settings.hand_edit_settle_seconds
    deadline = time.monotonic() + timeout
    last = (-1, -1)
    while time.monotonic() < deadline:
        time.sleep(settle + 0.25)
        now = (w.batches, w.commits_requested)
        if now == last and not w._pending and not w._recheck:
            m.writer.flush()
            return
        last = now
    raise AssertionError("the watcher did not settle")


def committed(wiki: Path) -> set[str]:
    """Paths in HEAD's tree of the git repository ``wiki`` (bytes that are not UTF-8 kept
    as surrogates), read with dulwich."""
    repo = Repo(str(wiki))
    try:
        tree = repo[repo[repo.head()].tree]  # type: ignore[attr-defined]
        return {
            e.path.decode("utf-8", "surrogateescape")
            for e in repo.object_store.iter_tree_contents(tree.id)
        }
    finally:
        repo.close()


def all_text_under(root: Path) -> bytes:
    """Every file's bytes under ``root``, concatenated in path order (for "this secret is
    stored nowhere" checks)."""
    blob = bytearray()
    for f in sorted(root.rglob("*")):
        if f.is_file():
            blob += f.read_bytes()
    return bytes(blob)


def git_objects(wiki: Path) -> bytes:
    """The raw bytes of every object in the git repository ``wiki``, loose and packed."""
    repo = Repo(str(wiki))
    try:
        blob = bytearray()
        for sha in repo.object_store:
            blob += repo.object_store[sha].as_raw_string()
        return bytes(blob)
    finally:
        repo.close()


def hook_event(kind: str, session_id: str = "s-1", **payload: object) -> dict[str, object]:
    """A /v1/events body as the hook sends it (harness ``codex``, cwd ``/x/proj``)."""
    return {
        "harness": "codex",
        "event": kind,
        "session_id": session_id,
        "cwd": "/x/proj",
        "payload": payload,
    }


def runtime_distributions() -> list[Any]:
    """The installed distributions the project needs at run time, wiki-memory excluded.

    Walks ``Requires-Dist`` from ``wiki-memory`` recursively, skipping extras (test
    tools) and requirements that are not installed here (a platform marker). Returns
    ``importlib.metadata.Distribution`` objects sorted by normalized name.
    """
    import re
    from importlib import metadata

    seen: dict[str, Any] = {}
    todo = ["wiki-memory"]
    while todo:
        name = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen[key] = dist
        for req in dist.requires or ():
            if re.search(r"\bextra\s*==", req):
                continue
            m = re.match(r"[A-Za-z0-9._-]+", req)
            if m:
                todo.append(m.group())
    seen.pop("wiki-memory", None)
    return [seen[k] for k in sorted(seen)]


#: The headers a streamable-HTTP MCP client sends with a JSON-RPC POST to ``/mcp``.
#: The thirteen MCP tools the server lists, by name (docs/mcp.md); a new tool is added here.
MCP_TOOL_NAMES = frozenset(
    {
        "memory_recall",
        "memory_expand",
        "memory_brief",
        "memory_remember",
        "memory_feedback",
        "page_read",
        "page_list",
        "page_write",
        "page_edit",
        "page_forget",
        "handoff_create",
        "handoff_list",
        "handoff_claim",
        "handoff_update",
    }
)

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def own_address() -> str | None:
    """An IPv4 address of this machine other than loopback that a socket can bind (what a
    LAN client would reach), or None when the machine has none."""
    from wiki_memory.hosts import primary_addresses

    for ip in primary_addresses():
        if ":" in ip:
            continue
        try:
            with socket.socket() as s:
                s.bind((ip, 0))
            return ip
        except OSError:
            continue
    return None


def home_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a user whose HOME is ``home`` (made if missing): nothing of the
    real home's configuration reaches the command (no XDG folders, harness profile
    variables, session bus or ``WIKI_MEMORY_*`` settings), and ``XDG_RUNTIME_DIR`` is an
    empty owner-only folder beside it, so ``systemctl --user`` finds no user manager."""
    home.mkdir(parents=True, exist_ok=True)
    run = home.parent / (home.name + "-run")
    run.mkdir(mode=0o700, exist_ok=True)
    drop = ("XDG_", "WIKI_MEMORY_", "DBUS_", "CLAUDE_CONFIG_DIR", "CODEX_HOME")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(HOME=str(home), XDG_RUNTIME_DIR=str(run), PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def cli_as(
    env: dict[str, str], *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``wiki-memory ARGS...`` (this interpreter, the installed package) in ``env``."""
    return subprocess.run(
        [sys.executable, "-m", "wiki_memory.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def files_of(wiki: Path) -> dict[str, bytes]:
    """Every file of a wiki's worktree (``.git`` left out): relative path -> bytes."""
    return {
        p.relative_to(wiki).as_posix(): p.read_bytes()
        for p in sorted(wiki.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(wiki).parts
    }


def refs_of(wiki: Path) -> dict[bytes, bytes]:
    """The wiki repository's ``refs/…`` names and the object ids they point at."""
    repo = Repo(str(wiki))
    try:
        return {k: v for k, v in repo.get_refs().items() if k.startswith(b"refs/")}
    finally:
        repo.close()
