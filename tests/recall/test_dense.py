"""The optional ``dense`` recall signal (docs/ranking.md,
"Vectors"): a paraphrase with no shared word finds its section only with the ``vectors``
extra, never a section the caller may not see, and with the setting off (or without the
extra) recall is what it was. Tests that need the extra skip without it; the off path
runs everywhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import as_user, make_memory, run_cli

from wiki_memory.index import nearest, vectors
from wiki_memory.recall.filters import Filters

_extra = pytest.mark.skipif(
    not vectors.available(),
    reason="the vectors extra (wordllama) is not installed: pip install '.[vectors]'",
)


def needs_extra(test: Any) -> Any:
    """Skipped without the extra; ``slow`` with it (importing wordllama opens a socket,
    which the fast tier refuses)."""
    return pytest.mark.slow(_extra(test))


def note(title: str, body: str, **meta: str) -> str:
    lines = ["---", "type: note", f"title: {title}", *(f"{k}: {v}" for k, v in meta.items())]
    return "\n".join([*lines, "---", "", f"# {title}", "", "## Notes", "", body, ""])


# the query shares no word, stem or prefix with the page it means
PARAPHRASE = "cycling by the water"
FILES = {
    "projects/a/notes/weekend.md": note(
        "Weekend", "We rode bicycles along the river trail on Saturday morning."
    ),
    "projects/a/notes/db.md": note(
        "Database", "The postgres schema migration failed on the staging server."
    ),
    "projects/a/notes/food.md": note("Dinner", "Pasta with tomato sauce and basil."),
}


def anchors(m, query: str, **kw) -> list[str]:
    return [i["anchor"] for i in m.recall(query, budget_tokens=8000, **kw).items]


@needs_extra
def test_a_paraphrase_with_no_shared_word_finds_its_section_with_the_extra(tmp_path: Path):
    m = make_memory(tmp_path / "data", files=FILES, vectors=True)
    try:
        items = m.recall(PARAPHRASE, budget_tokens=8000).items
        assert items[0]["anchor"] == "projects/a/notes/weekend.md#Notes"
        assert "dense" in items[0]["why"]
        # a word query still ranks by its words first
        assert anchors(m, "postgres migration")[0] == "projects/a/notes/db.md#Notes"
    finally:
        m.stop()


def test_without_vectors_the_paraphrase_finds_nothing(tmp_path: Path):
    m = make_memory(tmp_path / "data", files=FILES, vectors=False)
    try:
        assert not m.index.vectors_on
        assert m.recall(PARAPHRASE, budget_tokens=8000).items == []
    finally:
        m.stop()


def test_recall_with_the_setting_off_is_recall_without_the_extra(tmp_path: Path, monkeypatch):
    """The setting off and the extra missing give the same items, item for item, and
    store no vector."""
    queries = ["bicycles river", "postgres staging server", "tomato", PARAPHRASE, "Saturday"]
    m = make_memory(tmp_path / "off", files=FILES, vectors=False)
    try:
        off = [m.recall(q, budget_tokens=8000).items for q in queries]
        assert m.index._conn().execute("SELECT count(*) FROM vectors").fetchone()[0] == 0
    finally:
        m.stop()
    monkeypatch.setattr(vectors, "available", lambda: False)
    m = make_memory(tmp_path / "missing", files=FILES, vectors=True)
    try:
        assert not m.index.vectors_on
        missing = [m.recall(q, budget_tokens=8000).items for q in queries]
    finally:
        m.stop()

    # ids and the pages' write times differ between the two wikis; the rest must not
    def strip(replies: list[list[dict[str, object]]]) -> list[list[dict[str, object]]]:
        return [
            [{k: v for k, v in i.items() if k not in ("id", "updated")} for i in r] for r in replies
        ]

    assert strip(off) == strip(missing)
    assert off[0][0]["anchor"] == "projects/a/notes/weekend.md#Notes"


@needs_extra
def test_an_out_of_scope_section_never_comes_back_through_the_dense_list(tmp_path: Path):
    """Another user's personal page and another project's page say the paraphrase best;
    neither is ranked, named or lets a visible section move for a caller who may not
    see it (invariant 9)."""
    hidden = {
        "people/alice/journal.md": note("Journal", "Cycling beside the water, by the lake."),
        "projects/b/notes/trip.md": note("Trip", "Cycling by the water along the canal."),
    }
    m = make_memory(tmp_path / "data", owner="olivia", files={**FILES, **hidden}, vectors=True)
    try:
        # alice sees her own page through the dense signal (the control)
        mine = anchors(m, PARAPHRASE, user=as_user(m, "alice"))
        assert "people/alice/journal.md#Notes" in mine
        # bob does not; a caller limited to project a gets neither
        assert "people/alice/journal.md#Notes" not in anchors(m, PARAPHRASE, user=as_user(m, "bob"))
        for who in ("alice", "bob"):
            got = anchors(m, PARAPHRASE, user=as_user(m, who), project="a")
            assert "people/alice/journal.md#Notes" not in got
            assert "projects/b/notes/trip.md#Notes" not in got
            assert got[0] == "projects/a/notes/weekend.md#Notes"
        # the dense list itself, scoped to project a for bob, is what a wiki without the
        # hidden pages gives
        scope = Filters(project="a", who=as_user(m, "bob"))
        seen = [h.path for h in nearest.dense_sections(m.index, PARAPHRASE, scope, 10, 0.0)]
    finally:
        m.stop()
    m = make_memory(tmp_path / "clean", owner="olivia", files=FILES, vectors=True)
    try:
        scope = Filters(project="a", who=as_user(m, "bob"))
        clean = [h.path for h in nearest.dense_sections(m.index, PARAPHRASE, scope, 10, 0.0)]
    finally:
        m.stop()
    assert seen == clean
    assert seen[0] == "projects/a/notes/weekend.md"


@pytest.mark.process
def test_doctor_says_which_signals_are_on(tmp_path: Path):
    data = tmp_path / "data"
    make_memory(data, files=FILES).stop()
    default = run_cli(data, "doctor")
    assert "signals: text, all-words" in default.stdout, default.stdout + default.stderr
    line = next(ln for ln in default.stdout.splitlines() if ln.startswith("signals:"))
    assert "dense" not in line
    on = run_cli(data, "doctor", env={"WIKI_MEMORY_VECTORS": "true"}).stdout
    line = next(ln for ln in on.splitlines() if ln.startswith("signals:"))
    if vectors.available():
        assert "vectors: off (setting vectors = false)" in default.stdout
        assert f"vectors: on ({vectors.MODEL_ID}), " in on
        assert "dense" in line
        # the index was built without vectors: the next start rebuilds it
        assert "the index was built without vectors" in on
    else:  # what CI sees: the extra is not installed, whatever the setting says
        for out in (default.stdout, on):
            assert (
                "vectors: off (the vectors extra is not installed: "
                "pip install 'wiki-memory[vectors]')" in out
            )
        assert "dense" not in line


@pytest.mark.process
def test_recall_with_vectors_off_imports_no_numpy(tmp_path: Path):
    """The default install's path: nothing of the extra is imported."""
    data = tmp_path / "data"
    make_memory(data, files=FILES, vectors=False).stop()
    code = (
        "import sys; from pathlib import Path\n"
        "from wiki_memory.config import load_settings\n"
        "from wiki_memory.core.memory import Memory\n"
        f"m = Memory(load_settings(Path({str(data)!r}), watch=False, vectors=False))\n"
        "m.start()\n"
        "assert m.recall('bicycles river').items\n"
        "m.stop()\n"
        "print(sorted(k for k in ('numpy', 'wordllama', 'tokenizers') if k in sys.modules))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


@pytest.mark.process
def test_doctor_without_the_extra_names_the_install_command(tmp_path: Path, monkeypatch):
    from wiki_memory.cli.doctor import doctor_report
    from wiki_memory.config import load_settings

    data = tmp_path / "data"
    make_memory(data, files=FILES).stop()
    monkeypatch.setattr(vectors, "available", lambda name=None: False)
    rep = doctor_report(load_settings(data, vectors=True), wait_seconds=0)
    assert rep["vectors"] == (
        "off (the vectors extra is not installed: pip install 'wiki-memory[vectors]')"
    )
    assert "dense" not in rep["signals"]["on"]
    assert "dense" in rep["signals"]["off"]
    assert {"text", "all-words", "page", "when"} <= set(rep["signals"]["on"])
