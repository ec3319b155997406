"""The page a purge removes, found under its other names in history (docs/operations.md,
"Purge"): the page before a rename or a move (by hand, by Obsidian, an earlier release's
session file name), a conflict copy of it. :func:`find_aliases` lists, for the commits a
purge rewrites, every other path that held a version of the page, which of those paths
get a neutral name (a text purge, when the path's file name holds the text) and the
wikilinks by those names that follow (or read as purged, for a whole purge);
:mod:`wiki_memory.wiki.purge` applies them in the same history rewrite as the page.
"""

from __future__ import annotations

import posixpath
import secrets
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dulwich.objects import Blob, Commit, ObjectID, Tree
from dulwich.repo import Repo

from wiki_memory.wiki.links import name_key, target_key
from wiki_memory.wiki.page import parse_metadata

__all__ = ["Aliases", "find_aliases"]


@dataclass
class Aliases:
    """The page's versions under other paths, and what a purge does with them.

    ``versions``: path (bytes, wiki-relative) -> the blob ids of the page's versions
    stored there; ``renames``: path -> its new path (a text purge whose text the file name
    holds); ``links``: groups of (link keys, the target they are pointed at, or None when
    they read as purged); ``subs``: (old bytes, new bytes or None for the purge mark) for
    commit messages, applied before the page's own."""

    versions: dict[bytes, set[ObjectID]] = field(default_factory=dict)
    renames: dict[bytes, bytes] = field(default_factory=dict)
    links: list[tuple[frozenset[str], str | None]] = field(default_factory=list)
    subs: list[tuple[bytes, bytes | None]] = field(default_factory=list)


def _stem(path: bytes) -> str:
    name = posixpath.basename(path.decode("utf-8", "replace"))
    return name[:-3] if name.lower().endswith(".md") else name


def find_aliases(
    repo: Repo,
    order: list[ObjectID],
    parts: list[bytes],
    whole: bool,
    holds: Callable[[str], bool] | None,
    wiki_dir: Path,
) -> Aliases:
    """The page at ``parts`` under other paths in the commits ``order`` (:class:`Aliases`).

    A version is a ``.md`` file whose frontmatter ``id`` is one the page had at ``parts``
    (renamed or moved, then edited; a conflict copy), or, for a text purge (not
    ``whole``), a file holding one of the page's versions byte for byte (renamed or copied
    unchanged: a page without an id). A whole purge drops what it finds, so a file merely
    equal to a version is not enough there. ``holds(stem)``: whether a file name holds
    the purged text (text purge; None for a whole purge). ``wiki_dir``'s working tree
    decides whether a link by an alias's file name may mean another page (then it is
    left alone, as for the page itself)."""
    page = b"/".join(parts)
    versions: set[ObjectID] = set()
    for sha in order:
        commit = repo[sha]
        assert isinstance(commit, Commit)
        try:
            found = _lookup(repo, commit.tree, parts)
        except KeyError:
            found = None
        if found is not None:
            versions.add(found)
    ids: set[str] = set()
    for v in versions:
        obj = repo[v]
        if isinstance(obj, Blob):
            pid = parse_metadata(obj.data).get("id")
            if isinstance(pid, str) and pid:
                ids.add(pid)
    needles = [i.encode("utf-8") for i in ids]
    same: dict[ObjectID, bool] = {}

    def is_version(blob: ObjectID) -> bool:
        if blob not in same:
            if blob in versions and not whole:
                same[blob] = True
            else:
                data = repo[blob].as_raw_string() if needles else b""
                same[blob] = any(n in data for n in needles) and (
                    parse_metadata(data).get("id") in ids
                )
        return same[blob]

    out = Aliases()
    seen: set[tuple[ObjectID, bytes]] = set()

    def visit(tree: ObjectID, prefix: bytes) -> None:
        if (tree, prefix) in seen:
            return
        seen.add((tree, prefix))
        obj = repo[tree]
        assert isinstance(obj, Tree)
        for item in obj.items():
            path = item.path if not prefix else prefix + b"/" + item.path
            if stat.S_ISDIR(item.mode):
                visit(item.sha, path)
            elif (
                stat.S_ISREG(item.mode)
                and path != page
                and item.path.lower().endswith(b".md")
                and is_version(item.sha)
            ):
                out.versions.setdefault(path, set()).add(item.sha)

    if versions:
        for sha in order:
            commit = repo[sha]
            assert isinstance(commit, Commit)
            visit(commit.tree, b"")
    _names(out, whole, holds, wiki_dir)
    return out


def _lookup(repo: Repo, tree: ObjectID, parts: list[bytes]) -> ObjectID | None:
    obj = repo[tree]
    for i, part in enumerate(parts):
        if not isinstance(obj, Tree) or part not in obj:
            return None
        mode, sha = obj[part]
        if i == len(parts) - 1:
            return sha if stat.S_ISREG(mode) else None
        obj = repo[sha]
    return None


def _names(out: Aliases, whole: bool, holds: Callable[[str], bool] | None, wiki_dir: Path) -> None:
    """Fill ``out``'s renames, link groups and message substitutions."""
    own = {p.decode("utf-8", "replace") for p in out.versions}
    for path in sorted(out.versions):
        rel = path.decode("utf-8", "replace")
        stem = _stem(path)
        if whole:
            keys = {target_key(rel)}
            others = [
                f
                for f in wiki_dir.rglob("*.md")
                if ".git" not in f.parts
                and name_key(f.stem) == name_key(stem)
                and f.relative_to(wiki_dir).as_posix() not in own
            ]
            if not others:  # no page of the working tree answers to the name
                keys.add(name_key(stem))
            out.links.append((frozenset(keys), None))
            out.subs.append((path, None))
        elif holds is not None and holds(stem):
            new_name = f"purged-{secrets.token_hex(4)}.md"
            new = posixpath.join(posixpath.dirname(rel), new_name).encode("utf-8")
            out.renames[path] = new
            out.links.append((frozenset({target_key(rel), name_key(stem)}), new_name[:-3]))
            out.subs += [(path, new), (stem.encode("utf-8"), new_name[:-3].encode("utf-8"))]
