"""Recalls take turns: however many callers recall at once, at most
:data:`~wiki_memory.core.recaller.RECALL_THREADS` rank at the same moment (the others wait,
holding no CPU, so the event loop is not left waiting behind a crowd of ranking threads),
and every one of them still gets the answer it would get alone."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from wiki_memory.core.memory import Memory
from wiki_memory.core.recaller import RECALL_THREADS
from wiki_memory.recall import rank


def notes(wiki: Path, n: int) -> None:
    folder = wiki / "projects" / "turns" / "notes"
    folder.mkdir(parents=True)
    for i in range(n):
        (folder / f"n{i:02d}.md").write_text(
            f"---\ntitle: Note {i}\n---\n\n## Part\n\nheron migration {i} over the marsh\n",
            encoding="utf-8",
        )


def test_many_recalls_at_once_all_answer_and_rank_a_few_at_a_time(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes(mem.wiki_dir, 12)
    mem.reindex()
    alone = [str(i["id"]) for i in mem.recall("heron", project="turns", budget_tokens=4000).items]
    assert len(alone) == 12

    # the real ranking, watched: how many run at the same moment
    real = rank.ranked
    lock = threading.Lock()
    now = {"in": 0, "most": 0}

    def watched(*args: Any, **kw: Any) -> Any:
        with lock:
            now["in"] += 1
            now["most"] = max(now["most"], now["in"])
        try:
            time.sleep(0.02)  # long enough for the callers to pile up
            return real(*args, **kw)
        finally:
            with lock:
                now["in"] -= 1

    monkeypatch.setattr(rank, "ranked", watched)
    callers = RECALL_THREADS * 4
    with ThreadPoolExecutor(callers) as pool:
        got = list(
            pool.map(
                lambda _: [
                    str(i["id"])
                    for i in mem.recall("heron", project="turns", budget_tokens=4000).items
                ],
                range(callers * 2),
            )
        )
    assert got == [alone] * (callers * 2)
    assert 1 <= now["most"] <= RECALL_THREADS
