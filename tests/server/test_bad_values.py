"""Every refusal of a bad value names it: each ``/v1`` route, sent a wrong value in each
of its fields, answers a 4xx whose body has a specific ``error`` code and, for a 400,
the ``field`` at fault, in words a client can act on; never a 500, and never a bare
``400 bad_request`` carrying a library's internal text (docs/api.md "Errors"). The MCP
tools answer the same through the same core (one case per tool kind at the end)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from appkit import AppServer

from wiki_memory.mcp.tools import build_server

pytestmark = pytest.mark.fast

#: values of the wrong type or shape, sent in turn in each field
BAD: list[Any] = [
    5,
    -1,
    1.5,
    True,
    [],
    ["x", 3],
    {},
    {"a": 1},
    "",
    "zz not valid \x00",
    "9" * 40,
]

#: text that shows a library's or Python's own words reached the client
INTERNAL = re.compile(
    r"Traceback|object has no attribute|invalid literal|NoneType|'(str|int|list|dict|float|bool)'"
    r" object|unhashable|not supported between|takes \d+ positional|unexpected keyword"
    r"|isoformat|fromisoformat|Invalid isoformat|expected (str|string|bytes)|must be str,"
    r"|ZoneInfo|No time zone found|\bargument\b"
)

ROUTES: list[tuple[str, str, dict[str, Any], list[str]]] = [
    (
        "POST",
        "/v1/observations",
        {"kind": "prompt", "session_id": "s-1", "harness": "h", "cwd": "/w/p", "payload": {}},
        ["kind", "session_id", "harness", "ts", "project", "cwd", "payload", "repo_id", "user"],
    ),
    (
        "POST",
        "/v1/recall",
        {"query": "deploy"},
        [
            "query",
            "project",
            "budget_tokens",
            "kinds",
            "kind",
            "cursor",
            "tags",
            "since",
            "until",
            "as_of",
            "now",
            "tz",
            "cwd",
        ],
    ),
    ("POST", "/v1/expand", {"ids": ["x"]}, ["ids", "budget_tokens"]),
    (
        "POST",
        "/v1/remember",
        {"text": "a fact", "project": "p"},
        [
            "text",
            "project",
            "title",
            "tags",
            "harness",
            "session_id",
            "supersedes",
            "if_new",
            "create_project",
            "repo_id",
            "cwd",
        ],
    ),
    (
        "POST",
        "/v1/handoffs",
        {"title": "work", "project": "p"},
        [
            "title",
            "project",
            "to",
            "visibility",
            "where_we_left_off",
            "what_failed",
            "open_questions",
            "next_steps",
            "files",
            "expires",
            "expires_in_seconds",
            "session_page",
            "harness",
            "session_id",
            "create_project",
            "repo_id",
        ],
    ),
    (
        "POST",
        "/v1/brief",
        {"project": "p"},
        ["project", "budget_tokens", "max_offers", "cwd", "session_id", "harness", "source"],
    ),
    ("POST", "/v1/admin/pin", {"path": "projects/p/notes/a.md"}, ["path", "pinned"]),
    ("POST", "/v1/forget", {"path": "projects/p/notes/zz.md"}, ["path"]),
    ("PUT", "/v1/pages/projects/p/notes/new.md", {"text": "t"}, ["text", "supersedes"]),
]

QUERIES: list[tuple[str, list[str]]] = [
    ("/v1/pages", ["project", "kind", "since", "limit", "offset"]),
    ("/v1/pages/projects/p/notes/a.md", ["cursor", "max_bytes"]),
    ("/v1/handoffs", ["project", "status", "limit"]),
    ("/v1/audit", ["user", "since", "limit"]),
]

QUERY_BAD = ["-1", "x", "1.5", "9" * 40, "2026-13-45", "\x00"]


def body_of(r: Any) -> Any:
    """A reply's JSON, else its text."""
    try:
        return r.json()
    except ValueError:
        return r.text


def check(what: str, status: int, body: Any, problems: list[str]) -> None:
    """Note what is wrong with one reply (nothing when it is fine)."""
    if status >= 500:
        problems.append(f"{what}: {status} {body}")
        return
    if status < 400:
        return
    if not isinstance(body, dict) or not body.get("error") or not body.get("message"):
        problems.append(f"{what}: {status} without error and message: {body}")
        return
    if body["error"] in ("bad_request", "bad_json", "bad_path") and not body.get("field"):
        problems.append(f"{what}: {status} {body['error']} names no field: {body['message']}")
    if INTERNAL.search(body["message"]):
        problems.append(f"{what}: internal text: {body['message']}")


