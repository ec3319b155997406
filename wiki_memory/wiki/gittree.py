"""Tree objects for :class:`~wiki_memory.wiki.git.GitStore`'s commits: walking a tree's
files and building a new tree from an old one plus changed paths, written straight to
the object store (split out of :mod:`wiki_memory.wiki.git`)."""

from __future__ import annotations

import stat
from collections.abc import Iterator

from dulwich.object_store import BaseObjectStore
from dulwich.objects import ObjectID, Tree

from wiki_memory.wiki.gitindex import Leaf

__all__ = ["build_tree", "tree_files"]


def tree_files(store: BaseObjectStore, tree_id: ObjectID, prefix: bytes) -> Iterator[bytes]:
    """Every file path below tree ``tree_id``, each prefixed with ``prefix``."""
    tree = store[tree_id]
    assert isinstance(tree, Tree)
    for item in tree.iteritems():
        child = prefix + b"/" + item.path if prefix else item.path
        if stat.S_ISDIR(item.mode):
            yield from tree_files(store, item.sha, child)
        else:
            yield child


def build_tree(
    store: BaseObjectStore, tree_id: ObjectID | None, items: list[tuple[list[bytes], Leaf | None]]
) -> ObjectID | None:
    """The id of tree ``tree_id`` (None: an empty one) with ``items`` applied: each is a
    path split at ``/`` and the new leaf there, None to delete it. Changed trees are
    written to ``store``; an unchanged tree keeps its id; None when nothing is left."""
    if tree_id is not None:
        old = store[tree_id]
        assert isinstance(old, Tree)
        tree = old.copy()
        assert isinstance(tree, Tree)
    else:
        tree = Tree()
    direct: dict[bytes, Leaf | None] = {}
    nested: dict[bytes, list[tuple[list[bytes], Leaf | None]]] = {}
    for parts, leaf in items:
        if len(parts) == 1:
            direct[parts[0]] = leaf
        else:
            nested.setdefault(parts[0], []).append((parts[1:], leaf))
    changed = False
    for name, leaf in direct.items():
        if name in nested and leaf is None:
            continue  # handled below: the folder's own changes decide
        current = tree[name] if name in tree else None
        if leaf is None:
            if current is not None:
                del tree[name]
                changed = True
        elif current != (leaf.mode, leaf.sha):
            tree[name] = (leaf.mode, leaf.sha)
            changed = True
    for name, sub in nested.items():
        if direct.get(name) is not None:
            continue  # a file and a folder of the same name: the file is on disk
        current = tree[name] if name in tree else None
        sub_id = current[1] if current is not None and stat.S_ISDIR(current[0]) else None
        new_id = build_tree(store, sub_id, sub)
        if new_id is None:
            if current is not None:
                del tree[name]
                changed = True
        elif current != (stat.S_IFDIR, new_id):
            tree[name] = (stat.S_IFDIR, new_id)
            changed = True
    if not changed and tree_id is not None:
        return tree_id
    if not tree.items():
        return None
    store.add_object(tree)
    return tree.id
