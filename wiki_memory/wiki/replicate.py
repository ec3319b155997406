"""Replication over git: remotes, fetch and push, history and merging.

Git is the replication engine (docs/git.md, "Replication"). This module is the git side
only; :mod:`wiki_memory.core.sync` runs it on the server's writer thread and keeps the
sync state. What leaves the machine is the shared projection of the local branch
(:mod:`wiki_memory.wiki.projection`: no personal page, no pin).

* **Remotes** are ordinary git remotes in ``.git/config`` (:func:`add_remote`,
  :func:`list_remotes`, :func:`remove_remote`). A URL holding a password is refused:
  credentials come from git's usual places (SSH keys and agent through the ``ssh``
  program; for HTTPS, dulwich reads ``~/.git-credentials`` and the ``credential.helper =
  store`` file), never from the wiki.
* **Merging** is :func:`wiki_memory.wiki.pagemerge.merge_trees` (lines, frontmatter keys,
  renames; only a true overlap keeps the remote's version as a conflict copy named by
  :func:`conflict_name`); this module holds its result type, :class:`MergeResult`.
* **Fetch and push** use dulwich's clients (``file``, ``ssh``, ``git``, ``http(s)``
  URLs). :func:`push` is always a compare-and-swap on the remote's branch ("force with
  lease"): it fails with :class:`LeaseFailed` when the branch is not what the caller last
  saw, so a push never drops another server's commits.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from dulwich.client import SSHGitClient, get_credentials_from_store, get_transport_and_path
from dulwich.index import commit_tree
from dulwich.objects import Commit, ObjectID, Tree
from dulwich.protocol import ZERO_SHA
from dulwich.refs import Ref
from dulwich.repo import Repo

from wiki_memory.capture.sanitize import redact_text
from wiki_memory.wiki import locks  # noqa: F401 - packs move in one at a time (PACK_LOCK)
from wiki_memory.wiki.border import Entry
from wiki_memory.wiki.packsize import inflated_bytes

__all__ = [
    "CONFLICT_RE",
    "config_remotes",
    "FetchTooLarge",
    "LeaseFailed",
    "MergeResult",
    "RemoteError",
    "TreeTooLarge",
    "add_remote",
    "conflict_name",
    "fetch",
    "fetch_prefixed",
    "flat_tree",
    "incoming_entries",
    "is_ancestor",
    "list_remotes",
    "merge_base",
    "push",
    "remote_head",
    "remove_remote",
]

#: the ref holding the projection of the local branch (what a plain ``git push`` sends)
SHARED_REF = Ref(b"refs/wiki-memory/shared")
#: a conflict copy's name: ``<stem>.conflict-<remote>-<7 hex of its blob><suffix>``
CONFLICT_RE = re.compile(r"\.conflict-[A-Za-z0-9._-]+-[0-9a-f]{7}(\.[^/]*)?$")
#: the ssh command line for ssh remotes (set by :mod:`wiki_memory.wiki.netchild`: no
#: prompt, a connect timeout); None: dulwich's default ``ssh``
SSH_OPTIONS: str | None = None
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_PASSWORD_RE = re.compile(r"^[a-z][a-z0-9+.-]*://[^/@:]*:[^/@]*@", re.IGNORECASE)


class RemoteError(Exception):
    """A remote cannot be added, found, reached or written: the message says which."""


class FetchTooLarge(RemoteError):
    """A fetch sent more than the allowed bytes: it was aborted and nothing of it kept."""


class LeaseFailed(RemoteError):
    """The remote's branch was not at the commit the push expected (someone pushed)."""


# --------------------------------------------------------------------------- remotes


def config_remotes(repo: Repo) -> dict[str, str]:
    """The repository's remotes from its config: name -> url ('' when it has none)."""
    config = repo.get_config()
    out: dict[str, str] = {}
    for section in config.sections():
        if len(section) == 2 and section[0] == b"remote":
            try:
                url = config.get(section, b"url").decode("utf-8", "replace")
            except KeyError:
                url = ""
            out[section[1].decode("utf-8", "replace")] = url
    return out


def list_remotes(wiki_dir: Path) -> dict[str, str]:
    """Every configured remote of the wiki's repository: name -> URL."""
    with Repo(str(wiki_dir)) as repo:
        return config_remotes(repo)


