"""GitStore.commit, measured: one-file commits on repositories of 1,000 and 10,000 files.

For each repository size, ``--commits`` (default 200) edits, each of one file (a different
one each time, as the writer commits a session page), committed one by one:

- **GitStore.commit**: the product: blob -> trees -> commit objects, the ref moved with a
  compare-and-swap under ``index.lock``, the index entries rewritten (``git status`` clean);
- **floor: objects only**: the same blob, trees and commit written to the same object
  store with dulwich and nothing else (no lock, no ref, no index): what any commit built
  from objects must at least do;
- **stock git add + commit**: the git binary on the same repository, for comparison
  (skipped without git).

Prints ms per commit, commits/s and the ratio to the floor. Moved here from
``tests/wiki/test_git.py`` (``test_speed_1k_files``/``test_speed_10k_files`` printed the rate);
the tests keep what the commits must do (``test_commits_on_a_large_repo_stay_clean``).
DESIGN's measurement: porcelain add+commit ~20/s at 1k files and ~3/s at 10k; objects
plus a ref compare-and-swap 120-170/s.

    python bench/git.py [--commits 200] [--sizes 1000,10000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dulwich.objects import Blob, Commit, Tree  # noqa: E402
from dulwich.repo import Repo  # noqa: E402

from wiki_memory.wiki.git import GitStore  # noqa: E402

GIT = shutil.which("git")


def seed(wiki: Path, files: int) -> list[str]:
    names = [f"notes/{i % 50:02d}/page-{i}.md" for i in range(files)]
    for i, rel in enumerate(names):
        p = wiki / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"# page {i}\n\nbody\n", encoding="utf-8")
    return names


def edit(wiki: Path, names: list[str], j: int) -> str:
    rel = names[(j * 7919) % len(names)]
    (wiki / rel).write_text(f"# page\n\nedit {j}\n", encoding="utf-8")
    return rel


def bench_store(root: Path, files: int, commits: int) -> float:
    wiki = root / f"store{files}"
    with GitStore(wiki) as s:
        names = seed(wiki, files)
        s.commit(names, "seed", "seed@x", "seed")
        t0 = time.perf_counter()
        for j in range(commits):
            rel = edit(wiki, names, j)
            if not s.commit([rel], "A", "a@x", f"edit {j}"):
                raise RuntimeError(f"commit {j} changed nothing")
        took = time.perf_counter() - t0
        if not s.is_clean():
            raise RuntimeError("git status is not clean after the commits")
    return took / commits


def bench_floor(root: Path, files: int, commits: int) -> float:
    """Blob + the trees on its path + a commit, added to a dulwich object store."""
    wiki = root / f"store{files}"  # the product's repository, already seeded and edited
    repo = Repo(str(wiki))
    store = repo.object_store
    head = repo[repo.head()]
    names = [f"notes/{i % 50:02d}/page-{i}.md" for i in range(files)]
    root_tree = store[head.tree]
    parent = head.id
    t0 = time.perf_counter()
    for j in range(commits):
        rel = names[(j * 7919) % files]
        data = f"# page\n\nfloor {j}\n".encode()
        (wiki / rel).write_bytes(data)  # the product writes the file too
        blob = Blob.from_string(data)
        store.add_object(blob)
        top, sub, leaf = rel.encode().split(b"/")
        t_top = store[root_tree[top][1]]
        t_sub = store[t_top[sub][1]]
        t_sub = t_sub.copy()
        t_sub.add(leaf, 0o100644, blob.id)
        store.add_object(t_sub)
        t_top = t_top.copy()
        t_top.add(sub, 0o040000, t_sub.id)
        store.add_object(t_top)
        new_root = Tree()
        for name, mode, sha in root_tree.iteritems():
            new_root.add(name, mode, sha)
        new_root.add(top, 0o040000, t_top.id)
        store.add_object(new_root)
        root_tree = new_root
        c = Commit()
        c.tree = new_root.id
        c.parents = [parent]
        c.author = c.committer = b"A <a@x>"
        c.author_time = c.commit_time = int(time.time())
        c.author_timezone = c.commit_timezone = 0
        c.message = f"floor {j}".encode()
        store.add_object(c)
        parent = c.id
    took = time.perf_counter() - t0
    repo.close()
    return took / commits


def bench_stock_git(root: Path, files: int, commits: int) -> float:
    assert GIT is not None
    wiki = root / f"git{files}"
    wiki.mkdir(parents=True)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "A",
        "GIT_AUTHOR_EMAIL": "a@x",
        "GIT_COMMITTER_NAME": "A",
        "GIT_COMMITTER_EMAIL": "a@x",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(root),
    }

    def git(*args: str) -> None:
        subprocess.run([GIT, *args], cwd=wiki, env=env, check=True, capture_output=True)

    git("init", "-q")
    names = seed(wiki, files)
    git("add", "-A")
    git("commit", "-q", "-m", "seed")
    t0 = time.perf_counter()
    for j in range(commits):
        rel = edit(wiki, names, j)
        git("add", "--", rel)
        git("commit", "-q", "-m", f"edit {j}", "--", rel)
    return (time.perf_counter() - t0) / commits


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--commits", type=int, default=200)
    ap.add_argument("--sizes", default="1000,10000", help="repository sizes, comma-separated")
    args = ap.parse_args()
    rows: list[tuple[str, int, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for files in (int(x) for x in args.sizes.split(",")):
            product = bench_store(root, files, args.commits)
            floor = bench_floor(root, files, args.commits)
            rows.append(("floor: objects only", files, floor, floor))
            rows.append(("GitStore.commit", files, product, floor))
            if GIT:
                rows.append(
                    (
                        "stock git add + commit",
                        files,
                        bench_stock_git(root, files, args.commits),
                        floor,
                    )
                )
    print(f"{os.cpu_count()} CPUs; {args.commits} one-file commits per row")
    print(f"{'case':<26} {'files':>6} {'ms/commit':>10} {'commits/s':>10} {'/floor':>8}")
    for name, files, per, floor in rows:
        print(f"{name:<26} {files:>6} {per * 1000:>10.2f} {1 / per:>10.0f} {per / floor:>7.2f}x")
    print("floor = blob + trees + commit objects written with dulwich, no lock, ref or index")
    return 0


if __name__ == "__main__":
    sys.exit(main())
