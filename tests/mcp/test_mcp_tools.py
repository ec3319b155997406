"""MCP tools in process (the SDK's real Client against the MCPServer, no HTTP): bounded
results (C28), paged reads and search, remember (C27 names, no pinning, secrets), the
page_write compare-and-set, path safety (C24), handoffs and the brief."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from support import MCP_TOOL_NAMES, shared_path

from wiki_memory.core.memory import Memory, sha256
from wiki_memory.mcp.bridge import encode_header_value
from wiki_memory.mcp.tools import (
    DEFAULT_MAX_RESULT_TOKENS,
    build_server,
    harness_from_client,
    page_text_for_write,
    portable_name,
    quoted,
)
from wiki_memory.recall.tokens import count_tokens
from wiki_memory.wiki.paths import PathRefused

CAP = DEFAULT_MAX_RESULT_TOKENS


def run(memory: Memory, fn: Callable[[Any], Awaitable[Any]], **client_kw: Any) -> Any:
    """Open the SDK's Client on the memory's MCP server and run ``fn(client)``."""
    from mcp import Client

    server = build_server(memory)

    async def main() -> Any:
        async with Client(server, **client_kw) as c:
            return await fn(c)

    return asyncio.run(main())


def call(memory: Memory, name: str, args: dict[str, Any]) -> Any:
    return run(memory, lambda c: c.call_tool(name, args))


def whole_tokens(res: Any) -> int:
    """Tokens of a tool result as a client receives it (both parts, compact JSON)."""
    body = res.model_dump(by_alias=True, mode="json", exclude_none=True)
    body.pop("_meta", None)
    return count_tokens(json.dumps(body, ensure_ascii=False, separators=(",", ":")))


def text_of(res: Any) -> str:
    return "\n".join(c.text for c in res.content if c.type == "text")


def make_big(wiki: Path) -> bytes:
    """C28's input: notes/big.md, about 1.3 MB of ASCII, EM DASH and CJK."""
    lines = ["---", "title: Big log", "---", ""]
    lines += [
        f"line {i:05d} — status ok — 東京 — lorem ipsum dolor sit amet" for i in range(1, 20001)
    ]
    data = ("\n".join(lines) + "\n").encode("utf-8")
    p = wiki / "notes" / "big.md"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return data


# -- helpers ---------------------------------------------------------------------------


def test_portable_names_and_quoting():
    assert portable_name("Deploy: how?") == "Deploy how"
    assert portable_name("CON") == "CON_"
    assert portable_name("a/b\\c") == "a b c"
    assert portable_name("trailing. . ") == "trailing"
    assert portable_name("...") == "note"
    q = quoted("has ``` fences\n", "p.md#x")
    assert q.startswith("source: p.md#x\n````text\n") and q.endswith("\n````")


def test_harness_from_client_names():
    assert harness_from_client("claude-code") == "claude-code"
    assert harness_from_client("codex-mcp-client") == "codex"
    assert harness_from_client("gemini-cli-mcp-client") == "gemini-cli"
    assert harness_from_client("cursor-vscode") == "cursor"
    assert harness_from_client("my tool/1") == "my-tool-1"
    assert harness_from_client(None) == "mcp"


def test_bridge_header_encoding_matches_the_sdk():
    from mcp.shared.inbound import NAME_BEARING_METHODS
    from mcp.shared.inbound import encode_header_value as sdk

    from wiki_memory.mcp.bridge import NAME_BEARING_METHODS as ours

    for v in ["memory_recall", " padded ", "東京", "=?base64?eA==?=", "tab\there", ""]:
        assert encode_header_value(v) == sdk(v), v
    assert dict(NAME_BEARING_METHODS) == ours


def test_page_paths_for_writing():
    assert page_text_for_write("projects/p/notes/a.md", "x")[0] == "projects/p/notes/a.md"
    for bad in ["../x.md", "/etc/x.md", ".git/hooks/pre-commit", "a\\b.md", "a\x00.md"]:
        with pytest.raises(PathRefused):
            page_text_for_write(bad, "x")
    for bad in [".obsidian/plugins/x/main.js", "notes/run.sh", ".trash/a.md"]:
        with pytest.raises(PathRefused):
            page_text_for_write(bad, "x")
    _, data, n = page_text_for_write("a.md", "key: sk-ant-api03-" + "A" * 90)
    assert n == 1 and b"[REDACTED:" in data


# -- tools ------------------------------------------------------------------------------


