"""Work a whole-suite run does in the background, at the lowest CPU priority, for the
tests that read it: ``tests/run.py`` starts ``python tests/capture/background.py FOLDER
SEED`` beside its parallel part and names it in the environment (:data:`DIR_ENV`,
:data:`PID_ENV`, :data:`SEED_ENV`).

Its jobs are CPU work whose result does not depend on when or how fast it runs, so the
priority changes nothing in them; they take the cores the parallel part leaves idle while
its tests wait on servers, hooks and disks (about 105 s of CPU the tests took before):

- ``seed0``: every rule's gitleaks sample of seed 0, which five test files read
  (``gitleaks_samples.shared_samples``: written to ``FOLDER/seed0-samples.json`` under
  its lock, so a worker that asks meanwhile waits for it and none searches them again);
- ``samples``: one gitleaks sample per rule searched with the run's seed
  (``gitleaks_samples.sample``), for the end-to-end test of the rules;
- ``linear``: each rule's linear-time measure (``linear_timing.worst_ratios``), which
  compares CPU time with CPU time.

Each job's result is written whole to ``FOLDER/<job>.json`` (``{"result": ...}``, or
``{"error": traceback}``). A test asks with :func:`result`, which computes in place when
no background run was started (a subset of the suite, a file alone)."""

from __future__ import annotations

import json
import os
import random
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: the folder the jobs write into, the background process's id and the run's seed
DIR_ENV = "WIKI_MEMORY_TEST_BACKGROUND_DIR"
PID_ENV = "WIKI_MEMORY_TEST_BACKGROUND_PID"
SEED_ENV = "WIKI_MEMORY_TEST_BACKGROUND_SEED"
#: a folder every test process of one run shares, whether or not a background run was
#: started (``gitleaks_samples`` keeps the seed-0 samples the workers share there)
SHARED_ENV = "WIKI_MEMORY_TEST_SHARED_DIR"


def seed() -> int:
    """The run's sample seed when a background run was started, else a fresh one."""
    given = os.environ.get(SEED_ENV)
    return int(given) if given else random.SystemRandom().randrange(1 << 30)


def samples(run_seed: int) -> list[tuple[str, str | None]]:
    """(rule id, text or None) of one sample per rule without a path condition, searched
    with ``run_seed``."""
    from gitleaks_samples import sample

    from wiki_memory.capture import leaks

    return [(r.id, sample(r, run_seed)) for r in leaks.RULES if r.path is None]


def seed0(folder: str) -> int:
    """Search every rule's sample of seed 0 into ``folder`` for the workers
    (``gitleaks_samples.shared_samples``); how many were searched."""
    from gitleaks_samples import shared_samples

    return len(shared_samples(Path(folder)))


def linear() -> dict[str, tuple[float, float, str]]:
    """``linear_timing.worst_ratios()``."""
    import linear_timing

    return linear_timing.worst_ratios()


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, ended but not yet waited for, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def result(job: str, compute: Callable[[], Any], poll: float = 0.5) -> Any:
    """The background run's result of ``job`` (JSON: tuples read back as lists), waiting
    for it; ``compute()`` when no background run was started.

    Raises AssertionError when the background run ended without that result, or with
    an error (its traceback in the message)."""
    folder, pid = os.environ.get(DIR_ENV), os.environ.get(PID_ENV)
    if not folder or not pid:
        return compute()
    path = Path(folder) / f"{job}.json"
    while not path.exists():
        if not _alive(int(pid)):
            time.sleep(poll)  # it may have written the file as it ended
            if not path.exists():
                raise AssertionError(f"the background run ({pid}) ended without {path}")
        time.sleep(poll)
    got = json.loads(path.read_text(encoding="utf-8"))
    assert "error" not in got, got.get("error")
    return got["result"]


def main(folder: str, run_seed: int) -> int:
    """Run the jobs in order, each written whole to ``folder/<job>.json``; 1 when one
    failed."""
    failed = 0
    jobs: list[tuple[str, Callable[[], Any]]] = [
        ("seed0", lambda: seed0(folder)),
        ("samples", lambda: samples(run_seed)),
        ("linear", linear),
    ]
    for job, compute in jobs:
        try:
            got: dict[str, Any] = {"result": compute()}
        except Exception:
            got = {"error": traceback.format_exc()}
            failed = 1
        part = Path(folder) / f"{job}.part"
        part.write_text(json.dumps(got), encoding="utf-8")
        part.replace(Path(folder) / f"{job}.json")
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
