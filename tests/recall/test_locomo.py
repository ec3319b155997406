"""One LoCoMo conversation through the HTTP API: recall finds the evidence session.

Each LoCoMo session is one captured session (its timestamp kept), each turn an
observation carrying the speaker and its ``dia_id``; every category 1-4 question goes
through ``/v1/recall``. The share of questions whose evidence session is among the top 5
items is compared with BM25 over whole sessions (rank-bm25) computed here on the same
turns. Full benchmark: ``python bench/locomo.py`` (docs/benchmarks.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest
from serverproc import ServerProcess
from support import REPO, shared_path

sys.path.insert(0, str(Path(REPO) / "bench"))

import locomo  # noqa: E402

pytestmark = pytest.mark.process


def test_locomo_conversation_evidence_session_in_top5(tmp_path):
    # conv-30, the smallest conversation of the file (19 sessions, 369 turns), keeps the
    # test short; bench/locomo.py runs all seven (bench/RESULTS.md has each one's figure)
    convs = locomo.load(shared_path("data", "locomo", "locomo7-dev.json"), 2)[1:]
    conv = convs[0]
    assert conv.sample_id == "conv-30"
    srv = ServerProcess(tmp_path / "data", env={"WIKI_MEMORY_COMMIT_DELAY_SECONDS": "0.2"})
    srv.start(timeout=120)
    try:
        locomo.ingest(srv, convs)
        anchors, pages = locomo.wait_for_pages(srv, convs, timeout=120)
        assert len(pages) == len(conv.sessions)
        base = locomo.Baselines(conv)
        valid = {t.dia_id for t in conv.turns}
        n = ours = theirs = 0
        with httpx.Client(base_url=srv.url, headers=srv.headers, timeout=60) as cl:
            for qa in conv.qa:
                if int(qa["category"]) == 5:
                    continue
                gold = locomo.norm_evidence(qa.get("evidence", [])) & valid
                if not gold:
                    continue
                gold_s = {locomo.session_of(d) for d in gold}
                got = locomo.ask(cl, conv, str(qa["question"]), 4000, anchors, pages)
                assert got.tokens <= 4000
                n += 1
                ours += locomo.hit_at(got.sessions, gold_s, 5)
                theirs += locomo.hit_at(base.by_sessions(str(qa["question"])).sessions, gold_s, 5)
    finally:
        srv.stop()
    print(
        f"\n{conv.sample_id}: {n} questions (categories 1-4); evidence session in the top 5: "
        f"wiki-memory {ours / n:.3f}, BM25 over whole sessions {theirs / n:.3f}"
    )
    assert n >= 50
    assert ours / n >= 0.5
    assert ours >= theirs