def add_remote(wiki_dir: Path, name: str, url: str, branch: str = "main") -> None:
    """Add remote ``name`` at ``url`` to the wiki's ``.git/config``, with a fetch refspec
    into ``refs/remotes/<name>/`` and a push refspec sending the shared projection
    (:data:`SHARED_REF`), never the local branch, to ``branch`` (so a person's plain
    ``git push <name>`` sends no personal page either).

    Raises RemoteError for a bad name (letters, digits, ``._-``, at most 64), a name in
    use, an empty URL, or a URL holding a password or anything the sanitizer takes for a
    secret (a token as the user name): credentials belong to git's credential store or
    ssh, never to the wiki's files."""
    if not _NAME_RE.match(name):
        raise RemoteError(f"bad remote name {name!r}: use letters, digits, '.', '_' or '-'")
    if not url.strip():
        raise RemoteError("the remote URL is empty")
    if _PASSWORD_RE.match(url) or redact_text(url)[1]:
        raise RemoteError(
            "the URL holds a password or token: keep it in git's credential store or use ssh keys"
        )
    with Repo(str(wiki_dir)) as repo:
        if name in config_remotes(repo):
            raise RemoteError(f"remote {name!r} exists already")
        config = repo.get_config()
        section = (b"remote", name.encode())
        config.set(section, b"url", url.encode())
        config.set(section, b"fetch", f"+refs/heads/*:refs/remotes/{name}/*".encode())
        config.set(section, b"push", SHARED_REF + f":refs/heads/{branch}".encode())
        config.write_to_path()


def remove_remote(wiki_dir: Path, name: str) -> None:
    """Remove remote ``name`` and its remote-tracking refs. RemoteError when unknown."""
    with Repo(str(wiki_dir)) as repo:
        if name not in config_remotes(repo):
            raise RemoteError(f"no remote named {name!r}")
        config = repo.get_config()
        del config[(b"remote", name.encode())]
        config.write_to_path()
        prefix = f"refs/remotes/{name}/".encode()
        for ref in [r for r in repo.refs.allkeys() if r.startswith(prefix)]:
            repo.refs.remove_if_equals(ref, None)


def remote_url(repo: Repo, name: str) -> str:
    """The URL of remote ``name``; RemoteError when there is none."""
    url = config_remotes(repo).get(name)
    if not url:
        raise RemoteError(f"no remote named {name!r}")
    return url


# --------------------------------------------------------------------------- network


def _client(url: str) -> tuple[Any, str]:
    """dulwich's client and path for ``url``. For ``http(s)`` URLs with no password, the
    first matching line of git's credential store (``~/.git-credentials``,
    ``$XDG_CONFIG_HOME/git/credentials``: what ``credential.helper = store`` writes) gives
    the user name and password; other credential helpers are not run (docs/operations.md,
    "Credentials"). ssh URLs use the ``ssh`` program, so keys and the agent work."""
    parsed = urlparse(url)
    found: tuple[str, str] | None = None
    if parsed.scheme in ("http", "https") and parsed.hostname and not parsed.password:
        found = next(
            iter(get_credentials_from_store(parsed.scheme, parsed.hostname, parsed.username)),
            None,
        )
    if found is not None:
        client, path = get_transport_and_path(url, username=found[0], password=found[1])
    else:
        client, path = get_transport_and_path(url)
    if SSH_OPTIONS and isinstance(client, SSHGitClient):
        client.ssh_command = SSH_OPTIONS
    return client, path


def remote_head(url: str, branch: str = "main") -> ObjectID | None:
    """The commit id the remote's ``branch`` points at now (None: no such branch), without
    fetching anything. RemoteError when the remote cannot be reached."""
    try:
        client, path = _client(url)
        refs = client.get_refs(path.encode()).refs
    except Exception as exc:  # noqa: BLE001 - every transport has its own errors
        raise RemoteError(f"cannot reach the remote: {exc}") from None
    sha = refs.get(Ref(f"refs/heads/{branch}".encode()))
    return None if sha is None or sha == ZERO_SHA else ObjectID(sha)


