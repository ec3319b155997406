"""What keeps a hub from wiping the local wiki (docs/git.md, "A hub never wipes the
local wiki"): purge tombstones, signed purge announcements, and the deletion limits.

* **Tombstones** (``.git/wiki-memory-tombstones.json``): a purge records the purged
  page's frontmatter ``id`` and the blob ids of every version it removed or scrubbed,
  never a path or text. A sync drops every incoming file whose blob, or whose page id,
  is tombstoned, whatever history the hub shows later; dropping one is no deletion.
* **Announcements**: ``sync --after-purge`` (and ``sync --rewrite-hub``) pushes
  ``refs/wiki-memory/purges/<id>`` beside the branch: a parentless commit with the empty
  tree whose message holds the old and new commit ids, the tombstones, and an HMAC-SHA256
  of those lines made with ``sync_purge_secret``. A follower whose last-seen commit is no
  longer an ancestor of the hub's branch follows the rewrite only with such an
  announcement, its HMAC valid and the two histories differing only by what a purge
  rewrites (:func:`purge_shaped`); otherwise the sync stops.
* **Deletion limits** (:func:`too_many`): a merge that would delete more than
  ``sync_max_delete_fraction`` of the shared pages (from :data:`FRACTION_FLOOR` deleted
  pages on) or more than ``sync_max_delete_pages`` stops until an admin runs
  ``sync --accept-deletions``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dulwich.objects import Blob, Commit, ObjectID, Tree
from dulwich.repo import Repo

from wiki_memory.plainfile import atomic_write
from wiki_memory.wiki import replicate as rp
from wiki_memory.wiki.gitcommon import SYSTEM_AUTHOR, author_identity

__all__ = [
    "ANNOUNCE_PREFIX",
    "FRACTION_FLOOR",
    "TOMBSTONES",
    "Announcement",
    "SyncStop",
    "Tombstones",
    "add_tombstones",
    "announcement_commit",
    "load_tombstones",
    "parse_announcement",
    "purge_shaped",
    "too_many",
]

#: the tombstone file inside ``wiki/.git``
TOMBSTONES = "wiki-memory-tombstones.json"
#: the refs a purging server announces a rewrite under
ANNOUNCE_PREFIX = b"refs/wiki-memory/purges/"
#: the deletion fraction counts only from this many deleted pages on (a wiki of four
#: pages whose hub deleted one is no wipe)
FRACTION_FLOOR = 5
_HEAD = "wiki-memory purge announcement"


class SyncStop(Exception):
    """A merge stopped before touching the working tree: ``cause`` (``rewrite`` or
    ``deletions``), ``message``, ``deletions`` (shared pages it would delete) and
    ``shared`` (shared pages here)."""

    def __init__(self, cause: str, message: str, deletions: int, shared: int) -> None:
        super().__init__(message)
        self.cause = cause
        self.message = message
        self.deletions = deletions
        self.shared = shared


# --------------------------------------------------------------------------- tombstones


@dataclass
class Tombstones:
    """Purged page ids and blob ids (hex text)."""

    ids: set[str] = field(default_factory=set)
    blobs: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.ids or self.blobs)


def load_tombstones(wiki_dir: Path) -> Tombstones:
    """The wiki's tombstones (empty when there are none or the file is unreadable)."""
    try:
        data = json.loads((Path(wiki_dir) / ".git" / TOMBSTONES).read_text("utf-8"))
    except (OSError, ValueError):
        return Tombstones()
    if not isinstance(data, dict):
        return Tombstones()
    ids = {str(x) for x in data.get("ids", []) if isinstance(x, str)}
    blobs = {str(x) for x in data.get("blobs", []) if isinstance(x, str)}
    return Tombstones(ids, blobs)


def add_tombstones(wiki_dir: Path, ids: set[str], blobs: set[str]) -> None:
    """Add page ids and blob ids to the wiki's tombstones (written atomically)."""
    old = load_tombstones(wiki_dir)
    ids = {i for i in ids if i} | old.ids
    blobs = {b for b in blobs if b} | old.blobs
    path = Path(wiki_dir) / ".git" / TOMBSTONES
    body = json.dumps({"ids": sorted(ids), "blobs": sorted(blobs)}, indent=1)
    atomic_write(path, body.encode("utf-8"))


