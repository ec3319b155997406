"""What a commit tells: a burst of writes by one author is grouped into commits, and the
history a reader sees names only what that reader may see.

One burst by the owner ``alice`` mixes a personal handoff, her own personal page (another
user's, for ``carol``), a session in a project ``carol`` holds no grant on, and a page
shared with everyone. ``carol`` (a member with no grant) opens the shared page's history
list and each of its versions: nothing of the first three shows (titles, paths, first
prompts). The commits themselves never mix a personal change with a shared one, and
their messages name paths and counts, never titles.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dulwich.repo import Repo
from starlette.testclient import TestClient
from support import as_user, make_memory, wait_for

from wiki_memory.auth import TokenStore
from wiki_memory.capture.observation import SessionMeta
from wiki_memory.core.memory import Memory
from wiki_memory.server.app import create_app
from wiki_memory.wiki import compiler

pytestmark = pytest.mark.fast

SHARED = "notes/team.md"
MINE = "people/alice/diary.md"
HANDOFF_TITLE = "zqxhandofftitle rotate the vault keys"
DIARY_TITLE = "zqxdiarytitle"
PROMPT = "zqxsessionprompt plan the merger"
SECRET_MARKS = ("zqx", "people/alice", "projects/secret", "P-")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Any]]:
    data = tmp_path / "data"
    m = make_memory(
        data,
        files={SHARED: "---\ntitle: Team\n---\nshared v1\n"},
        commit_delay_seconds=1.5,
    )
    tokens = TokenStore(data / "auth", owner_user="alice")
    alice = tokens.ensure_owner()[0]
    carol = tokens.create("carol")  # a member with no grant
    m.scope.directory = tokens
    try:
        yield {"m": m, "tokens": tokens, "alice": alice, "carol": carol, "data": data}
    finally:
        m.stop()


def _burst(m: Memory) -> None:
    """Alice's four writes within one commit delay (the handoff first: its creation
    commits at once, taking what is pending along)."""
    m.handoffs.create(
        as_user(m, "alice"),
        project="secret",
        title=HANDOFF_TITLE,
        visibility="personal",
        harness="codex",
    )
    m.capture(
        [
            {
                "harness": "codex",
                "event": "UserPromptSubmit",
                "session_id": "mixsession1",
                "project": "secret",
                "cwd": "/x/secret",
                "payload": {"prompt": PROMPT},
            },
            {
                "harness": "codex",
                "event": "SessionEnd",
                "session_id": "mixsession1",
                "project": "secret",
                "cwd": "/x/secret",
                "payload": {},
            },
        ],
        as_user(m, "alice"),
    )
    m.write_page(
        MINE,
        f"---\ntitle: {DIARY_TITLE}\n---\nzqx diary\n".encode(),
        user="alice",
        message=f"Write {MINE}",
        who=as_user(m, "alice"),
    )
    cur = (m.wiki_dir / SHARED).read_bytes()
    m.write_page(
        SHARED,
        cur + b"shared v2\n",
        user="alice",
        message=f"Write {SHARED}",
        who=as_user(m, "alice"),
    )
    wait_for(
        lambda: list((m.wiki_dir / "projects/secret/sessions").glob("*.md")),
        what="the session page",
    )
    m.writer.flush()


def _commits(data: Path) -> list[Any]:
    repo = Repo(str(data / "wiki"))
    try:
        out = []
        for entry in repo.get_walker():
            c = entry.commit
            parent = repo[c.parents[0]].tree if c.parents else None  # type: ignore[attr-defined]
            changes = repo.object_store.tree_changes(parent, c.tree)
            paths = {(ch[0][1] or ch[0][0]).decode() for ch in changes}
            out.append((c.message.decode(), paths))
        return out
    finally:
        repo.close()


def test_history_of_a_shared_page_names_nothing_the_reader_may_not_see(world):
    m, carol = world["m"], world["carol"]
    _burst(m)
    app = create_app(m, world["tokens"])
    with TestClient(app, base_url="http://127.0.0.1") as c:
        h = {"Authorization": f"Bearer {carol}"}
        r = c.get(f"/page/{SHARED}/history", headers=h)
        assert r.status_code == 200, r.text
        for mark in SECRET_MARKS:
            assert mark not in r.text, mark
        shas = sorted(set(_shas(r.text)))
        assert shas
        for sha in shas:
            for q in (f"?rev={sha}", f"?rev={sha}&view=version"):
                t = c.get(f"/page/{SHARED}/history{q}", headers=h)
                assert t.status_code == 200
                for mark in SECRET_MARKS:
                    assert mark not in t.text, (q, mark)
        assert f"Changed {SHARED}" in r.text
        # alice, who may see it all, is told of her own pages in the same way
        mine = c.get(
            f"/page/{SHARED}/history", headers={"Authorization": f"Bearer {world['alice']}"}
        )
        assert "Changed " in mine.text and "secret" in mine.text, re.findall(
            r"Changed [^<]*", mine.text
        )


def _shas(text: str) -> list[str]:
    return re.findall(r"\?rev=([0-9a-f]{40})#diff", text)


def test_commits_never_mix_personal_and_shared_and_carry_no_titles(world):
    m = world["m"]
    _burst(m)
    commits = _commits(world["data"])
    for message, paths in commits:
        assert "zqx" not in message, message
        owners = {p.split("/")[1] if p.startswith("people/") else None for p in paths}
        assert len(owners) <= 1, (message, paths)
    together = [paths for _, paths in commits if SHARED in paths]
    assert together and any(
        any(p.startswith("projects/secret/sessions/") for p in ps) for ps in together
    ), commits  # the burst really was grouped: the shared page and the session in one
    session = next(p for _, ps in commits for p in ps if "/sessions/" in p)
    stem = session.rsplit("/", 1)[-1].removesuffix(".md")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d-[^-]{8}", stem), session  # no title in the name
    assert any(msg.startswith(f"Add session {stem}") for msg, _ in commits), commits


def test_new_session_pages_are_named_by_date_and_short_id():
    meta = SessionMeta(
        key="3b021981ffffeeee",
        harness="codex",
        session_id="s",
        project="p",
        user="u",
        cwd=None,
        started=1796515200.0,  # 2026-12-06
    )
    assert compiler.page_path(meta, []) == "projects/p/sessions/2026-12-06-3b021981.md"


def test_hand_edits_saved_together_commit_personal_apart(world):
    m = world["m"]
    wiki = m.wiki_dir
    (wiki / "people/alice").mkdir(parents=True, exist_ok=True)
    (wiki / MINE).write_text("# mine zqx\n")
    (wiki / "notes/private.md").write_text("---\nvisibility: personal\n---\nzqx\n")
    (wiki / SHARED).write_text("---\ntitle: Team\n---\nshared by hand\n")
    m.writer.call(lambda: _hand(m, [MINE, "notes/private.md", SHARED]))
    commits = _commits(world["data"])
    mine = next(ps for msg, ps in commits if SHARED in ps)
    assert mine == {SHARED}, commits
    assert any(ps == {MINE} for _, ps in commits)
    assert any(ps == {"notes/private.md"} for _, ps in commits)


def _hand(m: Memory, paths: list[str]) -> Any:
    from wiki_memory.core.writer import WriteResult

    m._commit_hand_edits_now(paths)
    return WriteResult()
