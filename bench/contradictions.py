"""The contradiction detector on its labelled set (tests/core/data/contradictions.jsonl,
docs/knowledge.md "Contradictions"): the confusion matrix per split (tuning, held out,
all), precision and recall, each category's recall, every miss and false flag, and the
detector's time per pair beside the floor of reading both notes' words.

    python bench/contradictions.py
"""

from __future__ import annotations

import collections
import json
import re
import time
from pathlib import Path

from wiki_memory.wiki.contradict import Note, contradiction

SET = Path(__file__).resolve().parents[1] / "tests" / "core" / "data" / "contradictions.jsonl"


def note(side: dict[str, object]) -> Note:
    names = tuple(side.get("aliases", []) or ()) + (
        (side["subject"],) if side.get("subject") else ()
    )  # type: ignore[operator]
    return Note(str(side["title"]), str(side["text"]), tuple(str(n) for n in names))


def main() -> None:
    rows = [json.loads(line) for line in SET.read_text(encoding="utf-8").splitlines() if line]
    cm: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    wrong = []
    t0 = time.perf_counter()
    for r in rows:
        flag = None if r.get("b_supersedes_a") else contradiction(note(r["a"]), note(r["b"]))
        gold = r["label"] == "contradiction"
        cell = ("tp" if flag else "fn") if gold else ("fp" if flag else "tn")
        for key in (r["split"], "all", r["category"]):
            cm[key][cell] += 1
        if cell in ("fp", "fn"):
            wrong.append((r["id"], cell, r["category"], flag))
    took = (time.perf_counter() - t0) / len(rows)
    t0 = time.perf_counter()
    for r in rows:
        re.findall(r"\w+", r["a"]["text"] + " " + r["b"]["text"])
    floor = (time.perf_counter() - t0) / len(rows)
    print("| split | tp | fp | fn | tn | precision | recall |")
    print("|---|---|---|---|---|---|---|")
    for split in ("tuning", "heldout", "all"):
        c = cm[split]
        p = c["tp"] / max(1, c["tp"] + c["fp"])
        rc = c["tp"] / max(1, c["tp"] + c["fn"])
        print(f"| {split} | {c['tp']} | {c['fp']} | {c['fn']} | {c['tn']} | {p:.3f} | {rc:.3f} |")
    print()
    print("| category | recall | false flags |")
    print("|---|---|---|")
    for cat in ("numbers", "versions", "dates", "paths", "products", "negation"):
        c = cm[cat]
        print(f"| {cat} | {c['tp']}/{c['tp'] + c['fn']} | {c['fp']} |")
    print()
    for rid, cell, cat, flag in wrong:
        print(f"{cell} {rid} ({cat}): {flag}")
    print(f"\nper pair: detector {took * 1e3:.3f} ms, floor (split both notes' words) "
          f"{floor * 1e3:.4f} ms, ratio {took / max(floor, 1e-9):.0f}x")  # fmt: skip


if __name__ == "__main__":
    main()
