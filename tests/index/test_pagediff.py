"""A page indexed again writes only its changed sections (index/pagediff.py): the rows
must be those an index built from the last version alone holds, and searches must
answer the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from wiki_memory.index.store import Index

PATH = "projects/p/sessions/2026-01-01-abcd1234.md"


def version(entries: list[str], *, title: str = "Fix the parser", files: int = 1) -> bytes:
    front = ["---", "type: session", f"title: {title}", "project: p", "files:"]
    front += [f"- f{i}.py" for i in range(files)]
    body = [f"# {title}", "", "## Summary", "", f"- **Last reply:** {entries[-1]}", ""]
    body += ["## Timeline", ""]
    for n, text in enumerate(entries, start=1):
        body += [f"**10:00:{n:02d}** · prompt", "", text, "", f"^t{n}", ""]
    return ("\n".join(front + ["---"] + body)).encode()


def table(ix: Index) -> list[tuple[object, ...]]:
    conn = ix._conn()  # noqa: SLF001 - the rows themselves are what is compared
    cols = "path, anchor, heading, ord, line, hash, text, project, kind, day, t0, t1"
    secs = list(conn.execute(f"SELECT {cols} FROM sections ORDER BY path, ord"))
    apart = list(
        conn.execute(
            "SELECT s.path, s.anchor FROM sections_apart a JOIN sections s "
            "ON s.rowid = a.rowid ORDER BY 1, 2"
        )
    )
    pages = list(conn.execute("SELECT * FROM pages ORDER BY path"))
    names = list(conn.execute("SELECT key, path, source FROM names ORDER BY 1, 2, 3"))
    links = list(conn.execute("SELECT src_path, target, fragment, status FROM links ORDER BY 1, 2"))
    return [*secs, ("apart", *apart), *pages, *names, *links]


def rowid_of(ix: Index, anchor: str) -> int:
    conn = ix._conn()  # noqa: SLF001
    row = conn.execute("SELECT rowid FROM sections WHERE path = ? AND anchor = ?", (PATH, anchor))
    return int(row.fetchone()[0])


def found(ix: Index, q: str) -> list[tuple[str, str]]:
    return sorted((h.path, h.anchor) for h in ix.query(q))


@pytest.mark.fast
def test_a_page_indexed_section_by_section_equals_one_indexed_once(tmp_path: Path) -> None:
    entries = [f"entry {n} about the lexer and the tokens" for n in range(1, 40)]
    steps = [
        version(entries[:10]),
        version(entries[:13]),  # three entries added, the summary changed
        version(entries[:13], files=4),  # every line moved down three
        version([*entries[:5], "entry six rewritten: a wombat", *entries[6:14]]),
        version(entries[1:14]),  # the first entry gone: every anchor after it renumbered
        version(entries[1:14], title="A new title"),  # on every full-text row: all again
        version([*entries[1:14], "see [[other]] and #tagged"]),
    ]
    inc = Index(tmp_path / "inc.db")
    inc.upsert_page("projects/p/notes/other.md", b"# other\n\nthe lexer\n")
    kept = []
    for raw in steps:
        assert inc.upsert_page(PATH, raw)
        kept.append(rowid_of(inc, "^t5"))
    # an entry that did not change keeps its row (its full-text row is not written again)
    # until the title changed, which every full-text row carries
    assert kept[0] == kept[1] == kept[2] == kept[3] and kept[5] != kept[4]
    full = Index(tmp_path / "full.db")
    full.upsert_page("projects/p/notes/other.md", b"# other\n\nthe lexer\n")
    full.upsert_page(PATH, steps[-1])
    assert table(inc) == table(full)
    assert inc.rows() == full.rows()
    for q in ("lexer", "wombat", "tokens entry", "tagged", "new title"):
        assert found(inc, q) == found(full, q), q
    assert found(inc, "wombat") == []  # the rewritten entry went with its version
    inc.close()
    full.close()


@pytest.mark.fast
def test_repeated_anchors_and_a_personal_page_are_indexed_whole(tmp_path: Path) -> None:
    twice = version(["one", "two"]).replace(b"^t2", b"^t1")
    personal = "people/ann/sessions/2026-01-01-abcd1234.md"
    inc = Index(tmp_path / "inc.db")
    full = Index(tmp_path / "full.db")
    for path in (PATH, personal):
        for raw in (version(["one"]), twice, version(["one", "two", "three"])):
            inc.upsert_page(path, raw)
        full.upsert_page(path, version(["one", "two", "three"]))
    assert table(inc) == table(full)
    inc.upsert_page(PATH, twice)
    full2 = Index(tmp_path / "full2.db")
    full2.upsert_page(personal, version(["one", "two", "three"]))
    full2.upsert_page(PATH, twice)
    assert table(inc) == table(full2)
    for ix in (inc, full, full2):
        ix.close()
