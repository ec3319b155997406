"""The sanitizer's speed: throughput over a realistic mix, cost per observation, import.

Rows (each the least CPU time of ``--repeat`` rounds, default 5, in which the
sanitizers compared and the floor take turns; the subprocess rows are medians):

- ``redact_text`` over a mix of about ``--mb`` MB (default 3) in thirds: tool output
  (the string values of the real hook payloads in ``../shared/data/hooks``, then this
  repository's ``git log -p --stat --reverse``, one commit per call), code (``.py`` files of the project's installed
  dependencies, in sorted order) and prose (the two shared Obsidian vaults and the LoCoMo
  turns). Each file, payload string or turn is one call, as the server sees them. The
  floor is ``re.compile("password").findall`` over the same strings: one plain ``re``
  scan for one fixed word. MB/s and the ratio product/floor in time.
- ``redact_obj`` per observation: every real hook payload of ``../shared/data/hooks``
  (Claude Code, Codex, Gemini CLI) and the 1 KB ``PostToolUse`` of ``bench/hook.py``, in
  microseconds per call (the mean over all of them; floor: ``json.dumps`` of the same
  payload, the least the hook does with it anyway).
- the hook's import of the sanitizer: a fresh ``python -S`` that has imported what the
  hook library imports (``json``, ``os``, ``sys``, ``time``) times, in CPU time,
  ``from wiki_memory.capture import sanitize``, then its first ``redact_obj`` of the 1 KB
  payload (which pays any pattern compiled on first use); median of ``--runs`` (30).

``--against REV`` runs every row also for ``wiki_memory/capture/sanitize.py`` as it was
at git revision REV (extracted into a temporary package), so one run shows before and
after on the same machine load.

    python bench/sanitize.py [--mb 3] [--repeat 5] [--runs 30] [--against REV]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
if not SHARED.is_dir():
    SHARED = Path("/work/shared/data")
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

from hook import payload as hook_payload  # noqa: E402
from support import runtime_distributions  # noqa: E402

MODULE = "wiki_memory/capture/sanitize.py"


def _strings(obj: Any) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in _strings(k) + _strings(v)]
    if isinstance(obj, list):
        return [s for x in obj for s in _strings(x)]
    return []


def hook_payloads() -> list[Any]:
    """Every real hook payload in the shared data (one JSON value per file)."""
    out = []
    for f in sorted((SHARED / "hooks").rglob("*.json")):
        if "responses" in f.parts or f.name.startswith("response"):
            continue
        out.append(json.loads(f.read_text(encoding="utf-8")))
    return out


def dependency_sources() -> list[Path]:
    """The ``.py`` files of the project's installed runtime dependencies (sorted)."""
    files: list[Path] = []
    for dist in runtime_distributions():
        for f in dist.files or ():
            if str(f).endswith(".py"):
                p = Path(str(dist.locate_file(f)))
                if p.is_file():
                    files.append(p)
    return sorted(files)


