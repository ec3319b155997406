"""Knowledge that stays true through the server (cases C54, C56; docs/knowledge.md):
the MCP tools over streamable HTTP with the official SDK client, against the app in this
process (``mcpkit``: the process is not the point here), each step waiting for its
commit. A port corrected twice (5432 → 6543 → 7001, each with ``supersedes``) with a
mention of the database in between, in English, Russian and Japanese: recall gives the
head first and the others after it, marked; the mention stays current; ``as_of`` (HTTP:
the MCP tool has no such parameter) gives each step's port; the brief names only the
head; the web search and page view agree. Broken supersessions made by hand are found
and named by doctor. Three equal remembers keep one file."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from appkit import AppServer, http
from clikit import run_cli_here
from dulwich.repo import Repo
from mcpkit import mcp_connect
from support import wait_for

# in process, but it waits for commits and the watcher, and steps a second at a time
pytestmark = pytest.mark.slow

#: per language: the project, the query, the mention's query, N1's title, N1..N4
FACTS = {
    "en": (
        "atlas",
        "staging database port",
        "billing cron",
        "Staging DB port",
        [
            "The staging database listens on port 5432.",
            "Staging DB port: moved to 6543 on 2026-03-02 (ticket OPS-311).",
            "The billing cron runs at 02:00 UTC and reads the staging database.",
            "Staging DB port is 7001 from 2026-04-10.",
        ],
    ),
    "ru": (
        "atlas-ru",
        "порт базы данных",
        "ночной отчёт",
        "Порт тестовой базы",
        [
            "Тестовая база данных слушает порт 5432.",
            "Порт тестовой базы данных перенесён на 6543 (заявка OPS-311).",
            "Ночной отчёт в 02:00 читает тестовую базу данных.",
            "Порт тестовой базы данных теперь 7001.",
        ],
    ),
    "ja": (
        "atlas-ja",
        "データベース ポート",
        "請求バッチ",
        "検証用データベースのポート",
        [
            "検証用データベースはポート5432で待ち受ける。",
            "検証用データベースのポートは6543に移った。",
            "請求バッチは毎晩検証用データベースを読む。",
            "検証用データベースのポートは7001になった。",
        ],
    ),
}
PORTS = ["5432", "6543", None, "7001"]


@asynccontextmanager
async def mcp(srv: Any) -> AsyncIterator[Any]:
    """The SDK client on ``srv``'s ``/mcp`` (an ``AppServer`` or a server process)."""
    async with mcp_connect(srv) as c:
        yield c


def text_of(res: Any) -> str:
    return "\n".join(c.text for c in res.content if c.type == "text")


def head_commit(wiki: Path) -> tuple[set[str], int]:
    """Paths in HEAD and its commit time."""
    repo = Repo(str(wiki))
    try:
        commit = repo[repo.head()]
        tree = repo[commit.tree]  # type: ignore[attr-defined]
        paths = {e.path.decode() for e in repo.object_store.iter_tree_contents(tree.id)}
        return paths, int(commit.commit_time)  # type: ignore[attr-defined]
    finally:
        repo.close()


def committed_at(wiki: Path, path: str) -> int:
    """Wait until ``path`` is in HEAD; HEAD's commit time."""
    wait_for(lambda: path in head_commit(wiki)[0], 30, f"{path} committed")
    return head_commit(wiki)[1]


def http_recall(srv: Any, query: str, project: str, **kw: Any) -> list[dict[str, Any]]:
    r = http(srv).post(
        srv.url + "/v1/recall",
        json={"query": query, "project": project, "budget_tokens": 4000, **kw},
        headers=srv.headers,
        timeout=60,
    )
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()["items"]
    return items


def login(srv: AppServer) -> Any:
    c = srv.new_client()
    r = c.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', r.text).group(1)  # type: ignore[union-attr]
    r = c.post(
        "/login",
        data={"csrf": csrf, "token": srv.token, "next": "/"},
        headers={"Origin": srv.url},
    )
    assert r.status_code in (200, 303), r.text
    return c


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Any:
    data = tmp_path_factory.mktemp("know") / "data"
    for project in ("atlas", "atlas-ru", "atlas-ja", "broken", "dedup"):
        (data / "wiki" / "projects" / project).mkdir(parents=True)
    s = AppServer(data, env={"WIKI_MEMORY_COMMIT_DELAY_SECONDS": "0.05"}).start()
    yield s
    s.stop()


