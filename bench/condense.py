"""Cold session pages condensed (docs/knowledge.md, "Cold sessions condensed"): what it
saves, what it keeps, and what it does to recall.

    python bench/condense.py [--pages 100] [--locomo-dir DIR] [--conversations N]

1. ``--pages`` ended sessions built from the shared Claude Code hook payload shapes
   (tests/condensekit.py: a goal, reads with long outputs, a failed test run, an edit,
   the same run passing, a reply with a decision and a question), ten of them linked by
   a note at their failed run's ``^tN``, are condensed in one run with the clock a year
   on: tokens before and after (cl100k_base, whole pages), the five facts chosen from
   each timeline before (goal, decision, file, command that worked, error) found by
   recall (the page among the first 10 items), linked ``^tN`` that still land, and
   ``uncondense`` restoring each timeline byte for byte. The run's time is printed beside
   the floor of reading and writing the same bytes.
2. LoCoMo's dev conversations, ingested in process (one session per LoCoMo session, as
   bench/locomo.py does over HTTP), scored in process (``locomo.evaluate``: S@5, T@10,
   categories 1-4) with condensing off, then on (every session treated as a year old).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import condensekit as ck  # noqa: E402
import locomo  # noqa: E402

from wiki_memory.config import load_settings  # noqa: E402
from wiki_memory.core.condense import condense_sessions, uncondense  # noqa: E402
from wiki_memory.core.memory import Memory  # noqa: E402
from wiki_memory.datadir import ensure_layout  # noqa: E402
from wiki_memory.recall.tokens import count_tokens  # noqa: E402
from wiki_memory.wiki import condense as wc  # noqa: E402
from wiki_memory.wiki.condense import timeline_span  # noqa: E402

SHARED = Path(os.environ.get("WIKI_MEMORY_SHARED") or ROOT.parent / "shared")
HOOKS = SHARED / "data" / "hooks"
YEAR = 365 * 86400.0


def memory(data: Path) -> Memory:
    s = load_settings(data, watch=False, commit_delay_seconds=0.05)
    ensure_layout(s)
    m = Memory(s, owner_user="owner")
    m.start()
    return m


def timeline(raw: bytes) -> bytes:
    text = raw.decode("utf-8", "surrogateescape")
    span = timeline_span(text)
    return b"" if span is None else text[span[0] : span[1]].encode("utf-8", "surrogateescape")


def sessions_part(n: int, data: Path) -> list[str]:
    m = memory(data)
    try:
        for i in range(n):
            m.capture(ck.events(HOOKS, i), m.scope.local_owner)
        m.writer.flush()
        plans: dict[str, ck.Plan] = {}
        for i in range(n):
            info = next(x for x in m.spool.sessions.values() if x.session_id == ck.plan(i).sid)
            plans[info.state["path"]] = ck.plan(i)
        linked = sorted(plans)[:10]
        note = "Failed runs:\n\n" + "\n".join(f"- [[{Path(p).stem}#^t10]]" for p in linked)
        m.write_page(
            "projects/atlas/notes/failed-runs.md",
            (note + "\n").encode(),
            user=m.owner,
            message="Note the failed runs",
        )
        m.writer.flush()
        before = {p: (m.wiki_dir / p).read_bytes() for p in plans}
        t0 = time.perf_counter()
        res = condense_sessions(m, None, now=time.time() + YEAR)
        run_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for p, raw in before.items():  # the floor: read and write the same bytes
            (data / "floor.tmp").write_bytes(hashlib.sha256(raw).hexdigest().encode() + raw)
            (m.wiki_dir / p).read_bytes()
        floor_s = time.perf_counter() - t0
        found = total = 0
        missed: list[str] = []
        for p, plan in plans.items():
            facts = [plan.goal, plan.decision, plan.file, plan.command, plan.error.split(" - ")[1]]
            for fact in facts:
                items = m.recall(fact, project="atlas", user=m.scope.local_owner).items
                total += 1
                if p in [i.get("path") for i in items[:10]]:
                    found += 1
                else:
                    missed.append(f"{p}: {fact}")
        lands = sum("^t10" in [s["anchor"] for s in m.index.sections_of(p)] for p in linked)
        outl = m.index.outlinks("projects/atlas/notes/failed-runs.md")
        resolved = sum(x["status"] == "resolved" for x in outl)
        restored = 0
        for p in plans:
            uncondense(m, m.scope.local_owner, p)
            restored += timeline((m.wiki_dir / p).read_bytes()) == timeline(before[p])
    finally:
        m.stop()
    tb, ta = res["tokens_before"], res["tokens_after"]
    return [
        f"{n} cold session pages (shared Claude Code payload shapes), condensed in one run",
        f"{'measure':<44} {'value':>16}",
        f"{'pages condensed':<44} {res['condensed']:>16}",
        f"{'tokens before → after (whole pages)':<44} {f'{tb:,} → {ta:,}':>16}",
        f"{'tokens after / before':<44} {ta / tb:>16.3f}",
        f"{'facts found by recall (top 10), of 5/page':<44} {f'{found}/{total}':>16}",
        f"{'linked ^tN still a section of its page':<44} {f'{lands}/{len(linked)}':>16}",
        f"{'links of the note still resolved':<44} {f'{resolved}/{len(outl)}':>16}",
        f"{'uncondense: timeline byte for byte':<44} {f'{restored}/{n}':>16}",
        f"{'condense run s (floor: read+write bytes)':<44} "
        f"{f'{run_s:.2f} ({floor_s:.3f}) ×{run_s / max(floor_s, 1e-9):.0f}':>16}",
        *([f"missed: {x}" for x in missed[:10]]),
    ]


def locomo_part(data: Path, conversations: int | None) -> list[str]:
    convs = locomo.load(SHARED / "data" / "locomo" / "locomo7-dev.json", conversations)
    m = memory(data)
    try:
        if not (m.wiki_dir / "projects" / convs[0].sample_id).exists():
            t0 = time.perf_counter()
            for conv in convs:
                for n, turns in conv.sessions.items():
                    m.capture(_session_events(conv, n, turns), m.scope.local_owner)
            m.writer.flush()
            print(f"ingested in process in {time.perf_counter() - t0:.1f} s", flush=True)
        anchors: dict[str, str] = {}
        pages: dict[str, tuple[str, int]] = {}
        for conv in convs:
            for row in m.index.list_pages(project=conv.sample_id, kind="session", limit=1000):
                raw = (m.wiki_dir / row["path"]).read_text()
                anchors.update(locomo.anchor_map(raw, row["path"]))
                sid = str(row["meta"].get("session_id", ""))
                pages[row["path"]] = (conv.sample_id, int(sid.rsplit("-s", 1)[1]))

        def tokens() -> int:
            return sum(count_tokens((m.wiki_dir / p).read_text()) for p in pages)

        before = tokens()
        off = locomo.evaluate(m, convs, anchors, pages, 4000, {}).rate()
        res = condense_sessions(m, None, now=time.time() + YEAR)
        on = locomo.evaluate(m, convs, anchors, pages, 4000, {}).rate()
        after = tokens()
        # every page, even one that keeps more than KEEP_RATIO of its characters
        wc.KEEP_RATIO, keep = 10.0, wc.KEEP_RATIO
        try:
            forced = condense_sessions(m, None, now=time.time() + YEAR)
        finally:
            wc.KEEP_RATIO = keep
        every = locomo.evaluate(m, convs, anchors, pages, 4000, {}).rate()
        after_all = tokens()
    finally:
        m.stop()
    return [
        f"LoCoMo dev, in process, categories 1-4 ({len(convs)} conversations, "
        f"{len(pages)} session pages; main's dev figures: S@5 0.931, T@10 0.751)",
        f"{'condensing':<34} {'pages':>6} {'S@5':>6} {'T@10':>6} {'session tokens':>15}",
        f"{'off':<34} {0:>6} {off[0]:6.3f} {off[1]:6.3f} {before:>15,}",
        f"{'on (1 year old)':<34} {res['condensed']:>6} {on[0]:6.3f} {on[1]:6.3f} {after:>15,}",
        f"{'on, every page (ratio rule off)':<34} {res['condensed'] + forced['condensed']:>6} "
        f"{every[0]:6.3f} {every[1]:6.3f} {after_all:>15,}",
    ]


def _session_events(conv: Any, n: int, turns: list[Any]) -> list[dict[str, Any]]:
    """One LoCoMo session's events, exactly as bench/locomo.py posts them."""
    sid = locomo.session_key(conv, n)
    base = conv.dates[n]
    out: list[dict[str, Any]] = []
    for i, t in enumerate(turns):
        out.append(
            {
                "harness": "locomo",
                "event": "UserPromptSubmit",
                "session_id": sid,
                "project": conv.sample_id,
                "event_id": f"{sid}-{t.dia_id}",
                "ts": base + locomo.TURN_SECONDS * i,
                "payload": {"prompt": t.text, "speaker": t.speaker, "dia_id": t.dia_id},
            }
        )
    out.append(
        {
            "harness": "locomo",
            "event": "SessionEnd",
            "session_id": sid,
            "project": conv.sample_id,
            "event_id": f"{sid}-end",
            "ts": base + locomo.TURN_SECONDS * len(turns),
            "payload": {"reason": "other"},
        }
    )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=100)
    ap.add_argument("--conversations", type=int, default=None)
    ap.add_argument("--locomo-dir", type=Path, default=None, help="keep (and reuse) its data dir")
    ap.add_argument("--no-locomo", action="store_true")
    ap.add_argument("--no-sessions", action="store_true", help="the LoCoMo part only")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="condense-") as tmp:
        if not args.no_sessions:
            print("\n".join(sessions_part(args.pages, Path(tmp) / "sessions")), flush=True)
        if not args.no_locomo:
            data = args.locomo_dir or Path(tmp) / "locomo"
            print()
            print("\n".join(locomo_part(data, args.conversations)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