# --------------------------------------------------------------------------- announcements


@dataclass
class Announcement:
    """A verified purge announcement: the hub's commit before and after the rewrite, and
    the tombstones it carries."""

    old: str
    new: str
    tombstones: Tombstones


def _sign(secret: str, lines: list[str]) -> str:
    body = "\n".join(lines).encode("utf-8")
    return hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def announcement_commit(
    repo: Repo, secret: str, old: str | None, new: str, stones: Tombstones
) -> ObjectID:
    """Write the announcement commit of a rewrite from ``old`` to ``new`` (a parentless
    commit with the empty tree: it keeps no old commit alive) and return its id."""
    lines = [
        _HEAD,
        f"old {old or '-'}",
        f"new {new}",
        "ids " + " ".join(sorted(stones.ids)),
        "blobs " + " ".join(sorted(stones.blobs)),
    ]
    empty = Tree()
    repo.object_store.add_object(empty)
    c = Commit()
    c.tree = empty.id
    c.parents = []
    c.author = c.committer = author_identity(*SYSTEM_AUTHOR)
    c.author_time = c.commit_time = int(time.time())
    c.author_timezone = c.commit_timezone = 0
    c.message = ("\n".join([*lines, "hmac " + _sign(secret, lines)]) + "\n").encode()
    repo.object_store.add_object(c)
    return c.id


def parse_announcement(repo: Repo, sha: ObjectID, secret: str) -> Announcement | None:
    """The announcement in commit ``sha`` when it is one, has no parent, holds the empty
    tree and its HMAC is valid under ``secret``; else None (no secret: always None)."""
    if not secret:
        return None
    try:
        c = repo[sha]
    except KeyError:
        return None
    if not isinstance(c, Commit) or c.parents:
        return None
    tree = repo[c.tree]
    if not isinstance(tree, Tree) or len(tree):
        return None
    lines = c.message.decode("utf-8", "replace").rstrip("\n").split("\n")
    if len(lines) != 6 or lines[0] != _HEAD or not lines[5].startswith("hmac "):
        return None
    if not hmac.compare_digest(lines[5][5:], _sign(secret, lines[:5])):
        return None
    fields = {}
    for line in lines[1:5]:
        key, _, value = line.partition(" ")
        fields[key] = value
    return Announcement(
        fields.get("old", "-"),
        fields.get("new", ""),
        Tombstones(set(fields.get("ids", "").split()), set(fields.get("blobs", "").split())),
    )


def _meta(c: Commit) -> tuple[Any, ...]:
    # not the message: a purge rewrites the text it held
    return (c.author, c.author_time, c.committer, c.commit_time)


#: the file name a purge gives a page whose name held the purged text
_NEUTRAL = re.compile(rb"(?:^|/)purged-[0-9a-f]{8}\.md$")


#: how many of the new history's newest commits a seen commit with no twin is compared to
_RECENT = 200


