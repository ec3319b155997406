"""Memory and handoff changes at a full disk (the shared failure case C63: "every event,
page, remember and handoff change that got a 2xx is present after space returns; every
refused one was refused visibly"), with ENOSPC injected in-process as in
``test_disk_full_inprocess.py``: a remember, a handoff created and a claim answered
``507 disk_full`` JSON change nothing; the ones answered 2xx before are all there; the
same calls made again once space returns succeed."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient
from support import as_user
from test_disk_full_inprocess import Full

from wiki_memory.auth import TokenStore
from wiki_memory.core.memory import Memory
from wiki_memory.server.app import create_app

pytestmark = pytest.mark.fast


def test_c63_remember_and_handoffs_at_a_full_disk(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    (Path(mem.wiki_dir) / "projects" / "proj").mkdir(parents=True, exist_ok=True)
    tokens = TokenStore(mem.settings.auth_dir, owner_user="alice")
    token, _ = tokens.ensure_owner()
    full = Full(monkeypatch, mem)
    with TestClient(create_app(mem, tokens), base_url="http://127.0.0.1") as http:
        auth = {"Authorization": f"Bearer {token}"}

        def remember(text: str) -> object:
            return http.post("/v1/remember", json={"text": text, "project": "proj"}, headers=auth)

        def create(title: str) -> object:
            body = {"project": "proj", "title": title, "next_steps": "go"}
            return http.post("/v1/handoffs", json=body, headers=auth)

        claim = {"harness": "codex", "session_id": "s-1"}
        r = remember("the yak shaver runs nightly")
        assert r.status_code == 201, r.text
        r = create("before the disk filled")
        assert r.status_code == 201, r.text
        hid = r.json()["handoff"]["id"]
        head = mem.git.head()
        before = {
            p.relative_to(mem.wiki_dir).as_posix(): p.read_bytes()
            for p in Path(mem.wiki_dir).rglob("*.md")
        }

        full.on = True
        refused = [
            remember("the okapi ledger is refused"),
            create("while the disk is full"),
            http.post(f"/v1/handoffs/{hid}/claim", json=claim, headers=auth),
        ]
        for r in refused:
            assert r.status_code == 507, r.text
            assert r.json()["error"] == "disk_full"
            assert int(r.headers["Retry-After"]) > 0
        full.on = False

        # nothing of the refused calls stayed: no page, no claim, HEAD where it was
        after = {
            p.relative_to(mem.wiki_dir).as_posix(): p.read_bytes()
            for p in Path(mem.wiki_dir).rglob("*.md")
        }
        assert after == before
        assert mem.git.head() == head
        got = http.get(f"/v1/handoffs/{hid}", headers=auth).json()["handoff"]
        assert got["status"] == "open"
        # the 2xx'd ones are there; the refused ones go through when made again
        assert mem.recall("yak shaver", user=as_user(mem, "alice")).total >= 1
        assert remember("the okapi ledger is refused").status_code == 201
        assert create("while the disk is full").status_code == 201
        r = http.post(f"/v1/handoffs/{hid}/claim", json=claim, headers=auth)
        assert r.status_code == 200, r.text
        assert http.get("/v1/health").json()["ok"] is True
    assert mem.recall("okapi ledger", user=as_user(mem, "alice")).total >= 1


def test_c63_a_pack_at_a_full_disk_leaves_no_temporary_pack(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The automatic pack meeting a full disk: it fails, the loose objects and HEAD stay,
    no ``tmp*.pack`` is left in ``objects/pack`` (one used to stay, as large as what was
    written), and the next pack once space returns works."""
    full = Full(monkeypatch, mem)
    wiki = Path(mem.wiki_dir)
    for i in range(5):
        p = wiki / f"notes/n{i}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"# N{i}\n\nbody {i}\n", encoding="utf-8")
        mem.git.commit([f"notes/n{i}.md"], "alice", "a@x", f"n{i}")
    head = mem.git.head()
    packs = wiki / ".git" / "objects" / "pack"
    full.on = True
    with pytest.raises(OSError):
        mem.git.pack()
    full.on = False
    assert sorted(p.name for p in packs.iterdir() if p.name.startswith("tmp")) == []
    assert mem.git.head() == head
    assert mem.git.pack() > 0
    assert [p.suffix for p in packs.iterdir()].count(".pack") == 1
    assert (wiki / "notes" / "n4.md").read_text(encoding="utf-8") == "# N4\n\nbody 4\n"
