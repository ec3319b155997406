"""What the hook's report of the instruction files (docs/agent-files.md, "In the brief")
adds to a SessionStart. Each run is a fresh ``python -S`` process that times, inside
itself (so the process start's noise stays out), the import of the hook's own project
and sanitizer modules (the floor: what every hook run pays) and then the import of
``capture/agentfiles.py`` plus the report of a project holding each instruction file the
import knows (the product: what a SessionStart adds); median of ``--runs``.

    .venv/bin/python bench/agentfiles_report.py [--runs 30]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = (
    "import sys, time; sys.path.insert(0, sys.argv[1]); t0 = time.perf_counter(); "
    "from wiki_memory.capture import project, sanitize; t1 = time.perf_counter(); "
    "from wiki_memory.capture import agentfiles; n = len(agentfiles.report(sys.argv[2])); "
    "t2 = time.perf_counter(); print(t1 - t0, t2 - t1, n)"
)


def layout(tmp: Path) -> Path:
    home = tmp / "home"
    api = home / "work" / "api"
    (api / ".git").mkdir(parents=True)
    for rel in ("CLAUDE.md", ".claude/CLAUDE.md", "CLAUDE.local.md", "AGENTS.md", "GEMINI.md"):
        (api / rel).parent.mkdir(parents=True, exist_ok=True)
        (api / rel).write_text("# Conventions\n\n" + "- a rule of this project\n" * 40)
    (api / ".cursor" / "rules").mkdir(parents=True)
    (api / ".cursor" / "rules" / "a.mdc").write_text("---\nalwaysApply: true\n---\nrule\n")
    for rel in (".claude/CLAUDE.md", ".codex/AGENTS.md", ".gemini/GEMINI.md"):
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text("# Mine\n")
    return api


def timed(api: Path, runs: int) -> tuple[float, float, int]:
    env = {"HOME": str(api.parents[1]), "PATH": "/usr/bin:/bin"}
    floors, adds, n = [], [], 0
    for _ in range(runs):
        r = subprocess.run(
            [sys.executable, "-S", "-c", CODE, str(ROOT), str(api)],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        a, b, c = r.stdout.split()
        floors.append(float(a))
        adds.append(float(b))
        n = int(c)
    return statistics.median(floors) * 1000, statistics.median(adds) * 1000, n


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=30)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        api = layout(Path(d))
        floor, added, n = timed(api, args.runs)
    print("| what | median ms | x floor |")
    print("|---|---:|---:|")
    print(f"| floor: import of the hook's project and sanitizer modules | {floor:.2f} | 1.00 |")
    print(
        f"| product: import of agentfiles + report of {n} files | {added:.2f} "
        f"| {added / floor:.2f} |"
    )


if __name__ == "__main__":
    main()
