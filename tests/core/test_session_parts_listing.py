"""A long session is listed once (docs/sessions.md, "Parts"): page listings on every
face (``Memory.list_pages``, which MCP's ``list_pages`` and ``GET /v1/pages`` call, and
the web's project page and all pages) show its session page and none of its parts;
the session page links each part, and a folder listing still shows the files. Real
apsw, real dulwich, the app in process."""

from __future__ import annotations

from pathlib import Path

import pytest
from appkit import AppServer
from sessionpartkit import PER, six_turns
from support import as_user

from wiki_memory.wiki.sessionparts import part_path

pytestmark = pytest.mark.fast


def test_a_long_session_is_listed_once_by_its_page(tmp_path: Path) -> None:
    with AppServer(tmp_path / "data", session_part_events=PER) as srv:
        m = srv.memory
        assert m is not None and srv.tokens is not None
        me = srv.tokens.owner_name()
        path = six_turns(m, me)  # t1..t12: the page and parts 2, 3
        parts = [part_path(path, 2), part_path(path, 3)]
        assert all((m.wiki_dir / p).exists() for p in parts)
        listed = [r["path"] for r in m.list_pages(kind="session", user=as_user(m, me))]
        assert listed == [path]
        body = srv.get("/v1/pages").json()
        api = [r["path"] for r in body["pages"]]
        assert path in api and not set(parts) & set(api), api
        c = srv.sign_in()
        for url in ("/p/atlas", "/pages"):
            html = c.get(srv.url + url).text  # type: ignore[attr-defined]
            assert path[:-3] in html and "(part 2)" not in html, url
            assert not any(p[:-3] in html for p in parts), url
        page = c.get(srv.url + "/page/" + path).text  # type: ignore[attr-defined]
        assert all(p[:-3] in page for p in parts)  # reachable from its page
        folder = m.folder(path.rsplit("/", 1)[0], user=as_user(m, me))
        names = str(folder)
        assert all(p.rsplit("/", 1)[-1] in names for p in parts), folder
