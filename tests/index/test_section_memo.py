"""A page indexed again derives the words of its new sections only: a session page that
grows by a turn at each Stop is not worked out section by section again
(wiki_memory/index/sectionmemo.py), and what the index holds is what a fresh index of the
same bytes holds."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from wiki_memory.index import sectionmemo, sectionrows
from wiki_memory.index.store import Index


def session_page(turns: int) -> bytes:
    entries = "\n\n".join(
        f"### Turn {n}\n\nprompt {n}: fix the parser yesterday, then 3 days ago the lexer\n\n^t{n}"
        for n in range(1, turns + 1)
    )
    return (
        f"---\ntype: session\ntitle: long\nstarted: 2026-12-01T10:00:00Z\n---\n# long\n\n"
        f"## Summary\n\n- turns: {turns}\n\n## Timeline\n\n{entries}\n"
    ).encode()


def rows(ix: Index, path: str) -> list[tuple[object, ...]]:
    return (
        ix._conn()
        .execute(  # type: ignore[no-any-return]
            "SELECT s.anchor, s.text, f.body, f.stems, f.dates FROM sections s "
            "JOIN fts f ON f.rowid = s.rowid WHERE s.path = ? ORDER BY s.ord",
            (path,),
        )
        .fetchall()
    )


def test_a_grown_page_derives_only_its_new_sections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sectionmemo.clear()
    calls: list[str] = []
    real = sectionrows.index_text_words

    me = threading.get_ident()

    def counted(text: str) -> tuple[str, list[str]]:
        if threading.get_ident() == me:  # another test's leftover thread is not this page
            calls.append(text)
        return real(text)

    monkeypatch.setattr(sectionrows, "index_text_words", counted)
    ix = Index(tmp_path / "index.db")
    try:
        path = "projects/p/sessions/2026-12-01-0123abcd.md"
        ix.upsert_page(path, session_page(200))
        first = len(calls)
        calls.clear()
        ix.upsert_page(path, session_page(201))
        # the new turn's sections and the summary that changed (heading and body of
        # each); the 200 turns before are not worked out again
        assert 0 < len(calls) <= 6 < first, (len(calls), first)
        grown = rows(ix, path)
    finally:
        ix.close()
    sectionmemo.clear()
    fresh = Index(tmp_path / "fresh.db")
    try:
        fresh.upsert_page(path, session_page(201))
        assert rows(fresh, path) == grown
    finally:
        fresh.close()
