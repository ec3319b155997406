"""The rebuild's parallel map: every item once, whatever its helpers do, and the same
index whether pages were parsed by helpers or by the caller alone."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from wiki_memory.index import parallel
from wiki_memory.index.parallel import map_unordered
from wiki_memory.index.store import Index


def in_helper() -> bool:
    return multiprocessing.parent_process() is not None


def tagged(item: int) -> tuple[int, int]:
    """The item and the process that computed it."""
    return item, os.getpid()


def tagged_slowly(item: int) -> tuple[int, int]:
    """:func:`tagged`, taking 3 ms (so helpers have started before the caller is done)."""
    time.sleep(0.003)
    return item, os.getpid()


def hang_in_helper(item: int) -> int:
    if in_helper():
        time.sleep(3600)
    return item * 2


def slow_first_in_helper(item: int) -> int:
    """A helper that is busy (not stuck) with its first item for 60 s."""
    if in_helper() and item == 0:
        time.sleep(60)
    return item * 2


def die_in_helper(item: int) -> int:
    if in_helper() and item > 64:
        os._exit(3)
    time.sleep(0.002)
    return item * 2


def fail_in_helper(item: int) -> tuple[int, int]:
    if in_helper() and item % 97 == 0:
        raise ValueError(f"helper refuses {item}")
    time.sleep(0.002)
    return item * 2, os.getpid()


def big(item: int) -> str:
    """A result large enough that a batch of them does not fit a socket's buffer."""
    time.sleep(0.002)
    return f"{item:06d}" * 1000


class TwoArgs(Exception):
    """Pickles, but does not unpickle (its args are one string, __init__ wants two)."""

    def __init__(self, a: int, b: int) -> None:
        super().__init__(f"{a}+{b}")


def unreadable_result(item: int) -> TwoArgs | tuple[int, int]:
    time.sleep(0.002)
    return TwoArgs(item, 1) if item % 50 == 0 else (item, os.getpid())


def fail_everywhere(item: int) -> int:
    if item == 150:
        raise ValueError("item 150 is bad")
    return item


@pytest.mark.process
@pytest.mark.parametrize("helpers", [0, 1, 2])
def test_every_item_once_and_helpers_do_a_share(helpers: int) -> None:
    items = list(range(1500))
    # the 3 ms an item lets helpers start before the caller is done; with none, it is
    # 4.5 s of sleep that shows nothing
    out = list(map_unordered(tagged_slowly if helpers else tagged, items, helpers, batch=16))
    assert Counter(i for i, _ in out) == Counter(items)
    pids = {pid for _, pid in out}
    if helpers:
        assert len(pids - {os.getpid()}) >= 1  # the helpers computed some of the items
    else:
        assert pids == {os.getpid()}


def test_few_items_run_in_the_caller_in_order() -> None:
    assert list(map_unordered(tagged, [3, 1, 2], 2)) == [
        (3, os.getpid()),
        (1, os.getpid()),
        (2, os.getpid()),
    ]


@pytest.mark.process
@pytest.mark.parametrize("fn", [hang_in_helper, slow_first_in_helper])
def test_the_caller_never_waits_for_a_stuck_or_slow_helper(fn) -> None:
    """Once the queue is empty the caller takes back the helper's items: it finishes
    everything itself, far sooner than the helper would (3600 s, 60 s)."""
    items = list(range(300))
    t0 = time.monotonic()
    out = list(map_unordered(fn, items, 1, batch=8))
    assert sorted(out) == [i * 2 for i in items]
    assert time.monotonic() - t0 < 30
    deadline = time.monotonic() + 10
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not multiprocessing.active_children()  # and the helper was stopped


@pytest.mark.process
def test_long_items_and_large_results_never_deadlock() -> None:
    """Tasks carry item numbers only: items of many KB (long paths) cannot fill the
    socket while a helper is sending a large answer."""
    items = [f"{i:05d}" + "x" * 6000 for i in range(400)]
    done: list[list[int]] = []
    t = threading.Thread(
        target=lambda: done.append(list(map_unordered(len, items, 2, batch=32))), daemon=True
    )
    t.start()
    t.join(120)
    assert done and sorted(done[0]) == [6005] * 400