def mix(mb: float) -> dict[str, list[str]]:
    """Three thirds of about ``mb`` MB: tool output, code, prose (lists of call inputs)."""
    third = int(mb * 1_000_000 / 3)

    def take(items: list[str]) -> list[str]:
        out, size = [], 0
        for s in items:
            if size >= third:
                break
            out.append(s)
            size += len(s.encode())
        return out

    tool = [s for p in hook_payloads() for s in _strings(p) if len(s) > 2]
    log = subprocess.run(
        ["git", "-C", str(REPO), "log", "-p", "--stat", "--reverse"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\ncommit ")
    while sum(len(s) for s in tool) < third and log:
        tool.append("commit " + log.pop(0))
    code = [p.read_text(encoding="utf-8", errors="replace") for p in dependency_sources()[:3000]]
    prose = [
        f.read_text(encoding="utf-8", errors="replace")
        for f in sorted((SHARED / "vaults").rglob("*.md"))
    ]
    locomo = json.loads((SHARED / "locomo" / "locomo7-dev.json").read_text(encoding="utf-8"))
    for conv in locomo:
        for key, turns in conv["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                prose.extend(t["text"] for t in turns)
    return {"tool output": take(tool), "code": take(code), "prose": take(prose)}


def load_from(root: Path) -> ModuleType:
    """Import ``wiki_memory/capture/sanitize.py`` under ``root`` as its own module."""
    name = f"sanitize_{abs(hash(str(root)))}"
    spec = importlib.util.spec_from_file_location(name, root / MODULE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def extract(rev: str, into: Path) -> Path:
    """The sanitizer at ``rev`` as ``into/wiki_memory/capture/sanitize.py`` (a package)."""
    text = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{rev}:{MODULE}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    pkg = into / "wiki_memory" / "capture"
    pkg.mkdir(parents=True)
    (into / "wiki_memory" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "sanitize.py").write_text(text)
    return into


IMPORT_PROBE = """
import json, os, sys, time
sys.path.insert(0, {root!r})
payload = json.loads({payload!r})
t0 = time.process_time()
from wiki_memory.capture import sanitize
t1 = time.process_time()
sanitize.redact_obj(payload)
t2 = time.process_time()
print(t1 - t0, t2 - t1)
"""


def import_cost(root: Path, runs: int) -> tuple[float, float]:
    """Median (import seconds, first 1 KB redact_obj seconds) in fresh ``python -S``."""
    code = IMPORT_PROBE.format(root=str(root), payload=hook_payload(1000, 0).decode())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-S", "-c", code], check=True, env=env, capture_output=True)
    imp, first = [], []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-S", "-c", code], check=True, env=env, capture_output=True, text=True
        ).stdout.split()
        imp.append(float(out[0]))
        first.append(float(out[1]))
    return statistics.median(imp), statistics.median(first)


def interleaved(fns: list[Callable[[], Any]], repeat: int) -> list[float]:
    """The least CPU time (``time.process_time``, seconds) of each of ``fns`` over
    ``repeat`` rounds, the functions taking turns within a round: CPU time, not wall
    time, because the machine is shared and a busy neighbour stretches wall time; turns,
    so that a busy spell (which still slows the CPU a little) hits them alike."""
    out = [float("inf")] * len(fns)
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            t0 = time.process_time()
            fn()
            out[k] = min(out[k], time.process_time() - t0)
    return out


def measure(
    targets: list[tuple[ModuleType, Path]], parts: dict[str, list[str]], args: Any
) -> list[list[tuple]]:
    """One list of rows per target (same order); every timed case interleaves them."""
    rows: list[list[tuple]] = [[] for _ in targets]
    floor_rx = re.compile("password")
    everything = [s for items in parts.values() for s in items]
    for label, items in [*parts.items(), ("all", everything)]:
        size = sum(len(s.encode()) for s in items)
        fns: list[Callable[[], Any]] = [
            lambda m=mod, items=items: [m.redact_text(s) for s in items] for mod, _ in targets
        ]
        fns.append(lambda items=items: [floor_rx.findall(s) for s in items])
        *products, floor = interleaved(fns, args.repeat)
        for k, (mod, _) in enumerate(targets):
            hits = sum(len(mod.redact_text(s)[1]) for s in items)
            rows[k].append(
                (f"redact_text, {label}", size, products[k], floor, f"{hits} redactions")
            )
    observations = [*hook_payloads(), json.loads(hook_payload(1000, 0))]
    fns = [lambda m=mod: [m.redact_obj(o) for o in observations] for mod, _ in targets]
    fns.append(lambda: [json.dumps(o) for o in observations])
    *products, floor = interleaved(fns, args.repeat)
    n = len(observations)
    for k in range(len(targets)):
        rows[k].append(("redact_obj per observation", n, products[k] / n, floor / n, "µs/call"))
    for k, (_, root) in enumerate(targets):
        imp, first = import_cost(root, args.runs)
        rows[k].append(("python -S: import sanitizer", args.runs, imp, None, "median"))
        rows[k].append(("python -S: first redact_obj 1 KB", args.runs, first, None, "median"))
    return rows


def per_rule() -> int:
    """Each gitleaks rule alone on its adversarial inputs (tests/capture/test_gitleaks_rules):
    CPU seconds at 16 KiB and 1 MiB of the worst input, and their ratio (linear: 64)."""
    sys.path.insert(0, str(REPO / "tests" / "capture"))
    from test_gitleaks_rules import LARGE, SMALL, _time, adversarial

    from wiki_memory.capture import leaks

    rows = []
    for rule in leaks.RULES:
        worst = (0.0, 0.0, 0.0, "")
        for unit in adversarial(rule):
            small = (unit * (SMALL // len(unit) + 1))[:SMALL]
            large = (unit * (LARGE // len(unit) + 1))[:LARGE]
            t_small, t_large = _time(rule, small), _time(rule, large)
            if t_large > worst[1]:
                worst = (t_small, t_large, t_large / max(t_small, 1e-4), unit)
        rows.append((rule.id, *worst))
    print(f"{'rule':<48} {'16 KiB':>9} {'1 MiB':>9} {'ratio':>7}  worst input unit")
    for rid, ts, tl, ratio, unit in sorted(rows, key=lambda r: -r[2]):
        print(f"{rid:<48} {ts * 1000:>7.1f}ms {tl * 1000:>7.1f}ms {ratio:>7.0f}  {unit[:24]!r}")
    top = max(rows, key=lambda r: r[2])
    print(f"\nworst rule: {top[0]} ({top[2]:.2f} s per MiB, ratio {top[3]:.0f})")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=3.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--against", metavar="REV", help="also measure the sanitizer at git REV")
    ap.add_argument(
        "--per-rule",
        action="store_true",
        help="instead: every generated gitleaks rule's worst adversarial input at 16 KiB"
        " and 1 MiB (the serial test's inputs), the table and the worst rule",
    )
    args = ap.parse_args()
    if args.per_rule:
        return per_rule()
    parts = mix(args.mb)
    targets: list[tuple[str, Path]] = []
    tmp = tempfile.TemporaryDirectory(prefix="wm-bench-sanitize-")
    if args.against:
        targets.append((args.against, extract(args.against, Path(tmp.name))))
    targets.append(("worktree", REPO))
    print(f"{os.cpu_count()} CPUs; Python {sys.version.split()[0]}; best of {args.repeat}")
    sizes = ", ".join(
        f"{k} {sum(len(s.encode()) for s in v) / 1e6:.2f} MB" for k, v in parts.items()
    )
    print(f"mix: {sizes}")
    loaded = [(load_from(root), root) for _, root in targets]
    all_rows = measure(loaded, parts, args)
    for (name, root), rows in zip(targets, all_rows, strict=True):
        print(f"\nsanitizer: {name} ({root / MODULE})")
        print(f"{'case':<34} {'MB/s':>8} {'time':>10} {'floor':>10} {'/floor':>8}  note")
        for case, size, product, floor, note in rows:
            if case.startswith("redact_text"):
                print(
                    f"{case:<34} {size / 1e6 / product:>8.1f} {product * 1000:>8.1f}ms "
                    f"{floor * 1000:>8.1f}ms {product / floor:>7.1f}x  {size / 1e6:.2f} MB, {note}"
                )
            elif floor is not None:
                print(
                    f"{case:<34} {'':>8} {product * 1e6:>8.1f}µs {floor * 1e6:>8.1f}µs "
                    f"{product / floor:>7.1f}x  {size} payloads"
                )
            else:
                print(f"{case:<34} {'':>8} {product * 1000:>8.2f}ms {'':>10} {'':>8}  {note}")
    tmp.cleanup()
    if len(all_rows) == 2:
        print(f"\nworktree against {args.against} (time before / time after, same rounds):")
        for before, after in zip(*all_rows, strict=True):
            if after[0].startswith(("redact_text", "redact_obj")):
                print(f"  {after[0]:<34} {before[2] / after[2]:>5.2f}x")
    print(
        "\nfloor: redact_text rows: re.compile('password').findall over the same strings;"
        " redact_obj: json.dumps of the same payload"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
