"""The per-rule linear-time measure of tests/capture/test_gitleaks_rules.py: for every
generated rule and each of its adversarial units, the CPU time of the rule's own matcher
over the unit repeated to 16 KiB and to 1 MiB, and their ratio (64 for a linear rule,
4,096 for a quadratic one).

Each (rule, unit) is measured on its own in one process, CPU time against CPU time (both
runs in the same process, so another process on the machine costs neither of them), and
the units are spread over worker processes (:func:`worst_ratios`), one per core: the
measure of one unit is the same wherever it runs; only the wall time of all of them
shrinks.

Because the measure is CPU time against CPU time, a whole-suite run makes it in the
background at the lowest priority (``background.py``), where it takes only the CPU the
other tests leave idle."""

from __future__ import annotations

import os
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

from wiki_memory.capture import leak_gaps, leaks

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
