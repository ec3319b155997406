"""Remember, one core operation behind two faces: ``POST /v1/remember`` through a real
server process and the MCP tool ``memory_remember`` (in process, and over HTTP with a
second user's token). The note lands in ``projects/<project>/notes/``, shared, with the
caller as its ``user`` whatever the text claims; bad fields are a 400 naming the field;
nothing is written outside the notes folder; ``wiki_memory.core.remember`` needs only a
page writer (no ``Memory``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from serverproc import ServerProcess
from support import as_user

from wiki_memory.auth import TokenStore
from wiki_memory.core.memory import Memory
from wiki_memory.core.remember import remember
from wiki_memory.core.writer import WriteResult
from wiki_memory.errors import TABLE, BadRequest, Conflict, Forbidden
from wiki_memory.identity import Identity
from wiki_memory.mcp.tools import build_server
from wiki_memory.wiki.page import parse_page

SECRET = "-".join(["sk", "ant", "api03", "A" * 90])  # assembled: this file holds no key
KEYS = {"path", "id", "title", "hash", "redacted"}


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path -> bytes)."""
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def meta_of(path: Path) -> dict[str, Any]:
    return dict(parse_page(path.read_text(encoding="utf-8"), path.name).metadata or {})


# -- through a real server ---------------------------------------------------------------


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    s = ServerProcess(tmp_path_factory.mktemp("remember") / "data")
    s.start()
    for name in ("web", "p", "api"):  # an explicit project must be one the wiki knows
        (s.data_dir / "wiki" / "projects" / name).mkdir(parents=True, exist_ok=True)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def bob(srv) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {TokenStore(srv.data_dir / 'auth').create('bob', projects=['p', 'api', 'web'])}"
    }


def owner_of(srv: ServerProcess) -> str:
    return TokenStore(srv.data_dir / "auth").owner_name()


def post(srv: ServerProcess, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(
        srv.url + "/v1/remember", json=body, headers=headers or srv.headers, timeout=60
    )


def get_page(srv: ServerProcess, path: str, headers: dict[str, str] | None = None):
    return httpx.get(srv.url + "/v1/pages/" + path, headers=headers or srv.headers, timeout=60)


@pytest.mark.process
def test_http_remember_writes_a_shared_note(srv):
    r = post(
        srv,
        {
            "text": f"Deploys go through `make ship`.\nThe key was {SECRET}.",
            "project": "web",
            "title": "Deploy: how?",
            "tags": ["deploy", "#decision", "not a tag"],
            "harness": "claude-code",
            "session_id": "s-1",
        },
    )
    assert r.status_code == 201, r.text
    out = r.json()
    assert set(out) == KEYS
    assert out["path"] == "projects/web/notes/Deploy how.md"
    assert out["title"] == "Deploy: how?" and out["redacted"] == 1
    assert out["id"].startswith("note_")
    page = get_page(srv, out["path"]).json()
    assert page["hash"] == out["hash"]
    assert SECRET not in page["content"] and "[REDACTED:" in page["content"]
    meta = page["metadata"]
    assert meta["type"] == "note" and meta["id"] == out["id"]
    assert meta["project"] == "web" and meta["tags"] == ["deploy", "decision"]
    assert (meta["user"], meta["harness"], meta["session"]) == (owner_of(srv), "claude-code", "s-1")
    # the same title again: a file of its own, the first note untouched
    again = post(srv, {"text": "another", "project": "web", "title": "Deploy: how?"})
    assert again.status_code == 201, again.text
    assert again.json()["path"] == "projects/web/notes/Deploy how 2.md"
    assert get_page(srv, out["path"]).json()["hash"] == out["hash"]
    # no harness named: "api"; no session: no session key
    meta2 = get_page(srv, again.json()["path"]).json()["metadata"]
    assert meta2["harness"] == "api" and "session" not in meta2


@pytest.mark.process
def test_http_second_user_is_the_author_and_cannot_pin_or_hide(srv, bob):
    """A note is shared: bob's text cannot make it personal, pinned or someone else's."""
    owner = owner_of(srv)
    text = (
        f"---\ntitle: Use pnpm\ntags: [tooling]\nuser: {owner}\nvisibility: personal\n"
        "pinned: true\n---\nUse pnpm, not npm.\n"
    )
    r = post(srv, {"text": text, "project": "web"}, bob)
    assert r.status_code == 201, r.text
    out = r.json()
    assert out["path"] == "projects/web/notes/Use pnpm.md" and out["title"] == "Use pnpm"
    path = srv.data_dir / "wiki" / out["path"]
    meta = meta_of(path)
    assert meta["user"] == "bob"
    assert meta["tags"] == ["tooling"]
    assert "pinned" not in meta and "visibility" not in meta
    # shared: the owner reads it, and so does bob
    assert get_page(srv, out["path"]).status_code == 200
    assert get_page(srv, out["path"], bob).json()["hash"] == out["hash"]


@pytest.mark.process
def test_http_remember_cannot_write_outside_the_notes_folder(srv, bob):
    wiki = srv.data_dir / "wiki"
    before = snapshot(wiki / "people")
    cases = [
        ({"text": "x", "project": "../people/alice"}, "project"),
        ({"text": "x", "project": "people/alice"}, "project"),
        ({"text": "x", "project": ".."}, "project"),
        ({"text": "x", "project": "p", "title": "../../../people/alice/x"}, "title"),
    ]
    for body, field in cases:
        r = post(srv, body, bob)
        assert (r.status_code, r.json().get("field")) == (400, field), (body, r.text)
        assert r.json()["error"] == "bad_request"
    assert snapshot(wiki / "people") == before
    assert not (wiki / "projects" / "p" / "notes").exists()


@pytest.mark.process
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"project": "web"}, "text"),
        ({"text": "", "project": "web"}, "text"),
        ({"text": 5, "project": "web"}, "text"),
        ({"text": "x" * 200_001, "project": "web"}, "text"),
        ({"text": "x"}, "project"),
        ({"text": "x", "project": 7}, "project"),
        ({"text": "x", "project": "web", "title": 5}, "title"),
        ({"text": "x", "project": "web", "tags": "deploy"}, "tags"),
        ({"text": "x", "project": "web", "tags": ["ok", 1]}, "tags"),
        ({"text": "x", "project": "web", "harness": ["codex"]}, "harness"),
        ({"text": "x", "project": "web", "session_id": "s" * 201}, "session_id"),
        (["text", "project"], "body"),
    ],
)
def test_http_bad_fields_are_400_naming_the_field(srv, body, field):
    notes = srv.data_dir / "wiki" / "projects" / "web" / "notes"
    before = snapshot(notes)
    r = post(srv, body)
    assert r.status_code == TABLE["bad_request"].status == 400, r.text
    assert r.json()["error"] == "bad_request" and r.json()["field"] == field, r.text
    assert snapshot(notes) == before