def test_C54_corrections_through_mcp_in_three_languages(srv: AppServer) -> None:
    wiki = srv.data_dir / "wiki"
    paths: dict[str, list[str]] = {lang: [] for lang in FACTS}
    at: list[int] = []

    async def remember(c: Any, lang: str, step: int) -> None:
        project, _q, _m, title, texts = FACTS[lang]
        args: dict[str, Any] = {"text": texts[step], "project": project}
        if step == 0:
            args["title"] = title
        if step in (1, 3):  # N2 supersedes N1, N4 supersedes N2
            args["supersedes"] = [paths[lang][step - 1 if step == 1 else 1]]
        r = await c.call_tool("memory_remember", args)
        assert not r.is_error, text_of(r)
        out = r.structured_content
        assert "duplicate" not in out and "may_supersede" not in out, out
        paths[lang].append(out["path"])

    async def main() -> None:
        async with mcp(srv) as c:
            for step in range(4):
                for lang in FACTS:
                    await remember(c, lang, step)
                at.append(max(committed_at(wiki, paths[lang][step]) for lang in FACTS))
                time.sleep(1.1)  # commit times are whole seconds: one step per second
            for lang, (project, query, mention_q, _t, _x) in FACTS.items():
                n1, n2, n3, n4 = paths[lang]
                r = await c.call_tool(
                    "memory_recall", {"query": query, "project": project, "budget_tokens": 4000}
                )
                items = r.structured_content["items"]
                got = [i["path"] for i in items]
                assert got[0] == n4 and "7001" in items[0]["snippet"], (lang, got)
                assert "superseded_by" not in items[0]
                for old in (n1, n2):
                    assert old in got, (lang, old, got)
                    it = items[got.index(old)]
                    assert (it["state"], it["superseded_by"]) == ("superseded", n4), (lang, it)
                assert f"SUPERSEDED by {n4}" in text_of(r)
                m = await c.call_tool("memory_recall", {"query": mention_q, "project": project})
                first = m.structured_content["items"][0]
                assert first["path"] == n3 and "state" not in first, (lang, first)
                # expand marks the state
                e = await c.call_tool("memory_expand", {"ids": [items[got.index(n1)]["id"]]})
                assert e.structured_content["items"][0]["superseded_by"] == n4
                # as_of: what was current after each step
                for step, want in ((0, n1), (1, n2), (3, n4)):
                    hist = http_recall(srv, query, project, as_of=at[step])
                    assert hist[0]["path"] == want, (lang, step, [h["path"] for h in hist])
                    assert PORTS[step] in hist[0]["snippet"]
                    assert all(h["path"] in paths[lang][: step + 1] for h in hist if h["path"])
                # the brief: every version pinned, only the head named
                for p in (n1, n2, n4):
                    pin = http(srv).post(
                        srv.url + "/v1/admin/pin",
                        json={"path": p, "pinned": True},
                        headers=srv.headers,
                        timeout=30,
                    )
                    assert pin.status_code == 200, pin.text
                b = await c.call_tool("memory_brief", {"project": project, "budget_tokens": 3000})
                brief = b.structured_content["text"]
                assert "7001" in brief and "5432" not in brief and "6543" not in brief, brief

    asyncio.run(main())
    # the web search and the page view agree
    web = login(srv)
    for _lang, (project, query, _m, _t, _x) in FACTS.items():
        n1, n2, _n3, n4 = paths[_lang]
        page = web.get("/search", params={"q": query, "project": project})
        assert page.status_code == 200
        order = re.findall(r'class="result" data-path="([^"]+)"', page.text)
        assert order[0] == n4 and n1 in order and n2 in order, order
        assert page.text.count("superseded by") >= 2
        view = web.get("/page/" + n1)
        assert view.status_code == 200
        assert 'id="superseded-by"' in view.text and "Superseded by" in view.text


BROKEN = {
    "p1": "---\nstate: superseded\nsuperseded_by: notes/does-not-exist.md\n---\nkiwiword one\n",
    "p2": "---\nstate: superseded\nsuperseded_by: '[[p3]]'\n---\nkiwiword two\n",
    "p3": "---\nstate: superseded\nsuperseded_by: '[[p2]]'\n---\nkiwiword three\n",
    "p4": "---\nstate: superseded\nsuperseded_by: '[[p5]]'\n---\nkiwiword four\n",
    "p5": "---\nstate: forgotten\n---\nkiwiword five\n",
}