def fetch(
    repo: Repo, name: str, branch: str = "main", max_bytes: int | None = None
) -> ObjectID | None:
    """Fetch the remote's ``branch`` into the repository and point
    ``refs/remotes/<name>/<branch>`` at it (moved even when the remote was rewritten: the
    caller compares it with what it knew). Returns its commit id, None when the remote
    has no such branch (an empty hub). RemoteError when unreachable; FetchTooLarge when
    the pack passes ``max_bytes`` (counted as it arrives; the fetch is aborted there and
    nothing of it is added to the repository)."""
    url = remote_url(repo, name)
    ref = f"refs/heads/{branch}".encode()

    def wants(refs: Any, depth: int | None = None) -> list[ObjectID]:
        sha = refs.get(ref)
        if sha in (None, ZERO_SHA) or sha in repo.object_store:
            return []
        return [sha]

    try:
        client, path = _client(url)
        result = _bounded_fetch(client, path.encode(), repo, wants, max_bytes)
    except FetchTooLarge:
        raise
    except Exception as exc:  # noqa: BLE001 - every transport has its own errors
        raise RemoteError(f"cannot fetch from {name}: {exc}") from None
    sha = result.refs.get(Ref(ref))
    tracking = Ref(f"refs/remotes/{name}/{branch}".encode())
    if sha is None or sha == ZERO_SHA:
        return None
    repo.refs[tracking] = ObjectID(sha)
    return ObjectID(sha)


def fetch_prefixed(
    repo: Repo, name: str, prefix: bytes, max_bytes: int | None = None
) -> dict[bytes, ObjectID]:
    """Fetch the remote's refs under ``prefix`` (such as purge announcements) without
    making local refs for them: ref -> commit id. RemoteError when unreachable."""
    url = remote_url(repo, name)
    found: dict[bytes, ObjectID] = {}

    def wants(refs: Any, depth: int | None = None) -> list[ObjectID]:
        for r, sha in refs.items():
            if r.startswith(prefix) and sha not in (None, ZERO_SHA):
                found[bytes(r)] = ObjectID(sha)
        return sorted({s for s in found.values() if s not in repo.object_store})

    try:
        client, path = _client(url)
        _bounded_fetch(client, path.encode(), repo, wants, max_bytes)
    except FetchTooLarge:
        raise
    except Exception as exc:  # noqa: BLE001 - every transport has its own errors
        raise RemoteError(f"cannot fetch from {name}: {exc}") from None
    return found


def _bounded_fetch(client: Any, path: bytes, repo: Repo, wants: Any, max_bytes: int | None) -> Any:
    """dulwich's ``GitClient.fetch`` with the pack's bytes counted as they arrive: every
    transport (the local one too) goes through ``fetch_pack``, whose data is spooled to a
    temporary file and added as a (thin) pack only once complete and within bounds."""
    from tempfile import SpooledTemporaryFile

    received = 0
    spool: Any = SpooledTemporaryFile(
        max_size=16 * 1024 * 1024,
        prefix="incoming-",
        dir=getattr(repo.object_store, "path", None),
    )

    def pack_data(chunk: bytes) -> int:
        nonlocal received
        received += len(chunk)
        if max_bytes is not None and received > max_bytes:
            raise FetchTooLarge(
                f"the fetch passed max_fetch_bytes ({max_bytes} bytes): aborted, nothing kept"
            )
        spool.write(chunk)
        return len(chunk)

    try:
        result = client.fetch_pack(path, wants, repo.get_graph_walker(), pack_data)
        if spool.tell() and max_bytes is not None:
            spool.seek(0)
            inflated = inflated_bytes(spool, max_bytes)
            if inflated > max_bytes:
                raise FetchTooLarge(
                    f"the fetch's objects inflate past max_fetch_bytes ({max_bytes} bytes):"
                    " aborted, nothing kept"
                )
        if spool.tell():
            spool.seek(0)
            repo.object_store.add_thin_pack(spool.read, None)
    finally:
        spool.close()
    return result