@pytest.mark.process
def test_http_remember_needs_a_token_and_json(srv):
    r = httpx.post(srv.url + "/v1/remember", json={"text": "x", "project": "web"}, timeout=60)
    assert r.status_code == 401 and r.json()["error"] == "unauthorized"
    r = httpx.post(srv.url + "/v1/remember", content=b"{", headers=srv.headers, timeout=60)
    assert (r.status_code, r.json()["error"]) == (400, "bad_json")
    r = httpx.get(srv.url + "/v1/remember", headers=srv.headers, timeout=60)
    assert (r.status_code, r.json()["error"]) == (405, "method_not_allowed")


@pytest.mark.process
def test_mcp_over_http_second_user_is_the_author(srv, bob):
    """The MCP tool with bob's token: bob is the note's user, the client its harness."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.types import Implementation

    async def main() -> tuple[Any, Any]:
        async with httpx2.AsyncClient(headers=bob, timeout=120) as hc:
            t = streamable_http_client(srv.url + "/mcp", http_client=hc)
            async with Client(t, client_info=Implementation(name="codex", version="1")) as c:
                ok = await c.call_tool(
                    "memory_remember",
                    {"text": f"---\nuser: {owner_of(srv)}\n---\nbob's rule", "project": "api"},
                )
                bad = await c.call_tool(
                    "memory_remember", {"text": "x", "project": "../people/bob"}
                )
                return ok, bad

    ok, bad = asyncio.run(main())
    assert not ok.is_error, ok.content
    out = ok.structured_content
    assert set(out) == KEYS and out["path"].startswith("projects/api/notes/")
    meta = meta_of(srv.data_dir / "wiki" / out["path"])
    assert (meta["user"], meta["harness"]) == ("bob", "codex")
    assert meta["session"].startswith("mcp-")
    assert bad.is_error
    assert bad.content[0].text.startswith("bad_request: project must be a plain name")


# -- the MCP tool in process -------------------------------------------------------------


def call(memory: Memory, name: str, args: dict[str, Any]) -> Any:
    from mcp import Client

    server = build_server(memory)

    async def main() -> Any:
        async with Client(server) as c:
            return await c.call_tool(name, args)

    return asyncio.run(main())


def test_mcp_tool_writes_the_same_note(mem):
    (mem.wiki_dir / "projects" / "p").mkdir(parents=True)
    res = call(
        mem,
        "memory_remember",
        {"text": f"rule one, key {SECRET}", "project": "p", "title": "Rule", "tags": ["a"]},
    )
    assert not res.is_error, res.content
    out = res.structured_content
    assert set(out) == KEYS
    assert (out["path"], out["title"], out["redacted"]) == ("projects/p/notes/Rule.md", "Rule", 1)
    text = res.content[0].text
    assert text.startswith(f"Remembered as {out['path']} (id {out['id']}).")
    assert "1 secret(s) were replaced" in text
    meta = meta_of(mem.wiki_dir / out["path"])
    assert list(meta) == [
        "type",
        "id",
        "title",
        "created",
        "updated",
        "project",
        "tags",
        "user",
        "harness",
        "session",
    ]
    assert meta["user"] == "alice" and meta["tags"] == ["a"]
    assert mem.read_page(out["path"], 0, 1 << 20, as_user(mem, "alice"))["hash"] == out["hash"]


def test_mcp_tool_bad_fields_are_tool_errors(mem):
    (mem.wiki_dir / "projects" / "p").mkdir(parents=True)
    for args, start in [
        ({"text": "x", "project": "../x"}, "bad_request: project must be a plain name"),
        ({"text": "x", "project": "p", "title": "a/../b"}, "bad_request: a title cannot be"),
    ]:
        res = call(mem, "memory_remember", args)
        assert res.is_error and res.content[0].text.startswith(start), res.content
    assert not (mem.wiki_dir / "projects" / "p" / "notes").exists()
    assert not (mem.wiki_dir / "x").exists()
    res = call(mem, "memory_remember", {"text": "x", "project": "q"})
    assert res.is_error and res.content[0].text.startswith("unknown_project: project 'q'")
    assert not (mem.wiki_dir / "projects" / "q").exists()


# -- the core operation, with a page writer that is not Memory ---------------------------


class FakeWriter:
    """The three things :func:`remember` needs: ``wiki_dir``, ``scope.write_check`` and
    ``write_page`` (it is its own ``scope``)."""

    def __init__(self, wiki_dir: Path, conflicts: int = 0, refuse: bool = False) -> None:
        self.wiki_dir = wiki_dir
        self.conflicts = conflicts
        self.refuse = refuse
        self.calls: list[dict[str, Any]] = []
        self.checked: list[tuple[str, str]] = []
        self.scope = self

    def write_check(self, who: Identity, path: str, op: str = "page.write") -> tuple[str, Path]:
        self.checked.append((who.user, path))
        if self.refuse:
            raise Forbidden(f"you may not write {path}", grant="write on project p")
        return path, self.wiki_dir / path

    def write_page(self, path: str, data: bytes, **kw: Any) -> WriteResult:
        self.calls.append({"path": path, **kw})
        if self.conflicts:
            self.conflicts -= 1
            raise Conflict(f"{path} already exists", "0" * 64)
        return WriteResult(paths=[path], value="f" * 64)


def test_core_remember_decides_the_right_to_write_before_reading_the_text(tmp_path, monkeypatch):
    import wiki_memory.core.remember as core_remember

    def no_scan(text: str) -> Any:
        raise AssertionError("the text was scanned before the right to write was decided")

    monkeypatch.setattr(core_remember, "redact_text", no_scan)
    w = FakeWriter(tmp_path, refuse=True)
    with pytest.raises(Forbidden):
        remember(w, "a fact\n" * 1000, project="p", user=Identity("rita"))
    assert w.checked == [("rita", "projects/p/notes")] and w.calls == []


def test_core_remember_needs_only_a_page_writer(tmp_path):
    w = FakeWriter(tmp_path, conflicts=2)
    out = remember(w, "a fact", project="p", user=Identity("bob"), harness="h", session_id="s")
    assert out == {
        "path": "projects/p/notes/a fact.md",
        "id": out["id"],
        "title": "a fact",
        "hash": "f" * 64,
        "redacted": 0,
    }
    assert len(w.calls) == 3  # a name taken meanwhile is tried again
    assert all(c["create_only"] is True and c["who"] == Identity("bob") for c in w.calls)
    assert w.calls[-1]["user"] == "bob" and w.calls[-1]["message"] == (
        "Remember projects/p/notes/a fact.md (h)"
    )


def test_core_remember_gives_up_naming_the_title(tmp_path):
    with pytest.raises(BadRequest) as exc:
        remember(FakeWriter(tmp_path, conflicts=10**6), "x", project="p", user=Identity("bob"))
    assert exc.value.field == "title"
