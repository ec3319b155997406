"""The filters of a listing and of a search are declared once and passed on by the
index's methods: each filter still narrows the rows, its default still holds, and a
misspelt filter is still refused (TypeError) rather than ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

from wiki_memory.index.store import Index

pytestmark = pytest.mark.fast


def _page(wiki: Path, rel: str, body: str, **meta: str) -> None:
    path = wiki / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    front = "".join(f"{k}: {v}\n" for k, v in meta.items())
    path.write_text(f"---\n{front}---\n{body}\n", encoding="utf-8")


@pytest.fixture
def index(tmp_path: Path):
    wiki = tmp_path / "wiki"
    _page(wiki, "projects/a/notes/one.md", "zqxword one", type="note", updated="2026-01-02")
    _page(wiki, "projects/a/notes/two.md", "zqxword two", type="note", updated="2026-03-04")
    _page(wiki, "projects/b/s.md", "zqxword three", type="session", updated="2026-05-06")
    ix = Index(tmp_path / "index.db")
    ix.sync_paths(wiki, [""])
    yield ix
    ix.close()


def test_each_listing_filter_narrows_and_the_defaults_hold(index: Index) -> None:
    def paths(**kw: object) -> list[str]:
        return [r["path"] for r in index.list_pages(**kw)]  # type: ignore[arg-type]

    assert paths() == ["projects/b/s.md", "projects/a/notes/two.md", "projects/a/notes/one.md"]
    assert paths(project="a") == ["projects/a/notes/two.md", "projects/a/notes/one.md"]
    assert paths(kind="session") == ["projects/b/s.md"]
    assert paths(since="2026-03-01") == ["projects/b/s.md", "projects/a/notes/two.md"]
    assert paths(limit=1, offset=1) == ["projects/a/notes/two.md"]
    with pytest.raises(TypeError):
        index.list_pages(projct="a")  # type: ignore[call-arg]


def test_each_search_filter_narrows_and_the_defaults_hold(index: Index) -> None:
    def paths(**kw: object) -> list[str]:
        return sorted(h.path for h in index.query("zqxword", **kw))  # type: ignore[arg-type]

    assert len(paths()) == 3
    assert paths(project="a") == ["projects/a/notes/one.md", "projects/a/notes/two.md"]
    assert paths(kinds=["session"]) == ["projects/b/s.md"]
    assert paths(kinds=[]) == []
    assert paths(exclude_dirs=["projects/a"]) == ["projects/b/s.md"]
    assert len(paths(limit=1, mode="and")) == 1
    assert len(index.search('"zqxword"', project="b")) == 1
    with pytest.raises(TypeError):
        index.query("zqxword", projct="a")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        index.search('"zqxword"', projct="a")  # type: ignore[call-arg]


def test_each_spool_filter_narrows(index: Index) -> None:
    index.add_spool(
        [
            {
                "session_key": "k1",
                "obs_id": "1",
                "text": "zqxspool alpha",
                "project": "a",
                "user": "ann",
            },
            {
                "session_key": "k2",
                "obs_id": "1",
                "text": "zqxspool beta",
                "project": "b",
                "user": "bob",
            },
        ]
    )
    assert len(index.query_spool("zqxspool")) == 2
    assert [h.session_key for h in index.query_spool("zqxspool", project="a")] == ["k1"]
    assert [h.session_key for h in index.search_spool('"zqxspool"', user="bob")] == ["k2"]
    assert len(index.query_spool("zqxspool", limit=1)) == 1
    with pytest.raises(TypeError):
        index.search_spool('"zqxspool"', usr="bob")  # type: ignore[call-arg]