def test_C54_broken_supersessions_by_hand_are_found_and_named(srv: AppServer) -> None:
    folder = srv.data_dir / "wiki" / "projects" / "broken" / "notes"
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in BROKEN.items():
        (folder / f"{name}.md").write_text(text, encoding="utf-8")
    want = {f"projects/broken/notes/p{i}.md" for i in range(1, 5)}

    def found() -> set[str]:
        return {i["path"] for i in http_recall(srv, "kiwiword", "broken")}

    wait_for(lambda: found() == want, 30, "the four hand-edited pages found")

    async def main() -> None:
        async with mcp(srv) as c:
            r = await c.call_tool("memory_recall", {"query": "kiwiword", "project": "broken"})
            items = r.structured_content["items"]
            assert {i["path"] for i in items} == want
            assert not any("superseded_by" in i for i in items)

    asyncio.run(main())
    doc = run_cli_here(srv.data_dir, "doctor")
    assert "healthy" not in doc.stdout.splitlines()[-1], doc.stdout
    for name, why in (("p1", "missing"), ("p2", "cycle"), ("p3", "cycle"), ("p4", "forgotten")):
        line = f"projects/broken/notes/{name}.md"
        assert any(line in x and f"superseded_by_{why}" in x for x in doc.stdout.splitlines()), (
            name,
            doc.stdout,
        )


def test_C56_three_equal_remembers_keep_one_file(srv: AppServer) -> None:
    text = "Run `make ship` to deploy; never push to prod by hand."

    async def main() -> list[dict[str, Any]]:
        out = []
        async with mcp(srv) as c:
            for tags in (["deploy"], ["deploy"], ["ops"]):
                r = await c.call_tool(
                    "memory_remember", {"text": text, "project": "dedup", "tags": tags}
                )
                assert not r.is_error, text_of(r)
                out.append(r.structured_content)
            r = await c.call_tool(
                "memory_remember",
                {
                    "text": "To deploy, run make ship. Never push to prod by hand.",
                    "project": "dedup",
                },
            )
            out.append(r.structured_content)
        return out

    r1, r2, r3, r5 = asyncio.run(main())
    assert "duplicate" not in r1 and r2["duplicate"] and r3["duplicate"]
    assert r2["path"] == r3["path"] == r1["path"] and r3["id"] == r1["id"] and r3["count"] == 3
    assert r3["tags_added"] == ["ops"]
    assert r5["similar"] == [r1["path"]] and r5["path"] != r1["path"]
    wait_for(lambda: r5["path"] in head_commit(srv.data_dir / "wiki")[0], 30, "committed")
    notes = sorted(p.name for p in (srv.data_dir / "wiki/projects/dedup/notes").glob("*.md"))
    assert len(notes) == 2, notes
    # HTTP answers a duplicate 200 with the existing note, never a 201 with a new path
    h = http(srv).post(
        srv.url + "/v1/remember",
        json={"text": text + "  ", "project": "dedup"},
        headers=srv.headers,
        timeout=30,
    )
    assert h.status_code == 200 and h.json()["path"] == r1["path"] and h.json()["count"] == 4


def test_put_page_supersedes_over_http(srv: AppServer) -> None:
    old = "projects/dedup/notes/ttl.md"
    new = "projects/dedup/notes/ttl-now.md"
    r = http(srv).put(
        srv.url + "/v1/pages/" + old, content=b"The TTL is 60s.\n", headers=srv.headers
    )
    assert r.status_code == 201, r.text
    r = http(srv).put(
        srv.url + "/v1/pages/" + new,
        json={"text": "The TTL is 300s.\n", "supersedes": "ttl"},
        headers=srv.headers,
        timeout=30,
    )
    assert r.status_code == 201, r.text
    body = (srv.data_dir / "wiki" / old).read_text()
    assert "state: superseded" in body and f"superseded_by: {new}" in body
    assert "supersedes: " + old in (srv.data_dir / "wiki" / new).read_text()
    items = http_recall(srv, "TTL", "dedup")
    assert [i["path"] for i in items][:2] == [new, old] and items[1]["superseded_by"] == new
    # a target that names nothing: 404, and nothing written
    r = http(srv).put(
        srv.url + "/v1/pages/projects/dedup/notes/ttl-3.md",
        json={"text": "x\n", "supersedes": "no such page"},
        headers=srv.headers,
        timeout=30,
    )
    assert r.status_code == 404, r.text
    assert not (srv.data_dir / "wiki/projects/dedup/notes/ttl-3.md").exists()
