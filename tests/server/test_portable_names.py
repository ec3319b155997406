"""Names Windows cannot check out are refused for new pages on every write path, with a
400 naming the rule; a vault's existing files with such names keep working and are
listed by ``doctor``; a path too deep is a 400, not a 500 (docs/api.md, "Page names")."""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

import httpx
import pytest
from appkit import AppServer, http
from clikit import run_cli_here
from support import as_user

from wiki_memory.core.memory import Memory
from wiki_memory.core.remember import remember
from wiki_memory.errors import BadPath
from wiki_memory.mcp.tools import build_server

#: every kind: each reserved device name, any case, with and without a further
#: extension, with a space before the dot, as a folder; trailing dots and spaces
RESERVED = (
    [f"{n}.md" for n in ("CON", "PRN", "AUX", "NUL")]
    + [f"COM{i}.md" for i in range(1, 10)]
    + [f"lpt{i}.md" for i in range(1, 10)]
    + ["con.md", "Nul.md", "aux.txt.md", "CON .md", "notes/com1.md", "CON/page.md"]
    + ["notes./page.md", "notes /page.md", "a/b./c.md"]
)


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("names") / "data"
    (data / "wiki" / "old").mkdir(parents=True)
    (data / "wiki" / "old" / "CON.md").write_text("# con\nfrom a Linux vault\n")
    with AppServer(data) as s:  # the routes' answers: the app in process
        yield s


def _put(srv: AppServer, path: str, **headers: str) -> httpx.Response:
    return http(srv).put(
        srv.url + "/v1/pages/" + path,
        content="# page\nbody\n",
        headers={**srv.headers, **headers},
        timeout=60,
    )


def test_put_refuses_every_windows_name_naming_the_rule(srv: AppServer) -> None:
    for path in RESERVED:
        r = _put(srv, path)
        assert r.status_code == 400, (path, r.text)
        body = r.json()
        assert (body["error"], body["rule"]) == ("bad_path", "portable_name"), path
        assert "Windows" in body["message"]
        assert not (srv.data_dir / "wiki" / path).exists()
    # an ordinary name next to them still works
    assert _put(srv, "notes/console.md").status_code == 201


@pytest.mark.process  # doctor's checks may ask the service manager
def test_existing_reserved_name_keeps_working_and_doctor_lists_it(srv: AppServer) -> None:
    r = http(srv).get(srv.url + "/v1/pages/old/CON.md", headers=srv.headers, timeout=60)
    assert r.status_code == 200 and "from a Linux vault" in r.json()["content"]
    digest = hashlib.sha256((srv.data_dir / "wiki/old/CON.md").read_bytes()).hexdigest()
    assert _put(srv, "old/CON.md", **{"If-Match": f'"{digest}"'}).status_code == 200
    out = run_cli_here(srv.data_dir, "doctor", "--json")
    rep = json.loads(out.stdout)
    assert rep["names"]["unportable"] == ["old/CON.md"]


def test_deep_and_long_paths_are_400(srv: AppServer) -> None:
    for path in ["/".join(["a"] * 3000) + "/x.md", "/".join(["b" * 200] * 8) + "/x.md"]:
        r = _put(srv, path)
        assert r.status_code == 400 and r.json()["error"] == "bad_path", r.text[:200]
        r = http(srv).get(srv.url + "/v1/pages/" + path, headers=srv.headers, timeout=60)
        assert r.status_code == 400, r.text[:200]
        r = http(srv).get(srv.url + "/page/" + path, headers=srv.headers, timeout=60)
        assert r.status_code == 400, r.text[:200]


def test_remember_never_makes_a_windows_name(srv: AppServer) -> None:
    (srv.data_dir / "wiki" / "projects" / "atlas").mkdir(parents=True, exist_ok=True)
    for title in ("CON", "aux.txt", "com1", "Notes.", "nul "):
        r = http(srv).post(
            srv.url + "/v1/remember",
            json={"text": f"a rule for {title}", "title": title, "project": "atlas"},
            headers=srv.headers,
            timeout=60,
        )
        assert r.status_code == 201, r.text
        name = r.json()["path"].rsplit("/", 1)[-1]
        from wiki_memory.wiki.names import is_portable

        assert is_portable(name), name
    r = http(srv).post(
        srv.url + "/v1/remember",
        json={"text": "a rule", "project": "COM1"},
        headers=srv.headers,
        timeout=60,
    )
    # a project that does not exist yet is refused first (404 unknown_project); either
    # way no folder named COM1 is ever made
    assert r.status_code in (400, 404), r.text
    assert not (srv.data_dir / "wiki/projects/COM1").exists()


def _mcp(memory: Memory, name: str, args: dict[str, Any]) -> Any:
    from mcp import Client

    server = build_server(memory)

    async def main() -> Any:
        async with Client(server) as c:
            return await c.call_tool(name, args)

    return asyncio.run(main())


def test_mcp_page_write_and_core_remember_refuse_windows_names(mem: Memory) -> None:
    for path in RESERVED:
        res = _mcp(mem, "page_write", {"path": path, "text": "# x\n"})
        assert res.is_error, path
        assert res.content[0].text.startswith("bad_path: path refused:"), res.content
        assert "Windows" in res.content[0].text
    with pytest.raises(BadPath):
        remember(mem, "a rule", project="aux", user=as_user(mem, mem.owner))


def test_symlink_loop_and_escaping_paths_are_4xx_on_api_and_web(
    srv: AppServer, caplog: pytest.LogCaptureFixture
) -> None:
    import logging
    import os

    caplog.set_level(logging.INFO)  # what serve writes to logs/server.log

    wiki = srv.data_dir / "wiki"
    os.symlink(wiki / "loop-b.md", wiki / "loop-a.md")
    os.symlink(wiki / "loop-a.md", wiki / "loop-b.md")
    os.symlink("..", wiki / "up")
    h = srv.headers
    for path in ["loop-a.md", "loop-a.md/x.md", "up/auth/owner.token", "up/x.md"]:
        r = http(srv).get(srv.url + "/v1/pages/" + path, headers=h, timeout=60)
        assert r.status_code == 400 and r.json()["error"] == "bad_path", (path, r.text)
        r = _put(srv, path)
        assert 400 <= r.status_code < 500, (path, r.text)
        for web in (f"/page/{path}", f"/page/{path}/history"):
            r = http(srv).get(srv.url + web, headers=h, timeout=60)
            assert 400 <= r.status_code < 500, (web, r.status_code)
            assert srv.token not in r.text
    # nothing logged a traceback or the loop (a 500 would have failed above too)
    log = caplog.text
    assert "Traceback" not in log and "Symlink loop" not in log
