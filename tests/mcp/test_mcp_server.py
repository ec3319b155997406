"""MCP against a real server process, with the SDK's real client over both transports:
streamable HTTP at /mcp and stdio through the `wiki-memory mcp` bridge. Also the HTTP
side of page writes (PUT /v1/pages with If-Match), /mcp routing and auth, LAN binds
(allowed hosts), C24, C28 and C34."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from serverproc import ServerProcess
from support import MCP_TOOL_NAMES, shared_path

from wiki_memory.core.memory import sha256
from wiki_memory.harness.mcp_install import BRIDGE_SCRIPT
from wiki_memory.recall.tokens import count_tokens

pytestmark = pytest.mark.process

CAP = 20_000
TRANSPORTS = [("http", "auto"), ("http", "legacy"), ("stdio", "auto"), ("stdio", "legacy")]


def big_page() -> bytes:
    lines = ["---", "title: Big log", "---", ""]
    lines += [
        f"line {i:05d} — status ok — 東京 — lorem ipsum dolor sit amet" for i in range(1, 20001)
    ]
    return ("\n".join(lines) + "\n").encode("utf-8")


def seed(wiki: Path) -> None:
    """C28's input plus a small page for C34's calls."""
    notes = wiki / "notes"
    notes.mkdir(parents=True, exist_ok=True)
    (notes / "big.md").write_bytes(big_page())
    for i in range(1, 601):
        (notes / f"s{i:03d}.md").write_text(f"# Status {i}\n\nheartbeat {i}\n", encoding="utf-8")
    (notes / "alpha.md").write_text("# Alpha\n\nHow we deploy: blue-green.\n", encoding="utf-8")


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    data = tmp_path_factory.mktemp("mcp") / "data"
    seed(data / "wiki")
    s = ServerProcess(data).start()
    yield s
    s.stop()


def bridge_cmd(data_dir: Path, *extra: str, installed_form: bool = False) -> list[str]:
    if installed_form:  # what install-mcp writes into a client's configuration
        return [
            sys.executable,
            "-S",
            str(BRIDGE_SCRIPT),
            "--data-dir",
            str(data_dir),
            "mcp",
            *extra,
        ]
    return [
        sys.executable,
        "-m",
        "wiki_memory.cli.main",
        "--data-dir",
        str(data_dir),
        "mcp",
        *extra,
    ]


def bridge_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WIKI_MEMORY_")}
    env.update(extra)
    return env


@asynccontextmanager
async def connect(
    srv: ServerProcess, transport: str, mode: str = "auto", name: str = "test-client"
) -> AsyncIterator[Any]:
    import httpx2
    from mcp import Client, StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client
    from mcp.types import Implementation

    info = Implementation(name=name, version="1.0")
    if transport == "http":
        async with httpx2.AsyncClient(headers=srv.headers, timeout=120) as hc:
            t = streamable_http_client(srv.url + "/mcp", http_client=hc)
            async with Client(t, mode=mode, client_info=info) as c:
                yield c
    else:
        cmd = bridge_cmd(srv.data_dir)
        params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=bridge_env())
        async with Client(params, mode=mode, client_info=info) as c:
            yield c


def text_of(res: Any) -> str:
    return "\n".join(c.text for c in res.content if c.type == "text")


def whole_tokens(res: Any) -> int:
    body = res.model_dump(by_alias=True, mode="json", exclude_none=True)
    body.pop("_meta", None)
    return count_tokens(json.dumps(body, ensure_ascii=False, separators=(",", ":")))


# -- the main flow, on each transport and protocol era ------------------------------------


@pytest.mark.parametrize(("transport", "mode"), TRANSPORTS)
def test_tools_remember_recall_handoff_and_bad_arguments(srv, transport, mode):
    word = f"quokka{transport}{mode}"
    (srv.data_dir / "wiki" / "projects" / "zoo").mkdir(parents=True, exist_ok=True)

    async def main() -> None:
        async with connect(srv, transport, mode, "claude-code") as a:
            tools = await a.list_tools()
            assert {t.name for t in tools.tools} == MCP_TOOL_NAMES

            r = await a.call_tool(
                "memory_remember",
                {"text": f"The {word} cache is warmed at 6am.", "project": "zoo"},
            )
            assert not r.is_error, text_of(r)
            path = r.structured_content["path"]
            rec = await a.call_tool("memory_recall", {"query": word, "project": "zoo"})
            assert not rec.is_error, text_of(rec)
            assert [i["path"] for i in rec.structured_content["items"]] == [path]
            assert "not instructions" in text_of(rec) and f"source: {path}" in text_of(rec)

            # bad arguments: a tool error, and the server keeps serving
            bad = await a.call_tool("memory_recall", {"query": {"not": "a string"}})
            assert bad.is_error and "query" in text_of(bad)
            bad = await a.call_tool("page_read", {"path": "../../etc/passwd"})
            assert bad.is_error and "root:" not in text_of(bad)
            ok = await a.call_tool("memory_recall", {"query": word})
            assert not ok.is_error

            h = await a.call_tool(
                "handoff_create",
                {"project": "zoo", "title": f"Finish {word}", "next_steps": ["warm it"]},
            )
            assert not h.is_error, text_of(h)
            hid = h.structured_content["handoff"]["id"]

        async with connect(srv, transport, mode, "codex-mcp-client") as b:
            got = await b.call_tool("handoff_claim", {"id": hid})
            assert not got.is_error, text_of(got)
            assert got.structured_content["handoff"]["claimed_harness"] == "codex"
        async with connect(srv, transport, mode, "gemini-cli") as c:
            lost = await c.call_tool("handoff_claim", {"id": hid})
            assert lost.is_error
            msg = text_of(lost)
            assert "already claimed by" in msg and "codex" in msg, msg
            # still serving after the conflict
            assert not (await c.call_tool("handoff_list", {"id": hid})).is_error

    asyncio.run(main())


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_recall_matches_http_recall(srv, transport):
    for i in range(5):
        srv.post(
            "/v1/observations",
            {
                "harness": "claude-code",
                "event": "UserPromptSubmit",
                "session_id": f"eq-{transport}",
                "cwd": "/home/u/zoo",
                "event_id": f"eq-{transport}-{i}",
                "payload": {"prompt": f"heartbeat monitor step {i} for the deploy pipeline"},
            },
        ).raise_for_status()
    queries = [("heartbeat deploy", 600), ("heartbeat", 1000), ("blue-green deploy", 300)]

    async def main() -> list[Any]:
        out = []
        async with connect(srv, transport) as c:
            for q, budget in queries:
                out.append(
                    await c.call_tool("memory_recall", {"query": q, "budget_tokens": budget})
                )
        return out

    results = asyncio.run(main())
    for (q, budget), res in zip(queries, results, strict=True):
        http = srv.post("/v1/recall", {"query": q, "budget_tokens": budget}).json()
        mcp_items = res.structured_content["items"]
        assert mcp_items, q
        assert mcp_items == http["items"], q
        assert res.structured_content["used_tokens"] == http["used_tokens"]
        assert res.structured_content["omitted"] == http["omitted"]


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_c28_paged_read_and_search_under_the_cap(srv, transport):
    data = big_page()

    async def main() -> tuple[list[Any], list[Any]]:
        reads, searches = [], []
        async with connect(srv, transport) as c:
            cursor = 0
            while cursor is not None:
                r = await c.call_tool("page_read", {"path": "notes/big.md", "cursor": cursor})
                assert not r.is_error, text_of(r)
                reads.append(r)
                cursor = r.structured_content["next_cursor"]
            cursor = 0
            while cursor is not None:
                r = await c.call_tool(
                    "memory_recall",
                    {"query": "heartbeat", "budget_tokens": 9000, "cursor": cursor},
                )
                searches.append(r)
                cursor = r.structured_content["next_cursor"]
        return reads, searches

    reads, searches = asyncio.run(main())
    assert "".join(r.structured_content["content"] for r in reads).encode() == data
    assert all(whole_tokens(r) <= CAP for r in reads + searches)
    assert all("\ufffd" not in r.structured_content["content"] for r in reads)
    assert reads[0].structured_content["hash"] == sha256(data)
    assert searches[0].structured_content["total"] >= 600
    paths = [i["path"] for s in searches for i in s.structured_content["items"]]
    assert len(set(p for p in paths if p.startswith("notes/s"))) == 600


# -- HTTP: /mcp itself, auth, page writes ----------------------------------------------------

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def test_post_mcp_answers_itself_and_needs_a_token(srv):
    for path in ("/mcp", "/mcp/"):
        r = httpx.post(srv.url + path, json=INIT, headers={**MCP_HEADERS, **srv.headers})
        assert r.status_code == 200, (path, r.status_code, r.text)
        assert r.json()["result"]["serverInfo"]["name"] == "wiki-memory"
        assert r.headers.get("mcp-session-id")
    r = httpx.post(srv.url + "/mcp", json=INIT, headers=MCP_HEADERS)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    # a session opened with one user's token cannot be used with another's
    other = subprocess.run(
        [sys.executable, "-m", "wiki_memory.cli.main", "--data-dir", str(srv.data_dir), "token",
         "create", "--user", "mallory"],
        capture_output=True, text=True, check=True,
    ).stdout.split()[0]  # fmt: skip
    opened = httpx.post(srv.url + "/mcp", json=INIT, headers={**MCP_HEADERS, **srv.headers})
    sid = opened.headers["mcp-session-id"]
    hijack = httpx.post(
        srv.url + "/mcp",
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        headers={
            **MCP_HEADERS,
            "Authorization": f"Bearer {other}",
            "Mcp-Session-Id": sid,
            "MCP-Protocol-Version": "2025-06-18",
        },
    )
    assert hijack.status_code == 404


def put(srv: ServerProcess, path: str, body: Any, **headers: str) -> httpx.Response:
    h = {**srv.headers, **headers}
    if isinstance(body, dict):
        return httpx.put(srv.url + "/v1/pages/" + path, json=body, headers=h, timeout=30)
    h.setdefault("Content-Type", "text/markdown; charset=utf-8")
    return httpx.put(srv.url + "/v1/pages/" + path, content=body, headers=h, timeout=30)


def test_put_page_compare_and_set(srv):
    path = "projects/zoo/notes/put-test.md"
    r = put(srv, path, b"# Put\n\nv1\n")
    assert r.status_code == 201, r.text
    h1 = r.json()["hash"]
    assert r.headers["etag"] == f'"{h1}"'
    assert srv.get(f"/v1/pages/{path}").json()["hash"] == h1
    # without If-Match an existing page is not replaced
    r = put(srv, path, b"blind")
    assert r.status_code == 428 and r.json()["hash"] == h1
    r = put(srv, path, b"x", **{"If-None-Match": "*"})
    assert r.status_code == 412 and r.json()["hash"] == h1
    r = put(srv, path, b"stale", **{"If-Match": '"' + "0" * 64 + '"'})
    assert r.status_code == 412 and r.json()["hash"] == h1
    r = put(srv, path, {"text": "# Put\n\nv2\n"}, **{"If-Match": f'"{h1}"'})
    assert r.status_code == 200, r.text
    assert (srv.data_dir / "wiki" / path).read_text() == "# Put\n\nv2\n"
    assert put(srv, "projects/zoo/notes/bad.md", b"\xff\xfe").status_code == 400
    assert put(srv, "projects/zoo/run.sh", b"echo").status_code == 400
    assert put(srv, "projects/zoo/big.md", b"x" * (1024 * 1024 + 1)).status_code == 413
    # the MCP tool sees the same hash and the same compare-and-set
    h2 = r.json()["hash"]

    async def main() -> Any:
        async with connect(srv, "http") as c:
            read = await c.call_tool("page_read", {"path": path})
            assert read.structured_content["hash"] == h2
            return await c.call_tool(
                "page_write", {"path": path, "text": "# Put\n\nv3\n", "expected_hash": h1}
            )

    stale = asyncio.run(main())
    assert stale.is_error and h2 in text_of(stale)


def test_c24_put_and_mcp_traversal(srv, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "marker.txt").write_text("OUTSIDE-MARKER")
    wiki = srv.data_dir / "wiki"
    git_hooks = (
        sorted(p.name for p in (wiki / ".git" / "hooks").glob("*"))
        if (wiki / ".git" / "hooks").exists()
        else []
    )
    config = (wiki / ".git" / "config").read_bytes()
    raw = [
        ("PUT", "/v1/pages/..%2Fescaped-note.md"),
        ("PUT", "/v1/pages/notes/%00evil.md"),
        ("PUT", "/v1/pages/.git/hooks/post-commit"),
        ("PUT", "/v1/pages/%2Ftmp%2Fescaped.md"),
        ("PUT", "/v1/pages/notes%5C..%5C..%5Cescaped.md"),
        ("GET", "/v1/pages/.git/config"),
    ]
    with httpx.Client(base_url=srv.url, headers=srv.headers) as client:
        for method, path in raw:
            req = client.build_request(method, path, content=b"#!/bin/sh\necho hi\n")
            req.url = req.url.copy_with(raw_path=path.encode())
            r = client.send(req)
            assert r.status_code in (400, 403, 404, 405), (method, path, r.status_code)
            assert "OUTSIDE-MARKER" not in r.text and "[core]" not in r.text
            assert str(srv.data_dir) not in r.text

    async def main() -> list[Any]:
        async with connect(srv, "stdio") as c:
            return [
                await c.call_tool("page_read", {"path": "../../../" + str(outside)[1:] + "/marker.txt"}),
                await c.call_tool("page_write", {"path": "../../escaped-note.md", "text": "x"}),
                await c.call_tool("page_write", {"path": ".git/hooks/pre-commit", "text": "x"}),
                await c.call_tool("memory_remember", {"text": "x", "project": "..", "title": "t"}),
                await c.call_tool(
                    "memory_remember", {"text": "x", "project": "p", "title": "../../escaped-by-title"}
                ),
            ]  # fmt: skip

    for res in asyncio.run(main()):
        assert res.is_error and "OUTSIDE-MARKER" not in text_of(res)
    assert sorted(p.name for p in outside.iterdir()) == ["marker.txt"]
    assert not list(srv.data_dir.rglob("escaped*"))
    assert (wiki / ".git" / "config").read_bytes() == config
    if (wiki / ".git" / "hooks").exists():
        assert sorted(p.name for p in (wiki / ".git" / "hooks").glob("*")) == git_hooks


def test_lan_bind_allows_its_host_names(tmp_path):
    data = tmp_path / "data"
    s = ServerProcess(
        data,
        args=["--host", "0.0.0.0", "--insecure-http"],
        env={"WIKI_MEMORY_MCP_ALLOWED_HOSTS": "wiki.lan"},
    ).start()
    try:
        headers = {**MCP_HEADERS, **s.headers}

        def init(host: str) -> int:
            return httpx.post(
                s.url + "/mcp", json=INIT, headers={**headers, "Host": host}
            ).status_code

        assert init(f"127.0.0.1:{s.port}") == 200
        assert init(f"localhost:{s.port}") == 200
        assert init(f"{socket.gethostname()}:{s.port}") == 200
        assert init(f"wiki.lan:{s.port}") == 200
        assert init(f"evil.example:{s.port}") == 421
        # one Host rule for every route (docs/team-server.md, "Allowed hosts")
        assert (
            httpx.get(
                s.url + "/v1/pages", headers={**s.headers, "Host": "evil.example"}
            ).status_code
            == 421
        )
    finally:
        s.stop()


# -- C34: nothing but protocol frames on the bridge's stdout ----------------------------------

LEGACY = "2025-06-18"


def raw_session(cmd: list[str], env: dict[str, str], messages: list[dict[str, Any]]) -> Any:
    """Feed one JSON-RPC message per line to the bridge, close stdin, and collect output."""
    stdin = "".join(json.dumps(m) + "\n" for m in messages)
    return subprocess.run(cmd, input=stdin.encode(), capture_output=True, env=env, timeout=90)


def c34_messages() -> list[dict[str, Any]]:
    return [
        INIT | {"params": {**INIT["params"], "protocolVersion": LEGACY}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "memory_recall", "arguments": {"query": "deploy"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "page_read", "arguments": {"path": "notes/alpha.md"}},
        },
    ]


def check_frames(out: bytes) -> dict[Any, dict[str, Any]]:
    """Every stdout line is one JSON-RPC 2.0 message; returns them by id."""
    by_id = {}
    lines = out.decode("utf-8").splitlines()
    assert lines, "no output"
    for line in lines:
        msg = json.loads(line)
        assert isinstance(msg, dict) and msg.get("jsonrpc") == "2.0", line
        if "id" in msg:
            by_id[msg["id"]] = msg
    return by_id


def check_answers(by_id: dict[Any, dict[str, Any]]) -> None:
    assert set(by_id) == {1, 2, 3, 4}
    assert by_id[1]["result"]["protocolVersion"] == LEGACY
    assert {t["name"] for t in by_id[2]["result"]["tools"]} == MCP_TOOL_NAMES
    assert "blue-green" in json.dumps(by_id[3]["result"])
    page = by_id[4]["result"]
    assert not page.get("isError")
    assert page["structuredContent"]["content"] == "# Alpha\n\nHow we deploy: blue-green.\n"


@pytest.fixture(scope="module")
def c34(tmp_path_factory):
    """A server whose wiki holds a page with malformed frontmatter (C06), whose tools
    print() to stdout while they run, and a sitecustomize that prints banners."""
    base = tmp_path_factory.mktemp("c34")
    data = base / "data"
    seed(data / "wiki")
    (data / "wiki" / "notes" / "runbook.md").write_bytes(
        shared_path("cases", "inputs", "C06.md").read_bytes()
    )
    noisy_server = base / "noisy-server"
    noisy_server.mkdir()
    (noisy_server / "sitecustomize.py").write_text(
        "import wiki_memory.core.memory as _c\n"
        "_recall = _c.Memory.recall\n"
        "def recall(self, *a, **k):\n"
        "    print('DEBUG from inside a tool: recall called', flush=True)\n"
        "    return _recall(self, *a, **k)\n"
        "_c.Memory.recall = recall\n"
    )
    banner = base / "banner"
    banner.mkdir()
    (banner / "sitecustomize.py").write_text("print('Loading models...', flush=True)\n")
    late = base / "late-banner"
    late.mkdir()
    (late / "sitecustomize.py").write_text(
        "import builtins, sys\n"
        "_imp = builtins.__import__\n"
        "def hooked(name, *a, **k):\n"
        "    m = _imp(name, *a, **k)\n"
        "    if name == 'httpx' and not getattr(sys, '_wm_banner', False):\n"
        "        sys._wm_banner = True\n"
        "        print('Loading models... (a dependency imported by the bridge)')\n"
        "    return m\n"
        "builtins.__import__ = hooked\n"
    )
    return {"data": data, "noisy": noisy_server, "banner": banner, "late": late}


def test_c34_bridge_stdout_is_protocol_only(c34):
    data = c34["data"]
    # B: the server starts indexing a wiki with malformed frontmatter while the bridge
    # connects (the bridge waits for it), and its tools print() (E)
    s = ServerProcess(data, env={"PYTHONPATH": str(c34["noisy"])})
    proc = subprocess.Popen(
        bridge_cmd(data, "--wait", "120"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=bridge_env(),
    )
    try:
        s.start()
        stdin = "".join(json.dumps(m) + "\n" for m in c34_messages()).encode()
        out, err = proc.communicate(stdin, timeout=90)
        assert proc.returncode == 0, err.decode()
        check_answers(check_frames(out))  # A, B, E

        # C: a banner printed at interpreter start (sitecustomize), with the command
        # install-mcp writes; and one printed by a dependency the bridge imports
        for cmd, path in (
            (bridge_cmd(data, installed_form=True), c34["banner"]),
            (bridge_cmd(data), c34["late"]),
        ):
            r = raw_session(cmd, bridge_env(PYTHONPATH=str(path)), c34_messages())
            assert r.returncode == 0, r.stderr.decode()
            assert b"Loading models" not in r.stdout
            assert b"Loading models" in r.stderr
            check_answers(check_frames(r.stdout))
    finally:
        if proc.poll() is None:
            proc.kill()
        s.stop()
    assert "DEBUG from inside a tool" not in out.decode()


def test_c34_startup_failures_exit_non_zero_with_the_reason(tmp_path, c34):
    # D: a data directory that does not exist
    missing = tmp_path / "no" / "such" / "wiki"
    for cmd in (bridge_cmd(missing), bridge_cmd(missing, installed_form=True)):
        r = raw_session(cmd, bridge_env(), c34_messages()[:1])
        assert r.returncode != 0
        assert r.stdout == b""
        assert b"does not exist" in r.stderr
        assert not missing.exists()
    # no server running on an existing data directory
    r = raw_session(bridge_cmd(c34["data"], "--wait", "0.5"), bridge_env(), c34_messages()[:1])
    assert r.returncode != 0 and r.stdout == b""
    assert b"wiki-memory serve" in r.stderr


def test_bridge_reopens_its_session_after_a_server_restart(tmp_path):
    data = tmp_path / "data"
    s = ServerProcess(data).start()
    port = s.port

    async def main() -> None:
        nonlocal s
        async with connect(s, "stdio", "legacy") as c:
            assert not (await c.call_tool("memory_recall", {"query": "x"})).is_error
            s.stop()
            s = ServerProcess(data, port=port).start()
            r = await c.call_tool("memory_recall", {"query": "x"})
            assert not r.is_error, text_of(r)

    try:
        asyncio.run(main())
    finally:
        s.stop()


#: What the bridge must not load (docs/mcp.md "Decisions": it starts fast because it does
#: not load the index, the tokenizer or the SDK; it imports the standard library and httpx).
BRIDGE_NEVER_IMPORTS = {
    "mcp", "tiktoken", "apsw", "dulwich", "starlette", "uvicorn", "watchfiles",
    "wiki_memory.core.memory", "wiki_memory.index", "wiki_memory.recall", "wiki_memory.mcp.tools",
    "wiki_memory.server.app", "wiki_memory.mcp.app", "wiki_memory.web.views",
}  # fmt: skip


def test_bridge_starts_light(srv):
    """A bound on the work the bridge does at start (the modules it imports, as
    ``-X importtime`` reports them), not on its wall time; bench/bridge.py times it."""
    env = bridge_env(PYTHONPROFILEIMPORTTIME="1")
    r = raw_session(bridge_cmd(srv.data_dir, installed_form=True), env, c34_messages()[:1])
    assert r.returncode == 0, r.stderr[-2000:]
    assert check_frames(r.stdout)[1]["result"]["serverInfo"]["name"] == "wiki-memory"
    names = [
        line.rsplit("|", 1)[1].strip()
        for line in r.stderr.decode("utf-8", "replace").splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    ]
    assert "httpx" in names and "wiki_memory.mcp.bridge" in names  # the report is real
    heavy = sorted(
        n for n in names if any(n == h or n.startswith(h + ".") for h in BRIDGE_NEVER_IMPORTS)
    )
    assert heavy == [], heavy


def test_concurrent_claims_over_mcp_one_winner(srv):
    """C30 over MCP: eight agents (six on HTTP, two through stdio bridges) claim one
    handoff at once; one wins, the others get a tool error naming the winner."""
    # the project is made here: under xdist this test may run without the module's others
    created = srv.post(
        "/v1/handoffs", {"project": "zoo", "title": "Race me", "create_project": True}
    )
    assert created.status_code in (200, 201), created.text
    body = created.json()
    hid = (body.get("handoff") or body)["id"]

    async def claim(transport: str, n: int) -> Any:
        async with connect(srv, transport, name=f"agent-{n}") as c:
            return await c.call_tool("handoff_claim", {"id": hid, "session_id": f"race-{n}"})

    async def main() -> list[Any]:
        jobs = [claim("http", n) for n in range(6)] + [claim("stdio", n) for n in (6, 7)]
        return list(await asyncio.gather(*jobs))

    results = asyncio.run(main())
    winners = [r for r in results if not r.is_error]
    assert len(winners) == 1, [text_of(r) for r in results]
    holder = winners[0].structured_content["handoff"]["claimed_session"]
    for r in results:
        if r.is_error:
            assert "already claimed by" in text_of(r) and holder in text_of(r), text_of(r)
    shown = srv.get(f"/v1/handoffs/{hid}").json()
    assert (shown.get("handoff") or shown)["claimed_session"] == holder
