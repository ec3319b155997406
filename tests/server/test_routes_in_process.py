"""Every route of every face answered by the app in this process (``appkit.AppServer``:
``create_app`` behind Starlette's ``TestClient``, lifespan running): each HTTP ``/v1``
route, each web route and the MCP endpoint with every tool, as the owner and without a
token. The route table comes from the app itself (``faces.app_routes``), so a new route
needs a row here. What each route does is checked in its own room; this is the fast
tier's proof that the whole app works without a process."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import faces
import pytest
from appkit import AppServer

pytestmark = pytest.mark.fast

NOTE = "projects/demo/notes/kiwi.md"
PAGES = {
    NOTE: "---\ntitle: Kiwi deploys\nproject: demo\ntags: [ops]\n---\n# Kiwi deploys\n\n"
    "The kiwi deploy runs at noon. #ops\n",
    "projects/demo/notes/other.md": "# Other\n\nSee [[kiwi]].\n",
}

#: ``METHOD route`` -> (method, path, JSON body or None, the owner's answers). ``{hid}``
#: stands for a handoff made by the fixture. Answers are sets of statuses: what a
#: well-formed request from the owner gets.
REQUESTS: dict[str, tuple[str, str, Any, set[int]]] = {
    "GET /v1/health": ("GET", "/v1/health", None, {200}),
    "GET /health": ("GET", "/health", None, {200}),
    "POST /v1/observations": (
        "POST",
        "/v1/observations",
        {"harness": "codex", "event": "Stop", "session_id": "r1", "cwd": "/x/demo"},
        {202},
    ),
    "POST /v1/recall": ("POST", "/v1/recall", {"query": "kiwi deploy"}, {200}),
    "POST /v1/expand": ("POST", "/v1/expand", {"ids": [NOTE], "budget_tokens": 300}, {200}),
    "GET /v1/pages": ("GET", "/v1/pages", None, {200}),
    "GET /v1/pages/{path:path}": ("GET", f"/v1/pages/{NOTE}", None, {200}),
    "PUT /v1/pages/{path:path}": ("PUT", "/v1/pages/notes/new.md", "# New\n", {200, 201}),
    "POST /v1/admin/reindex": ("POST", "/v1/admin/reindex", {}, {200}),
    "POST /v1/admin/pin": ("POST", "/v1/admin/pin", {"path": NOTE}, {200}),
    "GET /v1/audit": ("GET", "/v1/audit", None, {200}),
    "GET /v1/admin/unrendered": ("GET", "/v1/admin/unrendered", None, {200}),
    "POST /v1/admin/unrendered/discard": (
        "POST",
        "/v1/admin/unrendered/discard",
        {"session": "0123456789ab"},
        {404},
    ),
    "GET /v1/use": ("GET", "/v1/use?days=7", None, {200}),
    "POST /v1/admin/condense": ("POST", "/v1/admin/condense", {"dry_run": True}, {200}),
    "POST /v1/admin/uncondense": (
        "POST",
        "/v1/admin/uncondense",
        {"path": "projects/demo/notes/other.md"},
        {400},
    ),
    "POST /v1/feedback": ("POST", "/v1/feedback", {"path": NOTE, "verdict": "helped"}, {200}),
    "GET /v1/contradictions": ("GET", "/v1/contradictions?project=demo", None, {200}),
    "POST /v1/forget": ("POST", "/v1/forget", {"path": "projects/demo/notes/other.md"}, {200}),
    "POST /v1/edit": (
        "POST",
        "/v1/edit",
        {"op": "append", "path": "projects/demo/notes/other.md", "text": "More."},
        {200},
    ),
    "POST /v1/agent-files": (
        "POST",
        "/v1/agent-files",
        {"files": [{"source": "~/.codex/AGENTS.md", "scope": "user", "text": "# Mine\n"}]},
        {200},
    ),
    "POST /v1/admin/purge": ("POST", "/v1/admin/purge", {"path": "notes/nosuch.md"}, {400, 404}),
    "POST /v1/admin/sync": ("POST", "/v1/admin/sync", {}, {404}),  # no remote configured
    "GET /v1/sync-conflicts": ("GET", "/v1/sync-conflicts", None, {200}),
    "POST /v1/sync-conflicts/resolve": (
        "POST",
        "/v1/sync-conflicts/resolve",
        {"copy": NOTE, "keep": "page"},
        {404},  # no conflict copy
    ),
    "POST /v1/handoffs": (
        "POST",
        "/v1/handoffs",
        {"project": "demo", "title": "Second"},
        {201},
    ),
    "GET /v1/handoffs": ("GET", "/v1/handoffs?project=demo", None, {200}),
    "GET /v1/handoffs/{hid}": ("GET", "/v1/handoffs/{hid}", None, {200}),
    "POST /v1/handoffs/{hid}/{verb}": (
        "POST",
        "/v1/handoffs/{hid}/claim",
        {"harness": "codex", "session_id": "r2"},
        {200},
    ),
    "POST /v1/brief": ("POST", "/v1/brief", {"project": "demo"}, {200}),
    "POST /v1/remember": (
        "POST",
        "/v1/remember",
        {"text": "Deploys need a green build.", "project": "demo"},
        {200, 201},
    ),
    # the MCP endpoint: a GET without a session and a DELETE of none are refused cleanly;
    # POST is driven through every tool below
    "GET /mcp": ("GET", "/mcp", None, {400, 405, 406}),
    "POST /mcp": ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "ping"}, {200, 400}),
    "DELETE /mcp": ("DELETE", "/mcp", None, {400, 404, 405}),
    "GET /mcp/": ("GET", "/mcp/", None, {400, 405, 406}),
    "POST /mcp/": ("POST", "/mcp/", {"jsonrpc": "2.0", "id": 1, "method": "ping"}, {200, 400}),
    "DELETE /mcp/": ("DELETE", "/mcp/", None, {400, 404, 405}),
    "GET /": ("GET", "/", None, {200}),
    "GET /login": ("GET", "/login", None, {200}),
    "POST /login": ("POST", "/login", None, {303, 400, 403}),
    "GET /logout": ("GET", "/logout", None, {200, 303, 405}),
    "POST /logout": ("POST", "/logout", None, {303, 400, 403}),
    "GET /static/{name}": ("GET", "/static/web.css", None, {200}),
    "GET /p/{project}": ("GET", "/p/demo", None, {200}),
    "GET /pages": ("GET", "/pages", None, {200}),
    "GET /page/{path:path}": ("GET", f"/page/{NOTE}", None, {200}),
    "GET /search": ("GET", "/search?q=kiwi", None, {200}),
    "GET /f": ("GET", "/f", None, {200}),
    "GET /f/{folder:path}": ("GET", "/f/projects/demo", None, {200}),
    "GET /tag/{tag:path}": ("GET", "/tag/ops", None, {200}),
    "GET /handoffs": ("GET", "/handoffs", None, {200}),
    "GET /session/{sid}": ("GET", "/session/nosuch", None, {404}),
    "GET /{rest:path}": ("GET", "/no/such/route", None, {404}),
}

#: routes anyone may open without a token
OPEN = {"GET /v1/health", "GET /health", "GET /login", "POST /login", "GET /logout", "POST /logout"}
OPEN |= {"GET /static/{name}"}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Any:
    data = tmp_path_factory.mktemp("routes") / "data"
    for rel, text in PAGES.items():
        p = data / "wiki" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    with AppServer(data, commit_delay_seconds=0.02) as srv:
        r = srv.post("/v1/handoffs", {"project": "demo", "title": "Fix the kiwi deploy"})
        assert r.status_code == 201, r.text
        srv.hid = r.json()["handoff"]["id"]  # type: ignore[attr-defined]
        yield srv


def send(srv: Any, key: str, headers: dict[str, str]) -> Any:
    method, path, body, _ = REQUESTS[key]
    path = path.replace("{hid}", srv.hid)
    kw: dict[str, Any] = {"headers": headers}
    if isinstance(body, str):
        kw["content"] = body.encode()
    elif body is not None:
        kw["json"] = body
    if path.startswith("/mcp"):
        kw["headers"] = {**headers, "Accept": "application/json, text/event-stream"}
    return srv.client.request(method, srv.url + path, **kw)


def test_every_route_has_a_request(tmp_path: Path) -> None:
    routes = faces.app_routes(tmp_path)
    assert sorted(routes) == sorted(REQUESTS), (
        f"no row: {sorted(set(routes) - set(REQUESTS))}; "
        f"stale: {sorted(set(REQUESTS) - set(routes))}"
    )


@pytest.mark.parametrize("key", list(REQUESTS))
def test_the_owner_gets_an_answer(app: Any, key: str) -> None:
    r = send(app, key, app.headers)
    assert r.status_code in REQUESTS[key][3], (key, r.status_code, r.text[:400])
    if key.split()[1].startswith("/v1/"):
        assert r.headers["content-type"].startswith("application/json"), key


@pytest.mark.parametrize("key", sorted(set(REQUESTS) - OPEN))
def test_no_token_no_answer(app: Any, key: str) -> None:
    r = send(app, key, {})
    path = key.split()[1]
    if path.startswith(("/v1/", "/mcp")):
        assert r.status_code == 401, (key, r.status_code, r.text[:200])
        assert "kiwi" not in r.text.lower()
    else:  # the web view sends a browser to its sign-in form
        assert r.status_code in (303, 401), (key, r.status_code)
        assert "Kiwi deploys" not in r.text


def rpc(srv: Any, session: dict[str, str], n: int, method: str, params: Any = None) -> Any:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": n, "method": method}
    if params is not None:
        body["params"] = params
    r = srv.client.post(srv.url + "/mcp", json=body, headers=session)
    assert r.status_code == 200, (method, r.status_code, r.text[:400])
    text = r.text
    if r.headers["content-type"].startswith("text/event-stream"):
        text = "\n".join(m for m in re.findall(r"^data: (.*)$", text, re.M))
    return json.loads(text)


#: arguments for each MCP tool (every tool must have a row)
TOOL_ARGS: dict[str, dict[str, Any]] = {
    "memory_recall": {"query": "kiwi deploy"},
    "memory_expand": {"ids": [NOTE]},
    "memory_brief": {"project": "demo"},
    "memory_remember": {"text": "Ship on Tuesdays.", "project": "demo"},
    "memory_feedback": {"path": NOTE, "verdict": "helped"},
    "page_read": {"path": NOTE},
    "page_list": {},
    "page_write": {"path": "notes/from-mcp.md", "text": "# From MCP\n"},
    "page_edit": {"op": "append", "path": "notes/from-mcp.md", "text": "More."},
    "page_forget": {"path": "notes/from-mcp.md"},
    "handoff_create": {"project": "demo", "title": "Over MCP"},
    "handoff_list": {"project": "demo"},
    "handoff_claim": {"id": "{hid}"},
    "handoff_update": {"id": "{hid}", "action": "release"},
}


def test_mcp_every_tool_over_the_endpoint(app: Any, tmp_path: Path) -> None:
    """initialize, tools/list (the same tools as the SDK's in-memory client lists) and a
    call of each tool, over POST /mcp with the owner's token, JSON-RPC as a client sends
    it."""
    session = {**app.headers, "Accept": "application/json, text/event-stream"}
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "codex", "version": "1"},
    }
    r = app.client.post(
        app.url + "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        headers=session,
    )
    assert r.status_code == 200, r.text
    session["Mcp-Session-Id"] = r.headers["mcp-session-id"]
    session["Mcp-Protocol-Version"] = "2025-06-18"
    r = app.client.post(
        app.url + "/mcp",
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers=session,
    )
    assert r.status_code == 202, r.text
    tools = [t["name"] for t in rpc(app, session, 2, "tools/list")["result"]["tools"]]
    assert sorted(tools) == sorted(faces.mcp_tool_names(tmp_path))
    assert sorted(tools) == sorted(TOOL_ARGS), "every tool needs a row in TOOL_ARGS"
    r = app.post("/v1/handoffs", {"project": "demo", "title": "For the MCP tools"})
    hid = r.json()["handoff"]["id"]
    for n, name in enumerate(TOOL_ARGS, start=3):  # in the table's order: claim, then release
        args = {
            k: (v.replace("{hid}", hid) if isinstance(v, str) else v)
            for k, v in TOOL_ARGS[name].items()
        }
        res = rpc(app, session, n, "tools/call", {"name": name, "arguments": args})
        assert "result" in res, (name, res)
        assert not res["result"].get("isError"), (name, res["result"])
