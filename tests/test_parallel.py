"""The rebuild's parallel map: every item once, whatever its helpers do, and the same
index whether pages were parsed by helpers or by the caller alone."""

from __future__ import annotations

import multiprocessing
import os
import random
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


def hang_in_helper(item: int) -> int:
    if in_helper():
        time.sleep(3600)
    return item * 2


def die_in_helper(item: int) -> int:
    if in_helper():
        os._exit(3)
    return item * 2


def fail_in_helper(item: int) -> int:
    if in_helper() and item % 7 == 0:
        raise ValueError(f"helper refuses {item}")
    return item * 2


def big(item: int) -> str:
    """A result large enough that a batch of them does not fit a pipe's buffer."""
    return f"{item:06d}" * 1000


def fail_everywhere(item: int) -> int:
    if item == 150:
        raise ValueError("item 150 is bad")
    return item


@pytest.mark.parametrize("helpers", [0, 1, 2])
def test_every_item_once_and_helpers_do_a_share(helpers: int) -> None:
    items = list(range(2000))
    out = list(map_unordered(tagged, items, helpers, batch=16))
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


def test_a_stuck_helper_costs_the_stall_time_not_a_hang() -> None:
    items = list(range(300))
    t0 = time.monotonic()
    out = list(map_unordered(hang_in_helper, items, 1, batch=8, stall_seconds=1.0))
    assert sorted(out) == [i * 2 for i in items]
    assert time.monotonic() - t0 < 60  # the stuck helper was stopped, not waited for


def test_a_helper_that_dies_has_its_items_done_by_the_caller() -> None:
    items = list(range(300))
    assert sorted(map_unordered(die_in_helper, items, 2, batch=8)) == [i * 2 for i in items]


def test_a_helper_error_is_retried_in_the_caller() -> None:
    items = list(range(300))
    assert sorted(map_unordered(fail_in_helper, items, 1, batch=8)) == [i * 2 for i in items]


def test_a_real_error_reaches_the_caller() -> None:
    with pytest.raises(ValueError, match="item 150 is bad"):
        list(map_unordered(fail_everywhere, list(range(400)), 1, batch=8))


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
