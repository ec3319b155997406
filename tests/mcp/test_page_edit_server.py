"""Precise edits against the server with several users (docs/api.md "Precise edits"):
the MCP tool ``page_edit`` over streamable HTTP with the official SDK client, and
``POST /v1/edit``, against the app in this process (``appkit``, ``mcpkit``).

carol may write project ``alpha`` and only read project ``beta``; bob may read ``alpha``
and write his own folder; dave may only read ``alpha``. carol renames
``projects/alpha/target.md``, which 20 pages of ``alpha`` link to (carol may write them)
and 3 pages she may not write link to (two in ``beta``, one in bob's own folder, which
she cannot even see): the 20 are rewritten in the one commit of the rename, the 3 are
left byte for byte and still resolve through the alias."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from appkit import AppServer, http
from dulwich.repo import Repo
from mcpkit import mcp_connect
from support import wait_for

from wiki_memory.auth import TokenStore

# in process; it waits for commits
pytestmark = pytest.mark.slow

TARGET = "projects/alpha/target.md"
WRITABLE = [f"projects/alpha/l{i:02d}.md" for i in range(20)]
READ_ONLY = ["projects/beta/ro0.md", "projects/beta/ro1.md"]
BOBS = "people/bob/mine.md"


def seed(wiki: Path) -> None:
    pages = {
        TARGET: "# Target\n\nThe plan.\n",
        "projects/beta/readme.md": "# Beta\n",
        BOBS: "# Bob's\n\nI keep an eye on [[target]].\n",
    }
    for i, p in enumerate(WRITABLE):
        # a few spell the path, one links a heading, the rest the file name
        link = "[[projects/alpha/target]]" if i % 5 == 0 else "[[target#Target|the plan]]"
        pages[p] = f"# L{i}\n\nSee {link}; `[[target]]` in code stays.\n"
    for p in READ_ONLY:
        pages[p] = "# RO\n\nUpstream: [[target]].\n"
    for rel, text in pages.items():
        full = wiki / rel
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def srv(tmp_path_factory: Any) -> Any:
    data = tmp_path_factory.mktemp("edits") / "data"
    seed(data / "wiki")
    s = AppServer(data).start()
    tokens = TokenStore(data / "auth")
    s.tok = {  # type: ignore[attr-defined]
        "carol": tokens.create("carol", None, ["alpha"]),
        "bob": tokens.create("bob", None, ["alpha"], read_only=True),
        "dave": tokens.create("dave", None, ["alpha"], read_only=True),
    }
    tokens.grant("carol", "beta", read_only=True)
    yield s
    s.stop()


def headers(srv: Any, user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {srv.tok[user]}"}


def mcp_calls(srv: Any, user: str, todo: list[dict[str, Any]]) -> list[Any]:
    async def main() -> list[Any]:
        async with mcp_connect(srv, headers(srv, user)) as c:
            return [await c.call_tool("page_edit", args) for args in todo]

    return asyncio.run(main())


def text_of(res: Any) -> str:
    return "\n".join(c.text for c in res.content if c.type == "text")


def last_commit(wiki: Path) -> tuple[str, set[str]]:
    """HEAD's author and the paths it changed against its parent."""
    repo = Repo(str(wiki))
    try:
        head = repo[repo.head()]
        parent = repo[head.parents[0]]  # type: ignore[attr-defined]
        changes = repo.object_store.tree_changes(parent.tree, head.tree)  # type: ignore[attr-defined]
        paths = {(new or old).decode() for (old, new), _m, _s in changes}
        return head.author.decode(), paths  # type: ignore[attr-defined]
    finally:
        repo.close()


