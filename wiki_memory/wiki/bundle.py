"""Git bundles of the wiki, written and read with dulwich, streamed.

:func:`write_bundle` writes a v2 git bundle (``gitformat-bundle(5)``: the line
``# v2 git bundle``, one ``<hex id> <ref name>`` line per ref, a blank line, then a pack of
every object the refs reach) object by object, so a large wiki is never held in memory;
``git clone wiki.bundle`` reads it. :func:`read_bundle_into` creates a repository from
one: the objects, the refs, ``HEAD`` and a checked-out working tree and index.
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from dulwich.bundle import read_bundle
from dulwich.objects import ObjectID
from dulwich.pack import write_pack_data
from dulwich.refs import Ref
from dulwich.repo import Repo

__all__ = ["read_bundle_into", "write_bundle"]


def write_bundle(wiki_dir: Path, out: BinaryIO) -> dict[str, str]:
    """Write a bundle of every ref of the repository in ``wiki_dir`` (branches, tags,
    remote-tracking refs) to ``out``. Returns ``{ref name: commit id hex}`` plus ``HEAD``
    (the ref name HEAD points to, or its id when detached)."""
    repo = Repo(str(wiki_dir))
    try:
        refs = {
            name: sha for name, sha in sorted(repo.get_refs().items()) if name.startswith(b"refs/")
        }
        out.write(b"# v2 git bundle\n")
        for name, sha in refs.items():
            out.write(sha + b" " + name + b"\n")
        try:
            head_id: bytes | None = repo.head()
        except KeyError:  # a branch with no commit yet
            head_id = None
        if head_id is not None:
            out.write(head_id + b" HEAD\n")  # so that `git clone` checks it out
        out.write(b"\n")
        count, records = repo.generate_pack_data(have=set(), want=set(refs.values()))
        write_pack_data(out.write, records, repo.object_format, num_records=count)
        head = repo.refs.read_ref(Ref(b"HEAD")) or b""
        shown = {n.decode("utf-8", "replace"): s.decode() for n, s in refs.items()}
        shown["HEAD"] = head.removeprefix(b"ref: ").decode("utf-8", "replace")
        return shown
    finally:
        repo.close()


def read_bundle_into(bundle_path: Path, wiki_dir: Path, head: str) -> None:
    """Create the repository ``wiki_dir`` (which must not hold one) from the bundle file:
    every object and ref, ``HEAD`` pointing to ``head`` (a ref name, or an id), the
    working tree and index checked out from it. Raises ValueError for a bundle that
    needs objects it does not hold (prerequisites)."""
    wiki_dir.mkdir(parents=True, exist_ok=True)
    repo = Repo.init(str(wiki_dir))
    try:
        config = repo.get_config()
        config.set((b"core",), b"quotePath", False)
        config.write_to_path()
        with open(bundle_path, "rb") as f:
            bundle = read_bundle(f)
            if bundle.prerequisites:
                raise ValueError("the bundle is incomplete: it needs other objects")
            bundle.store_objects(repo.object_store)
            for name, sha in bundle.references.items():
                if not name.startswith(b"refs/"):
                    continue
                repo.refs[name] = ObjectID(sha)
            bundle.close()
        if head.startswith("refs/"):
            repo.refs.set_symbolic_ref(Ref(b"HEAD"), Ref(head.encode("utf-8")))
        elif head:
            repo.refs[Ref(b"HEAD")] = ObjectID(head.encode())
        if head:
            commit = repo[repo.head()]
            repo.get_worktree().reset_index(commit.tree)  # type: ignore[attr-defined]
    finally:
        repo.close()