def purge_shaped(repo: Repo, seen: ObjectID, ann: Announcement, stones: Tombstones) -> bool:
    """True when the announced new history is ``seen``'s as a purge rewrites it.

    Either a commit of the new history has ``seen``'s author, committer and dates (a
    purge keeps them; it may rewrite the message) and their trees differ only at paths
    whose version here is tombstoned or personal (a ``--rewrite-hub`` drops what leaked),
    and at pages the purge renamed (``purged-<8 hex>.md``); or the announcement names
    ``seen`` as the commit it replaced (the purging server took in what was pushed after
    its purge) and the new tree lacks no path of ``seen``'s but tombstoned ones; or, when
    ``seen`` has no twin (a sync merge the purging server's projection folded into its
    parent), one of the :data:`_RECENT` newest commits of the new history has ``seen``'s
    tree but for the purge."""
    try:
        mine = repo[seen]
    except KeyError:
        return False
    if not isinstance(mine, Commit):
        return False
    new = ObjectID(ann.new.encode())
    want = _meta(mine)
    a = rp.flat_tree(repo, ObjectID(mine.tree))
    # commits of one second by one author with one message are common (merge commits):
    # any twin whose tree differs only by tombstoned versions will do
    candidates: list[tuple[Commit, bool]] = []
    history = [c for c in (repo[s] for s in rp._ancestors(repo, new)) if isinstance(c, Commit)]
    for c in history:
        if _meta(c) == want:
            candidates.append((c, False))
    top = repo[new]
    if ann.old == seen.decode() and isinstance(top, Commit):
        candidates.append((top, True))
    if any(_differs_by_purge(repo, a, c, loose, stones) for c, loose in candidates):
        return True
    # a sync merge this server pushed can be projected away by the purging server (a
    # merge that took one side whole adds nothing to share): then a recent commit of
    # the new history whose tree is seen's but for the purge will do
    recent = sorted(history, key=lambda c: c.commit_time, reverse=True)[:_RECENT]
    return any(_differs_by_purge(repo, a, c, False, stones) for c in recent)


def _differs_by_purge(
    repo: Repo,
    a: rp.Files,
    twin: Commit,
    loose: bool,
    stones: Tombstones,
) -> bool:
    b = rp.flat_tree(repo, ObjectID(twin.tree))
    for path in set(a) | set(b):
        if a.get(path) == b.get(path):
            continue
        old = a.get(path)
        if loose and (old is None or path in b):
            continue  # added or changed since: the purging server merged others' edits
        if old is None and _NEUTRAL.search(path):
            continue  # the new name of a page whose old name held the purged text
        if old is None or old[1].decode() in stones.blobs:
            if old is None:
                return False
            continue
        if not _personal(repo, path, old[1]):
            return False
    return True


def _personal(repo: Repo, path: bytes, sha: ObjectID) -> bool:
    """True when the file ``path`` (blob ``sha``) is personal by the one rule: a rewrite
    that drops it from a hub removes what the border never let in (``rewrite_hub``)."""
    from wiki_memory.wiki.personal import is_people_folder, page_owner

    if b"/" in path and is_people_folder(path.split(b"/", 1)[0]):
        return True
    try:
        blob = repo[sha]
    except KeyError:
        return False
    rel = path.decode("utf-8", "replace")
    return (
        isinstance(blob, Blob)
        and rel.lower().endswith(".md")
        and page_owner(rel, blob.data) is not None
    )


# --------------------------------------------------------------------------- deletions


def deleted_pages(
    mine: rp.Files,
    merged: rp.Files,
    stones: Tombstones,
) -> int:
    """How many of the shared files ``mine`` the merged tree would delete (a tombstoned
    version's removal is the purge's, not the merge's)."""
    return sum(1 for p, v in mine.items() if p not in merged and v[1].decode() not in stones.blobs)


def too_many(deleted: int, shared: int, fraction: float, most: int) -> bool:
    """True when deleting ``deleted`` of ``shared`` pages passes the limits."""
    if deleted > most:
        return True
    return deleted >= FRACTION_FLOOR and deleted > fraction * max(shared, 1)


def tombstoned(
    repo: Repo,
    files: rp.Files,
    known: rp.Files,
    stones: Tombstones,
) -> set[bytes]:
    """The paths of ``files`` (a hub's flat tree) that are not exactly ``known``'s and
    hold a tombstoned blob, or a page whose frontmatter ``id`` is tombstoned."""
    from wiki_memory.wiki.page import parse_metadata

    out: set[bytes] = set()
    if not stones:
        return out
    for path, (mode, sha) in files.items():
        if known.get(path) == (mode, sha):
            continue
        if sha.decode() in stones.blobs:
            out.add(path)
            continue
        if not stones.ids or not path.lower().endswith(b".md"):
            continue
        try:
            blob = repo[sha]
        except KeyError:
            continue
        if isinstance(blob, Blob) and b"id" in blob.data:
            pid = parse_metadata(blob.data).get("id")
            if pid is not None and str(pid) in stones.ids:
                out.add(path)
    return out
