"""Sync over git, measured: a wiki of ``--pages`` pages (10 % of them personal) with
``--commits`` one-page commits, synced through a local bare hub.

Rows (each beside a floor: stock git moving the same commits between the same kind of
repositories, so the ratio shows what the projection and the merge cost on top):

- **first push**: server A's first ``sync`` into an empty hub (projects the whole history,
  then pushes). Floor: ``git push`` of A's ``main`` into another empty bare repository.
- **first pull**: server B (its own first commit, nothing else) syncs with the hub: fetch,
  merge of two unrelated histories, write every page, push the merge. Floor: ``git fetch``
  of the hub into an empty repository plus ``git merge --allow-unrelated-histories``.
- **one page**: A changes one page and syncs (projection of one new commit, push). Floor:
  ``git commit`` of one page plus ``git push``.
- **up to date**: A syncs with nothing new. Floor: ``git fetch`` with nothing new.

    python bench/sync.py [--pages 1000] [--commits 200]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from wiki_memory.config import load_settings  # noqa: E402
from wiki_memory.core.memory import Memory  # noqa: E402
from wiki_memory.datadir import ensure_layout  # noqa: E402
from wiki_memory.wiki import replicate as rp  # noqa: E402

GIT = shutil.which("git")


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def memory(data: Path) -> Memory:
    s = load_settings(data, watch=False, commit_delay_seconds=0.0)
    ensure_layout(s)
    m = Memory(s, owner_user="bench")
    m.start()
    return m


def seed(m: Memory, pages: int, commits: int) -> list[str]:
    names = []
    for i in range(pages):
        if i % 10 == 0:
            rel = f"people/bench/page-{i}.md"
        else:
            rel = f"projects/p/notes/{i % 40:02d}/page-{i}.md"
        p = m.wiki_dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"# page {i}\n\nbody {i}\n")
        names.append(rel)
    m.git.commit(["people", "projects"], "bench", "bench@x", "seed")
    for j in range(commits):
        rel = names[(j * 7919) % len(names)]
        (m.wiki_dir / rel).write_text(f"# page\n\nedit {j}\n")
        m.git.commit([rel], "bench", "bench@x", f"edit {j}")
    return names


def timed(fn) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=1000)
    ap.add_argument("--commits", type=int, default=200)
    args = ap.parse_args()
    if GIT is None:
        sys.exit("needs stock git for the floor")
    root = Path(tempfile.mkdtemp(prefix="bench-sync-"))
    try:
        hub, floor_hub = root / "hub.git", root / "floor.git"
        for h in (hub, floor_hub):
            git(root, "init", "-q", "--bare", str(h))
        a = memory(root / "a")
        names = seed(a, args.pages, args.commits)
        rp.add_remote(a.wiki_dir, "origin", str(hub))
        rows = []
        product = timed(lambda: a.sync.sync())
        floor = timed(lambda: git(a.wiki_dir, "push", "-q", str(floor_hub), "main:main"))
        rows.append(("first push", product, floor))

        b = memory(root / "b")
        rp.add_remote(b.wiki_dir, "origin", str(hub))
        product = timed(lambda: b.sync.sync())
        fl = root / "floor-b"
        git(root, "init", "-q", "-b", "main", str(fl))
        git(
            fl,
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@x",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "start",
        )

        def floor_pull() -> None:
            git(fl, "fetch", "-q", str(floor_hub), "main")
            git(
                fl,
                "-c",
                "user.name=b",
                "-c",
                "user.email=b@x",
                "merge",
                "-q",
                "--allow-unrelated-histories",
                "-m",
                "merge",
                "FETCH_HEAD",
            )

        rows.append(("first pull", product, timed(floor_pull)))
        a.sync.sync()  # take B's merge in, so A is up to date

        rel = names[1]

        def one_page() -> None:
            (a.wiki_dir / rel).write_text("# page\n\none more\n")
            a.git.commit([rel], "bench", "bench@x", "one more")
            a.sync.sync()

        def floor_one() -> None:
            (fl / "one.md").write_text(f"{time.time()}\n")
            git(fl, "add", "one.md")
            git(fl, "-c", "user.name=b", "-c", "user.email=b@x", "commit", "-q", "-m", "x")
            git(fl, "push", "-q", str(floor_hub), "HEAD:main")

        rows.append(("one page", timed(one_page), timed(floor_one)))
        rows.append(
            (
                "up to date",
                timed(lambda: a.sync.sync()),
                timed(lambda: git(fl, "fetch", "-q", str(floor_hub), "main")),
            )
        )
        a.stop()
        b.stop()
        print(
            f"{args.pages} pages (10 % personal), {args.commits} one-page commits, local bare hub"
        )
        print(f"{'operation':<12} {'wiki-memory':>12} {'floor (git)':>12} {'ratio':>7}")
        for name, p, f in rows:
            print(f"{name:<12} {p * 1000:>10.0f}ms {f * 1000:>10.0f}ms {p / f:>6.1f}x")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
