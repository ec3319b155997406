"""The whole suite as the README runs it: every test but the ``serial`` ones on two
workers (``pytest -n 2 --dist loadgroup -m 'not serial'``: a file's module-scoped fixture
stays on one worker, tests/conftest.py), then the ``serial`` ones
on their own (``pytest -n 2 --dist loadgroup -m serial``: they assert time bounds, which
the parallel part's load would break; each holds its bound under two busy loops, more
load than one serial neighbour makes, so they run two at a time).
A whole-suite run also runs ``tests/capture/background.py`` beside the parallel part at
the lowest CPU priority (:func:`start_background`), for the tests that read its results.
Arguments go to both runs (``-x``, ``-k word``, a folder, ...). Exits 0 when both pass
(a serial run that selects nothing passes) and ends with one line adding the two up.
With ``--folders`` it first prints a table of the tests per folder of ``tests/``: how
many ran and the seconds they took, summed (setup, call and teardown, as pytest's
``--junitxml`` reports them; on two workers the sum is about twice the wall time).

    python tests/run.py -q
    python tests/run.py -q --folders
"""

from __future__ import annotations

import compileall
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

# the names the background run and the tests that read it are found by, kept in one place
sys.path.insert(0, str(Path(__file__).with_name("capture")))
import background  # noqa: E402

WORKERS = os.environ.get("WIKI_MEMORY_TEST_WORKERS", "2")

NO_TESTS = 5  # pytest's exit code when nothing was selected
SUMMARY = re.compile(r"^=*\s*((?:\d+ \w+|no tests ran).*?) in ([\d.]+)s")


def run(args: list[str]) -> tuple[int, str, float]:
    """Run pytest with ``args``, its output passed through; its exit code, the counts of
    its closing line and the time it reported."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    assert proc.stdout is not None
    counts, seconds = "", 0.0
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        m = SUMMARY.match(line.strip())
        if m:
            counts, seconds = m.group(1), float(m.group(2))
    return proc.wait(), counts, seconds


def add(*summaries: str) -> str:
    """``"3 passed, 1 skipped"`` and ``"2 passed, 9 deselected"`` → ``"5 passed, 1 skipped"``
    (deselected ones left out: each run deselects what the other runs)."""
    total: dict[str, int] = {}
    for s in summaries:
        for n, word in re.findall(r"(\d+) (\w+)", s):
            if word != "deselected":
                total[word] = total.get(word, 0) + int(n)
    return ", ".join(f"{n} {w}" for w, n in total.items())


def folder_table(reports: list[Path]) -> str:
    """A Markdown table of the tests in pytest's JUnit XML ``reports`` by folder of
    ``tests/`` (``tests/core``, ...): tests run (skipped ones counted) and their summed
    seconds, with a total row. A report that is missing (a run that selected nothing
    writes one anyway; a run that crashed may not) adds nothing."""
    rows: dict[str, list[float]] = {}
    for report in reports:
        if not report.exists():
            continue
        for case in ET.parse(report).getroot().iter("testcase"):
            parts = case.get("classname", "").split(".")
            folder = "/".join(parts[:2]) if len(parts) > 2 else parts[0] or "(unnamed)"
            row = rows.setdefault(folder, [0, 0.0])
            row[0] += 1
            row[1] += float(case.get("time", 0))
    lines = ["| folder | tests | seconds |", "|---|--:|--:|"]
    lines += [f"| {f} | {int(n)} | {t:.0f} |" for f, (n, t) in sorted(rows.items())]
    total_n = sum(int(n) for n, _ in rows.values())
    total_t = sum(t for _, t in rows.values())
    lines.append(f"| total | {total_n} | {total_t:.0f} |")
    return "\n".join(lines)


def junit(wanted: bool, report: Path) -> list[str]:
    """pytest's option writing its JUnit XML report to ``report``, when ``wanted``."""
    return [f"--junitxml={report}"] if wanted else []


def compile_sources() -> None:
    """Byte-compile the project's own modules (``wiki_memory``, ``hooks``, ``tests``) into
    their ``__pycache__`` folders before the run. Every server, CLI and hook process the
    tests start imports them, and where ``PYTHONDONTWRITEBYTECODE`` is set (it is on this
    project's machines) each process would compile them from source again: importing the
    CLI, the app and ``Memory`` took 1.05 s of CPU from source and 0.82 s compiled. Python
    reads the compiled files whatever that variable says; ``compileall`` writes them
    anyway and skips the ones already current."""
    for folder in ("wiki_memory", "hooks", "tests"):
        compileall.compile_dir(folder, quiet=1)


#: options that leave a run's selection whole (anything else may deselect the tests that
#: read the background run's results, which then would be wasted work)
WHOLE = re.compile(r"^-(q+|v+|x|s|r\w*|-tb=\w+|-folders|-maxfail=\d+)$")


def start_background(argv: list[str], folder: Path) -> subprocess.Popen[bytes] | None:
    """For a whole-suite run (``argv`` only options that select no subset), start
    ``tests/capture/background.py`` (the rules' samples and linear-time measure for the
    tests that read them) at the lowest CPU priority, writing into ``folder``, and name
    it in this process's environment. Its work is CPU work whose result does not depend
    on how fast it runs: it takes the cores the parallel part leaves idle while its tests
    wait on servers, hooks and disks (about 85 s of CPU otherwise taken from them). None
    for a run of a subset, where those tests compute in place."""
    if not all(WHOLE.match(a) for a in argv):
        return None
    seed = random.SystemRandom().randrange(1 << 30)
    proc = subprocess.Popen(
        [sys.executable, "tests/capture/background.py", str(folder), str(seed)],
        preexec_fn=lambda: os.nice(19),  # noqa: PLW1509 - this process starts no threads
        start_new_session=True,
    )
    os.environ[background.DIR_ENV] = str(folder)
    os.environ[background.PID_ENV] = str(proc.pid)
    os.environ[background.SEED_ENV] = str(seed)
    return proc


def stop(proc: subprocess.Popen[bytes] | None) -> None:
    """End the background run and its worker processes if it still runs (a test that
    reads it failed first or was not reached)."""
    if proc is None:
        return
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    proc.wait()
    for name in (background.DIR_ENV, background.PID_ENV, background.SEED_ENV):
        os.environ.pop(name, None)


def main(argv: list[str]) -> int:
    os.chdir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    folders = "--folders" in argv
    argv = [a for a in argv if a != "--folders"]
    reports = Path(tempfile.mkdtemp(prefix="wiki-memory-tests-"))
    par, ser = reports / "parallel.xml", reports / "serial.xml"
    start = time.monotonic()
    compile_sources()
    parallel = ["-n", WORKERS, "--dist", "loadgroup", "-m", "not serial"]
    # what the test processes of this run share (tests/capture/gitleaks_samples.py)
    os.environ[background.SHARED_ENV] = str(reports)
    side = start_background(argv, reports)
    try:
        rc1, s1, t1 = run([*parallel, *argv, *junit(folders, par)])
    finally:
        stop(side)
    rc2, s2, t2 = run(
        ["-n", WORKERS, "--dist", "loadgroup", "-m", "serial", *argv, *junit(folders, ser)]
    )
    if rc2 == NO_TESTS:
        rc2 = 0
    wall = time.monotonic() - start
    if folders:
        print(folder_table([par, ser]))
    shutil.rmtree(reports, ignore_errors=True)
    print(
        f"{add(s1, s2)} in {t1 + t2:.2f}s "
        f"(parallel part {t1:.0f}s on {WORKERS} workers, serial part {t2:.0f}s; {wall:.0f}s wall)"
    )
    return rc1 or rc2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
