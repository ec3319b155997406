"""While the index is rebuilt in the background, recall answers from a scan of the page
files marked ``complete: false`` (never 503, never a short 200 that claims to be whole),
through the one scope rule, the same on HTTP, MCP and the web; once the rebuild is done
answers are complete again and equal a fresh reindex's."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import as_user, make_memory, wait_for
from test_index_damage import QUERIES, WORDS, answers, fresh, wiki_files

from wiki_memory.core.memory import Memory
from wiki_memory.core.scanrecall import INCOMPLETE
from wiki_memory.index.search import SearchError
from wiki_memory.index.store import Index

pytestmark = pytest.mark.fast

SECRET = "zorblax"  # a word only pages alice may not read hold
PRIVATE = {
    "people/bob/profile.md": f"# Bob\n\n{SECRET} {WORDS[0]}\n",
    "projects/p/notes/bobs.md": (
        f"---\nvisibility: personal\nuser: bob\n---\n# Bob's note\n\n{SECRET} {WORDS[0]}\n"
    ),
    "projects/p/notes/gone.md": (
        f"---\nstate: forgotten\nforgotten_by: alice\n---\n# Gone\n\n{SECRET} {WORDS[0]}\n"
    ),
}


def holding(files: dict[str, str], word: str) -> set[str]:
    return {p for p, t in files.items() if word in t.split()}


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Rebuilds at start run in the background (the fixture's 200 pages count as a large
    wiki) and wait until the test sets the event."""
    monkeypatch.setenv("WIKI_MEMORY_REBUILD_BACKGROUND_PAGES", "50")
    gate = threading.Event()
    real = Index.rebuild

    def slow(self: Index, *a: Any, **kw: Any) -> int:
        gate.wait(30)
        return real(self, *a, **kw)

    monkeypatch.setattr(Index, "rebuild", slow)
    yield gate
    gate.set()


def built(data: Path, files: dict[str, str], held: threading.Event) -> None:
    """A data directory over ``files`` whose index was built, then deleted while no
    server ran."""
    held.set()
    m = make_memory(data, files=files)
    wait_for(lambda: m.index.damaged is None, timeout=60)
    m.stop()
    held.clear()
    (data / "index.db").unlink()


@pytest.fixture
def rebuilding(tmp_path: Path, held: threading.Event) -> Iterator[tuple[Memory, dict[str, str]]]:
    """A Memory whose index was deleted while it was stopped: it starts at once and
    rebuilds in the background (held until the test lets it go)."""
    files = {**wiki_files(), **PRIVATE}
    data = tmp_path / "data"
    built(data, files, held)
    m = make_memory(data)
    assert m.index.damaged is not None, "the rebuild runs in the background"
    try:
        yield m, files
    finally:
        held.set()
        m.stop()


def test_recall_meanwhile_answers_every_matching_page_marked_incomplete(
    rebuilding: tuple[Memory, dict[str, str]], held: threading.Event, tmp_path: Path
) -> None:
    m, files = rebuilding
    for q in WORDS[::21]:
        want = holding(wiki_files(), q)
        r = m.recall(q, user=as_user(m, "alice"), budget_tokens=100_000)
        assert r.complete is False
        assert r.total == len(want) > 0, q
        assert {i["path"] for i in r.items} == want
        assert r.to_json()["complete"] is False
    # paging by cursor returns every match once
    seen: list[str] = []
    cursor = 0
    while True:
        r = m.recall(WORDS[7], user=as_user(m, "alice"), budget_tokens=1500, cursor=cursor)
        seen += [i["path"] for i in r.items]
        if r.next_cursor is None:
            break
        cursor = r.next_cursor
    assert sorted(seen) == sorted(holding(wiki_files(), WORDS[7]))
    held.set()
    wait_for(lambda: m.index.damaged is None, timeout=60)
    after = answers(m)
    assert all(m.recall(q, user=as_user(m, "alice")).complete for q in QUERIES)
    assert after == fresh(m, tmp_path)


