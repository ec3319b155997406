"""Helpers for the team-server tests (``tests/core/test_authz_matrix.py``,
``tests/server/test_team.py``): tokens made through the CLI with roles and grants, and a
raw MCP client over HTTP (JSON-RPC, one session per token) that answers like the other
faces: ``ok``, ``401``, ``403``, ``404``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from clikit import run_cli_here
from support import run_cli

from wiki_memory.config import default_tls
from wiki_memory.errors import TABLE

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def make_token(
    data: Path, user: str, role: str | None = None, *projects: str, here: bool = False
) -> str:
    """``wiki-memory token create --user USER [--role ROLE] [--project P]...``; the token.
    ``here``: the command runs in this process (``clikit.run_cli_here``), not as one."""
    args = ["token", "create", "--user", user]
    if role:
        args += ["--role", role]
    for p in projects:
        args += ["--project", p]
    r = run_cli_here(data, *args) if here else run_cli(data, *args)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()[0]


def status_word(code: int) -> str:
    """An HTTP status as a matrix answer: ``ok`` for 2xx, else the number."""
    return "ok" if 200 <= code < 300 else str(code)


class Network:
    """``httpx``'s one-request calls over the network, called like ``httpx.post``, with
    the process's one default TLS context (``config.default_tls``) unless ``verify=`` is
    given: each call still opens its own connection, without loading CAs anew."""

    @staticmethod
    def post(url: str, **kw: Any) -> httpx.Response:
        kw.setdefault("verify", default_tls())
        return httpx.post(url, **kw)

    @staticmethod
    def request(method: str, url: str, **kw: Any) -> httpx.Response:
        kw.setdefault("verify", default_tls())
        return httpx.request(method, url, **kw)


NETWORK = Network()


class McpRaw:
    """A streamable-HTTP MCP session (JSON responses) opened with one bearer token.
    ``opened`` is ``ok`` or the HTTP status word of a refused ``initialize``. ``via``:
    what sends the requests, called like ``httpx.post`` (``appkit.http(srv)`` for an app
    in this process); default :data:`NETWORK`, over the network."""

    def __init__(self, url: str, token: str | None, via: Any = None) -> None:
        self.via = NETWORK if via is None else via
        self.url = url + "/mcp"
        self.headers = dict(MCP_HEADERS)
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.n = 0
        init = {
            "jsonrpc": "2.0",
            "id": self._id(),
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "codex", "version": "1"},
            },
        }
        r = self.via.post(self.url, json=init, headers=self.headers, timeout=60)
        self.opened = status_word(r.status_code)
        if self.opened == "ok":
            self.headers["Mcp-Session-Id"] = r.headers["mcp-session-id"]
            self.headers["Mcp-Protocol-Version"] = "2025-06-18"
            self.via.post(
                self.url,
                json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                headers=self.headers,
                timeout=60,
            )

    def _id(self) -> int:
        self.n += 1
        return self.n

    def call(self, tool: str, args: dict[str, Any]) -> tuple[str, str]:
        """``(answer, text)``: ``ok`` and the result's text (structured part included),
        or the status of the tool error's code (``404`` for ``not_found: ...``) or of the
        HTTP refusal."""
        body = {
            "jsonrpc": "2.0",
            "id": self._id(),
            "method": "tools/call",
            "params": {"name": tool, "arguments": args},
        }
        r = self.via.post(self.url, json=body, headers=self.headers, timeout=120)
        if r.status_code != 200:
            return status_word(r.status_code), r.text
        res = r.json()
        if "error" in res:
            return f"rpc {res['error'].get('code')}", json.dumps(res["error"])
        result = res["result"]
        text = "\n".join(c.get("text", "") for c in result.get("content", []))
        text += json.dumps(result.get("structuredContent") or {}, ensure_ascii=False)
        if result.get("isError"):
            code = text.split(":", 1)[0].strip()
            rule = TABLE.get(code)
            return (str(rule.status) if rule else f"tool {code}"), text
        return "ok", text
