"""Recall's replies to ``bench/recall.py``'s queries written as JSON, to compare two trees
byte for byte (a change meant to keep every reply the same). Not a timing.

Over a copy of a data directory that ``bench/recall_stages.py --data-dir DIR`` built (the
copy, so that the use record each recall writes does not carry from one run to the
next), in process (``Memory.recall``, ``now`` fixed): the 100 queries, each as asked,
every fifth also with ``kinds: ["note"]`` and every ninth with ``budget_tokens`` 4000,
every seventh with a ``project``; each reply and the next three pages its cursors lead
to. Run it from each tree (the other one's folder first on ``PYTHONPATH``) and compare:

    python bench/recall_same.py DIR before.json     # in the other tree
    python bench/recall_same.py DIR after.json
    cmp before.json after.json
"""

from __future__ import annotations

import json
import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import recall as base  # noqa: E402  (bench/recall.py: corpus and queries)

NOW = "2026-12-07T12:00:00Z"
PAGES = 3
"""Cursor pages followed after each first reply."""


def replies(data: Path, n_queries: int = 100) -> list[dict[str, Any]]:
    """``[{q, kw, pages}]``: each query's replies (``to_json()``) over a copy of ``data``."""
    from wiki_memory.config import load_settings
    from wiki_memory.core.memory import Memory

    with tempfile.TemporaryDirectory(prefix="recall-same-") as tmp:
        copy = Path(tmp) / "data"
        shutil.copytree(data, copy, ignore=shutil.ignore_patterns("*.lock"))
        vocab = base.vocabulary(random.Random(base.SEED))
        titles = json.loads((copy / "bench-titles.json").read_text())
        mem = Memory(load_settings(copy, watch=False, vectors=False))
        out: list[dict[str, Any]] = []
        try:
            for i, q in enumerate(base.queries(vocab, titles, n_queries)):
                runs: list[dict[str, Any]] = [{"project": f"p{i % 10}"} if i % 7 == 3 else {}]
                if i % 5 == 0:
                    runs.append({"kinds": ["note"]})
                if i % 9 == 0:
                    runs.append({"budget_tokens": 4000})
                for kw in runs:
                    page = mem.recall(q, now=NOW, **kw).to_json()
                    pages = [page]
                    for _ in range(PAGES):
                        cursor = page.get("next_cursor")
                        if not cursor:
                            break
                        page = mem.recall(q, now=NOW, cursor=cursor, **kw).to_json()
                        pages.append(page)
                    out.append({"q": q, "kw": kw, "pages": pages})
        finally:
            mem.index.close()
    return out


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    got = replies(Path(sys.argv[1]))
    Path(sys.argv[2]).write_text(json.dumps(got, indent=1, sort_keys=True))
    print(f"{len(got)} replies (with their cursor pages) written to {sys.argv[2]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
