"""A recall's filters are written once, in its RecallQuery: the ranking takes the query
(filters given beside it as keywords are refused, never ignored), and the query's
filters are the SQL scope every signal joins plus ``as_of``, so a filter narrows the
ranking exactly as the scope's SQL does."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import as_user, make_memory

from wiki_memory.index.signals import Scope
from wiki_memory.recall import rank
from wiki_memory.recall.filters import FilterError
from wiki_memory.recall.query import RecallQuery

pytestmark = pytest.mark.fast

FILES = {
    "projects/a/notes/one.md": "---\ntags: [ops]\n---\n# One\n\nthe zqxokapi gateway\n",
    "projects/a/notes/two.md": "# Two\n\nthe zqxokapi gateway again\n",
    "projects/b/notes/three.md": "---\ntags: [ops]\n---\n# Three\n\nzqxokapi elsewhere\n",
}


def test_the_ranking_takes_the_query_and_refuses_filters_beside_it(tmp_path: Path) -> None:
    m = make_memory(tmp_path / "data", files=FILES)
    try:
        alice = as_user(m, "alice")
        q = RecallQuery("zqxokapi", project="a", tags=["ops"])
        found = rank.ranked(m._sources, q, who=alice)
        assert [found.item(i)["path"] for i in range(len(found))] == ["projects/a/notes/one.md"]
        items = rank.candidates(m._sources, q, who=alice)
        assert [i["path"] for i in items] == ["projects/a/notes/one.md"]
        with pytest.raises(TypeError):
            rank.ranked(m._sources, "zqxokapi", project="a")  # type: ignore[call-arg]
        with pytest.raises(TypeError):
            rank.candidates(m._sources, "zqxokapi", tags=["ops"])  # type: ignore[call-arg]
    finally:
        m.stop()


def test_a_querys_filters_are_its_sql_scope_plus_as_of() -> None:
    q = RecallQuery(
        "x", project="a", kinds="note", tags=["#ops", ""], since="2025", until="2025-06"
    )
    f = q.filters(None)
    same = Scope(
        project="a", kinds=("note",), tags=("ops",), since=f.since, until=f.until, who=None
    )
    assert isinstance(f, Scope) and f.where("p") == same.where("p")
    assert f.as_of is None and f.since is not None and f.until is not None
    assert RecallQuery("x", as_of="2025-01-01").filters(None).as_of is not None
    with pytest.raises(FilterError) as e:
        RecallQuery("x", kinds=[]).filters(None)
    assert e.value.field == "kinds"