def test_the_scan_passes_the_scope_rule_and_leaves_forgotten_pages_out(
    rebuilding: tuple[Memory, dict[str, str]],
) -> None:
    m, _files = rebuilding
    r = m.recall(SECRET, user=as_user(m, "alice"))
    assert (r.total, r.items, r.complete) == (0, [], False)
    mine = m.recall(SECRET, user=as_user(m, "bob"))
    assert {i["path"] for i in mine.items} == {"people/bob/profile.md", "projects/p/notes/bobs.md"}
    paths = {
        i["path"] for i in m.recall(WORDS[0], user=as_user(m, "alice"), budget_tokens=100_000).items
    }
    assert not paths & set(PRIVATE)
    anonymous = m.recall(WORDS[0], user=None)
    assert anonymous.total == 0 or not {i["path"] for i in anonymous.items} & set(PRIVATE)


def test_filters_the_scan_cannot_apply_answer_503_not_a_wrong_list(
    rebuilding: tuple[Memory, dict[str, str]],
) -> None:
    m, _files = rebuilding
    for kw in ({"tags": ["x"]}, {"since": "2020-01-01"}, {"until": "2020-01-01"}):
        with pytest.raises(SearchError) as err:
            m.recall(WORDS[0], user=as_user(m, "alice"), **kw)
        assert err.value.headers.get("Retry-After")
    # the filters it can apply: project and kinds
    assert m.recall(WORDS[0], user=as_user(m, "alice"), project="other").total == 0
    assert m.recall(WORDS[0], user=as_user(m, "alice"), kinds=["session"]).total == 0
    assert m.recall(WORDS[0], user=as_user(m, "alice"), kinds=["page"]).total > 0


def test_a_query_with_no_match_meanwhile_is_incomplete_not_a_claim_of_none(
    rebuilding: tuple[Memory, dict[str, str]],
) -> None:
    m, _files = rebuilding
    r = m.recall("nothingmatchesthis", user=as_user(m, "alice"))
    assert (r.total, r.complete) == (0, False)


def test_http_and_mcp_say_incomplete_alike(tmp_path: Path, held: threading.Event) -> None:
    from appkit import AppServer
    from mcp import Client

    from wiki_memory.mcp.tools import build_server

    data = tmp_path / "data"
    built(data, wiki_files(), held)
    srv = AppServer(data).start()
    try:
        r = srv.post("/v1/recall", {"query": WORDS[0], "budget_tokens": 100_000})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["complete"] is False and body["total"] == len(holding(wiki_files(), WORDS[0]))

        async def call() -> Any:
            async with Client(build_server(srv.memory)) as c:  # type: ignore[arg-type]
                return await c.call_tool(
                    "memory_recall", {"query": WORDS[0], "budget_tokens": 4000}
                )

        res = asyncio.run(call())
        assert res.structured_content["complete"] is False
        assert res.structured_content["total"] == body["total"]
        text = "\n".join(c.text for c in res.content if c.type == "text")
        assert INCOMPLETE in text
        held.set()
        assert srv.memory is not None
        wait_for(lambda: srv.memory.index.damaged is None, timeout=60)  # type: ignore[union-attr]
        done = srv.post("/v1/recall", {"query": WORDS[0], "budget_tokens": 100_000}).json()
        assert done["complete"] is True and done["total"] >= body["total"]
        res = asyncio.run(call())
        assert res.structured_content["complete"] is True
        assert INCOMPLETE not in "\n".join(c.text for c in res.content if c.type == "text")
    finally:
        held.set()
        srv.stop()


def test_the_scan_leaves_out_excluded_folders_and_other_frontmatter_keys(
    rebuilding: tuple[Memory, dict[str, str]],
) -> None:
    from wiki_memory.recall.query import RecallQuery

    m, _files = rebuilding
    assert (
        m.recall(
            RecallQuery(WORDS[0], exclude_dirs=["projects/p/notes"]), user=as_user(m, "alice")
        ).total
        == 0
    )
    # "forgotten_by: alice" and "user: bob" are frontmatter, not text a page holds
    assert m.recall("forgotten_by", user=as_user(m, "alice")).total == 0
    assert m.recall("Bob's note", user=as_user(m, "bob")).total >= 1  # its title and text are
