"""Two fetches into one wiki at once (``sync`` runs every remote on a thread of its own,
each fetch in a child process): when both receive the same objects, dulwich names both
packs alike, and the second fetch failed with FileLocked on ``pack-<sha>.idx.lock``
("sync with origin failed: cannot fetch from origin"; seen in a clean-clone CI run of
case C47). Packs now move in one at a time (``wiki/locks.py``, ``PACK_LOCK``)."""

from __future__ import annotations

import multiprocessing
import subprocess
from pathlib import Path

import pytest
from dulwich.repo import Repo

from wiki_memory.wiki import replicate as rp

pytestmark = pytest.mark.process

ROUNDS = 20


def _fetch(wiki: str, name: str) -> str | None:
    try:
        with Repo(wiki) as repo:
            rp.fetch(repo, name)
    except Exception as exc:  # noqa: BLE001 - the test reports what failed
        return f"{name}: {exc}"
    return None


def _hub_with_pages(src: Path) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main", str(src)], check=True)
    for i in range(30):
        (src / f"page-{i}.md").write_text(f"# page {i}\n" + "a line of the page\n" * 20)
    subprocess.run(["git", "-C", str(src), "add", "."], check=True)
    subprocess.run(
        ["git", "-C", str(src), "-c", "user.name=t", "-c", "user.email=t@example.org"]
        + ["commit", "-qm", "pages"],
        check=True,
    )


def test_two_remotes_fetched_at_once_into_one_wiki_both_succeed(tmp_path):
    src = tmp_path / "src"
    _hub_with_pages(src)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        for r in range(ROUNDS):
            wiki = tmp_path / f"w{r}"
            Repo.init(str(wiki), mkdir=True).close()
            for name in ("origin", "mirror"):
                hub = tmp_path / f"{name}{r}.git"
                subprocess.run(["git", "clone", "-q", "--bare", str(src), str(hub)], check=True)
                rp.add_remote(wiki, name, str(hub))
            out = pool.starmap(_fetch, [(str(wiki), "origin"), (str(wiki), "mirror")])
            assert [e for e in out if e] == [], f"round {r} of {ROUNDS}"
            with Repo(str(wiki)) as repo:
                head = repo.refs[b"refs/remotes/origin/main"]
                assert repo.refs[b"refs/remotes/mirror/main"] == head
                assert b"page-29.md" in {e.path for e in repo[repo[head].tree].items()}
    # git itself reads the wiki as whole: every object present, no stray pack
    fsck = subprocess.run(
        ["git", "-C", str(tmp_path / "w0"), "fsck", "--full"], capture_output=True, text=True
    )
    assert fsck.returncode == 0, fsck.stderr
