"""Where a recall's time goes, stage by stage, on the generated wiki of ``bench/recall.py``
(10,000 pages by default), beside the floor. Prints one table.

The corpus, the query mix and the floors are ``bench/recall.py``'s (same generator, same
seed, same queries). Recall runs in process (``Memory.recall``, the core every face calls,
``budget_tokens`` 1000), then the reply is serialized as the HTTP face does
(``json.dumps`` of ``to_json()``). The stages are timed by wrapping the functions that do
them from this script (nothing in the product is changed or switched on): each wrapper
counts its own time, its callees' wrapped time taken out, so the stages add up to no more
than the whole. A stage is a row per query (summed over its calls), and the table gives
its p50 / p95 over the queries in ms and its share of the summed total:

- ``parse``: the query analyzed (words, stems, probes), the time words it names, the
  filters and scope built (``analyze``, ``windows``, ``RecallQuery.filters``, ``Pool``);
- ``fts: vocabulary``: the word counts that drop common words and universal tags;
- ``fts: chains``: the superseded-page chains the caller may see;
- ``fts: count``: whether at most ``FULL_RANK`` sections match (the pool's switch);
- ``fts: text+fields``: the bm25 searches of the ``text`` and ``fields`` lists;
- ``signal: NAME``: each signal's ``collect`` (its own SQL included);
- ``represent``: a section chosen for pages found only by page signals;
- ``fusion: scores``: the weighted reciprocal-rank scores (``fuse``, and the strongest
  pages the ``link`` signal asks for);
- ``fusion: near-dups, order``: the rest of ``fusion.order``: the near-duplicate filter
  (each candidate's word set against :class:`~wiki_memory.recall.dedup.Dedup`), which is
  nearly all of it, then the heads, the per-page cap and superseded pages after their
  successors (timed as one: wrapping the per-candidate calls cost more than they do);
- ``items``: recall items built (snippet, ``why``) for the matches read;
- ``tail``: matches after the ranked pool read from SQL;
- ``flags``: contradiction flags of note items;
- ``packing``: each item offered to the token budget (its tokens counted);
- ``json``: the reply serialized;
- ``other``: the rest of the call (walk record, use record, audit, glue).

``total`` is the sum per query; ``unwrapped`` the same queries without the wrappers, in
the same run (the wrappers' own cost is the difference). The floors, timed in the same run
over the same pages: ``bm25 top-20, fair`` (FTS5 ``ORDER BY bm25 LIMIT 20`` over only the
terms recall searches, its stop words left out: ``bench/recall.py``'s fair floor) and
``bm25 top-20, OR`` (every word of the query OR-ed); and ``both orders, index``: on the
product's own index (one FTS5 row per section, all its columns), the two bm25 orders the
``text`` and ``fields`` lists are, top 20 each, for the match expressions recall searched
(no join, no scope, no other list): what the index's design costs before recall does
anything else. Run:

    python bench/recall_stages.py [--pages 10000] [--queries 100] [--data-dir DIR]

``--data-dir DIR`` keeps the generated data directory and reuses it on the next run (no
generation, no reindex). Not a test; compare rows of one run.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import recall as base  # noqa: E402  (bench/recall.py: corpus, queries, floors)


class Stages:
    """Exclusive time per stage: a stack of running wrapped calls; a call's time minus its
    wrapped callees' goes to its stage. ``times`` maps stage -> seconds for the current
    query (:meth:`reset` between queries)."""

    def __init__(self) -> None:
        self.times: dict[str, float] = defaultdict(float)
        self._stack: list[float] = []  # callees' time of each open call
        #: the FTS5 match expressions the ``fts: text+fields`` stage searched, per query
        self.matches: dict[int, list[str]] = defaultdict(list)
        self.query = 0

    def reset(self) -> None:
        self.times = defaultdict(float)
        self._stack = []

    def recording(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` (a search taking ``(index, match, ...)``) noting each ``match`` it is
        given in :attr:`matches` under the current query."""

        @functools.wraps(fn)
        def noted(*a: Any, **kw: Any) -> Any:
            self.matches[self.query].append(a[1])
            return fn(*a, **kw)

        return noted

    def wrap(self, stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*a: Any, **kw: Any) -> Any:
            self._stack.append(0.0)
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                spent = time.perf_counter() - t0
                inner = self._stack.pop()
                self.times[stage] += spent - inner
                if self._stack:
                    self._stack[-1] += spent

        return timed