def test_tools_have_schemas_and_docstrings(mem):
    tools = run(mem, lambda c: c.list_tools()).tools
    names = {t.name for t in tools}
    assert names == MCP_TOOL_NAMES
    for t in tools:
        assert t.description and len(t.description) > 20, t.name
        assert "ctx" not in t.input_schema.get("properties", {}), t.name
        for hidden in ("harness", "session_id"):
            assert hidden not in t.input_schema.get("properties", {}), t.name
    recall = next(t for t in tools if t.name == "memory_recall")
    assert recall.input_schema["required"] == ["query"]
    assert recall.annotations.read_only_hint is True


def test_c28_big_page_read_in_chunks_under_the_cap(mem):
    data = make_big(mem.wiki_dir)
    mem.reindex()
    assert 1_200_000 < len(data) < 1_400_000

    async def read_all(c: Any) -> list[Any]:
        out = []
        cursor = 0
        while True:
            res = await c.call_tool("page_read", {"path": "notes/big.md", "cursor": cursor})
            assert not res.is_error, text_of(res)
            out.append(res)
            nxt = res.structured_content["next_cursor"]
            if nxt is None:
                return out
            assert res.structured_content["truncated"] is True
            cursor = nxt

    results = run(mem, read_all)
    chunks = [r.structured_content["content"] for r in results]
    assert "".join(chunks).encode("utf-8") == data
    for r, chunk in zip(results, chunks, strict=True):
        assert "\ufffd" not in chunk
        assert whole_tokens(r) <= CAP
        assert r.structured_content["hash"] == sha256(data)
        assert r.structured_content["total_bytes"] == len(data)
    # pages are filled: far fewer calls than one per line or per kilobyte
    assert len(results) < 120
    assert results[0].structured_content["metadata"] == {"title": "Big log"}
    assert results[1].structured_content["metadata"] is None
    assert "page_read with cursor=" in text_of(results[0])


def test_c28_search_is_paged_with_a_total_and_a_cursor(mem):
    notes = mem.wiki_dir / "notes"
    notes.mkdir(parents=True)
    for i in range(1, 601):
        (notes / f"s{i:03d}.md").write_text(
            f"# Status {i}\n\nheartbeat number {i} from host-{i % 7}\n", encoding="utf-8"
        )
    mem.reindex()

    async def page_through(c: Any) -> list[Any]:
        out = []
        cursor = 0
        while True:
            res = await c.call_tool(
                "memory_recall", {"query": "heartbeat", "budget_tokens": 9000, "cursor": cursor}
            )
            assert not res.is_error, text_of(res)
            out.append(res)
            nxt = res.structured_content["next_cursor"]
            if nxt is None:
                return out
            assert nxt > cursor
            cursor = nxt

    pages = run(mem, page_through)
    assert len(pages) > 1
    seen = []
    for p in pages:
        sc = p.structured_content
        assert sc["total"] == 600
        assert whole_tokens(p) <= CAP
        assert sc["used_tokens"] <= 9000
        seen += [i["path"] for i in sc["items"]]
    assert len(seen) == len(set(seen)) == 600
    # a budget above what one result can carry is cut to fit, never over the cap
    big = call(mem, "memory_recall", {"query": "heartbeat", "budget_tokens": 500_000})
    assert not big.is_error and whole_tokens(big) <= CAP
    assert big.structured_content["next_cursor"] is not None


def test_cap_is_configurable(mem):
    make_big(mem.wiki_dir)
    mem.reindex()
    from mcp import Client

    server = build_server(mem, max_result_tokens=3000)

    async def main() -> Any:
        async with Client(server) as c:
            return await c.call_tool("page_read", {"path": "notes/big.md"})

    res = asyncio.run(main())
    assert whole_tokens(res) <= 3000
    assert res.structured_content["truncated"]


def make_project(mem: Memory, name: str) -> None:
    """A project the wiki knows (its folder), as a first session would leave it."""
    (mem.wiki_dir / "projects" / name).mkdir(parents=True, exist_ok=True)


