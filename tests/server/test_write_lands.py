"""A write whose file landed is not an error: when the index update after it fails, the
reply is still 2xx (with ``indexed: false``), the write is committed with the caller as
author, and the page is indexed again later (never left to the watcher as a hand
edit with no author who asked)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from appkit import AppServer
from dulwich.repo import Repo
from support import wait_for

pytestmark = pytest.mark.fast


def _broken_upsert(*_a: Any, **_k: Any) -> bool:
    raise OSError("disk I/O error")


def _head_author(wiki: Path) -> bytes:
    repo = Repo(str(wiki))
    try:
        return bytes(repo[repo.head()].author)
    finally:
        repo.close()


def test_put_and_remember_answer_2xx_when_only_the_index_update_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with AppServer(tmp_path / "data") as srv:
        mem = srv.memory
        assert mem is not None
        bob = srv.token_for("bob", role="member", projects=("p",))
        headers = {"Authorization": f"Bearer {bob}"}
        monkeypatch.setattr(mem.index, "upsert_page", _broken_upsert)
        r = srv.client.put(
            srv.url + "/v1/pages/projects/p/notes/zqxlands.md",
            content=b"---\ntitle: Lands\n---\nzqxlands body\n",
            headers=headers,
        )
        assert r.status_code == 201, r.text
        assert r.json()["indexed"] is False
        r2 = srv.client.post(
            srv.url + "/v1/remember",
            json={"text": "zqxremembered fact", "project": "p", "title": "Fact"},
            headers=headers,
        )
        assert r2.status_code == 201, r2.text
        assert r2.json()["indexed"] is False
        assert sorted(mem.unindexed.pending()) == sorted(
            ["projects/p/notes/zqxlands.md", r2.json()["path"]]
        )
        mem.writer.flush()
        assert _head_author(mem.wiki_dir).startswith(b"bob")
        monkeypatch.undo()
        mem.unindexed.retry(mem.index, mem.wiki_dir)
        assert mem.unindexed.pending() == []
        assert wait_for(lambda: srv.post("/v1/recall", {"query": "zqxlands"}).json()["items"])


def test_mcp_page_write_says_indexed_false(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from mcp import Client
    from support import make_memory

    from wiki_memory.mcp.tools import build_server

    mem = make_memory(tmp_path / "data")
    try:
        monkeypatch.setattr(mem.index, "upsert_page", _broken_upsert)

        async def main() -> Any:
            async with Client(build_server(mem)) as c:
                return await c.call_tool(
                    "page_write", {"path": "notes/zqxmcp.md", "text": "# zqxmcp\n"}
                )

        res = asyncio.run(main())
        assert not res.is_error
        assert res.structured_content["indexed"] is False
    finally:
        mem.stop()