def test_every_route_names_the_field_of_a_bad_value(tmp_path: Path) -> None:
    with AppServer(tmp_path / "data") as srv:
        srv.client.put(
            srv.url + "/v1/pages/projects/p/notes/a.md",
            content=b"---\ntitle: A\n---\nbody\n",
            headers=srv.headers,
        )
        problems: list[str] = []
        for method, path, good, fields in ROUTES:
            for name in fields:
                for value in BAD:
                    body = {**good, name: value}
                    target = path
                    if method == "PUT":
                        r = srv.client.put(srv.url + target, json=body, headers=srv.headers)
                    else:
                        r = srv.client.request(
                            method, srv.url + target, json=body, headers=srv.headers
                        )
                    check(f"{method} {path} {name}={value!r}", r.status_code, body_of(r), problems)
        hid = srv.post("/v1/handoffs", {"title": "w", "project": "p"}).json()["handoff"]["id"]
        for verb, fields in [
            ("claim", ["harness", "session_id"]),
            ("complete", ["note", "harness"]),
            ("release", ["session_id"]),
            ("cancel", ["reason"]),
        ]:
            for name in fields:
                for value in BAD:
                    r = srv.post(f"/v1/handoffs/{hid}/{verb}", {name: value})
                    check(f"{verb} {name}={value!r}", r.status_code, body_of(r), problems)
        for path, params in QUERIES:
            for name in params:
                for value in QUERY_BAD:
                    r = srv.get(path, params={name: value})
                    check(f"GET {path}?{name}={value!r}", r.status_code, body_of(r), problems)
        assert not problems, "\n".join(problems)


def test_the_mcp_tools_answer_a_specific_code(mem: Any) -> None:
    """Each refusal starts with the code HTTP would send (``precondition_required``,
    ``conflict``, ``bad_request: <field>``...), never a bare ``bad_request`` with the
    text of an untyped error."""
    from mcp import Client

    page = mem.wiki_dir / "projects" / "p" / "notes" / "a.md"
    page.parent.mkdir(parents=True)
    page.write_text("---\ntitle: A\n---\nbody\n")
    stale = "0" * 64
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("memory_recall", {"query": "x", "since": "last blursday"}, "bad_request: since: "),
        ("memory_recall", {"query": "x", "tz": "Mars/Olympus"}, "bad_request: tz: "),
        ("memory_recall", {"query": "x", "now": "13/45/2026"}, "bad_request: now: "),
        ("handoff_create", {"title": "t", "project": "p", "expires": "someday"}, "bad_request: "),
        ("page_read", {"path": "projects/../x.md"}, "bad_path: "),
        (
            "page_write",
            {"path": "projects/p/notes/a.md", "text": "t"},
            "precondition_required: projects/p/notes/a.md already exists",
        ),
        (
            "page_write",
            {"path": "projects/p/notes/a.md", "text": "t", "expected_hash": stale},
            "conflict: projects/p/notes/a.md changed since it was read",
        ),
    ]

    async def main() -> list[Any]:
        async with Client(build_server(mem)) as c:
            return [await c.call_tool(name, args) for name, args, _ in cases]

    problems = []
    for (name, args, start), res in zip(cases, asyncio.run(main()), strict=True):
        text = "\n".join(c.text for c in res.content if c.type == "text")
        if not res.is_error or not text.startswith(start) or INTERNAL.search(text):
            problems.append(f"{name} {args}: {text}")
    assert not problems, "\n".join(problems)


def test_an_untyped_value_error_keeps_its_library_text_in_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A ValueError no core operation typed (a gap the test above would find) answers a
    400 naming the request's body, with the library's text in the server log only."""

    def broken(*_a: Any, **_k: Any) -> Any:
        raise ValueError("invalid literal for int() with base 10: 'zz'")

    with AppServer(tmp_path / "data") as srv:
        assert srv.memory is not None
        monkeypatch.setattr(srv.memory, "expand", broken)
        r = srv.post("/v1/expand", {"ids": ["x"]})
        assert r.status_code == 400
        body = r.json()
        assert body["error"] == "bad_request" and body["field"] == "body"
        assert "invalid literal" not in body["message"]
    assert any("invalid literal" in rec.getMessage() for rec in caplog.records)