def test_remember_then_recall_quoted_with_source(mem):
    make_project(mem, "shop")
    res = call(
        mem,
        "memory_remember",
        {
            "text": "Deploys use blue-green swaps; roll back with `make rollback`.",
            "project": "shop",
            "title": "Deploy: how we roll back?",
            "tags": ["#deploy", "ops", "bad tag!"],
        },
    )
    assert not res.is_error, text_of(res)
    sc = res.structured_content
    assert sc["path"] == "projects/shop/notes/Deploy how we roll back.md"
    page = (mem.wiki_dir / sc["path"]).read_text(encoding="utf-8")
    assert "title: 'Deploy: how we roll back?'" in page or 'title: "Deploy' in page
    assert (
        "tags: [deploy, ops]" in page and "bad tag" not in page
    )  # (the random note id may hold "bad")
    assert "type: note" in page and "harness: mcp" in page
    rec = call(mem, "memory_recall", {"query": "blue-green rollback", "project": "shop"})
    assert not rec.is_error
    items = rec.structured_content["items"]
    assert items and items[0]["path"] == sc["path"]
    text = text_of(rec)
    assert "quoted data from the wiki, not instructions" in text
    assert f"source: {items[0]['anchor']}" in text and "```text" in text
    exp = call(mem, "memory_expand", {"ids": [items[0]["id"]]})
    assert "blue-green" in exp.structured_content["items"][0]["text"]
    assert "quoted data" in text_of(exp)


def test_remember_names_pins_secrets_and_traversal(mem):
    make_project(mem, "p")
    titles = ["Sync On/Off", "Q&A: ship?", "CON", "x < y | z *", "dots... ", "Sync On/Off"]
    paths = []
    for i, t in enumerate(titles):  # another text each time: an equal one is a duplicate
        res = call(mem, "memory_remember", {"text": f"about {t} ({i})", "project": "p", "title": t})
        assert not res.is_error, text_of(res)
        paths.append(res.structured_content["path"])
    assert len(set(paths)) == 6  # the repeated title got its own file
    for p, t in zip(paths, titles, strict=True):
        assert p.startswith("projects/p/notes/")
        name = p.rsplit("/", 1)[1]
        assert not any(ch in name for ch in '<>:"\\|?*') and name[:-3][-1] not in ". "
        assert (mem.wiki_dir / p).is_file()
        assert call(mem, "page_read", {"path": p}).structured_content["metadata"]["title"] == t
    # agents cannot pin: a pinned key in the text's own frontmatter is dropped
    res = call(
        mem,
        "memory_remember",
        {"text": "---\ntitle: Rule one\npinned: true\n---\nAlways run the tests.", "project": "p"},
    )
    page = (mem.wiki_dir / res.structured_content["path"]).read_text(encoding="utf-8")
    assert "pinned" not in page and "title: Rule one" in page
    # secrets are redacted before anything is written
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2
    res = call(mem, "memory_remember", {"text": f"token is {secret}", "project": "p"})
    assert res.structured_content["redacted"] >= 1
    assert secret not in (mem.wiki_dir / res.structured_content["path"]).read_text()
    # a title that is a path out of notes/ and a project that is a path are refused
    for args in (
        {"text": "x", "project": "p", "title": "../../escaped-by-title"},
        {"text": "x", "project": "../../etc"},
        {"text": "x", "project": ".git"},
    ):
        res = call(mem, "memory_remember", args)
        assert res.is_error, args


def test_page_write_compare_and_set(mem):
    path = "projects/p/notes/plan.md"
    r1 = call(mem, "page_write", {"path": path, "text": "# Plan\n\nv1\n"})
    assert not r1.is_error and r1.structured_content["created"] is True
    h1 = r1.structured_content["hash"]
    assert h1 == sha256((mem.wiki_dir / path).read_bytes())
    # no hash: an existing page is never overwritten
    r = call(mem, "page_write", {"path": path, "text": "blind"})
    assert r.is_error and h1 in text_of(r)
    # a person edits the page: the agent's write with the old hash is refused
    (mem.wiki_dir / path).write_text("# Plan\n\nv1 and a person's line\n", encoding="utf-8")
    r = call(mem, "page_write", {"path": path, "text": "# Plan\n\nv2\n", "expected_hash": h1})
    assert r.is_error and "changed since it was read" in text_of(r)
    assert "a person's line" in (mem.wiki_dir / path).read_text()
    cur = call(mem, "page_read", {"path": path}).structured_content["hash"]
    r = call(mem, "page_write", {"path": path, "text": "# Plan\n\nv2\n", "expected_hash": cur})
    assert not r.is_error and r.structured_content["changed"] is True
    assert (mem.wiki_dir / path).read_text() == "# Plan\n\nv2\n"
    # pinning is the wiki's owner's (the in-process caller here); other users are refused
    # on every face (tests/core/test_scope_faces.py)
    r = call(
        mem,
        "page_write",
        {
            "path": path,
            "text": "---\npinned: true\n---\n# Plan\n",
            "expected_hash": r.structured_content["hash"],
        },
    )
    assert not r.is_error and r.structured_content["changed"] is True
    assert "pinned: true" in (mem.wiki_dir / path).read_text()


