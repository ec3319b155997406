"""LoCoMo questions in process: how many are ranked whole (every match through the
fusion, ``rank.FULL_RANK``), and how many of those have matches past fused rank 50 that
the near-duplicate rules leave out of the reply, so that ``total`` and ``omitted`` need
every match filtered (docs/ranking.md, "Why every match, not an exact pool").

The first ``--conversations`` conversations (default 2) are captured into a temp
``Memory`` as ``bench/locomo.py`` posts them; every category 1-4 question is ranked as
``Memory.recall`` ranks it. Run: ``python bench/leftout.py [--conversations N]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "recall"))
sys.path.insert(0, str(ROOT / "bench"))

import locomo  # noqa: E402
from recall import LEFT_OUT_PAST, left_out_past  # noqa: E402
from support import make_memory, wait_for  # noqa: E402
from test_whole_ranking import locomo_events  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    ap.add_argument("--conversations", type=int, default=2)
    args = ap.parse_args(argv)
    from wiki_memory.recall import rank

    convs = locomo.load(args.data, args.conversations)
    with tempfile.TemporaryDirectory(prefix="leftout-") as tmp:
        m = make_memory(Path(tmp) / "data")
        try:
            for conv in convs:
                m.capture(locomo_events(conv), m.scope.named("alice"))
            n = sum(len(c.sessions) for c in convs)
            wait_for(lambda: len(m.list_pages(kind="session")) == n, 600, "pages compiled")
            who = m.scope.named("alice")
            asked = 0
            past: list[int] = []
            for conv in convs:
                now = locomo.now_of(conv)
                for qa in conv.qa:
                    if int(qa["category"]) == 5:
                        continue
                    asked += 1
                    question = rank.RecallQuery(
                        str(qa["question"]), project=conv.sample_id, now=now
                    )
                    found = rank.ranked(m._sources, question, who=who)
                    if found.whole:
                        past.append(left_out_past(found))
        finally:
            m.stop()
    some = [p for p in past if p]
    print(
        f"{len(convs)} conversations, {asked} questions (categories 1-4): {len(past)} ranked "
        f"whole; {len(some)} of them with matches past fused rank {LEFT_OUT_PAST} left out "
        f"by the near-duplicate rules (median {statistics.median(past) if past else 0:g}, "
        f"most {max(past, default=0)} per question)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
