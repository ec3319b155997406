"""Cases C01, C02, C03, C05, C06, C07, C09, C10, C11, C13, C21, C23 and C27 of
../shared/cases end to end: the case inputs in a wiki served by a real server, read over
HTTP (C02, C03, C05 too), searched, linked, written concurrently, named.

The parser-level halves of C01-C11 are in tests/wiki/test_page.py; C18 and C19 (the watcher)
are in tests/index/test_watcher.py.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import threading
import time
import unicodedata
from pathlib import Path
from typing import Any

import httpx
import pytest
from appkit import AppServer, http
from serverproc import ServerProcess
from support import shared_path

from wiki_memory.config import load_settings
from wiki_memory.core.memory import Memory
from wiki_memory.datadir import ensure_layout
from wiki_memory.plainfile import page_hash
from wiki_memory.wiki.frontmatter import FrontmatterError, set_keys
from wiki_memory.wiki.links import name_key, rename_links
from wiki_memory.wiki.page import parse_page

CASES = ["C01.md", "C02.md", "C03.md", "C05.md", "C06.md", "C07.md", "C09.md", "C10.md", "C11.md"]

SUPPORT = {
    "notes/Deploy Guide.md": "# Deploy Guide\n\n## Rollback\n\nUndo it.\n\nCareful here. ^warn-1\n",
    "notes/Release Process.md": "# Release Process\n\nShip it.\n",
    "notes/Auth Service.md": "# Auth Service\n",
    "notes/Billing Service.md": "# Billing Service\n",
    "Billing Pipeline Summary.md": "# Billing Pipeline Summary\n\nbilling pipeline summary\n",
    "cases/source.md": "---\ntitle: Source note\n---\n- relates_to [[Target Not Yet Written]]\n"
    "- see_also [[summary (billing-pipeline)]]\n",
    "cases/C05-unclosed.md": "---\nno closing fence\n",
}


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    data = tmp_path_factory.mktemp("cases") / "data"
    wiki = data / "wiki"
    (wiki / "cases").mkdir(parents=True)
    for name in CASES:
        shutil.copyfile(shared_path("cases", "inputs", name), wiki / "cases" / name)
    for rel, text in SUPPORT.items():
        (wiki / rel).parent.mkdir(parents=True, exist_ok=True)
        (wiki / rel).write_text(text, encoding="utf-8")
    # the app in this process: what is checked here is what the routes answer
    s = AppServer(data, hand_edit_settle_seconds=0.2).start()
    s.inputs = {n: (wiki / "cases" / n).read_bytes() for n in CASES}  # type: ignore[attr-defined]
    yield s
    s.stop()


def page(srv: AppServer, rel: str) -> dict[str, Any]:
    r = srv.get(f"/v1/pages/{rel}")
    assert r.status_code == 200, r.text
    return r.json()


def found(srv: AppServer, query: str) -> set[str]:
    r = srv.post("/v1/recall", {"query": query, "budget_tokens": 4000})
    assert r.status_code == 200, r.text
    return {i["path"] for i in r.json()["items"]}


@pytest.mark.slow
def test_reading_never_rewrites_a_case_file(srv):
    for name in CASES:
        page(srv, f"cases/{name}")
    time.sleep(0.5)
    for name, raw in srv.inputs.items():
        assert (srv.data_dir / "wiki" / "cases" / name).read_bytes() == raw, name


def test_c01_bom_and_crlf_over_http(srv):
    p = page(srv, "cases/C01.md")
    assert p["title"] == "Release checklist"
    assert p["metadata"]["tags"] == ["ops", "release"]
    assert [lk["target"] for lk in p["links"]] == ["Deploy Guide"]
    assert p["links"][0]["status"] == "resolved"
    assert p["links"][0]["path"] == "notes/Deploy Guide.md"
    assert "cases/C01.md" in found(srv, "checklist")
    listing = srv.get("/v1/pages", params={"limit": 100}).json()["pages"]
    row = next(r for r in listing if r["path"] == "cases/C01.md")
    assert "\ufeff" not in str(row) and "\r" not in str(row)


def test_c01_server_write_keeps_crlf_unmixed(tmp_path):
    settings = load_settings(tmp_path / "data", watch=False, commit_delay_seconds=0.02)
    ensure_layout(settings)
    raw = shared_path("cases", "inputs", "C01.md").read_bytes()
    (settings.wiki_dir / "C01.md").write_bytes(raw)
    m = Memory(settings)
    m.start()
    try:
        m.update_page(
            "C01.md", lambda cur: set_keys(cur or b"", {"id": "p-1"}), user="o", message="id"
        )
        out = (settings.wiki_dir / "C01.md").read_bytes()
        assert out.startswith(b"\xef\xbb\xbf---\r\n")
        assert b"\n" not in out.replace(b"\r\n", b"")
        assert out.replace(b"id: p-1\r\n", b"") == raw
    finally:
        m.stop()


def test_c02_non_string_keys_over_http(srv):
    p = page(srv, "cases/C02.md")
    assert p["metadata"] == {
        "title": "Retro notes",
        "2024": "quarterly",
        "true": "archived",
        "content": "one-line summary of the retro",
        "handler": "ops-team",
    }
    assert p["content"].endswith("Body of the retro page.\n")
    assert "cases/C02.md" in found(srv, "retro")
    listing = srv.get("/v1/pages", params={"limit": 100}).json()["pages"]
    assert "cases/C02.md" in {r["path"] for r in listing}


def test_c03_dates_over_http_and_sorting(srv):
    p = page(srv, "cases/C03.md")
    meta = p["metadata"]
    assert meta["created"] == "2024-05-01"
    assert meta["updated"] == "2024-05-01T10:30:00"
    assert meta["review_at"] == "2024-05-01T10:30:00+02:00"
    assert "cases/C03.md" in found(srv, "standup")
    items = srv.post("/v1/recall", {"query": "standup", "budget_tokens": 4000}).json()["items"]
    assert next(i for i in items if i["path"] == "cases/C03.md")["updated"] == "2024-05-01T10:30:00"
    since = srv.get("/v1/pages", params={"since": "2024-05-01T10:00:00", "limit": 500}).json()
    assert "cases/C03.md" in {r["path"] for r in since["pages"]}
    later = srv.get("/v1/pages", params={"since": "2024-05-02", "kind": "page", "limit": 500})
    assert "cases/C03.md" not in {r["path"] for r in later.json()["pages"]}


def test_c05_preamble_that_is_not_a_mapping_over_http(srv):
    p = page(srv, "cases/C05.md")
    assert p["metadata"] == {}
    assert "VENDOR NOTES (INTERNAL)" in p["content"]
    assert "cases/C05.md" in found(srv, "vendor")
    assert [d["kind"] for d in p["diagnostics"]] == ["frontmatter_not_mapping"]
    u = page(srv, "cases/C05-unclosed.md")
    assert u["metadata"] == {} and "no closing fence" in u["content"]
    assert "cases/C05-unclosed.md" in found(srv, "closing fence")


def test_c06_invalid_yaml_served_with_line_and_writes_refused(srv, tmp_path):
    p = page(srv, "cases/C06.md")
    assert p["metadata"] == {}
    assert {"kind": "frontmatter_invalid", "line": 3} == {
        k: v for k, v in p["diagnostics"][0].items() if k in ("kind", "line")
    }
    assert "cases/C06.md" in found(srv, "owner")
    # a server write (a tag, an id stamp) is refused and the bytes stay
    settings = load_settings(tmp_path / "data", watch=False, commit_delay_seconds=0.02)
    ensure_layout(settings)
    raw = srv.inputs["C06.md"]  # type: ignore[attr-defined]
    tab = raw.replace(b"tags: [ops]\n", b"tags:\n\t- ops\n")
    (settings.wiki_dir / "C06.md").write_bytes(raw)
    (settings.wiki_dir / "C06-tab.md").write_bytes(tab)
    m = Memory(settings)
    m.start()
    try:
        for name, before in (("C06.md", raw), ("C06-tab.md", tab)):
            for update in ({"tags": ["ops", "new"]}, {"handoff": "H-0001"}):
                with pytest.raises(FrontmatterError) as err:
                    m.update_page(
                        name, lambda cur, u=update: set_keys(cur or b"", u), user="o", message="x"
                    )
                assert err.value.line in (3, 4)
                assert (settings.wiki_dir / name).read_bytes() == before
            parsed = parse_page(before, name)
            assert parsed.diagnostics[0].kind == "frontmatter_invalid"
    finally:
        m.stop()


def test_c07_duplicate_key_over_http(srv):
    p = page(srv, "cases/C07.md")
    assert p["title"] == "Draft B" and p["metadata"]["status"] == "open"
    dup = [d for d in p["diagnostics"] if d["kind"] == "duplicate_key"]
    assert dup and dup[0]["line"] == 4 and dup[0]["key"] == "title"


def test_c09_table_aliases_and_backlinks_and_rename(srv):
    p = page(srv, "cases/C09.md")
    assert [(lk["target"], lk["alias"], lk["status"]) for lk in p["links"]] == [
        ("Auth Service", "auth", "resolved"),
        ("Billing Service", "billing", "resolved"),
        ("Auth Service", "the auth service", "resolved"),
    ]
    assert not any(
        lk["target"].endswith("\\") or lk["target"].startswith("[[") for lk in p["links"]
    )
    back = page(srv, "notes/Auth Service.md")["backlinks"]
    assert {b["path"] for b in back} == {"cases/C09.md"}
    text = srv.inputs["C09.md"].decode()  # type: ignore[attr-defined]
    renamed = rename_links(text, {name_key("Auth Service")}, "Identity Service")
    assert "| Auth | [[Identity Service\\|auth]] |" in renamed
    assert "[[Identity Service|the auth service]]" in renamed
    assert "[[Billing Service|billing]]" in renamed


def test_c10_fragments_resolve_and_same_page_refs_are_not_page_links(srv):
    p = page(srv, "cases/C10.md")
    assert [
        (lk["target"], lk["fragment"], lk["path"], lk["fragment_found"]) for lk in p["links"]
    ] == [
        ("Deploy Guide", "Rollback", "notes/Deploy Guide.md", True),
        ("Deploy Guide", "^warn-1", "notes/Deploy Guide.md", True),
    ]
    kinds = [d["kind"] for d in p["diagnostics"]]
    assert "unresolved_link" not in kinds and "missing_fragment" not in kinds
    # a fragment that names nothing: still resolves, with a warning
    srv_wiki = srv.data_dir / "wiki"
    (srv_wiki / "cases" / "c10b.md").write_text("[[Deploy Guide#Nowhere]]\n")
    deadline = time.monotonic() + 10
    while srv.get("/v1/pages/cases/c10b.md").json().get("links") in (None, []):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    q = page(srv, "cases/c10b.md")
    assert q["links"][0]["status"] == "resolved" and q["links"][0]["fragment_found"] is False
    assert [d["kind"] for d in q["diagnostics"]] == ["missing_fragment"]


def test_c11_code_is_not_linked_but_searchable(srv):
    p = page(srv, "cases/C11.md")
    assert {lk["target"] for lk in p["links"]} == {"Release Process"}
    assert "cases/C11.md" in found(srv, "servers.backup")


def wait_links(srv: AppServer, rel: str, ok: Any, timeout: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        p = page(srv, rel)
        if ok(p):
            return p
        assert time.monotonic() < deadline, p["links"]
        time.sleep(0.05)


def test_c13_forward_links_resolve_through_the_api_and_on_disk(srv):
    p = page(srv, "cases/source.md")
    assert [(lk["target"], lk["status"], lk["path"]) for lk in p["links"]] == [
        ("Target Not Yet Written", "unresolved", None),
        ("summary (billing-pipeline)", "unresolved", None),
    ]
    rec = srv.post("/v1/recall", {"query": "relates_to", "budget_tokens": 2000}).json()
    assert any("[[Target Not Yet Written]]" in i["snippet"] for i in rec["items"])
    # step 2: created through the HTTP write
    r = http(srv).put(
        f"{srv.url}/v1/pages/notes/Target Not Yet Written.md",
        content=b"# Target Not Yet Written\n",
        headers={**srv.headers, "Content-Type": "text/markdown"},
        timeout=30,
    )
    assert r.status_code in (200, 201), r.text
    p = wait_links(srv, "cases/source.md", lambda p: p["links"][0]["status"] == "resolved")
    assert p["links"][0]["path"] == "notes/Target Not Yet Written.md"
    assert p["links"][1]["status"] == "unresolved"  # never the fuzzy Billing Pipeline Summary
    back = page(srv, "notes/Target Not Yet Written.md")["backlinks"]
    assert [(b["path"], b["title"]) for b in back] == [("cases/source.md", "Source note")]
    # step 3: a page on disk, as a person writes it
    wiki = srv.data_dir / "wiki"
    (wiki / "cases" / "source2.md").write_text("---\ntitle: Source two\n---\n[[Written On Disk]]\n")
    wait_links(
        srv, "cases/source2.md", lambda p: p["links"] and p["links"][0]["status"] == "unresolved"
    )
    (wiki / "Written On Disk.md").write_text("# Written On Disk\n")
    p = wait_links(srv, "cases/source2.md", lambda p: p["links"][0]["status"] == "resolved")
    assert p["links"][0]["path"] == "Written On Disk.md"
    assert [b["path"] for b in page(srv, "Written On Disk.md")["backlinks"]] == ["cases/source2.md"]


# --------------------------------------------------------------------------- C21


def hold_index_lock(wiki: Path, seconds: float) -> subprocess.Popen[bytes]:
    """An external process that holds .git/index.lock as git does (O_CREAT|O_EXCL), then
    removes it."""
    code = (
        "import os,sys,time\n"
        "p=sys.argv[1]\n"
        "while True:\n"
        "    try:\n"
        "        fd=os.open(p,os.O_CREAT|os.O_EXCL|os.O_WRONLY); break\n"
        "    except FileExistsError: time.sleep(0.01)\n"
        "print('held', flush=True)\n"
        "time.sleep(float(sys.argv[2])); os.close(fd); os.unlink(p)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(wiki / ".git" / "index.lock"), str(seconds)],
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"held"
    return proc


@pytest.mark.process
@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary")
def test_c21_concurrent_puts_and_an_observation_while_git_holds_the_index_lock(tmp_path):
    data = tmp_path / "data"
    wiki = data / "wiki"
    (wiki / "notes").mkdir(parents=True)
    (wiki / "notes" / "alpha.md").write_text("---\ntitle: Alpha\n---\nAlpha body v1\n")
    (wiki / "notes" / "beta.md").write_text("---\ntitle: Beta\n---\nBeta body v1\n")
    env = {
        "WIKI_MEMORY_IDLE_SECONDS": "1",
        "WIKI_MEMORY_IDLE_CHECK_SECONDS": "0.2",
        "WIKI_MEMORY_COMMIT_DELAY_SECONDS": "0.05",
        # a commit waits 1.5 s for another git's lock (5 s by default), a failed one is
        # tried again 0.5 s later (5 s): the lock below outlives the wait all the same
        "WIKI_MEMORY_GIT_LOCK_WAIT_SECONDS": "1.5",
        "WIKI_MEMORY_COMMIT_RETRY_SECONDS": "0.5",
    }
    with ServerProcess(data, env=env) as srv:

        def token(user: str) -> dict[str, str]:
            r = subprocess.run(
                [sys.executable, "-m", "wiki_memory.cli.main", "--data-dir", str(data), "token"]
                + ["create", "--user", user],
                capture_output=True,
                text=True,
                check=True,
            )
            return {"Authorization": f"Bearer {r.stdout.strip().splitlines()[0]}"}

        user_a, user_b = token("user-a"), token("user-b")
        v1 = {n: page_hash((wiki / "notes" / f"{n}.md").read_bytes()) for n in ("alpha", "beta")}
        results: dict[str, httpx.Response] = {}

        def put(name: str, headers: dict[str, str], text: str) -> None:
            results[name] = httpx.put(
                f"{srv.url}/v1/pages/notes/{name}.md",
                content=text.encode(),
                headers={**headers, "If-Match": f'"{v1[name]}"', "Content-Type": "text/markdown"},
                timeout=60,
            )

        def observe() -> None:
            results["obs"] = httpx.post(
                f"{srv.url}/v1/observations",
                json={
                    "harness": "claude-code",
                    "event": "PostToolUse",
                    "session_id": "sess-1",
                    "cwd": "/repo",
                    "payload": {
                        "hook_event_name": "PostToolUse",
                        "tool_name": "Edit",
                        "tool_input": {"file_path": "/repo/app.py"},
                        "tool_response": {"success": True},
                    },
                },
                headers=user_a,
                timeout=60,
            )

        lock = hold_index_lock(wiki, 0.3)
        threads = [
            threading.Thread(
                target=put, args=("alpha", user_a, "---\ntitle: Alpha\n---\nAlpha body v2\n")
            ),
            threading.Thread(
                target=put, args=("beta", user_b, "---\ntitle: Beta\n---\nBeta body v2\n")
            ),
            threading.Thread(target=observe),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert lock.wait(10) == 0
        for name, r in results.items():
            assert 200 <= r.status_code < 300, (name, r.status_code, r.text)
            assert "index.lock" not in r.text and "remove the file" not in r.text

        def head_has_all() -> bool:
            files = subprocess.run(
                ["git", "ls-tree", "-r", "--name-only", "HEAD"],
                cwd=wiki,
                capture_output=True,
                text=True,
            ).stdout.split()

            def show(p: str) -> str:
                return subprocess.run(
                    ["git", "show", f"HEAD:{p}"], cwd=wiki, capture_output=True, text=True
                ).stdout

            sessions = [f for f in files if "/sessions/" in f]
            return (
                "Alpha body v2" in show("notes/alpha.md")
                and "Beta body v2" in show("notes/beta.md")
                and any("app.py" in show(f) for f in sessions)
            )

        deadline = time.monotonic() + 30
        while not head_has_all():
            assert time.monotonic() < deadline, "HEAD does not hold all three changes"
            time.sleep(0.2)
        authors = {
            line.split("|")[1]: line.split("|")[0]
            for line in subprocess.run(
                ["git", "log", "--format=%an|%s"], cwd=wiki, capture_output=True, text=True
            ).stdout.splitlines()
        }
        assert authors["Write notes/alpha.md"] == "user-a"
        assert authors["Write notes/beta.md"] == "user-b"
        assert any(
            a == "user-a" and s.startswith(("Add session", "Session ")) for s, a in authors.items()
        )
        assert subprocess.run(["git", "fsck"], cwd=wiki, capture_output=True).returncode == 0

        # a lock that outlives the wait: the write is accepted (it is on disk), the commit
        # waits, the lock is never deleted by the server, and nothing names it to anyone
        lock = hold_index_lock(wiki, 3.5)
        r = httpx.put(
            f"{srv.url}/v1/pages/notes/gamma.md",
            content=b"# Gamma\n",
            headers={**user_b, "Content-Type": "text/markdown"},
            timeout=60,
        )
        assert r.status_code in (201, 503), r.text
        if r.status_code == 503:
            assert int(r.headers["Retry-After"]) > 0
        time.sleep(2.0)  # past the 1.5 s lock wait
        assert (wiki / ".git" / "index.lock").exists()  # still the external process's
        assert lock.wait(10) == 0
        deadline = time.monotonic() + 30
        while (
            "notes/gamma.md"
            not in subprocess.run(
                ["git", "ls-tree", "-r", "--name-only", "HEAD"],
                cwd=wiki,
                capture_output=True,
                text=True,
            ).stdout
        ):
            assert time.monotonic() < deadline, "gamma was never committed"
            time.sleep(0.2)
    logs = "".join(p.read_text(errors="replace") for p in (data / "logs").glob("*.log"))
    logs += srv.stderr()
    assert "index.lock" not in logs and "remove the file manually" not in logs


# --------------------------------------------------------------------------- C23, C27


def mcp_call(memory: Memory, name: str, args: dict[str, Any]) -> Any:
    from mcp import Client

    from wiki_memory.mcp.tools import build_server

    async def main() -> Any:
        async with Client(build_server(memory)) as c:
            return await c.call_tool(name, args)

    res = asyncio.run(main())
    assert not res.is_error, res
    return res.structured_content


C23_TITLES = ["Café résumé", "会议记录 第三周", "Ünïcödé – notes", "ملاحظات"]


@pytest.mark.process
@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary")
def test_c23_unicode_titles_give_nfc_names_readable_history_and_search(mem, tmp_path):
    (mem.wiki_dir / "projects" / "u").mkdir(parents=True, exist_ok=True)  # a known project
    paths = []
    for t in C23_TITLES:
        sc = mcp_call(
            mem, "memory_remember", {"text": f"notes for {t}", "project": "u", "title": t}
        )
        paths.append(sc["path"])
    for p in paths:
        cur = mem.read_page(p)
        mcp_call(
            mem,
            "page_write",
            {"path": p, "text": cur["content"] + "\nedited once\n", "expected_hash": cur["hash"]},
        )
    mem.writer.flush()
    notes = mem.wiki_dir / "projects" / "u" / "notes"
    on_disk = sorted(os.listdir(notes))
    assert all(unicodedata.is_normalized("NFC", n) for n in on_disk)
    assert sorted(p.rsplit("/", 1)[1] for p in paths) == on_disk
    for p, t in zip(paths, C23_TITLES, strict=True):
        assert p.rsplit("/", 1)[1] == unicodedata.normalize("NFC", t) + ".md"
        log = mem.git.log(p)
        assert len(log) == 2 and all(p in c.paths for c in log)
        diff = mem.git.diff(p, log[0].sha)
        assert f"a/{p}" in diff and "\\x" not in diff and "edited once" in diff
        assert {b.line for b in mem.git.blame(p)} >= {"edited once"}
        assert p in {i["path"] for i in mem.recall(t, budget_tokens=4000).items}
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(mem.wiki_dir), str(clone)], check=True)
    listed = subprocess.run(
        ["git", "-c", "core.quotePath=false", "ls-files", "projects/u/notes"],
        cwd=clone,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    assert sorted(x for x in listed if x) == sorted(paths)
    assert sorted(os.listdir(clone / "projects" / "u" / "notes")) == on_disk


C27_TITLES = [
    "Sync On/Off Toggle",
    "Q&A: what ships next?",
    "CON",
    "a<b>c|d*e",
    "  trailing dots...  ",
    "Sync On/Off Toggle",
]


def test_c27_titles_give_portable_names_and_title_links_resolve(mem):
    (mem.wiki_dir / "projects" / "p").mkdir(parents=True, exist_ok=True)  # a known project
    from wiki_memory.wiki.names import is_portable

    paths = []
    for i, t in enumerate(C27_TITLES):  # the repeated title with another text (C56: an
        # equal text is the same memory)
        text = f"about {t.strip()}" + (f" ({i})" if i else "")
        sc = mcp_call(mem, "memory_remember", {"text": text, "project": "p", "title": t})
        paths.append(sc["path"])
    first, repeat = paths[0], paths[5]
    assert len(set(paths)) == 6 and first != repeat  # the repeat never overwrote the first
    assert "about Sync On/Off Toggle" in (mem.wiki_dir / first).read_text()
    for p, t in zip(paths, C27_TITLES, strict=True):
        folder, name = p.rsplit("/", 1)
        assert folder == "projects/p/notes"
        assert is_portable(name), name
        assert (mem.wiki_dir / p).is_file()  # the returned path is the file
        assert mem.read_page(p)["metadata"]["title"] == t  # the title exactly as given
    # links by title, from another page, resolve (the repeat is a copy, not ambiguity)
    mem.write_page(
        "projects/p/notes/links.md",
        b"See [[Sync On/Off Toggle]] and [[Q&A: what ships next?]].\n",
        user="alice",
        message="links",
    )
    links = mem.read_page("projects/p/notes/links.md")["links"]
    assert [(lk["status"], lk["path"]) for lk in links] == [
        ("resolved", first),
        ("resolved", paths[1]),
    ]