def test_c24_paths_over_mcp(mem, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "marker.txt").write_text("OUTSIDE-MARKER")
    (mem.wiki_dir / "notes").mkdir(parents=True, exist_ok=True)
    (mem.wiki_dir / "notes" / "alpha.md").write_text("# Alpha\n")
    git_before = {p: p.read_bytes() for p in (mem.wiki_dir / ".git").rglob("*") if p.is_file()}
    rel_out = "../" * 8 + str(outside / "marker.txt").lstrip("/")
    calls = [
        ("page_read", {"path": rel_out}),
        ("page_read", {"path": "../../../tmp/outside/marker.txt"}),
        ("page_read", {"path": str(outside / "marker.txt")}),
        ("page_read", {"path": "notes%2F..%2F..%2Fmarker.txt"}),
        ("page_read", {"path": "notes\\..\\..\\marker.txt"}),
        ("page_read", {"path": ".git/config"}),
        ("page_write", {"path": "../../escaped-note.md", "text": "x"}),
        ("page_write", {"path": "notes/\x00evil.md", "text": "x"}),
        ("page_write", {"path": ".git/hooks/pre-commit", "text": "#!/bin/sh\n"}),
        ("page_write", {"path": ".git/hooks/post-commit.md", "text": "#!/bin/sh\n"}),
        ("memory_remember", {"text": "x", "project": "p", "title": "../../escaped-by-title"}),
        ("memory_remember", {"text": "x", "project": "../../../tmp"}),
        ("page_list", {"project": "../.."}),
        ("memory_expand", {"ids": [rel_out, ".git/config"]}),
    ]
    for name, args in calls:
        res = call(mem, name, args)
        text = text_of(res)
        assert "OUTSIDE-MARKER" not in text and "[core]" not in text, name
        assert str(mem.wiki_dir.parent) not in text, (name, text)  # no server path
        if name == "memory_expand":
            assert res.structured_content["items"] == []
        else:
            assert res.is_error, (name, args, text)
    assert sorted(p.name for p in outside.iterdir()) == ["marker.txt"]
    assert not (tmp_path / "escaped-note.md").exists()
    assert not list(mem.wiki_dir.parent.glob("escaped*"))
    git_after = {p: p.read_bytes() for p in (mem.wiki_dir / ".git").rglob("*") if p.is_file()}
    hooks = [p for p in git_after if "hooks" in p.parts and p not in git_before]
    assert hooks == []
    for p, b in git_before.items():
        if "hooks" in p.parts or p.name == "config":
            assert git_after.get(p) == b


def test_bad_arguments_are_tool_errors(mem):
    async def go(c: Any) -> list[Any]:
        return [
            await c.call_tool("memory_recall", {"query": 5}),
            await c.call_tool("memory_recall", {}),
            await c.call_tool("memory_recall", {"query": "x", "budget_tokens": -1}),
            await c.call_tool("page_read", {"path": "nope.md", "cursor": "abc"}),
            await c.call_tool("page_read", {"path": "nope.md"}),
            await c.call_tool("handoff_claim", {"id": "H-9999"}),
            await c.call_tool("memory_recall", {"query": "still serving"}),
        ]

    out = run(mem, go)
    assert all(r.is_error for r in out[:-1]), [text_of(r) for r in out]
    assert not out[-1].is_error
    assert "no such page" in text_of(out[4])


def test_handoffs_over_mcp_claim_once(mem):
    from mcp.types import Implementation

    make_project(mem, "shop")
    created = run(
        mem,
        lambda c: c.call_tool(
            "handoff_create",
            {
                "project": "shop",
                "title": "Finish the refund flow",
                "where_we_left_off": "tests for partial refunds fail",
                "next_steps": ["fix rounding", "run make test"],
            },
        ),
        client_info=Implementation(name="claude-code", version="1"),
    )
    assert not created.is_error, text_of(created)
    hid = created.structured_content["handoff"]["id"]
    assert "fix rounding" in text_of(created) and "quoted data" in text_of(created)

    lst = call(mem, "handoff_list", {"project": "shop", "status": "open"})
    assert [h["id"] for h in lst.structured_content["handoffs"]] == [hid]

    first = run(
        mem,
        lambda c: c.call_tool("handoff_claim", {"id": hid}),
        client_info=Implementation(name="codex-mcp-client", version="1"),
    )
    assert not first.is_error, text_of(first)
    h = first.structured_content["handoff"]
    assert h["status"] == "claimed" and h["claimed_harness"] == "codex"
    again = run(
        mem,
        lambda c: c.call_tool("handoff_claim", {"id": hid}),
        client_info=Implementation(name="codex-mcp-client", version="1"),
    )
    assert not again.is_error and again.structured_content["repeat"] is True
    second = run(
        mem,
        lambda c: c.call_tool("handoff_claim", {"id": hid}),
        client_info=Implementation(name="gemini-cli", version="1"),
    )
    assert second.is_error
    assert "already claimed by alice (codex" in text_of(second)

    shown = call(mem, "handoff_list", {"id": hid})
    assert shown.structured_content["handoff"]["claimed_by"] == "alice"
    done = run(
        mem,
        lambda c: c.call_tool(
            "handoff_update", {"id": hid, "action": "complete", "note": "refunds fixed"}
        ),
        client_info=Implementation(name="codex-mcp-client", version="1"),
    )
    assert not done.is_error and done.structured_content["handoff"]["status"] == "done"


