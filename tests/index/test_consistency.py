"""Invariant 1 under a running server (the app in this process, with its watcher and
writer as ``serve`` runs them; git is a real process): after hand edits, a directory
rename, a delete, a ``git checkout`` of an older commit in ``wiki/`` and a server compile,
the live index holds the same rows (path, section, content hash) as a fresh reindex of
the files."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest
from appkit import AppServer
from support import shared_path

from wiki_memory.index.store import Index

pytestmark = pytest.mark.process


def git(wiki, *args):
    return subprocess.run(["git", *args], cwd=wiki, check=True, capture_output=True, text=True)


def settle_equal(data, tmp_path, timeout=60.0):
    """Poll until the live index equals a fresh rebuild of the same files."""
    deadline = time.monotonic() + timeout
    n = 0
    while True:
        n += 1
        fresh_path = tmp_path / f"fresh-{n}.db"
        fresh = Index(fresh_path)
        fresh.rebuild(data / "wiki")
        want = fresh.rows()
        fresh.close()
        live = Index(data / "index.db")
        got = live.rows()
        live.close()
        if got == want:
            return got
        if time.monotonic() > deadline:
            missing = sorted(want - got)[:5]
            extra = sorted(got - want)[:5]
            raise AssertionError(
                f"index differs from a fresh reindex: missing {missing}, extra {extra}"
            )
        time.sleep(0.3)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary for checkout")
def test_index_matches_fresh_reindex_after_edits_renames_checkout_and_compile(tmp_path):
    data = tmp_path / "data"
    wiki = data / "wiki"
    wiki.mkdir(parents=True)
    shutil.copytree(shared_path("data", "vaults", "obsidian-tasks-demo", "vault"), wiki / "demo")
    with AppServer(data, env={"WIKI_MEMORY_HAND_EDIT_SETTLE_SECONDS": "0.3"}) as srv:
        settle_equal(data, tmp_path)
        first_head = git(wiki, "rev-parse", "HEAD").stdout.strip()
        # hand edits: change a page, add a page
        top = sorted((wiki / "demo").glob("*.md"))
        page, victim = top[0], top[1]
        page.write_text(page.read_text() + "\n\nA hand-written paragraph about wombats.\n")
        (wiki / "demo" / "new-note.md").write_text("# New note\n\nplatypus facts\n")
        settle_equal(data, tmp_path)
        # a directory rename and a delete
        sub = next(p for p in (wiki / "demo").iterdir() if p.is_dir() and any(p.rglob("*.md")))
        sub.rename(wiki / "demo" / "renamed-dir")
        victim.unlink()
        settle_equal(data, tmp_path)
        # a server compile
        for ev in (
            {"event": "UserPromptSubmit", "payload": {"prompt": "index the echidna notes"}},
            {"event": "Stop", "payload": {"last_assistant_message": "done"}},
        ):
            r = srv.post(
                "/v1/observations",
                {"harness": "codex", "session_id": "cons-1", "cwd": "/home/u/cons", **ev},
            )
            assert r.status_code == 202
        settle_equal(data, tmp_path)
        # wait until the hand edits are committed, then check out the first commit
        deadline = time.monotonic() + 20
        while git(wiki, "status", "--porcelain").stdout.strip() and time.monotonic() < deadline:
            time.sleep(0.2)
        git(wiki, "checkout", "-q", first_head)
        rows = settle_equal(data, tmp_path)
        paths = {p for p, _, _ in rows}
        assert not any(p.startswith("demo/renamed-dir/") for p in paths)
        assert "demo/new-note.md" not in paths
        # and back to the branch tip
        git(wiki, "checkout", "-q", "main")
        rows = settle_equal(data, tmp_path)
        assert "demo/new-note.md" in {p for p, _, _ in rows}
        r = srv.post("/v1/recall", {"query": "wombats"})
        assert (
            r.json()["items"] and r.json()["items"][0]["path"] == page.relative_to(wiki).as_posix()
        )
