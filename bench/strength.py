"""The ``strength`` signal seen changing recall (docs/knowledge.md, "Strength"): recall's
top 5 for ten queries before and after a simulated month of use, on a generated corpus.

    python bench/strength.py [--notes-per-topic 20] [--users 8] [--days 30]

A project of ten topics, each with ``--notes-per-topic`` notes that all hold the topic's
words (so each query has many near-equal matches). Five topics are *used*: over ``--days``
simulated days (the use record's clock moved a day at a time), each of ``--users`` members
recalls the topic's query, reads the page that ranked 7th before the month (the page the
team actually found useful) on about half the days and says ``helped`` about once a
week. The other five topics are never used. The table shows, per query, the top 5 before
and after (page numbers within the topic; ``*`` marks the used page) and whether the top 5
changed: it should change for the used topics only. Last, the ranking's time per query
with the empty record and with the month's record, each beside its floor (the same
ranking with the ``strength`` weight 0, in the same process) and the ratio.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TOPICS = [
    ("kiwi deploy pipeline", "deploy"),
    ("okapi cache eviction", "cache"),
    ("walrus database migration", "migration"),
    ("heron login tokens", "login"),
    ("lynx search indexing", "indexing"),
    ("ibis billing invoices", "invoices"),
    ("tapir email queue", "queue"),
    ("gecko metrics dashboard", "dashboard"),
    ("bison backup restore", "backup"),
    ("marmot feature flags", "flags"),
]
USED = range(5)  # the first five topics are used during the month
USEFUL_RANK = 6  # the page found useful: ranked 7th before the month (outside the top 5)
FILLER = (
    "we checked the logs again and noted the outcome for the next person who works on it "
    "while the team reviewed the plan and agreed to keep the steps short and written down"
).split()
DAY = 86400.0
T0 = 1_800_000_000.0


def corpus(wiki: Path, per_topic: int, rng: random.Random) -> None:
    """``per_topic`` notes per topic in project p, each holding the topic's words once or
    twice among filler, with frontmatter dates spread over a year."""
    for ti, (words, slug) in enumerate(TOPICS):
        for i in range(per_topic):
            body = rng.sample(FILLER, 18)
            for _ in range(rng.choice((1, 1, 2))):
                body.insert(rng.randrange(len(body)), words)
            f = wiki / "projects" / "p" / "notes" / f"{slug}-{i:02d}.md"
            f.parent.mkdir(parents=True, exist_ok=True)
            day = 1 + (ti * 7 + i * 3) % 28
            f.write_text(
                f"---\nproject: p\ntype: note\nupdated: 2026-0{1 + i % 9}-{day:02d}\n---\n"
                f"# {slug.title()} note {i}\n\n{' '.join(body)}.\n",
                encoding="utf-8",
            )


def top(mem: Any, query: str, user: str, n: int = 5) -> list[str]:
    res = mem.recall(query, project="p", budget_tokens=4000, user=mem.scope.named(user))
    out: list[str] = []
    for it in res.items:
        if it["path"] not in out:
            out.append(it["path"])
    return out[:n] if n else out


def short(path: str) -> str:
    return path.rsplit("-", 1)[1].removesuffix(".md")


def timed(mem: Any, user: str, rounds: int) -> tuple[list[float], list[float]]:
    """Per-query seconds of the ranking (``rank.candidates``, as recall runs it) over the
    ten queries, ``rounds`` times: the floor (the ``strength`` weight 0) and the product
    taking turns on each query, so a change of the machine's load hits both alike."""
    from wiki_memory.recall import rank

    who = mem.scope.named(user)
    src = mem._sources  # what recall ranks over (the bench's own reach into the core)
    floor: list[float] = []
    product: list[float] = []
    for _ in range(rounds):
        for words, _slug in TOPICS:
            question = rank.RecallQuery(words, project="p")
            for out, tuning in ((floor, {"strength": 0.0}), (product, None)):
                t = time.perf_counter()
                rank.candidates(src, question, limit=20, who=who, tuning=tuning)
                out.append(time.perf_counter() - t)
    return floor, product


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--notes-per-topic", type=int, default=20)
    ap.add_argument("--users", type=int, default=8)
    ap.add_argument("--days", type=int, default=30)
    args = ap.parse_args(argv)
    from wiki_memory.auth import TokenStore
    from wiki_memory.config import load_settings
    from wiki_memory.core.feedback import give_feedback
    from wiki_memory.core.memory import Memory
    from wiki_memory.datadir import ensure_layout

    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="strength-") as tmp:
        data = Path(tmp) / "data"
        settings = load_settings(data, watch=False, commit_delay_seconds=0.02)
        ensure_layout(settings)
        corpus(settings.wiki_dir, args.notes_per_topic, rng)
        tokens = TokenStore(settings.auth_dir)
        tokens.ensure_owner()
        users = [f"u{i}" for i in range(args.users)]
        for u in users:
            tokens.create(u, "member", ("p",))
        mem = Memory(settings, owner_user=tokens.owner_name(), directory=tokens)
        mem.start()
        try:
            t = [T0]
            mem.use.clock = lambda: t[0]
            viewer = users[0]
            before = {q: top(mem, q, viewer) for q, _ in TOPICS}
            useful = {ti: top(mem, TOPICS[ti][0], viewer, 0)[USEFUL_RANK] for ti in USED}
            timed(mem, viewer, 1)  # warm: the index's pages and the caches
            empty_floor_ms, empty_ms = timed(mem, viewer, 5)
            reads = helps = 0
            for _day in range(args.days):
                for u in users:
                    for ti in USED:
                        top(mem, TOPICS[ti][0], u)  # recalls never count
                        if rng.random() < 0.5:
                            mem.read_page(useful[ti], user=mem.scope.named(u))
                            reads += 1
                        if rng.random() < 1 / 7:
                            give_feedback(mem, useful[ti], "helped", mem.scope.named(u))
                            helps += 1
                t[0] += DAY
            after = {q: top(mem, q, viewer) for q, _ in TOPICS}
            floor_ms, full_ms = timed(mem, viewer, 5)
            strengths = mem.reader.strength.of({p: ("note", False) for p in useful.values()})
        finally:
            mem.stop()
    print(
        f"{len(TOPICS)} topics x {args.notes_per_topic} notes; {args.users} users, "
        f"{args.days} days: {reads} reads and {helps} 'helped' of the used pages "
        "(one per user, page and day counts); * = the used page"
    )
    print()
    print(
        "| query | used | top 5 before | top 5 after | changed | used page: rank before -> after, strength |"
    )
    print("|---|---|---|---|---|---|")
    changed_used = changed_other = 0
    for ti, (q, _slug) in enumerate(TOPICS):
        mark = useful.get(ti)

        def fmt(paths: list[str], mark: str | None = mark) -> str:
            return " ".join(short(p) + ("*" if p == mark else "") for p in paths)

        changed = before[q] != after[q]
        if ti in USED:
            changed_used += changed
        else:
            changed_other += changed
        note = ""
        if mark is not None:
            rank_after = after[q].index(mark) + 1 if mark in after[q] else ">5"
            note = f"{USEFUL_RANK + 1} -> {rank_after}, {strengths.get(mark, 0.0):.1f}"
        print(
            f"| {q} | {'yes' if ti in USED else 'no'} | {fmt(before[q])} | {fmt(after[q])} "
            f"| {'yes' if changed else 'no'} | {note} |"
        )
    print()
    print(
        f"top 5 changed: {changed_used} of {len(USED)} used queries, "
        f"{changed_other} of {len(TOPICS) - len(USED)} unused"
    )
    print()

    def ms(v: list[float]) -> str:
        return f"{1000 * statistics.median(v):.2f}"

    print("| recall ranking, per query | floor (strength weight 0), ms | product, ms | ratio |")
    print("|---|---|---|---|")
    for what, floor_v, prod in (
        ("empty use record", empty_floor_ms, empty_ms),
        ("after the month", floor_ms, full_ms),
    ):
        ratio = statistics.median(prod) / statistics.median(floor_v)
        print(f"| {what} | {ms(floor_v)} | {ms(prod)} | {ratio:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
