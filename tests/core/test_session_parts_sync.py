"""One long session from two replicas (docs/sessions.md, "Parts"; docs/git.md,
"Merging"): each replica compiled the session past its bound with entries of its own,
so its session page and its open part changed on both sides; a sync merges each page
entry by entry, both replicas end with the same pages, no conflict copy, every entry's
text once and no block id twice across the session's pages. Real dulwich repositories
and a bare hub; the sync runs git, hence ``process``."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sessionpartkit import PATH, pages, turns
from support import make_memory

from wiki_memory.wiki import replicate as rp

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(shutil.which("git") is None, reason="needs stock git"),
]


def put(m: Any, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        full = m.wiki_dir / rel
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(data)
    m._commit_hand_edits_now(sorted(files))


def test_one_long_session_from_two_replicas_merges_page_by_page(
    tmp_path: Path, stop_after: Any
) -> None:
    hub = tmp_path / "hub.git"
    subprocess.run(["git", "init", "-q", "--bare", str(hub)], check=True)
    a = make_memory(tmp_path / "a", files={"projects/p/index.md": "# p\n"})
    b = make_memory(tmp_path / "b", owner="ben")
    for m in (a, b):
        stop_after(m)
        rp.add_remote(m.wiki_dir, "origin", str(hub))
    shared = turns(["alphaword", "betaword", "gammaword"], 10)  # 6 events: parts 1, 2
    put(a, pages(shared, 50.0))
    a.sync.sync()
    b.sync.sync()
    on_a = shared + turns(["hubdeltaword"], 30)  # events 7, 8: part 2
    on_b = shared + turns(["localepsword"], 40)  # the same numbers, other events
    put(a, pages(on_a, 200.0))
    put(b, pages(on_b, 150.0))
    a.sync.sync()
    reps = b.sync.sync() + a.sync.sync()
    assert all(not r.conflicts for r in reps), [r.conflicts for r in reps]
    for m in (a, b):
        assert not list(m.wiki_dir.rglob("*.conflict-*"))
        assert not list(m.wiki_dir.rglob("*.server-copy.md"))
    files = sorted(p.relative_to(a.wiki_dir).as_posix() for p in a.wiki_dir.rglob("*.md"))
    session = [f for f in files if f.startswith(PATH[:-3])]
    assert session[0] == PATH and len(session) >= 2, session
    text = ""
    for rel in session:
        mine = (a.wiki_dir / rel).read_bytes()
        assert mine == (b.wiki_dir / rel).read_bytes(), rel
        text += mine.decode()
    for w in ("alphaword", "betaword", "gammaword", "hubdeltaword", "localepsword"):
        timeline = "".join(t.split("## Timeline", 1)[-1] for t in text.split("\n---\ntype"))
        assert timeline.count(f"look at {w}") == 1, w
    ids = re.findall(r"^\^t(\d+)r?$", text, re.M)
    assert len(ids) == len(set(ids)), ids
