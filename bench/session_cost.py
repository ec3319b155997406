"""What one more turn costs a session page, early and late in a long session.

An in-process ``Memory`` (the core every face calls; default settings, no watcher) on a
temporary data directory captures one Claude Code session: each turn is a
``UserPromptSubmit`` (~200 bytes), a ``PostToolUse`` (~100 bytes of output) and a
``Stop`` (~250 bytes of reply), captured one event at a time as the hook posts them,
then the writer is flushed (the compile ``Stop`` asks for, and its commit). A turn's
time is from its first capture to its commit.

``--samples`` turns are timed ending at each of ``--at`` (default 100, 1000 and 3000);
the turns between are captured in lists of 999 events (one compile per list), so a
3,000-turn session is built in seconds whatever the cost per turn.

The floor, in the same run and at the same turns: the same three events appended as
JSON lines to one file and the turn's entries (the same bytes the product's compiler
writes for them) appended to one markdown file, each append ``fsync``-ed: what any
durable capture that adds a turn to a page must at least do, and flat by construction.

Prints per row the median and p95 ms per turn, the floor's median, the ratio to the
floor, the ratio to the first row (the target: at turn 3,000 at most 1.2x turn 100),
and what the session page weighs: its size and the median time of one parse of it
(``parse_page``; the index parsed the whole page each turn until it parsed a grown
page by its new part, ``wiki_memory/index/pagetail.py``). Past ``session_part_events``
(600 events, turn 200 here) later entries go to part pages and the session page stops
growing (docs/sessions.md, "Parts"); ``WIKI_MEMORY_SESSION_PART_EVENTS=0`` measures the
single page.

    python bench/session_cost.py [--at 100,1000,3000] [--samples 15]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from wiki_memory.config import load_settings  # noqa: E402
from wiki_memory.core.memory import Memory  # noqa: E402
from wiki_memory.datadir import ensure_layout  # noqa: E402

SID = "bench-long-session"


def event(name: str, **payload: Any) -> dict[str, Any]:
    payload.update(session_id=SID, cwd="/home/dev/atlas", hook_event_name=name)
    return {"harness": "claude-code", "project": "atlas", "payload": payload}


def turn(n: int) -> list[dict[str, Any]]:
    """Turn ``n``'s three events, about 550 bytes of text."""
    return [
        event("UserPromptSubmit", prompt=f"prompt {n}: " + "look at the parser again " * 8),
        event(
            "PostToolUse",
            tool_name="Bash",
            tool_use_id=f"toolu_{n}",
            tool_input={"command": f"grep -n parse src/mod{n % 7}.py"},
            tool_response={"stdout": "12: def parse(x):\n" * 5, "stderr": ""},
        ),
        event("Stop", last_assistant_message=f"reply {n}: " + "the parser now keeps offsets " * 8),
    ]


def entries_text(n: int) -> bytes:
    """What the compiler writes for turn ``n`` (the floor appends the same bytes)."""
    from wiki_memory.capture.observation import SessionMeta, parse_event
    from wiki_memory.wiki import compiler

    obs = [parse_event(e, "alice") for e in turn(n)]
    meta = SessionMeta("k" * 64, "claude-code", SID, "atlas", "alice", None, 0.0)
    comp = compiler.compile_session(meta, obs, status="active", ended=None, now=0.0)
    return comp.timeline.encode() + b"\n\n"


class Floor:
    """Durable appends of a turn's events and entries, nothing else."""

    def __init__(self, folder: Path) -> None:
        self.spool = os.open(folder / "floor.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self.page = os.open(folder / "floor.md", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def turn(self, n: int, page_bytes: bytes) -> None:
        for ev in turn(n):
            os.write(self.spool, json.dumps(ev).encode() + b"\n")
            os.fsync(self.spool)
        os.write(self.page, page_bytes)
        os.fsync(self.page)

    def close(self) -> None:
        os.close(self.spool)
        os.close(self.page)


def parse_time(raw: bytes) -> float:
    """The median seconds of three parses of a page's bytes."""
    from wiki_memory.wiki.page import parse_page

    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        parse_page(raw, "projects/atlas/sessions/page.md")
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def p95(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(0.95 * (len(s) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--at", default="100,1000,3000", help="turns to time, comma separated")
    ap.add_argument("--samples", type=int, default=15, help="turns timed ending at each")
    args = ap.parse_args()
    marks = sorted(int(x) for x in args.at.split(","))
    if marks[0] <= args.samples:
        ap.error("--at: every turn must be above --samples")
    tmp = Path(tempfile.mkdtemp(prefix="wm-session-cost-"))
    settings = load_settings(tmp / "data", watch=False)
    ensure_layout(settings)
    mem = Memory(settings, owner_user="alice")
    mem.start()
    floor = Floor(tmp)
    page_bytes = entries_text(1)
    rows: list[tuple[int, list[float], list[float], int, float]] = []
    done = 0
    try:
        for mark in marks:
            first = mark - args.samples + 1
            batch: list[dict[str, Any]] = []
            for n in range(done + 1, first):
                batch.extend(turn(n))
                if len(batch) >= 999:
                    mem.capture(batch, mem.scope.local_owner)
                    batch = []
            if batch:
                mem.capture(batch, mem.scope.local_owner)
            mem.writer.flush()
            prod: list[float] = []
            flo: list[float] = []
            for n in range(first, mark + 1):
                t0 = time.perf_counter()
                for ev in turn(n):
                    mem.capture(ev, mem.scope.local_owner)
                mem.writer.flush()
                prod.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                floor.turn(n, page_bytes)
                flo.append(time.perf_counter() - t0)
            info = next(i for i in mem.spool.sessions.values() if i.session_id == SID)
            raw = (settings.wiki_dir / info.state["path"]).read_bytes()
            rows.append((mark, prod, flo, len(raw), parse_time(raw)))
            done = mark
    finally:
        floor.close()
        mem.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{os.cpu_count()} CPUs; one session, {args.samples} turns timed ending at each row")
    print(f"a turn adds ~{len(page_bytes):,} bytes of page")
    head = f"{'turn':>6} {'p50 ms':>8} {'p95 ms':>8} {'floor ms':>9} {'/floor':>8} {'/first':>8}"
    print(head + f" {'page KB':>8} {'parse ms':>9}")
    base = statistics.median(rows[0][1])
    for mark, prod, flo, size, parse in rows:
        p50 = statistics.median(prod)
        f50 = statistics.median(flo)
        print(
            f"{mark:>6} {p50 * 1000:>8.1f} {p95(prod) * 1000:>8.1f} {f50 * 1000:>9.2f}"
            f" {p50 / f50:>7.1f}x {p50 / base:>7.2f}x {size / 1024:>8.0f} {parse * 1000:>9.1f}"
        )
    print(
        "a turn: 3 events captured one by one, then the writer flushed (compile + commit); "
        "floor: the events and the turn's entries appended to two files, each fsync-ed; "
        "parse: one parse of the whole page as it is at that turn (the index now parses its new part)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
