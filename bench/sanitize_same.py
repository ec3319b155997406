"""The sanitizer's output, this tree against another checkout, text by text.

A speed change to the sanitizer must not change what it redacts. This script runs
``redact_text`` of this tree and of ``--against DIR`` (a checkout or ``git archive`` of
another revision: ``git archive REV wiki_memory hooks | tar -x -C DIR``) over one corpus
and counts the texts whose output (redacted text and every redaction) differs. Each tree
runs in its own process with ``PYTHONPATH`` set to it; ``--python-s`` runs both under
``python -S`` (the hook's way: standard library only, so no ``ahocorasick_rs``).

The corpus: the texts of ``bench/sanitize.py``'s mix (tool output, code, prose: about
3 MB), every page of the shared vaults, every string of the shared hook payloads, two
samples per generated rule (``tests/capture/gitleaks_samples``: alone, in prose, and twice
in a row) and each rule's own false-positive examples; each text whole and cut into its
lines (so short texts, which take other paths, are compared too).

    python bench/sanitize_same.py --against DIR [--python-s]

Prints the number of texts compared, the number that differ (the target: 0) and the
first few that differ.
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

#: text around a sample, longer than the windows the run prefilter keeps around a run
PROSE = "Notes from the meeting, nothing secret in them: we moved the deploy to Friday. " * 4

RUN = """
import pickle, sys
from wiki_memory.capture import sanitize
texts = pickle.load(open(sys.argv[1], "rb"))
out = []
for t in texts:
    red, found = sanitize.redact_text(t)
    out.append((red, [(r.kind, r.start, r.end) for r in found]))
pickle.dump(out, open(sys.argv[2], "wb"))
"""


def corpus() -> list[str]:
    """The texts compared (see the module docstring), each once, in a fixed order."""
    import sanitize as bench  # bench/sanitize.py

    texts = [s for items in bench.mix(3.0).values() for s in items]
    for f in sorted((bench.SHARED / "vaults").rglob("*.md")):
        texts.append(f.read_text(encoding="utf-8", errors="replace"))
    texts.extend(s for p in bench.hook_payloads() for s in bench._strings(p))
    sys.path.insert(0, str(REPO / "tests" / "capture"))
    sys.path.insert(0, str(REPO / "tests"))
    from gitleaks_samples import false_positives, sample  # noqa: PLC0415

    from wiki_memory.capture import leaks

    for rule in leaks.RULES:
        for seed in range(2):
            s = sample(rule, seed)
            if s is not None:
                texts.extend((s, f"{PROSE}{s}\n{PROSE}", f"{PROSE} {s}{s}"))
    for fps in false_positives(bench.SHARED / "gitleaks" / "rules").values():
        texts.extend(fps)
    lines = [ln for t in texts for ln in t.splitlines() if ln.strip()]
    return list(dict.fromkeys([*texts, *lines]))


def outputs(root: Path, texts_file: Path, python_s: bool) -> list[tuple]:  # type: ignore[type-arg]
    with tempfile.NamedTemporaryFile(suffix=".pkl", delete=False) as f:
        out = Path(f.name)
    env = dict(os.environ, PYTHONPATH=str(root))
    cmd = [sys.executable, *(["-S"] if python_s else []), "-c", RUN, str(texts_file), str(out)]
    subprocess.run(cmd, check=True, env=env)
    with out.open("rb") as fh:
        res = pickle.load(fh)
    out.unlink()
    return res  # type: ignore[no-any-return]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", type=Path, required=True, help="the other tree")
    ap.add_argument("--python-s", action="store_true", help="both under python -S")
    args = ap.parse_args()
    texts = corpus()
    with tempfile.NamedTemporaryFile(suffix=".pkl", delete=False) as f:
        pickle.dump(texts, f)
        texts_file = Path(f.name)
    try:
        old = outputs(args.against, texts_file, args.python_s)
        new = outputs(REPO, texts_file, args.python_s)
    finally:
        texts_file.unlink()
    differ = [k for k, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]
    size = sum(len(t) for t in texts)
    mode = "python -S" if args.python_s else "python"
    print(f"{time.strftime('%Y-%m-%d %H:%M')}; {mode}; against {args.against}")
    print(f"texts compared: {len(texts)} ({size / 1e6:.2f} M characters)")
    print(f"redactions (old tree): {sum(len(o[1]) for o in old)}")
    print(f"texts whose output differs: {len(differ)} (target: 0)")
    for k in differ[:5]:
        print(f"  text {k}: {texts[k][:120]!r}\n    old {old[k][1]}\n    new {new[k][1]}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
