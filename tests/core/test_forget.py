"""Forget, one core operation behind the HTTP, MCP and CLI faces, against a real server
with a team: the page becomes ``state: forgotten`` (docs/operations.md), leaves recall,
the brief and listings for every user, keeps its history in git; only a user who may
write the page may forget it (403 for a read grant, 404 without one). The state rule
itself (:mod:`wiki_memory.states`) is checked on its own and through the index."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from clikit import run_cli_here
from dulwich.repo import Repo
from serverproc import ServerProcess
from support import as_user, make_memory, wait_for
from teamkit import McpRaw, make_token

from wiki_memory.errors import Gone
from wiki_memory.states import page_state, shown
from wiki_memory.wiki.page import parse_page

pytestmark = pytest.mark.process

PAGES = {
    # a pinned note, so the brief shows it; the word is found by recall
    "projects/p/notes/alpha.md": "---\ntitle: Alpha rule\npinned: true\n---\n# Alpha rule\n\n"
    "Always feed the zebrafinch before the deploy.\n",
    "projects/p/notes/beta.md": "---\ntitle: Beta rule\n---\n# Beta\n\nThe quokkaword is kept.\n",
    "projects/p/notes/gamma.md": "# Gamma\n\nOrnithopter notes for the MCP face.\n",
    "projects/p/notes/delta.md": "# Delta\n\nArmadillo notes for the CLI face.\n",
    "people/rob/private.md": "# Mine\n\nrob's own page\n",
}


def test_state_values() -> None:
    assert page_state(None) == "current"
    assert page_state({"state": " Forgotten "}) == "forgotten"
    # a vault's own value, or a value that is not text, leaves the page current
    assert page_state({"state": "draft"}) == "current"
    assert page_state({"state": 3}) == "current"
    assert page_state({"status": "forgotten"}) == "current"  # status is another key
    assert not shown({"state": "forgotten"}, "list")
    assert shown({"state": "superseded", "superseded_by": "x.md"}, "list")
    # a superseded page is not hidden by SQL: recall ranks it after its successor
    # (wiki_memory.index.supersede; tests/core/test_knowledge.py)
    assert shown({"state": "superseded"}, "recall")


def test_index_leaves_out_forgotten_and_ranks_superseded_after(tmp_path: Path) -> None:
    files = {
        "notes/kept.md": "# Kept\n\nwombatword here\n",
        "notes/old.md": "---\nstate: superseded\nsuperseded_by: notes/kept.md\n---\nwombatword old\n",
        "notes/gone.md": "---\nstate: FORGOTTEN\n---\nwombatword gone\n",
        "notes/draft.md": "---\nstate: draft\n---\nwombatword draft\n",
    }
    m = make_memory(tmp_path / "data", files=files)
    try:
        listed = {p["path"] for p in m.list_pages(user=as_user(m, "alice"))}
        assert {"notes/kept.md", "notes/old.md", "notes/draft.md"} <= listed
        assert "notes/gone.md" not in listed
        items = m.recall("wombatword", user=as_user(m, "alice")).items
        found = [i["path"] for i in items]
        assert set(found) == {"notes/kept.md", "notes/draft.md", "notes/old.md"}
        assert found.index("notes/kept.md") < found.index("notes/old.md")
        old = items[found.index("notes/old.md")]
        assert (old["state"], old["superseded_by"]) == ("superseded", "notes/kept.md")
        # its path answers that it is forgotten (the state is read case-folded), no text
        with pytest.raises(Gone) as gone:
            m.read_page("notes/gone.md", user=as_user(m, "alice"))
        assert gone.value.extra["path"] == "notes/gone.md"
        assert "wombatword" not in str(gone.value.body())
    finally:
        m.stop()


def recall_paths(srv: ServerProcess, token: str, query: str) -> set[str]:
    r = httpx.post(
        srv.url + "/v1/recall",
        json={"query": query, "project": "p", "budget_tokens": 4000},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    return {i["path"] for i in r.json()["items"]}


def listed(srv: ServerProcess, token: str) -> set[str]:
    r = httpx.get(
        srv.url + "/v1/pages",
        params={"project": "p", "limit": "1000"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    return {p["path"] for p in r.json()["pages"]}


def brief_text(srv: ServerProcess, token: str) -> str:
    r = httpx.post(
        srv.url + "/v1/brief",
        json={"project": "p", "budget_tokens": 4000},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    return r.text


def forget(srv: ServerProcess, token: str, path: str) -> httpx.Response:
    return httpx.post(
        srv.url + "/v1/forget",
        json={"path": path},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )


def history_texts(wiki: Path, path: str) -> list[bytes]:
    """The page's bytes in every commit of HEAD's history that holds it."""
    repo = Repo(str(wiki))
    try:
        out = []
        for entry in repo.get_walker():
            tree = repo[entry.commit.tree]
            try:
                _mode, sha = tree.lookup_path(repo.object_store.__getitem__, path.encode())
            except KeyError:
                continue
            out.append(repo[sha].data)
        return out
    finally:
        repo.close()


def test_forget_through_every_face(tmp_path: Path) -> None:
    data = tmp_path / "data"
    wiki = data / "wiki"
    for rel, text in PAGES.items():
        (wiki / rel).parent.mkdir(parents=True, exist_ok=True)
        (wiki / rel).write_text(text, encoding="utf-8")
    srv = ServerProcess(data)
    srv.start()
    try:
        owner = srv.token
        wes = make_token(data, "wes", "member", "p", here=True)  # write on p
        rob = make_token(data, "rob", "reader", "p", here=True)  # reads p
        nia = make_token(data, "nia", "member", here=True)  # no grant
        alpha = "projects/p/notes/alpha.md"
        for tok in (owner, wes, rob):
            wait_for(lambda tok=tok: alpha in recall_paths(srv, tok, "zebrafinch"), 60)
            assert alpha in listed(srv, tok)
        assert "zebrafinch" in brief_text(srv, owner)

        # who may forget: a writer; a reader is refused naming the grant; no grant is 404
        r = forget(srv, rob, alpha)
        assert r.status_code == 403 and "write" in r.json()["grant"], r.text
        assert forget(srv, nia, alpha).status_code == 404
        # another user's personal page is missing to everyone else, the owner included
        for tok in (owner, wes):
            assert forget(srv, tok, "people/rob/private.md").status_code == 404
        r = forget(srv, wes, alpha)
        assert r.status_code == 200, r.text
        assert r.json() == {"path": alpha, "state": "forgotten", "changed": True}
        assert forget(srv, wes, alpha).json()["changed"] is False  # once is enough

        for tok in (owner, wes, rob):
            assert alpha not in recall_paths(srv, tok, "zebrafinch")
            assert alpha not in listed(srv, tok)
        assert "zebrafinch" not in brief_text(srv, owner)
        assert "projects/p/notes/beta.md" in recall_paths(srv, owner, "quokkaword")

        # the web view: not in its lists; the page answers 410, saying it is forgotten
        web = {"Authorization": f"Bearer {owner}"}
        assert f"/page/{alpha}" not in httpx.get(srv.url + "/pages", headers=web).text
        page = httpx.get(srv.url + f"/page/{alpha}", headers=web)
        assert page.status_code == 410 and "Forgotten" in page.text
        assert "zebrafinch" not in page.text

        meta = parse_page((wiki / alpha).read_bytes(), alpha).metadata
        assert meta["state"] == "forgotten" and meta["forgotten_by"] == "wes"
        assert meta["forgotten_at"].endswith("Z")
        versions = history_texts(wiki, alpha)
        assert b"state: forgotten" in versions[0]
        assert any(b"state:" not in v and b"zebrafinch" in v for v in versions[1:])

        # the MCP tool, as the member who may write
        client = McpRaw(srv.url, wes)
        ans, text = client.call("page_forget", {"path": "projects/p/notes/gamma.md"})
        assert ans == "ok", text
        ans, _ = McpRaw(srv.url, rob).call("page_forget", {"path": "projects/p/notes/beta.md"})
        assert ans == "403"
        assert "projects/p/notes/gamma.md" not in listed(srv, owner)

        # the CLI goes through the running server
        out = run_cli_here(data, "forget", "projects/p/notes/delta.md")
        assert out.returncode == 0, out.stderr
        assert "projects/p/notes/delta.md" not in listed(srv, owner)
        missing = run_cli_here(data, "forget", "projects/p/notes/nope.md")
        assert missing.returncode != 0 and "no such page" in missing.stderr

        audit = (data / "logs" / "audit.jsonl").read_text(encoding="utf-8")
        assert '"forget"' in audit
    finally:
        srv.stop()


def test_forget_cli_without_a_server(tmp_path: Path) -> None:
    data = tmp_path / "data"
    m = make_memory(data, files={"notes/x.md": "# X\n\nlemurword\n"})
    m.stop()
    out = run_cli_here(data, "forget", "notes/x.md")
    assert out.returncode == 0, out.stderr
    text = (data / "wiki" / "notes" / "x.md").read_text(encoding="utf-8")
    assert "state: forgotten" in text
    assert history_texts(data / "wiki", "notes/x.md")[0] == text.encode()  # committed
