"""Every match of a wide recall search, ranked in Python, is the list the full SQL gives:
the same sections, scores and order (ties by path, then page order), both rankings."""

from __future__ import annotations

from pathlib import Path

import pytest

from wiki_memory.index.signals import (
    FIRST_MAX,
    Scope,
    search_sections,
    search_sections_both,
)
from wiki_memory.index.store import Index

pytestmark = pytest.mark.fast


def _page(wiki: Path, rel: str, text: str, **meta: str) -> None:
    path = wiki / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    front = "".join(f"{k}: {v}\n" for k, v in meta.items())
    path.write_text(f"---\n{front}---\n{text}\n", encoding="utf-8")


@pytest.fixture
def index(tmp_path: Path):
    wiki = tmp_path / "wiki"
    for i in range(12):
        # equal sections on several pages (ties), words in the title only on some
        # (fields list, not the own-text list), a forgotten page (left out)
        body = "## Part\n\nkestrel plover\n\n## Other\n\nplover kestrel\n"
        _page(wiki, f"notes/p{i % 4}-{i}.md", body, title=f"Page {i}", type="note")
        _page(wiki, f"notes/t{i}.md", "nothing here", title=f"Kestrel {i}", type="note")
    _page(wiki, "notes/gone.md", "kestrel", title="Gone", type="note", state="forgotten")
    _page(wiki, "notes/ü.md", "kestrel plover", title="Umlaut", type="note")
    ix = Index(tmp_path / "index.db")
    ix.sync_paths(wiki, [""])
    yield ix
    ix.close()


def _rows(hits: list) -> list[tuple[str, str, int, float]]:
    return [(h.path, h.anchor, h.ord, h.score) for h in hits]


@pytest.mark.parametrize("limit", [FIRST_MAX, 10**12])
def test_every_match_is_the_full_queries_list(index: Index, limit: int) -> None:
    scope = Scope()
    match = '"kestrel" OR "plover"'
    body, alls = search_sections_both(index, match, scope, limit)
    body_sql, alls_sql = search_sections_both(index, match, scope, limit, plain=True)
    assert body == body_sql and alls == alls_sql
    assert _rows(body) == _rows(body_sql) and _rows(alls) == _rows(alls_sql)
    assert len(alls) > len(body) > 0  # title-only matches are in the fields list only
    assert "notes/gone.md" not in {h.path for h in alls}
    one = search_sections(index, match, scope, limit)
    assert _rows(one) == _rows(search_sections(index, match, scope, limit, plain=True))