@pytest.mark.process
def test_a_helper_that_dies_has_its_items_done_by_the_caller() -> None:
    items = list(range(300))
    items = list(range(1000))
    assert sorted(map_unordered(die_in_helper, items, 2, batch=8)) == [i * 2 for i in items]


@pytest.mark.process
def test_a_helper_error_is_retried_in_the_caller() -> None:
    items = list(range(300))
    items = list(range(1000))
    out = list(map_unordered(fail_in_helper, items, 1, batch=8))
    assert sorted(v for v, _ in out) == [i * 2 for i in items]
    assert {pid for _, pid in out} - {os.getpid()}  # the helper's other answers were used


@pytest.mark.process
def test_a_real_error_reaches_the_caller() -> None:
    with pytest.raises(ValueError, match="item 150 is bad"):
        list(map_unordered(fail_everywhere, list(range(400)), 1, batch=8))


@pytest.mark.process
def test_closing_early_stops_the_helpers_and_leaves_no_spill_files(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(parallel.tempfile, "tempdir", str(tmp_path))
    gen = map_unordered(tagged, list(range(5000)), 2, batch=16)
    for _ in range(100):
        next(gen)
    gen.close()
    assert list(tmp_path.iterdir()) == []
    deadline = time.monotonic() + 10
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not multiprocessing.active_children()


@pytest.mark.process
@pytest.mark.parametrize("temp", ["usable", "missing"])
def test_large_results_arrive_whole_with_or_without_a_temporary_directory(
    tmp_path, monkeypatch, temp: str
) -> None:
    spill_root = tmp_path / ("spill" if temp == "usable" else "does-not-exist")
    if temp == "usable":
        spill_root.mkdir()
    monkeypatch.setattr(parallel.tempfile, "tempdir", str(spill_root))
    items = list(range(600))
    out = list(map_unordered(big, items, 1, batch=16))
    assert sorted(out) == [big(i) for i in items]
    if temp == "usable":
        assert list(spill_root.iterdir()) == []  # every spilled result was read and removed


@pytest.mark.process
def test_temporary_files_of_a_killed_run_are_removed(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(parallel.tempfile, "tempdir", str(tmp_path))
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead = int(gone.stdout)
    stale = tmp_path / f"wiki-memory-map-{dead}-abc"
    stale.mkdir()
    (stale / "items.pickle").write_bytes(b"x" * 1000)
    hour_ago = time.time() - 7200
    os.utime(stale, (hour_ago, hour_ago))
    recent = tmp_path / f"wiki-memory-map-{dead}-fresh"  # maybe a live run elsewhere: kept
    recent.mkdir()
    alive = tmp_path / f"wiki-memory-map-{os.getppid()}-def"  # a live process's: kept
    alive.mkdir()
    os.utime(alive, (hour_ago, hour_ago))
    stray = tmp_path / "wiki-memory-map-99999999999999999999-x"  # not a pid at all: kept
    stray.mkdir()
    os.utime(stray, (hour_ago, hour_ago))
    assert sorted(map_unordered(abs, list(range(-100, 0)), 1, batch=8)) == list(range(1, 101))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [recent.name, alive.name, stray.name]
    )


def test_a_full_temporary_directory_means_working_alone_and_leaves_nothing(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.setattr(parallel.tempfile, "tempdir", str(tmp_path))

    def full(*args: object, **kw: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(parallel.pickle, "dump", full)
    out = list(map_unordered(tagged, list(range(200)), 2, batch=8))
    assert sorted(out) == [(i, os.getpid()) for i in range(200)]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.process
def test_an_answer_that_cannot_be_read_is_redone_by_the_caller() -> None:
    out = list(map_unordered(unreadable_result, list(range(1000)), 1, batch=8))
    bad = sorted(str(x) for x in out if isinstance(x, TwoArgs))
    assert bad == sorted(f"{i}+1" for i in range(0, 1000, 50))
    good = [x for x in out if not isinstance(x, TwoArgs)]
    assert sorted(i for i, _ in good) == [i for i in range(1000) if i % 50]
    assert {pid for _, pid in good} - {os.getpid()}  # readable answers were used


def _processes_with_env(name: str, value: str) -> list[int]:
    """Pids of live processes whose environment has ``name=value`` (Linux /proc)."""
    want = f"{name}={value}".encode()
    found = []
    for env in Path("/proc").glob("[0-9]*/environ"):
        try:
            if want in env.read_bytes().split(b"\0"):
                found.append(int(env.parent.name))
        except OSError:
            continue
    return found


def _random_vault(root: Path, n: int) -> None:
    rng = random.Random(5)
    words = "alpha beta gamma deploy rollback cache getUserName test_app.py E1101 Łódź 修复".split()
    for i in range(n):
        folder = root / f"f{i % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        links = " ".join(f"[[n{rng.randrange(n)}]]" for _ in range(3))
        body = "\n\n".join(
            f"## Part {k}\n\n" + " ".join(rng.choice(words) for _ in range(40)) for k in range(4)
        )
        text = f"---\ntitle: Note {i}\ntags: [t{i % 5}]\naliases: [N{i}]\n---\n# Note {i}\n\n{links}\n\n{body}\n"
        (folder / f"n{i}.md").write_text(text, encoding="utf-8")


@pytest.mark.process
def test_rebuild_with_helpers_equals_rebuild_alone(tmp_path: Path, monkeypatch) -> None:
    wiki = tmp_path / "wiki"
    _random_vault(wiki, 400)
    monkeypatch.setenv("WIKI_MEMORY_REINDEX_WORKERS", "1")
    alone = Index(tmp_path / "alone.db")
    assert alone.rebuild(wiki) == 400
    monkeypatch.setenv("WIKI_MEMORY_REINDEX_WORKERS", "3")
    helped = Index(tmp_path / "helped.db")
    assert helped.rebuild(wiki) == 400
    assert helped.rows() == alone.rows()
    assert helped.paths() == alone.paths()
    assert helped.link_stats() == alone.link_stats()
    for q in ("deploy rollback", "user name", "Note 17", "lodz", "修复"):
        a, b = alone.query(q), helped.query(q)
        assert [(h.path, h.anchor) for h in a] == [(h.path, h.anchor) for h in b], q
        assert a, q
    alone.close()
    helped.close()


@pytest.mark.process
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
def test_sigterm_during_reindex_stops_helpers_and_leaves_no_temporary_files(tmp_path) -> None:
    data = tmp_path / "data"
    _random_vault(data / "wiki", 2500)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "WIKI_MEMORY_REINDEX_WORKERS": "2"}
    cmd = [sys.executable, "-m", "wiki_memory.cli.main", "--data-dir", str(data), "reindex"]
    proc = subprocess.Popen(cmd + ["--quiet"], env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not any(tmp.glob("wiki-memory-map-*")):  # the helpers are being started
        assert proc.poll() is None, "reindex ended before its helpers started"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 128 + signal.SIGTERM, proc.stderr.read() if proc.stderr else ""
    assert list(tmp.iterdir()) == []
    # no helper left running: one caught by the signal while it was being spawned is not
    # yet known to the parent, and ends by itself once it finds its parent gone
    # (polled: a generous bound, not a speed target)
    until = time.monotonic() + 30
    while _processes_with_env("TMPDIR", str(tmp)) and time.monotonic() < until:
        time.sleep(0.1)
    assert _processes_with_env("TMPDIR", str(tmp)) == []
    # and the index still works: a full reindex afterwards gives every page
    r = subprocess.run(cmd + ["--quiet"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "reindexed 2500 pages" in r.stdout, r.stdout + r.stderr
    assert list(tmp.iterdir()) == []
