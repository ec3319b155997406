"""Wall time of the hook program over the shared hook payloads, this tree against another.

Runs the hook as a harness runs it (``python -S <tree>/hooks/wiki_memory_hook.py
--harness <h>``, the event JSON on stdin) for every input payload of
``../shared/data/hooks`` (Claude Code, Codex, Gemini CLI; answers and transcripts left
out), against one live ``wiki-memory serve`` of this tree on a temporary data directory.
``--against DIR`` is a second checkout (``git worktree add /tmp/san-old <rev>``): its own
hook program and the sanitizer beside it run the same payloads. The trees take turns
payload by payload, ``--rounds`` times over all payloads (default 10), so a busy spell of
the shared machine hits both alike. Prints p50 and p95 wall time per tree and the CPU time
of each run (user + system of the hook process and its children, from ``getrusage``),
the floor (``python -S -c pass``, taking the same turns) and the differences of the p95s.

    python bench/hook_payloads.py [--against /tmp/san-old] [--rounds 10]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from hook import Server, pct, timed  # noqa: E402

SHARED = REPO.parent / "shared" / "data"
if not SHARED.is_dir():
    SHARED = Path(os.environ.get("WIKI_MEMORY_SHARED", "/work/shared")) / "data"
HARNESS = {"claude-code": "claude-code", "codex": "codex", "gemini": "gemini-cli"}


def payloads() -> list[tuple[str, str, bytes]]:
    """``(harness, file name, bytes)`` of every shared hook input payload (sorted)."""
    out = []
    for folder, harness in HARNESS.items():
        for f in sorted((SHARED / "hooks" / folder).glob("*.json")):
            if f.name.startswith("response"):
                continue
            out.append((harness, f"{folder}/{f.name}", f.read_bytes()))
    return out


def cpu_timed(argv: list[str], data: bytes, env: dict[str, str]) -> tuple[float, float]:
    """``(wall seconds, CPU seconds)`` of one run: the CPU time (user + system) of the
    child, which a busy neighbour on the shared machine stretches far less than wall."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = timed(argv, data, env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", type=Path, help="a second checkout to run beside this one")
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    items = payloads()
    if not items:
        raise SystemExit(f"no hook payloads under {SHARED / 'hooks'}")
    trees = ([("against", args.against)] if args.against else []) + [("this tree", REPO)]
    py = sys.executable
    tmp = Path(tempfile.mkdtemp(prefix="wm-bench-hookp-"))
    data = tmp / "data"
    data.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WIKI_MEMORY_")}
    env["WIKI_MEMORY_HOME"] = str(data)
    times: dict[str, list[float]] = {name: [] for name, _ in trees}
    cpus: dict[str, list[float]] = {name: [] for name, _ in trees}
    floor: list[float] = []
    floor_cpu: list[float] = []
    srv = Server(data)
    try:
        live = dict(env, WIKI_MEMORY_URL=srv.url)
        for _name, root in trees:  # warm each tree's bytecode caches once
            for harness, _f, body in items:
                timed([py, "-S", str(root / "hooks" / "wiki_memory_hook.py"), "--harness",
                       harness], body, live)  # fmt: skip
        for _ in range(args.rounds):
            for harness, _f, body in items:
                wall, cpu = cpu_timed([py, "-S", "-c", "pass"], b"", env)
                floor.append(wall)
                floor_cpu.append(cpu)
                for name, root in trees:
                    hook = [py, "-S", str(root / "hooks" / "wiki_memory_hook.py")]
                    wall, cpu = cpu_timed([*hook, "--harness", harness], body, live)
                    times[name].append(wall)
                    cpus[name].append(cpu)
        left = [n for n in os.listdir(data / "outbox") if n.endswith(".json")]
        if left:
            print(f"warning: {len(left)} event(s) left in the outbox", file=sys.stderr)
    finally:
        srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"interpreter: {py} (Python {sys.version.split()[0]}), {os.cpu_count()} CPUs")
    print(f"{len(items)} payloads x {args.rounds} rounds; {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"load average: {os.getloadavg()[0]:.1f}")
    print(f"{'hook of':<40} {'runs':>5} {'wall p50':>9} {'wall p95':>9} {'CPU p50':>8} "
          f"{'CPU p95':>8}  (ms)")  # fmt: skip
    rows = [("floor: python -S -c pass", floor, floor_cpu)]
    rows += [(f"{name} ({root})", times[name], cpus[name]) for name, root in trees]
    for label, xs, cs in rows:
        print(f"{label:<40} {len(xs):>5} {pct(xs, 0.5) * 1000:>9.1f} "
              f"{pct(xs, 0.95) * 1000:>9.1f} {pct(cs, 0.5) * 1000:>8.1f} "
              f"{pct(cs, 0.95) * 1000:>8.1f}")  # fmt: skip
    if args.against:
        for label, d in (("wall", times), ("CPU", cpus)):
            diff = (pct(d["this tree"], 0.95) - pct(d["against"], 0.95)) * 1000
            print(f"{label} p95 this tree - against: {diff:+.1f} ms (target: at most +3 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