def targets() -> list[tuple[str, Any, str]]:
    """(stage, owner, attribute): the functions wrapped, looked up where the caller finds
    them (module attributes the ranking reads at call time, class methods). A name that
    no longer exists is skipped (the stage then reads 0 and its time counts as other)."""
    from wiki_memory.core import recaller
    from wiki_memory.index import signals, vocab
    from wiki_memory.index import tail as tail_rows
    from wiki_memory.index.store import Index
    from wiki_memory.recall import (
        fusion,
        items,
        matches,
        pool,
        query,
        rank,
        signal_allwords,
        signal_dense,
        signal_entity,
        signal_fields,
        signal_link,
        signal_page,
        signal_recent,
        signal_spool,
        signal_strength,
        signal_text,
        signal_when,
    )

    out: list[tuple[str, Any, str]] = [
        ("parse", rank, "analyze"),
        ("parse", rank, "windows"),
        ("parse", query.RecallQuery, "filters"),
        ("parse", pool.Pool, "__init__"),
        ("fts: vocabulary", vocab, "universal_tags"),
        ("fts: vocabulary", vocab, "row_estimate"),
        ("fts: vocabulary", vocab, "doc_counts"),
        ("fts: chains", Index, "chains"),
        ("fts: count", tail_rows, "count_own"),
        ("fts: text+fields", signals, "search_sections_both"),
    ]
    for mod in (
        signal_text,
        signal_allwords,
        signal_fields,
        signal_page,
        signal_entity,
        signal_spool,
        signal_link,
        signal_dense,
        signal_recent,
        signal_strength,
        signal_when,
    ):
        out.append(
            (f"signal: {getattr(mod, 'NAME', mod.__name__.rsplit('_', 1)[-1])}", mod, "collect")
        )
    out += [
        ("represent", pool.Pool, "represent"),
        ("fusion: scores", fusion, "fuse"),
        ("fusion: scores", fusion, "strongest_pages"),
        ("fusion: near-dups, order", fusion, "order"),
        ("items", items, "item"),
        ("tail", matches.Ranked, "key"),
        ("tail", matches.Ranked, "item"),
        ("flags", recaller.Recaller, "_flagged"),
        ("packing", recaller, "offer"),
    ]
    return [(s, o, a) for s, o, a in out if hasattr(o, a)]


@contextmanager
def wrapped(stages: Stages) -> Iterator[None]:
    """Every function of :func:`targets` wrapped for the block, restored after."""
    saved = []
    for stage, owner, attr in targets():
        fn = owner.__dict__.get(attr, getattr(owner, attr))
        saved.append((owner, attr, fn))
        # the floor of the index's own searches reruns what this stage searched for
        inner = stages.recording(fn) if stage == "fts: text+fields" else fn
        setattr(owner, attr, stages.wrap(stage, inner))
    try:
        yield
    finally:
        for owner, attr, fn in reversed(saved):
            setattr(owner, attr, fn)


ORDER = [
    "parse",
    "fts: vocabulary",
    "fts: chains",
    "fts: count",
    "fts: text+fields",
]


def build(data: Path, pages: int) -> tuple[list[str], list[str]]:
    """The corpus of ``bench/recall.py`` in ``data/wiki`` (written and reindexed unless
    ``data/index.db`` is there); returns (vocabulary, titles)."""
    vocab = base.vocabulary(random.Random(base.SEED))
    wiki = data / "wiki"
    titles_file = data / "bench-titles.json"
    if (data / "index.db").exists() and titles_file.exists():
        return vocab, json.loads(titles_file.read_text())
    wiki.mkdir(parents=True, exist_ok=True)
    titles = base.generate(wiki, pages, vocab)
    env = {**os.environ, "WIKI_MEMORY_HOME": str(data), "WIKI_MEMORY_VECTORS": "false"}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "wiki_memory.cli.main",
            "--data-dir",
            str(data),
            "reindex",
            "--quiet",
        ],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    titles_file.write_text(json.dumps(titles))
    return vocab, titles


def measure(data: Path, pages: int, n_queries: int) -> dict[str, Any]:
    vocab, titles = build(data, pages)
    qs = base.queries(vocab, titles, n_queries)
    with tempfile.TemporaryDirectory(prefix="stages-floor-") as tmp:
        fconn = base.floor_db(data / "wiki", Path(tmp) / "floor.db")
        sql = "SELECT rowid, bm25(t) FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT 20"
        fair = base.timed(lambda q: fconn.execute(sql, (base.fair_match(q),)).fetchall(), qs)
        orr = base.timed(lambda q: fconn.execute(sql, (base.floor_match(q),)).fetchall(), qs)
        fconn.close()

    from wiki_memory.config import load_settings
    from wiki_memory.core.memory import Memory

    mem = Memory(load_settings(data, watch=False, vectors=False))
    stages = Stages()
    rows: list[dict[str, float]] = []
    try:

        def answer(q: str) -> str:
            return json.dumps(mem.recall(q).to_json())

        unwrapped = base.timed(answer, qs)
        with wrapped(stages):
            for q in qs[:10]:  # warm, as the unwrapped run was
                answer(q)
            for i, q in enumerate(qs):
                stages.reset()
                stages.query = i
                t0 = time.perf_counter()
                res = mem.recall(q)
                t1 = time.perf_counter()
                json.dumps(res.to_json())
                t2 = time.perf_counter()
                row = {k: v * 1000 for k, v in stages.times.items()}
                row["json"] = (t2 - t1) * 1000
                row["total"] = (t2 - t0) * 1000
                row["other"] = max(
                    0.0, row["total"] - sum(v for k, v in row.items() if k != "total")
                )
                rows.append(row)
        index_floor = both_orders_floor(
            data / "index.db", [stages.matches[i] for i in range(len(qs))]
        )
    finally:
        mem.index.close()
    return {
        "rows": rows,
        "fair": fair,
        "or": orr,
        "index": index_floor,
        "unwrapped": unwrapped,
        "queries": len(qs),
    }


