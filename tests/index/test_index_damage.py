"""A damaged or stale index is never an empty answer: 8 KiB of random bytes in the middle
of ``index.db``, a truncated, a missing and a stale one (edits while no server ran) are
found at start and rebuilt before the first answer, and a CorruptError at run time is
logged once and starts a rebuild during which recall answers from the files marked
``complete: false`` (tests/index/test_recall_while_rebuilding.py), never a short 200 that
claims to be whole. Answers afterwards equal those of a fresh reindex."""

from __future__ import annotations

import json
import logging
import os
import random
import time
from pathlib import Path

import apsw
import pytest
from support import as_user, cli_as, home_env, make_memory, wait_for

from wiki_memory.core.memory import Memory
from wiki_memory.index.db import quick_check
from wiki_memory.index.search import SearchError
from wiki_memory.index.store import Index

WORDS = [f"kw{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(120)]
QUERIES = [*WORDS[::7], "zebracorn", "nothingmatchesthis"]


def wiki_files(n: int = 200) -> dict[str, str]:
    rng = random.Random(7)
    out = {}
    for i in range(n):
        words = " ".join(rng.choice(WORDS) for _ in range(60))
        out[f"projects/p/notes/n{i:04d}.md"] = f"# Note {i}\n\n{words}\n\n## More\n\n{words}\n"
    return out


def answers(m: Memory) -> dict[str, tuple[int, list[str]]]:
    out = {}
    for q in QUERIES:
        r = m.recall(q, user=as_user(m, "alice"), budget_tokens=4000)
        out[q] = (r.total, [i["path"] for i in r.items])
    return out


def fresh(m: Memory, tmp: Path) -> dict[str, tuple[int, list[str]]]:
    """What a fresh reindex of ``m``'s wiki answers (the same Memory, its index
    replaced by a new file built from the files)."""
    other = Index(tmp / "fresh.db")
    other.rebuild(m.wiki_dir)
    other.close()
    m.index.close()
    os.replace(tmp / "fresh.db", m.settings.index_path)
    for suffix in ("-wal", "-shm"):
        if (tmp / f"fresh.db{suffix}").exists():
            os.replace(tmp / f"fresh.db{suffix}", f"{m.settings.index_path}{suffix}")
    m.index._db._closed = False
    return answers(m)


def restart(data: Path, **kw: object) -> Memory:
    return make_memory(data, **kw)  # type: ignore[arg-type]


@pytest.fixture
def stopped(tmp_path: Path) -> Path:
    """A data directory whose index was built and whose server stopped cleanly."""
    data = tmp_path / "data"
    m = make_memory(data, files=wiki_files())
    assert m.recall(WORDS[0], user=as_user(m, "alice")).total > 0
    m.stop()
    return data


def check_equal_to_fresh(m: Memory, tmp: Path) -> None:
    got = answers(m)
    assert got["zebracorn"][0] == 0 or got["zebracorn"][0] > 0  # answered, not raised
    for q in WORDS[::7]:
        assert got[q][0] > 0, f"{q} matches pages but recall answered total 0"
    assert got == fresh(m, tmp)


@pytest.mark.fast
def test_random_bytes_in_the_middle_are_found_and_rebuilt_at_start(
    stopped: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = stopped / "index.db"
    size = db.stat().st_size
    assert size > 64 * 1024
    with open(db, "r+b") as f:
        f.seek(size // 2)
        f.write(random.Random(1).randbytes(8192))
    assert quick_check(db), "the quick check names the damage (doctor runs it too)"
    caplog.set_level(logging.WARNING)
    m = restart(stopped)
    try:
        damaged = [r for r in caplog.records if "index.db is damaged" in r.getMessage()]
        assert len(damaged) == 1
        assert quick_check(db) == []
        check_equal_to_fresh(m, tmp_path)
    finally:
        m.stop()


@pytest.mark.fast
@pytest.mark.parametrize("how", ["truncated", "missing"])
def test_a_truncated_or_missing_index_is_rebuilt_before_any_answer(
    stopped: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    db = stopped / "index.db"
    if how == "truncated":
        with open(db, "r+b") as f:
            f.truncate(db.stat().st_size // 3)
    else:
        db.unlink()
    caplog.set_level(logging.WARNING)
    m = restart(stopped)
    try:
        if how == "truncated":
            assert any("index.db" in r.getMessage() for r in caplog.records), "logged"
        check_equal_to_fresh(m, tmp_path)
    finally:
        m.stop()


@pytest.mark.fast
def test_a_stale_index_catches_up_offline_edits_before_answering(
    stopped: Path, tmp_path: Path
) -> None:
    wiki = stopped / "wiki"
    for i in range(100):
        p = wiki / f"projects/p/notes/n{i:04d}.md"
        p.write_text(p.read_text(encoding="utf-8") + "\nzebracorn was added offline\n")
    for i in range(190, 200):  # deleted offline
        (wiki / f"projects/p/notes/n{i:04d}.md").unlink()
    for i in range(3):  # added offline
        (wiki / f"projects/p/notes/new{i}.md").write_text(f"# New {i}\n\nunicornfish\n")
    m = restart(stopped)
    try:
        r = m.recall("zebracorn", user=as_user(m, "alice"), budget_tokens=200)
        assert r.total == 100 and r.complete
        assert m.recall("unicornfish", user=as_user(m, "alice")).total == 3
        assert m.index.count_pages() == 193
        check_equal_to_fresh(m, tmp_path)
    finally:
        m.stop()


@pytest.mark.fast
def test_a_corrupt_error_at_run_time_is_logged_once_and_rebuilt_meanwhile_incomplete(
    stopped: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch
) -> None:
    m = restart(stopped)
    try:
        before = answers(m)
        # the rebuild waits until the test has seen the 503s
        gate = __import__("threading").Event()
        real = m.index.rebuild

        def slow(*a, **kw):  # type: ignore[no-untyped-def]
            gate.wait(10)
            return real(*a, **kw)

        monkeypatch.setattr(m.index, "rebuild", slow)
        caplog.set_level(logging.WARNING)
        conn = m.index._conn()
        from wiki_memory.index.db import note_failure

        for _ in range(3):  # three queries meet the damage: one log line, one rebuild
            note_failure(conn, apsw.CorruptError("database disk image is malformed"))
        for q in QUERIES[:3]:
            r = m.recall(q, user=as_user(m, "alice"))
            assert r.complete is False and r.total == before[q][0] > 0, q
        logged = [r for r in caplog.records if "index.db is damaged" in r.getMessage()]
        assert len(logged) == 1
        gate.set()
        wait_for(lambda: m.index.damaged is None, timeout=30)
        assert answers(m) == before
    finally:
        m.stop()


@pytest.mark.fast
def test_an_ordinary_query_with_no_match_starts_nothing(stopped: Path) -> None:
    m = restart(stopped)
    try:
        t = time.monotonic()
        r = m.recall("nothingmatchesthis", user=as_user(m, "alice"))
        assert r.total == 0 and time.monotonic() - t < 2
        assert m.index.damaged is None
        assert not [t for t in m._threads if t.name == "wiki-index-rebuild"]
    finally:
        m.stop()


@pytest.mark.process
def test_doctor_names_a_damaged_index(stopped: Path, tmp_path: Path) -> None:
    db = stopped / "index.db"
    with open(db, "r+b") as f:
        f.seek(db.stat().st_size // 2)
        f.write(random.Random(2).randbytes(8192))
    r = cli_as(home_env(tmp_path / "home"), "--data-dir", str(stopped), "doctor", "--json")
    rep = json.loads(r.stdout)
    found = [
        f
        for f in rep["findings"]
        if f["check"] == "index" and f["severity"] == "error" and "damaged" in f["message"]
    ]
    assert found and found[0]["fix"] == "wiki-memory reindex", rep["findings"]
    assert r.returncode == 1


@pytest.mark.fast
def test_a_disk_too_full_to_rebuild_at_start_is_no_crash_loop(
    stopped: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wiki_memory.core import indexcheck

    (stopped / "index.db").unlink()
    monkeypatch.setattr(indexcheck, "RETRY_SECONDS", 0.05)
    real = Index.rebuild
    tries = {"n": 0}

    def full_then_room(self, *a, **kw):  # type: ignore[no-untyped-def]
        tries["n"] += 1
        if tries["n"] <= 2:
            raise apsw.FullError("database or disk is full")
        return real(self, *a, **kw)

    monkeypatch.setattr(Index, "rebuild", full_then_room)
    m = restart(stopped)  # starts: no exception, no exit
    try:
        if m.index.damaged is not None:
            r = m.recall(WORDS[0], user=as_user(m, "alice"))
            assert r.complete is False and r.total > 0
        wait_for(lambda: m.index.damaged is None, timeout=30)
        assert tries["n"] == 3
        check_equal_to_fresh(m, tmp_path)
    finally:
        m.stop()


@pytest.mark.fast
def test_damage_made_while_running_is_found_by_the_periodic_check(
    stopped: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # damage that no query happens to raise on (it could make a query miss rows): the
    # quick check the server runs now and then finds it, and it is rebuilt
    from wiki_memory.core import indexcheck

    monkeypatch.setattr(indexcheck, "CHECK_EVERY_SECONDS", 0.1)
    m = restart(stopped)
    try:
        before = answers(m)
        db = stopped / "index.db"
        caplog.set_level(logging.WARNING)
        with open(db, "r+b") as f:
            f.seek(db.stat().st_size // 2)
            f.write(random.Random(3).randbytes(8192))
        wait_for(
            lambda: any("index.db is damaged" in r.getMessage() for r in caplog.records),
            timeout=30,
        )
        wait_for(lambda: m.index.damaged is None, timeout=60)
        assert quick_check(db) == []
        assert answers(m) == before
    finally:
        m.stop()


@pytest.mark.fast
def test_a_large_wiki_is_rebuilt_in_the_background_and_answers_incomplete_meanwhile(
    stopped: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    monkeypatch.setenv("WIKI_MEMORY_REBUILD_BACKGROUND_PAGES", "50")  # the fixture's 200 pages
    (stopped / "index.db").unlink()
    gate = __import__("threading").Event()
    real = Index.rebuild

    def held(self, *a, **kw):  # type: ignore[no-untyped-def]
        gate.wait(10)
        return real(self, *a, **kw)

    monkeypatch.setattr(Index, "rebuild", held)
    m = restart(stopped)  # returns before the rebuild
    try:
        for q in QUERIES[:3]:
            r = m.recall(q, user=as_user(m, "alice"))
            assert r.complete is False and r.total > 0, q
        with pytest.raises(SearchError) as err:  # a listing needs the index
            m.index.count_pages()
        assert err.value.headers.get("Retry-After")
        gate.set()
        wait_for(lambda: m.index.damaged is None, timeout=60)
        check_equal_to_fresh(m, tmp_path)
    finally:
        gate.set()
        m.stop()
