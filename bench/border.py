"""The border's cost on a sync: the first projection of a big history, before and after.

Builds one git history of the vaults in ../shared/data/vaults copied ``--copies`` times
(34: 10,098 pages), one commit per copy, with one page a copy pinned and one marked
personal. Then, ``--rounds`` times and alternating, in a fresh interpreter each over a
fresh copy of the repository, times:

- **main**: ``Shared.project(HEAD)`` (``wiki/projection.py``; ``wiki/replicate.py`` in
  older revisions) with the code of ``--old`` (a git revision of this repository,
  extracted with ``git archive``; default ``main``): the projection before the border
  (no pin stripping);
- **this tree**: the same with this tree's code (pins stripped from every page sent);
- **this tree + check**: the projection plus what a server pulling this history for the
  first time adds: ``incoming_entries`` and ``border.check`` (source ``HUB``, contents
  read) over every file of HEAD.

Prints the median seconds of each and the ratios to main (the target: at most 2x).

    python bench/border.py [--copies 34] [--rounds 3] [--old main] [--distinct]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: ../shared/data/vaults beside the checkout, or beside a folder above it (a worktree)
VAULTS = next(
    (p / "shared" / "data" / "vaults" for p in REPO.parents if (p / "shared" / "data").is_dir()),
    REPO.parent / "shared" / "data" / "vaults",
)

_RUN = """
import sys, time
from dulwich.repo import Repo
from wiki_memory.wiki import replicate as rp
try:
    from wiki_memory.wiki.projection import Shared
except ImportError:  # --old: a revision from before wiki/projection.py
    Shared = rp.Shared
check = sys.argv[2] == "check"
with Repo(sys.argv[1]) as repo:
    head = repo.head()
    t0 = time.perf_counter()
    shared = Shared(repo, None)
    shared.project(head)
    if check:
        from wiki_memory.wiki import border
        files = rp.flat_tree(repo, repo[head].tree)
        kept = {}
        entries = rp.incoming_entries(repo, files, {}, keep=kept)
        v = border.check(entries, border.Source.HUB,
                         content=lambda e: kept.get(e.blob) or repo[e.blob.encode()].data)
        assert len(v.accepted) + len(v.refused) == len(files)
    print(time.perf_counter() - t0)
"""


def build_history(target: Path, copies: int, distinct: bool = False) -> int:
    """A repository at ``target`` holding the vaults ``copies`` times, one commit a copy
    (written as one pack); returns the number of pages in HEAD. ``distinct``: each copy's
    pages end with a line naming the copy, so no two pages share a blob (the projection's
    and the border's per-blob memos then save nothing)."""
    from dulwich.index import commit_tree
    from dulwich.object_store import MemoryObjectStore
    from dulwich.objects import Blob, Commit
    from dulwich.repo import Repo

    sources = sorted(p for p in VAULTS.rglob("*.md") if ".git" not in p.parts)
    store = MemoryObjectStore()
    files: dict[bytes, bytes] = {}
    parent: list[bytes] = []
    for i in range(copies):
        for j, src in enumerate(sources):
            rel = f"projects/copy{i:02d}/{src.relative_to(VAULTS).as_posix()}".encode()
            data = src.read_bytes()
            if distinct:
                data += f"\n<!-- copy {i} -->\n".encode()
            if j == 0:
                data = b"---\npinned: true\n---\n" + data
            elif j == 1:
                data = b"---\nvisibility: personal\nuser: bench\n---\n" + data
            blob = Blob.from_string(data)
            store.add_object(blob)
            files[rel] = blob.id
        c = Commit()
        c.tree = commit_tree(store, [(p, s, 0o100644) for p, s in files.items()])
        c.parents = parent
        c.author = c.committer = b"bench <bench@localhost>"
        c.author_time = c.commit_time = 1_700_000_000 + i
        c.author_timezone = c.commit_timezone = 0
        c.message = f"copy {i}\n".encode()
        store.add_object(c)
        parent = [c.id]
    repo = Repo.init(str(target), mkdir=True)
    repo.object_store.add_objects([(store[sha], None) for sha in store])
    repo.refs[b"refs/heads/master"] = parent[0]
    repo.refs.set_symbolic_ref(b"HEAD", b"refs/heads/master")
    repo.close()
    return len(files)


def run(tree: Path, repo: Path, scratch: Path, mode: str) -> float:
    work = scratch / "run"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(repo, work, symlinks=True)
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run(
        [sys.executable, "-c", _RUN, str(work), mode],
        env=env,
        cwd=str(tree),
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return float(out.split()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=34)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--old", default="main", help="git revision measured as main")
    ap.add_argument(
        "--distinct", action="store_true", help="no two pages share a blob (see build_history)"
    )
    args = ap.parse_args()
    if not VAULTS.is_dir():
        print(f"no vaults at {VAULTS}", file=sys.stderr)
        return 2
    sys.path.insert(0, str(REPO))
    with tempfile.TemporaryDirectory(prefix="bench-border-") as tmp:
        scratch = Path(tmp)
        old = scratch / "old"
        old.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", args.old], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        repo = scratch / "history"
        t0 = time.perf_counter()
        pages = build_history(repo, args.copies, args.distinct)
        print(
            f"history: {args.copies} commits, {pages:,} pages in HEAD, "
            f"{'distinct' if args.distinct else 'identical'} copies "
            f"(built in {time.perf_counter() - t0:.1f} s)"
        )
        times: dict[str, list[float]] = {"main": [], "this tree": [], "this tree + check": []}
        for _ in range(args.rounds):
            times["main"].append(run(old, repo / ".git", scratch, "project"))
            times["this tree"].append(run(REPO, repo / ".git", scratch, "project"))
            times["this tree + check"].append(run(REPO, repo / ".git", scratch, "check"))
        base = statistics.median(times["main"])
        print(f"{'first projection of HEAD':<28}{'median s':>10}{'runs':>30}{'x main':>8}")
        for name, ts in times.items():
            med = statistics.median(ts)
            runs = " ".join(f"{t:.2f}" for t in ts)
            print(f"{name:<28}{med:>10.2f}{runs:>30}{med / base:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