def both_orders_floor(db: Path, matches: list[list[str]]) -> list[float]:
    """The floor of recall's own searches, ms per query: on the product's index (its
    ``fts`` table, one row per section, every column), the two bm25 orders the ``text``
    and ``fields`` lists are (body columns only, and all columns), top 20 of each, for the
    match expressions recall searched for that query; no join, no scope, no other list."""
    import apsw

    from wiki_memory.index.signals import SECTION_COLUMNS, bm25_sql

    sql = f"""
        WITH m AS MATERIALIZED (
            SELECT fts.rowid AS rid, {bm25_sql(None)} AS r,
                   {bm25_sql(None, SECTION_COLUMNS)} AS rb
            FROM fts WHERE fts MATCH ?),
        body AS (SELECT rid, rb AS r FROM m WHERE rb < 0 ORDER BY rb LIMIT 20),
        alls AS (SELECT rid, r FROM m ORDER BY r LIMIT 20)
        SELECT * FROM body UNION ALL SELECT * FROM alls"""
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:

        def run(i: int) -> None:
            for match in matches[i]:
                conn.execute(sql, (match,)).fetchall()

        for i in range(min(10, len(matches))):  # warm, as the other floors are
            run(i)
        out = []
        for i in range(len(matches)):
            t = time.perf_counter()
            run(i)
            out.append((time.perf_counter() - t) * 1000)
        return out
    finally:
        conn.close()


def table(pages: int, got: dict[str, Any]) -> None:
    rows: list[dict[str, float]] = got["rows"]
    names = [s for s, _o, _a in targets()]
    seen = list(dict.fromkeys(ORDER + names + ["json", "other"]))
    grand = sum(r["total"] for r in rows)
    print(
        f"recall stages, {pages:,} pages, {got['queries']} queries (ms; share of the summed total)"
    )
    print(f"{'stage':<26} {'p50':>8} {'p95':>8} {'share':>7}")
    for name in seen:
        vals = [r.get(name, 0.0) for r in rows]
        print(
            f"{name:<26} {base.pct(vals, 50):>8.2f} {base.pct(vals, 95):>8.2f} "
            f"{100 * sum(vals) / grand:>6.1f}%"
        )
    tot = [r["total"] for r in rows]
    print(
        f"{'total (wrapped)':<26} {base.pct(tot, 50):>8.2f} {base.pct(tot, 95):>8.2f} {100.0:>6.1f}%"
    )
    un = got["unwrapped"]
    print(f"{'total (unwrapped)':<26} {base.pct(un, 50):>8.2f} {base.pct(un, 95):>8.2f}")
    for label, key in (
        ("floor: bm25 top-20, fair", "fair"),
        ("floor: bm25 top-20, OR", "or"),
        ("floor: both orders, index", "index"),
    ):
        v = got[key]
        print(f"{label:<26} {base.pct(v, 50):>8.2f} {base.pct(v, 95):>8.2f}")
    fair95 = base.pct(got["fair"], 95)
    print(f"unwrapped p95 / fair floor p95: {base.pct(un, 95) / max(fair95, 1e-9):.1f}x")
    index95 = base.pct(got["index"], 95)
    print(f"both orders on the index p95 / fair floor p95: {index95 / max(fair95, 1e-9):.2f}x")


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pages", type=int, default=10000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--data-dir", type=Path, help="keep the data directory here and reuse it")
    args = ap.parse_args()
    if args.data_dir is not None:
        args.data_dir.mkdir(parents=True, exist_ok=True)
        got = measure(args.data_dir, args.pages, args.queries)
    else:
        with tempfile.TemporaryDirectory(prefix=f"stages-{args.pages}-") as tmp:
            got = measure(Path(tmp) / "data", args.pages, args.queries)
    table(args.pages, got)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
