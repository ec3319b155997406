"""The near-duplicate filter reads each section's words as the index stored them
(``sections.words`` / ``nums``, docs/index.md "Near-duplicate words"): a reply must be the
one the words worked out from the text give (items, order, groups, ``omitted``,
``total``, cursors), and an index of the schema before them gains them in place."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import as_user, make_memory

from wiki_memory.core.memory import Memory
from wiki_memory.index import sectionwords
from wiki_memory.index.sectionwords import columns, content_text
from wiki_memory.index.store import Index
from wiki_memory.recall.dedup import numbers, tokens

pytestmark = pytest.mark.fast

DUP = "Run make ship to deploy the okapi service; never push to prod by hand."
FILES = {
    **{f"notes/d{i}.md": f"# Deploy {i}\n\n{DUP}{' Really.' if i % 2 else ''}\n" for i in range(4)},
    "notes/staging.md": f"# Staging\n\n{DUP.replace('prod', 'staging')}\n",
    "notes/v2.md": f"# Version\n\n{DUP} Since v2 of 2024-03-01.\n",
    "notes/code.md": "# Code\n\n```sh\nmake ship\n```\n\nDeploy the okapi service with make ship.\n",
    "notes/cjk.md": "# 部署\n\n部署 okapi 服务 make ship deploy\n",
    "notes/bare.md": "# Okapi deploy\n\n## Okapi deploy steps\n\n## Other\n\nThe okapi logs.\n",
    "sessions/s1.md": (
        "---\ntype: session\n---\n# Session\n\n**09:01:39** · user\n"
        f"{DUP} ^t1\n\n**09:02:10** · assistant\nDeploy the okapi service by hand. ^t2\n"
    ),
}
QUERIES = ["okapi deploy", "make ship", "deploy okapi prod", "部署", "okapi"]


def _walk(m: Memory, query: str, budget: int) -> list[dict[str, Any]]:
    pages: list[dict[str, Any]] = []
    cursor: int | None = 0
    while cursor is not None:
        res = m.recall(query, budget_tokens=budget, cursor=cursor, user=as_user(m, "alice"))
        got = res.to_json()
        got.pop("took_ms", None)
        pages.append(got)
        cursor = res.next_cursor
    return pages


def _replies(m: Memory) -> list[list[dict[str, Any]]]:
    return [_walk(m, q, b) for q in QUERIES for b in (80, 100_000)]


def _rows(db: Path) -> list[tuple[Any, ...]]:
    conn = apsw.Connection(str(db))
    try:
        return list(conn.execute("SELECT rowid, text, heading, words, nums FROM sections"))
    finally:
        conn.close()


def test_the_stored_words_are_those_of_the_text(tmp_path: Path) -> None:
    """Each section's stored words and numbers are the set the filter compares and its
    numbers, however they were written (timeline heads, fences, CJK, versions, dates)."""
    m = make_memory(tmp_path / "data", files=FILES)
    db = m.settings.index_path
    m.stop()
    rows = _rows(db)
    assert len(rows) >= len(FILES)
    for _rid, text, heading, words, nums in rows:
        assert words is not None and nums is not None
        toks = frozenset(words.split())
        assert len(toks) == len(words.split())  # each word once
        assert toks == tokens(content_text(text or "", heading or ""))
        assert nums == " ".join(sorted(numbers(toks)))
        assert (words, nums) == columns(text or "", heading or "")


def test_replies_read_from_stored_words_equal_those_from_the_text(tmp_path: Path) -> None:
    """The same replies, page by page through the cursors, whether the filter reads the
    stored words or works them out from each match's text (the columns emptied)."""
    m = make_memory(tmp_path / "data", files=FILES)
    db = m.settings.index_path
    try:
        stored = _replies(m)
    finally:
        m.stop()
    assert any(i.get("collapsed") for walk in stored for p in walk for i in p["items"])
    conn = apsw.Connection(str(db))
    conn.execute("UPDATE sections SET words = NULL, nums = NULL")
    conn.close()
    m = make_memory(tmp_path / "data")
    try:
        assert _replies(m) == stored
    finally:
        m.stop()
    assert all(r[3] is None for r in _rows(db))  # the text's words were worked out


def test_an_index_without_the_words_gains_them_in_place(tmp_path: Path) -> None:
    """An index of schema 15 (no ``words``/``nums``) is not rebuilt at open: the columns
    are added and filled from the stored text, equal to what indexing writes."""
    m = make_memory(tmp_path / "data", files=FILES)
    db = m.settings.index_path
    before = _replies(m)
    m.stop()
    want = _rows(db)
    conn = apsw.Connection(str(db))
    conn.execute("ALTER TABLE sections DROP COLUMN words")
    conn.execute("ALTER TABLE sections DROP COLUMN nums")
    conn.pragma("user_version", 15)
    conn.close()
    ix = Index(db)
    assert not ix.needs_rebuild
    ix.close()
    assert _rows(db) == want
    m = make_memory(tmp_path / "data")
    try:
        assert _replies(m) == before
    finally:
        m.stop()


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=200))
@settings(max_examples=300, deadline=None)
def test_ascii_words_split_as_the_regex_finds_them(text: str) -> None:
    # the ASCII path (one translate and split) gives the words, in order, that the
    # general path's regex gives: runs of letters and digits, lowercased
    assert sectionwords.words(text) == [w.lower() for w in re.findall(r"[^\W_]+", text)]
    fenced = f"intro\n```sh\n{text}\n```\n~~~\nx\n~~~\nend"
    assert content_text(fenced, "h") == re.sub(
        r"^[ \t]*(?:~{3,}|`{3,})[^\n]*$", "", fenced, flags=re.M
    )
