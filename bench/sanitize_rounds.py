"""The sanitizer's mix, this tree against another checkout, in alternating rounds.

Runs ``bench/sanitize.py`` of ``--against DIR`` (a second checkout, ``git worktree add
/tmp/san-old <rev>``, with ``PYTHONPATH=DIR`` so that its own package is the one
imported) and then this tree's, ``--rounds`` times (default 3: old, new, old, new, old,
new), each in a fresh process on the same interpreter, and reads the
``redact_text, all`` row of each (the least CPU time of ``--repeat`` passes over the
same ~3 MB mix). Prints every round, the ratio new/old per round and its median (the
target: at most 1.1), and the floor beside them.

    python bench/sanitize_rounds.py --against /tmp/san-old [--rounds 3] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROW = re.compile(r"^redact_text, all\s+([\d.]+)\s+([\d.]+)ms\s+([\d.]+)ms", re.M)


def one(root: Path, repeat: int) -> tuple[float, float, float]:
    """``(MB/s, ms, floor ms)`` of the ``redact_text, all`` row of ``root``'s bench."""
    env = dict(os.environ, PYTHONPATH=str(root))
    out = subprocess.run(
        [sys.executable, str(root / "bench" / "sanitize.py"), "--repeat", str(repeat),
         "--runs", "3"],
        capture_output=True, text=True, check=True, env=env,
    ).stdout  # fmt: skip
    m = ROW.search(out)
    if m is None:
        raise SystemExit(f"no 'redact_text, all' row in the output of {root}:\n{out}")
    return float(m.group(1)), float(m.group(2)), float(m.group(3))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", type=Path, required=True, help="the other checkout")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"{time.strftime('%Y-%m-%d %H:%M')}; {sys.executable}; {os.cpu_count()} CPUs")
    print(f"{'round':<6} {'tree':<10} {'MB/s':>7} {'ms':>8} {'floor ms':>9}")
    ratios = []
    for k in range(1, args.rounds + 1):
        res = {}
        for name, root in (("old", args.against), ("new", REPO)):
            res[name] = one(root, args.repeat)
            mbs, ms, floor = res[name]
            print(f"{k:<6} {name:<10} {mbs:>7.1f} {ms:>8.1f} {floor:>9.1f}", flush=True)
        ratios.append(res["new"][1] / res["old"][1])
        print(f"{k:<6} {'new/old':<10} {ratios[-1]:>16.2f}x time")
    med = statistics.median(ratios)
    print(f"median new/old time: {med:.2f}x (target <= 1.1; speed {1 / med:.2f}x of old)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