def push(
    repo: Repo,
    name: str,
    sha: ObjectID,
    expected: ObjectID | None,
    branch: str = "main",
    extra: dict[bytes, ObjectID] | None = None,
) -> None:
    """Set the remote's ``branch`` to ``sha`` only if it is at ``expected`` now (None: the
    branch must not exist): git's ``push --force-with-lease``. Sends the objects reachable
    from ``sha`` that the remote lacks, and nothing else. ``extra``: more refs set in the
    same push (a purge announcement). Raises LeaseFailed when the branch moved,
    RemoteError when the remote cannot be reached or refuses."""
    url = remote_url(repo, name)
    ref = f"refs/heads/{branch}".encode()

    def update_refs(refs: dict[Any, ObjectID]) -> dict[Any, ObjectID]:
        cur = refs.get(ref)
        if cur == ZERO_SHA:
            cur = None
        if cur != expected:
            raise LeaseFailed(f"the remote's {branch} moved since it was fetched")
        out = {ref: sha}
        out.update(extra or {})
        return out

    def pack_data(have: Any, want: Any, *, ofs_delta: bool = False, progress: Any = None) -> Any:
        return repo.generate_pack_data(set(have), set(want), progress=progress, ofs_delta=ofs_delta)

    try:
        client, path = _client(url)
        result = client.send_pack(path.encode(), update_refs, generate_pack_data=pack_data)
    except LeaseFailed:
        raise
    except Exception as exc:  # noqa: BLE001 - every transport has its own errors
        raise RemoteError(f"cannot push to {name}: {exc}") from None
    for _ref, error in (result.ref_status or {}).items():
        if error is not None:
            raise RemoteError(f"{name} refused the push: {error}")
    repo.refs[Ref(f"refs/remotes/{name}/{branch}".encode())] = sha


# --------------------------------------------------------------------------- history


def is_ancestor(repo: Repo, a: ObjectID, b: ObjectID) -> bool:
    """True when commit ``a`` is ``b`` or one of its ancestors (a walk from ``b``)."""
    return a == b or any(a in c.parents for _, c in walk(repo, b))


def _ancestors(repo: Repo, sha: ObjectID) -> set[ObjectID]:
    return {s for s, _ in walk(repo, sha)}


def walk(repo: Repo, sha: ObjectID, missing_ok: bool = False) -> Iterator[tuple[ObjectID, Commit]]:
    """Each commit reachable from ``sha`` once, with its id (depth first, parents in
    their order). ``missing_ok``: an object the repository lacks, or one that is no
    commit, is passed over (with its history behind it); else KeyError or
    AssertionError."""
    seen: set[ObjectID] = set()
    todo = [sha]
    while todo:
        s = todo.pop()
        if s in seen:
            continue
        seen.add(s)
        try:
            c = repo[s]
        except KeyError:
            if missing_ok:
                continue
            raise
        if not isinstance(c, Commit):
            assert missing_ok, f"{s!r} is no commit"
            continue
        yield s, c
        todo.extend(c.parents)


def merge_base(repo: Repo, a: ObjectID, b: ObjectID) -> ObjectID | None:
    """A best common ancestor of ``a`` and ``b`` (one that is no other common ancestor's
    ancestor; the newest by commit time when a criss-cross leaves several); None for
    unrelated histories (two servers that started apart).

    The common ancestors are closed under "parent of", so the best ones are exactly
    those that are no common ancestor's parent. Commit times never decide ancestry here:
    two commits in the same second are common."""
    common = _ancestors(repo, a) & _ancestors(repo, b)
    if not common:
        return None
    parents: set[ObjectID] = set()
    for sha in common:
        c = repo[sha]
        assert isinstance(c, Commit)
        parents.update(c.parents)
    best = [s for s in common if s not in parents]
    return max(best, key=lambda s: (repo[s].commit_time, s))  # type: ignore[attr-defined]


#: the most entries (files and folders) a hub's tree may list: a tree can name one
#: subtree many times, so 10 KiB of trees list a million paths and 13 KiB a hundred million
MAX_TREE_ENTRIES = 1 << 20


class TreeTooLarge(RemoteError):
    """A hub's tree lists more than :data:`MAX_TREE_ENTRIES` entries: nothing of it is used."""


#: a tree's files, flat: path -> (mode, blob id), as :func:`flat_tree` lists them
Files = dict[bytes, tuple[int, ObjectID]]


