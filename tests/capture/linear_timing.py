"""The per-rule linear-time measure of tests/capture/test_gitleaks_rules.py: for every
generated rule and each of its adversarial units, the CPU time of the rule's own matcher
over the unit repeated to 16 KiB and to 1 MiB, and their ratio (64 for a linear rule,
4,096 for a quadratic one).

Each (rule, unit) is measured on its own in one process, CPU time against CPU time (both
runs in the same process, so another process on the machine costs neither of them), and
the units are spread over worker processes (:func:`worst_ratios`), one per core: the
measure of one unit is the same wherever it runs; only the wall time of all of them
shrinks.

Because the measure is CPU time against CPU time, it may also run in the background at the
lowest priority while other tests run (``python tests/capture/linear_timing.py OUT``,
started by ``tests/run.py`` for a whole-suite run): it then takes only the CPU the other
tests leave idle while they wait on servers, hooks and disks, and the test reads its
result (:func:`measured`)."""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

from wiki_memory.capture import leak_gaps, leaks

#: where a background run writes its result, and its process id (set by tests/run.py)
OUT_ENV, PID_ENV = "WIKI_MEMORY_TEST_LINEAR_OUT", "WIKI_MEMORY_TEST_LINEAR_PID"

#: the 1 MiB / 16 KiB time ratio (64 for linear, 4,096 for quadratic) stays below
LINEAR_RATIO = 256
SMALL, LARGE = 16 * 1024, 1024 * 1024
#: below this many CPU seconds per MiB a rule is fast whatever the ratio
FAST_PER_MIB = 0.05


def adversarial(rule: leaks.Rule) -> list[str]:
    """Units repeated to size: each keyword bare, followed by a run of the characters the
    rule consumes, glued with no separator, with ``=``, and a long run alone; for a rule
    with a long gap (``leak_gaps``), its keyword with each of its tail's flags, and the
    flags alone with a quote, a value or a whole tail."""
    units = []
    for k in rule.keywords[:3] or ("x",):
        units += [k, k + "=", k + " = a", k + "_" + "a1" * 8, f"{k}:{k}."]
    units += ["a" * 64, "A1" * 32, "0" * 64, "a-" * 16, "a.", " ="]
    gap = leak_gaps.read_gap(rule.fast)
    if gap is not None:  # a head and its tail's flags, the tail matched or not at each
        for f in gap.flags:
            units += [f"{gap.keyword} {f} ", f'{gap.keyword} {f} "', f"{gap.keyword}\n{f} '"]
            units += [f' {f} "', f" {f} 'a:", f' {f} "Authorization: Bearer abcdefgh1"']
    return units


def cpu_time(rule: leaks.Rule, text: str, tries: int = 1) -> float:
    """The least CPU seconds of ``tries`` runs of the rule's own matcher over ``text``."""
    low = text.lower()
    best = float("inf")
    for _ in range(tries):
        t = time.process_time()
        list(leaks._run(rule, text, low))
        best = min(best, time.process_time() - t)
    return best


def unit_ratio(index: int, unit: str) -> tuple[float, float]:
    """(ratio, CPU seconds at 1 MiB) of rule ``leaks.RULES[index]`` over ``unit``
    repeated; the ratio is 0 for a unit under :data:`FAST_PER_MIB` at 1 MiB.

    The 1 MiB run is timed once first: a unit under :data:`FAST_PER_MIB` there is fast
    whatever the ratio and its 16 KiB run is skipped. Otherwise the 16 KiB run is the
    best of three (the least time gives the largest, so the strictest, ratio), and only
    a ratio at or above the bound has its 1 MiB run timed once more, the better of the
    two kept (one slow run under a busy neighbour is not a quadratic rule)."""
    rule = leaks.RULES[index]
    small = (unit * (SMALL // len(unit) + 1))[:SMALL]
    large = (unit * (LARGE // len(unit) + 1))[:LARGE]
    t_large = cpu_time(rule, large)
    if t_large < FAST_PER_MIB:
        return 0.0, t_large
    t_small = max(cpu_time(rule, small, 3), 1e-4)  # below the clock's grain: noise
    if t_large / t_small >= LINEAR_RATIO:
        t_large = min(t_large, cpu_time(rule, large))
        if t_large < FAST_PER_MIB:
            return 0.0, t_large
    return t_large / t_small, t_large


def _unit_ratio(job: tuple[int, str]) -> tuple[float, float]:
    return unit_ratio(*job)


def workers() -> int:
    """The worker processes :func:`worst_ratios` uses: one per core this process may
    run on, at most 4."""
    return max(1, min(4, len(os.sched_getaffinity(0))))


def worst_ratios(n: int | None = None) -> dict[str, tuple[float, float, str]]:
    """Every rule's id → (ratio, CPU seconds at 1 MiB, unit) of its worst adversarial
    unit (ratio 0 and unit ``""`` when every unit is fast), measured in ``n`` worker
    processes (default :func:`workers`; 1: in this process). The units are handed out one
    at a time, so the workers end within one unit's time of each other."""
    jobs = [(i, u) for i, rule in enumerate(leaks.RULES) for u in adversarial(rule)]
    n = workers() if n is None else n
    if n <= 1:
        results = [unit_ratio(i, u) for i, u in jobs]
    else:
        with ProcessPoolExecutor(n, mp_context=get_context("spawn")) as pool:
            results = list(pool.map(_unit_ratio, jobs, chunksize=1))
    worst: dict[str, tuple[float, float, str]] = {r.id: (0.0, 0.0, "") for r in leaks.RULES}
    for (i, unit), (ratio, secs) in zip(jobs, results, strict=True):
        rid = leaks.RULES[i].id
        if ratio > worst[rid][0]:
            worst[rid] = (ratio, secs, unit)
    return worst


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, ended but not yet waited for, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def measured(poll: float = 0.5) -> dict[str, tuple[float, float, str]]:
    """:func:`worst_ratios`, read from the background run named by :data:`OUT_ENV` and
    :data:`PID_ENV` when there is one (waiting for it to end), else measured here.

    Raises AssertionError when the background run ended without a result or with an
    error (its traceback in the message)."""
    out, pid = os.environ.get(OUT_ENV), os.environ.get(PID_ENV)
    if not out or not pid:
        return worst_ratios()
    while not os.path.exists(out):
        if not _alive(int(pid)):
            time.sleep(poll)  # it may have written the file as it ended
            if not os.path.exists(out):
                raise AssertionError(f"the background linear-time run ({pid}) ended without {out}")
        time.sleep(poll)
    with open(out, encoding="utf-8") as f:
        got = json.load(f)
    assert "error" not in got, got.get("error")
    return {rid: (float(r), float(s), str(u)) for rid, (r, s, u) in got["worst"].items()}


def main(out: str) -> int:
    """Measure :func:`worst_ratios` and write ``{"worst": {rule id: [ratio, seconds,
    unit]}}`` to ``out`` (``{"error": traceback}`` when the measure failed), whole: the
    file appears only when it is complete."""
    try:
        got: dict[str, object] = {"worst": worst_ratios()}
    except Exception:
        got = {"error": traceback.format_exc()}
    tmp = out + ".part"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(got, f)
    os.replace(tmp, out)
    return 0 if "worst" in got else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
