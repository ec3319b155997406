"""Large and pathological input, measured: page parsing and secret redaction.

Each row times one call (best of ``--repeat``, default 5) on an input built to make a
careless parser or detector take quadratic or exponential time, beside a floor: the same
call on ordinary input of the same size (prose with headings, links, tags and code). The
ratio says how much more the pathological input costs than an ordinary one of its size;
anything near 1x is linear work.

- ``parse_page``: the inputs of ``tests/wiki/test_page.py`` (``PATHOLOGICAL``, the 20,000
  duplicate frontmatter keys, and a 300 KB file that is not UTF-8);
- ``redact_text``: the secret corpus of ``tests/capture/test_sanitize.py`` plus 40,000 filler
  lines (about 1.6 MB).

Moved here from the tests' old wall-clock bounds (2 s each in
``test_pathological_input_is_fast``, ``test_binary_file_is_fast_and_diagnosed`` and
``test_large_payload_is_fast``); the tests keep what the output must be, under a hang
guard.

    python bench/parse.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "wiki"))  # the test files live in room folders
sys.path.insert(0, str(REPO / "tests" / "capture"))

from test_page import PATHOLOGICAL, PATHOLOGICAL_FRONTMATTER  # noqa: E402
from test_sanitize import CORPUS  # noqa: E402

from wiki_memory.capture.sanitize import redact_text  # noqa: E402
from wiki_memory.wiki.page import parse_page  # noqa: E402

ORDINARY_BLOCK = (
    "## Notes on the deploy\n\n"
    "We moved the cache in front of the gateway; see [[Runbook|the runbook]] and #ops.\n"
    "- call `getUserName()` in test_app.py before the rollback\n"
    "- the retry budget is 3, then the handoff goes to [[people/alice/profile]]\n\n"
    "```sh\nmake test && ./deploy --canary\n```\n\n"
)


def ordinary(size: int, as_bytes: bool = False) -> Any:
    """Ordinary markdown of ``size`` characters (or bytes)."""
    text = ("# A page\n\n" + ORDINARY_BLOCK * (size // len(ORDINARY_BLOCK) + 1))[:size]
    return text.encode() if as_bytes else text


def best(fn: Callable[[], Any], repeat: int) -> float:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rows: list[tuple[str, int, float, float]] = []

    cases: list[tuple[str, Any]] = [(f"parse_page {t[:10]!r}…", t) for t in PATHOLOGICAL]
    cases.append(("parse_page 20k duplicate keys", PATHOLOGICAL_FRONTMATTER))
    cases.append(("parse_page bytes not UTF-8", b"\xff\n" * 50_000 + b"\xfe" * 200_000))
    for name, data in cases:
        normal = ordinary(len(data), isinstance(data, bytes))
        product = best(lambda d=data: parse_page(d, "x.md"), args.repeat)
        floor = best(lambda d=normal: parse_page(d, "x.md"), args.repeat)
        rows.append((name, len(data), product, floor))

    blob = "\n".join(t for _, t, _ in CORPUS) + ("x = 1  # filler line with a token word\n" * 40000)
    product = best(lambda: redact_text(blob), args.repeat)
    floor = best(lambda: redact_text(ordinary(len(blob))), args.repeat)
    rows.append(("redact_text secrets + filler", len(blob), product, floor))

    print(f"{os.cpu_count()} CPUs; best of {args.repeat}")
    print(f"{'case':<36} {'size':>9} {'ms':>9} {'floor ms':>9} {'/floor':>8}")
    for name, size, product, floor in rows:
        print(
            f"{name:<36} {size:>9,} {product * 1000:>9.1f} {floor * 1000:>9.1f} "
            f"{product / floor:>7.2f}x"
        )
    print("floor = the same call on ordinary markdown of the same size")
    return 0


if __name__ == "__main__":
    sys.exit(main())
