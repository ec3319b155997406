"""What a sync keeps consistent about the entries the border refused (docs/git.md,
"Refused entries"): a push whose only effect would revert them is not made
(:func:`only_refused`), and a push that carries other changes puts the hub's refused
entries back on top (:func:`keep_refused`), so this server never deletes from the hub
what it never took.
"""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path

from dulwich.objects import Commit, ObjectID
from dulwich.repo import Repo

from wiki_memory.core.syncstate import refused_entries
from wiki_memory.wiki import border
from wiki_memory.wiki import replicate as rp

__all__ = ["keep_refused", "only_refused", "tree_of"]


def tree_of(repo: Repo, sha: ObjectID | None) -> ObjectID | None:
    """The tree id of commit ``sha`` (None for None)."""
    if sha is None:
        return None
    c = repo[sha]
    assert isinstance(c, Commit)
    return ObjectID(c.tree)


def only_refused(wiki_dir: Path, repo: Repo, out: ObjectID, theirs: ObjectID) -> bool:
    """True when the trees of ``out`` and ``theirs`` differ only at paths where the
    hub's entry is a recorded refusal, or below one (what this server keeps where the
    hub put a refused link): pushing ``out`` would only revert them."""
    keys = {(r["path"], r["blob"]) for r in refused_entries(wiki_dir)}
    if not keys:
        return False
    a = rp.flat_tree(repo, tree_of(repo, out), rp.MAX_TREE_ENTRIES)
    b = rp.flat_tree(repo, tree_of(repo, theirs), rp.MAX_TREE_ENTRIES)

    def refused(path: bytes) -> bool:
        t = b.get(path)
        return t is not None and (path.decode("utf-8", "surrogateescape"), t[1].decode()) in keys

    for p in set(a) | set(b):
        if a.get(p) == b.get(p) or refused(p):
            continue
        # kept below a refused entry (a link where this server has a folder)
        parts = p.split(b"/")
        if p in b or not any(refused(b"/".join(parts[:i])) for i in range(1, len(parts))):
            return False
    return True


def keep_refused(
    wiki_dir: Path,
    repo: Repo,
    name: str,
    commit: Callable[[Repo, rp.Files, list[ObjectID], str], ObjectID],
    out: ObjectID,
    theirs: ObjectID | None,
) -> ObjectID:
    """What to push instead of ``out``: ``out`` itself, or a commit on top of it that
    puts back the hub's entries the border refused here (recorded, still on the hub,
    at a path ``out`` leaves free): this server never took them, so its push must not
    delete them from the hub (another server's oversize file, link or personal page
    would go, and every server would then pull that deletion). Entries refused for
    their path or a folder mode are not rebuilt here, and a page's pin stays stripped
    (pins never travel)."""
    if theirs is None or out == theirs:
        return out
    rows = [r for r in refused_entries(wiki_dir) if r["remote"] == name]
    if not rows:
        return out
    mine = rp.flat_tree(repo, tree_of(repo, out), rp.MAX_TREE_ENTRIES)
    hub = rp.flat_tree(repo, tree_of(repo, theirs), rp.MAX_TREE_ENTRIES)
    folders: set[bytes] = set()
    for p in mine:
        parts = p.split(b"/")
        folders.update(b"/".join(parts[:i]) for i in range(1, len(parts)))
    files = dict(mine)
    for r in rows:
        key = r["path"].encode("utf-8", "surrogateescape")
        entry = hub.get(key)
        if (
            entry is None
            or entry[1].decode() != r["blob"]
            or key in mine
            or r["reason"].startswith("scope: pin")
            or stat.S_ISDIR(entry[0])
            or border.path_refusal(r["path"]) is not None
        ):
            continue
        parts = key.split(b"/")
        above = [b"/".join(parts[:i]) for i in range(1, len(parts))]
        if key in folders or any(a in mine for a in above):
            continue  # this server has a file above it or a folder at its path
        files[key] = entry
    if files == mine:
        return out
    return commit(repo, files, [out], "Keep the hub's files this server refused to take")
