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
from support import make_memory

from wiki_memory.capture.observation import parse_event
from wiki_memory.core.sessionpartwrite import part_bytes
from wiki_memory.core.sessions import compiler_bytes
from wiki_memory.wiki import replicate as rp
from wiki_memory.wiki.compiler import SessionMeta, compile_session

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(shutil.which("git") is None, reason="needs stock git"),
]

PER = 4
PATH = "projects/p/sessions/1970-01-01-abcd1234.md"
META = SessionMeta("abcd1234" + "0" * 16, "claude-code", "s1", "p", "ann", "/w/p", 0.0)


def turns(words: list[str], start: int) -> list[tuple[str, dict[str, Any], int]]:
    out: list[tuple[str, dict[str, Any], int]] = []
    for i, w in enumerate(words):
        ts = start + 2 * i
        out.append(("UserPromptSubmit", {"prompt": f"look at {w} please"}, ts))
        out.append(("Stop", {"last_assistant_message": f"done with {w}"}, ts + 1))
    return out


def pages(events: list[tuple[str, dict[str, Any], int]], now: float) -> dict[str, bytes]:
    """The session page and its parts as the compiler writes them for ``events``."""
    obs = []
    for n, (event, payload, ts) in enumerate(events, start=1):
        o = parse_event(
            {"harness": "claude-code", "event": event, "session_id": "s1", "cwd": "/w/p",
             "ts": f"1970-01-01T00:00:{ts:02d}Z", "payload": payload},
            "ann",
        )  # fmt: skip
        o.obs_id = f"o-{n}"
        obs.append(o)
    comp = compile_session(
        META, obs, status="active", ended=None, now=now, created=1.0, path=PATH, part_events=PER
    )
    return {PATH: compiler_bytes(comp), **{p.path: part_bytes(p) for p in comp.parts}}


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