def test_rename_rewrites_only_what_the_caller_may_write(srv: Any) -> None:
    wiki = srv.data_dir / "wiki"
    before = {p: (wiki / p).read_bytes() for p in [*READ_ONLY, BOBS]}
    (res,) = mcp_calls(
        srv,
        "carol",
        [{"op": "rename", "path": TARGET, "new_path": "projects/alpha/goal.md", "edit_id": "r1"}],
    )
    assert not res.is_error, text_of(res)
    out = res.structured_content
    assert out["path"] == "projects/alpha/goal.md" and out["from"] == TARGET
    assert sorted(out["rewritten"]) == WRITABLE
    assert out["kept"] == 2  # the beta pages; bob's page is not even counted for carol
    assert not (wiki / TARGET).exists()
    moved = (wiki / "projects/alpha/goal.md").read_text(encoding="utf-8")
    assert moved.startswith("---\naliases:\n- target\n---\n") or "aliases: [target]" in moved
    for i, p in enumerate(WRITABLE):
        text = (wiki / p).read_text(encoding="utf-8")
        link = "[[projects/alpha/goal]]" if i % 5 == 0 else "[[goal#Target|the plan]]"
        assert f"See {link};" in text, text
        assert "`[[target]]`" in text
    for p, data in before.items():
        assert (wiki / p).read_bytes() == data, p
    author, paths = last_commit(wiki)
    assert author.startswith("carol ")
    assert paths == {TARGET, "projects/alpha/goal.md", *WRITABLE}

    # the pages carol may not write still resolve, through the alias
    def backlinks(user: str | None) -> set[str]:
        h = headers(srv, user) if user else srv.headers
        r = http(srv).get(srv.url + "/v1/pages/projects/alpha/goal.md", headers=h, timeout=30)
        assert r.status_code == 200, r.text
        return {b["path"] for b in r.json()["backlinks"]}

    wait_for(lambda: set(READ_ONLY) <= backlinks(None), 30, "beta pages link to the page")
    assert set(WRITABLE) <= backlinks(None)
    wait_for(lambda: BOBS in backlinks("bob"), 30, "bob's page links to the page")

    # a retry with the same id answers the first result and moves nothing
    (again,) = mcp_calls(
        srv,
        "carol",
        [{"op": "rename", "path": TARGET, "new_path": "projects/alpha/goal.md", "edit_id": "r1"}],
    )
    assert not again.is_error, text_of(again)
    assert again.structured_content["repeated"] is True
    assert again.structured_content["rewritten"] == out["rewritten"]


def test_readers_get_403_and_hidden_pages_404(srv: Any) -> None:
    wiki = srv.data_dir / "wiki"
    page = "projects/alpha/l05.md"
    before = (wiki / page).read_bytes()
    ro, hidden, beta = mcp_calls(
        srv,
        "dave",
        [
            {"op": "append", "path": page, "text": "dave was here"},
            {"op": "append", "path": BOBS, "text": "dave was here"},
            {"op": "append", "path": "projects/beta/readme.md", "text": "x"},
        ],
    )
    assert ro.is_error and text_of(ro).startswith("forbidden: you may not write " + page)
    assert hidden.is_error and text_of(hidden) == f"not_found: no such page: {BOBS}"
    assert beta.is_error and text_of(beta).startswith("not_found:")
    assert (wiki / page).read_bytes() == before
    r = http(srv).post(
        srv.url + "/v1/edit",
        json={"op": "item", "path": page, "text": "x"},
        headers=headers(srv, "dave"),
        timeout=30,
    )
    assert r.status_code == 403 and r.json()["error"] == "forbidden", r.text
    r = http(srv).post(
        srv.url + "/v1/edit",
        json={"op": "rename", "path": BOBS, "new_path": "people/bob/x.md"},
        headers=headers(srv, "carol"),
        timeout=30,
    )
    assert r.status_code == 404 and r.json()["error"] == "not_found", r.text


def test_http_edit_section_with_a_stale_hash_is_412_with_the_current(srv: Any) -> None:
    page = "projects/alpha/l07.md"
    h = headers(srv, "carol")

    def post(body: dict[str, Any]) -> Any:
        return http(srv).post(srv.url + "/v1/edit", json=body, headers=h, timeout=30)

    body = {"op": "replace_section", "path": page, "section": "L7", "text": "Rewritten.\n"}
    r = post(body)
    assert r.status_code == 428 and r.json()["error"] == "precondition_required", r.text
    current = r.json()["hash"]
    r = post({**body, "hash": "f" * 64})
    assert r.status_code == 412, r.text
    assert r.json()["error"] == "conflict" and r.json()["hash"] == current
    r = post({**body, "hash": current, "edit_id": "s1"})
    assert r.status_code == 200, r.text
    assert (srv.data_dir / "wiki" / page).read_text(encoding="utf-8") == "# L7\nRewritten.\n"
    r = post({**body, "hash": current, "edit_id": "s1"})  # the retry
    assert r.status_code == 200 and r.json()["repeated"] is True, r.text
    r = post({"op": "nope", "path": page})
    assert r.status_code == 400 and r.json()["field"] == "op", r.text