def flat_tree(repo: Repo, tree_id: ObjectID | None, limit: int | None = None) -> Files:
    """Every file of a tree: path -> (mode, blob id). An entry with a folder's mode whose
    object is missing or not a tree (a hub can write one) is listed as it is, with its
    folder mode, rather than walked: the border refuses it. ``limit``: TreeTooLarge once
    more than that many entries (files and folders, each path counted) were walked."""
    out: Files = {}
    if tree_id is None:
        return out
    walked = 0
    todo: list[tuple[bytes, ObjectID]] = [(b"", tree_id)]
    while todo:
        prefix, tid = todo.pop()
        try:
            tree = repo[tid]
        except KeyError:
            tree = None
        if not isinstance(tree, Tree):
            if prefix:
                out[prefix[:-1]] = (stat.S_IFDIR, tid)
            continue
        walked += len(tree)
        if limit is not None and walked > limit:
            raise TreeTooLarge(
                f"the hub's tree lists more than {limit} files and folders: nothing of it used"
            )
        for item in tree.iteritems():
            path = prefix + item.path
            if stat.S_ISDIR(item.mode):
                todo.append((path + b"/", item.sha))
            else:
                out[path] = (item.mode, item.sha)
    return out


_KINDS = {1: "commit", 2: "tree", 3: "blob", 4: "tag"}


def incoming_entries(
    repo: Repo,
    files: Files,
    known: Files,
    keep: dict[str, bytes] | None = None,
    keep_bytes: int = 64 * 1024 * 1024,
) -> list[Entry]:
    """The border's :class:`~wiki_memory.wiki.border.Entry` for every file of ``files``
    (a flat tree that came from a hub) that is not exactly ``known``'s (what this server
    shares already needs no check): its path decoded with ``surrogateescape``, its mode,
    its object's kind (``blob``, ``tree``, ``commit``, ``missing``) and size in bytes. A
    gitlink's or folder's object is not read. ``keep``: filled with blob id (hex text) ->
    bytes for the ``.md`` blobs read on the way, up to ``keep_bytes`` in all, so the
    border's content reads need not read them again."""
    out: list[Entry] = []
    kept = 0
    seen: dict[ObjectID, tuple[str, int]] = {}
    for path, (mode, sha) in files.items():
        if known.get(path) == (mode, sha):
            continue
        kind, size = "missing", 0
        if mode == 0o160000:
            kind = "commit"
        elif stat.S_ISDIR(mode):
            kind = "tree"
        elif sha in seen:
            kind, size = seen[sha]
        else:
            try:
                type_num, raw = repo.object_store.get_raw(sha)
                kind, size = _KINDS.get(type_num, "missing"), len(raw)
                if (
                    keep is not None
                    and kind == "blob"
                    and kept + size <= keep_bytes
                    and path.lower().endswith(b".md")
                ):
                    keep[sha.decode()] = raw
                    kept += size
            except KeyError:
                pass
            seen[sha] = (kind, size)
        out.append(
            Entry(path.decode("utf-8", "surrogateescape"), mode, size, sha.decode(), kind=kind)
        )
    return out


def build_tree(repo: Repo, files: Files) -> ObjectID:
    """Write the tree holding exactly ``files`` (path -> (mode, blob id)); its id."""
    if not files:
        empty = Tree()
        repo.object_store.add_object(empty)
        return empty.id
    return commit_tree(repo.object_store, [(p, sha, mode) for p, (mode, sha) in files.items()])


def conflict_name(path: bytes, remote: str, blob: ObjectID) -> bytes:
    """Where the remote's version of a conflicting file is kept: ``notes/a.md`` ->
    ``notes/a.conflict-origin-1a2b3c4.md`` (the blob's first 7 hex digits, so both
    servers name the same copy the same)."""
    head, sep, name = path.rpartition(b"/")
    stem, dot, suffix = name.rpartition(b".")
    if not dot or not stem:
        stem, suffix = name, b""
    tag = b".conflict-" + remote.encode() + b"-" + blob[:7]
    new = stem + tag + (b"." + suffix if suffix else b"")
    return head + sep + new


@dataclass
class MergeResult:
    """A merged tree: ``files`` (path -> (mode, blob id)) and ``conflicts`` (path ->
    the conflict copy's path) for files both sides changed differently."""

    files: Files
    conflicts: dict[str, str] = field(default_factory=dict)
