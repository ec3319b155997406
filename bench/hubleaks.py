"""doctor's ``hub_leaks`` check on a big history, beside its floor.

Builds the history of ``bench/border.py`` (the vaults in ../shared/data/vaults copied
``--copies`` times, one commit a copy, one page a copy marked personal: every commit then
holds personal pages, the worst case for the check), points ``refs/remotes/origin/main``
at it, and times, ``--rounds`` times in this interpreter, each over a fresh ``Repo``:

- **floor**: every distinct tree and blob reachable from the tip read once (dulwich, no
  parsing): what any check of every version must at least do;
- **hub_leaks**: :func:`wiki_memory.wiki.hubleaks.hub_leaks` (the trees walked once each,
  every page's frontmatter asked the one personal rule).

Prints the median seconds of each and the ratio.

    python bench/hubleaks.py [--copies 34] [--rounds 3] [--distinct]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from border import VAULTS, build_history  # noqa: E402


def floor(repo_dir: Path, tip: bytes) -> float:
    from dulwich.objects import Commit, Tree
    from dulwich.repo import Repo

    t0 = time.perf_counter()
    with Repo(str(repo_dir)) as repo:
        seen: set[bytes] = set()
        todo = [tip]
        trees: list[bytes] = []
        while todo:
            c = repo[todo.pop()]
            assert isinstance(c, Commit)
            todo.extend(c.parents)
            trees.append(c.tree)
        while trees:
            sha = trees.pop()
            if sha in seen:
                continue
            seen.add(sha)
            t = repo[sha]
            assert isinstance(t, Tree)
            for item in t.iteritems():
                if item.mode & 0o040000:
                    trees.append(item.sha)
                elif item.sha not in seen:
                    seen.add(item.sha)
                    _ = repo[item.sha].data
    return time.perf_counter() - t0


def product(repo_dir: Path, tip: bytes) -> tuple[float, int]:
    from dulwich.repo import Repo

    from wiki_memory.wiki.hubleaks import hub_leaks

    t0 = time.perf_counter()
    with Repo(str(repo_dir)) as repo:
        n = len(hub_leaks(repo, tip, set()))
    return time.perf_counter() - t0, n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--copies", type=int, default=34)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--distinct", action="store_true", help="no two pages share a blob")
    args = ap.parse_args()
    if not VAULTS.is_dir():
        print(f"skipped: {VAULTS} is missing (../shared/data/vaults)")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        repo_dir = Path(tmp) / "hub"
        pages = build_history(repo_dir, args.copies, args.distinct)
        from dulwich.repo import Repo

        with Repo(str(repo_dir)) as repo:
            tip = repo.head()
            repo.refs[b"refs/remotes/origin/main"] = tip
        f, p, leaks = [], [], 0
        for _ in range(args.rounds):
            f.append(floor(repo_dir, tip))
            secs, leaks = product(repo_dir, tip)
            p.append(secs)
    fm, pm = statistics.median(f), statistics.median(p)
    kind = "distinct blobs" if args.distinct else "copies share blobs"
    print(f"history: {args.copies} commits, {pages} pages in HEAD ({kind}); {leaks} listed")
    print(f"{'what':<34}{'seconds':>10}")
    print(f"{'floor: every object read once':<34}{fm:>10.2f}")
    print(f"{'hub_leaks (doctor)':<34}{pm:>10.2f}")
    print(f"{'ratio':<34}{pm / fm:>10.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