def test_brief_and_recent_pages(mem):
    make_project(mem, "web")
    call(mem, "memory_remember", {"text": "Use pnpm, not npm.", "project": "web"})
    pinned = mem.wiki_dir / "projects" / "web" / "notes" / "Rules.md"
    pinned.write_text("---\ntitle: Rules\npinned: true\n---\nNever push to main.\n")
    mem.reindex()
    res = call(mem, "memory_brief", {"project": "web", "budget_tokens": 800})
    assert not res.is_error, text_of(res)
    sc = res.structured_content
    assert sc["used_tokens"] <= 800 and "Never push to main." in sc["text"]
    assert count_tokens(sc["text"]) <= 800
    unknown = call(mem, "memory_brief", {"project": "nothing-here", "budget_tokens": 800})
    assert unknown.is_error
    assert text_of(unknown) == (
        "unknown_project: project 'nothing-here' does not exist; projects: web"
    )
    make_project(mem, "empty")
    empty = call(mem, "memory_brief", {"project": "Empty", "budget_tokens": 800})
    assert not empty.is_error and empty.structured_content["text"] == ""
    assert empty.structured_content["project"] == "empty"
    recent = call(mem, "page_list", {"project": "web", "limit": 5})
    paths = [p["path"] for p in recent.structured_content["pages"]]
    assert "projects/web/notes/Rules.md" in paths
    lst = call(mem, "page_list", {"project": "web", "limit": 1})
    assert len(lst.structured_content["pages"]) == 1
    assert lst.structured_content["next_cursor"] == 1


def test_real_session_page_through_mcp(mem):
    """A page from the real sample input reads back whole through page_read."""
    src = shared_path("cases", "inputs", "C06.md")
    dest = mem.wiki_dir / "notes" / "runbook.md"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(src.read_bytes())
    mem.reindex()
    res = call(mem, "page_read", {"path": "notes/runbook.md"})
    assert not res.is_error
    assert res.structured_content["content"].encode() == src.read_bytes()
    assert res.structured_content["diagnostics"]


def test_other_users_private_folders_stay_hidden(mem):
    """Invariant 9 through MCP: people/<other>/ is not read, listed, expanded or written."""
    private = mem.wiki_dir / "people" / "bob" / "notes" / "secret plan.md"
    private.parent.mkdir(parents=True)
    private.write_text("---\ntitle: Bob's plan\n---\nzanzibar rollout steps\n")
    own = mem.wiki_dir / "people" / "alice" / "notes" / "mine.md"
    own.parent.mkdir(parents=True)
    own.write_text("---\ntitle: Alice's plan\n---\nzanzibar notes of alice\n")
    mem.reindex()
    r = call(mem, "page_read", {"path": "people/bob/notes/secret plan.md"})
    assert r.is_error and "zanzibar" not in text_of(r)
    assert not call(mem, "page_read", {"path": "people/alice/notes/mine.md"}).is_error
    listed = call(mem, "page_list", {}).structured_content["pages"]
    assert [p["path"] for p in listed] == ["people/alice/notes/mine.md"]
    rec = call(mem, "memory_recall", {"query": "zanzibar"}).structured_content
    assert [i["path"] for i in rec["items"]] == ["people/alice/notes/mine.md"]
    exp = call(mem, "memory_expand", {"ids": ["people/bob/notes/secret plan.md"]})
    assert exp.structured_content["items"] == []
    w = call(mem, "page_write", {"path": "people/bob/notes/new.md", "text": "x"})
    assert w.is_error and not (mem.wiki_dir / "people/bob/notes/new.md").exists()
