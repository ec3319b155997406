"""Dense vectors in the index (``wiki_memory.index.vectors``; docs/index.md, "Vectors"):
written at index time for every section and timeline entry, stored compactly, gone with
their page, rebuilt with the index, and a setting change rebuilds it. Tests that embed
skip without the ``vectors`` extra; the off path runs everywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from wiki_memory.index import vectors
from wiki_memory.index.store import Index

_extra = pytest.mark.skipif(
    not vectors.available(),
    reason="the vectors extra (wordllama) is not installed: pip install '.[vectors]'",
)


def needs_extra(test: Any) -> Any:
    """Skipped without the extra; ``slow`` with it (importing wordllama opens a socket,
    which the fast tier refuses)."""
    return pytest.mark.slow(_extra(test))


PAGE = (
    "---\ntitle: Trip\n---\n# Trip\n\nIntro line about the trip.\n\n## Plans\n\n"
    "We rode bicycles along the river.\n\n## Timeline\n\n"
    "**09:00:01** · prompt · Ann\nWhere did we leave the tent?\n^t1\n\n"
    "**09:00:02** · prompt · Bob\n^t2\n"
)


def counts(ix: Index, path: str | None = None) -> tuple[int, int]:
    """(vectors, sections) in the index, of ``path`` only when given."""
    conn = ix._conn()
    where, args = ("WHERE s.path = ?", (path,)) if path else ("", ())
    n_sec = conn.execute(f"SELECT count(*) FROM sections AS s {where}", args).fetchone()[0]
    n_vec = conn.execute(
        f"SELECT count(*) FROM vectors AS v JOIN sections AS s ON s.rowid = v.rowid {where}",
        args,
    ).fetchone()[0]
    return n_vec, n_sec


def total_vectors(ix: Index) -> int:
    return ix._conn().execute("SELECT count(*) FROM vectors").fetchone()[0]


@needs_extra
def test_vectors_are_written_at_index_time_and_go_with_their_page(tmp_path: Path):
    wiki = tmp_path / "wiki"
    (wiki / "notes").mkdir(parents=True)
    (wiki / "notes" / "trip.md").write_text(PAGE, encoding="utf-8")
    (wiki / "notes" / "other.md").write_text("# Other\n\nTomato soup.\n", encoding="utf-8")
    ix = Index(tmp_path / "index.db", vectors=True)
    assert ix.vectors_on
    ix.sync_paths(wiki, ["notes/trip.md", "notes/other.md"])
    n_vec, n_sec = counts(ix, "notes/trip.md")
    # every section with words has one; the bare head line of ^t2 has none
    assert n_sec >= 4 and n_vec == n_sec - 1
    blobs = [r[0] for r in ix._conn().execute("SELECT v FROM vectors")]
    assert {len(b) for b in blobs} == {vectors.ROW_BYTES}
    # a changed page's vectors are those of its new sections
    (wiki / "notes" / "trip.md").write_text(PAGE + "\n## More\n\nA canoe too.\n", "utf-8")
    ix.sync_paths(wiki, ["notes/trip.md"])
    n_vec2, n_sec2 = counts(ix, "notes/trip.md")
    assert (n_vec2, n_sec2) == (n_vec + 1, n_sec + 1)
    assert total_vectors(ix) == n_vec2 + counts(ix, "notes/other.md")[0]
    # the search sees the change at once (the in-memory matrix reloads)
    assert ix.dense("canoe paddling")[0].size == total_vectors(ix)
    # a deleted page's vectors go
    (wiki / "notes" / "trip.md").unlink()
    ix.sync_paths(wiki, ["notes/trip.md"])
    assert total_vectors(ix) == counts(ix, "notes/other.md")[0] == 1
    assert ix.dense("canoe paddling")[0].size == 1
    # a rebuild from the files gives the same vectors
    before = sorted(r[0] for r in ix._conn().execute("SELECT v FROM vectors"))
    ix.rebuild(wiki)
    assert sorted(r[0] for r in ix._conn().execute("SELECT v FROM vectors")) == before
    ix.close()


@needs_extra
def test_turning_vectors_on_or_off_marks_the_index_for_a_rebuild(tmp_path: Path):
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    (wiki / "trip.md").write_text(PAGE, encoding="utf-8")
    db = tmp_path / "index.db"
    plain = Index(db)
    plain.rebuild(wiki)
    assert total_vectors(plain) == 0
    plain.close()
    on = Index(db, vectors=True)
    assert on.needs_rebuild
    on.rebuild(wiki)
    assert not on.needs_rebuild and total_vectors(on) > 0
    on.close()
    again = Index(db, vectors=True)
    assert not again.needs_rebuild
    again.close()
    off = Index(db, vectors=False)
    assert off.needs_rebuild
    off.rebuild(wiki)
    assert total_vectors(off) == 0
    off.close()


def test_without_the_extra_the_index_stores_no_vectors(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(vectors, "available", lambda: False)
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    (wiki / "trip.md").write_text(PAGE, encoding="utf-8")
    ix = Index(tmp_path / "index.db", vectors=True)
    assert not ix.vectors_on
    ix.rebuild(wiki)
    assert total_vectors(ix) == 0
    assert ix.dense("bicycles") is None
    ix.close()


@needs_extra
def test_stored_vectors_are_int8_with_a_scale_close_to_the_model(tmp_path: Path):
    """The compact form keeps the cosine within 0.01 of the float vectors'."""
    import numpy as np

    texts = ["We rode bicycles along the river.", "Postgres migration failed.", "Tomato soup"]
    full = vectors.model().embed(texts)
    blobs = vectors.encode(full)
    back = []
    for b in blobs:
        assert b is not None and len(b) == vectors.ROW_BYTES
        scale = np.frombuffer(b[:4], "<f4")[0]
        back.append(np.frombuffer(b[4:], np.int8).astype(np.float32) * scale)
    q = vectors.model().embed(["cycling by the water"])[0]
    assert np.allclose(np.array(back) @ q, full @ q, atol=0.01)
