"""Recall latency at 1k to 100k pages beside a bare FTS5 floor, the server's resident
memory, and reindex speed. Prints one table.

For each size, a temp data directory gets that many generated markdown pages (notes with
frontmatter, 3 sections of about 300 bytes of English-like text drawn from a 20,000-word
vocabulary with Zipf's 1/rank spread, a wikilink to another page, an identifier or two,
tags on some, aliases on some), then:

1. ``wiki-memory reindex`` (the CLI, no server running) builds the index from the files:
   wall time of the command and pages/s;
2. the floors: a bare FTS5 table (apsw, default tokenizer) of the same pages' titles and
   bodies, one row per page, queried with ``ORDER BY bm25 LIMIT 20``: with every word of
   the query OR-ed (stop words included, which makes FTS5 score most pages), and, the
   fair floor, with only the terms recall itself searches (its stop words left out);
   p50 / p95 ms each;
3. recall in process (``Memory.recall``, the core every face calls) for a fixed mix of
   queries: 2-word keywords, 4-word keywords, 9-word natural-language questions, code
   identifiers and a page title; p50 / p95 ms (with ``--plain`` also the plain path,
   ``recall_plain = true``, in the same run);
4. the same queries through ``POST /v1/recall`` of a real server (127.0.0.1): p50 / p95
   ms, and the server's resident memory (``VmRSS``) idle (started, one health check) and
   serving (after every query), and its peak (``VmHWM``), in MB.

Every recall uses ``budget_tokens`` 1000 (the default). A line after the table counts
the queries ranked whole (at most ``rank.FULL_RANK`` matches) and by a pool, and of the
whole ones those where the near-duplicate rules left out a match past fused rank 50
(:func:`paths`; docs/ranking.md, "Why every match, not an exact pool"). The ratio
columns are the product's p95 over the floor's p95 of the same run. ``--profile`` prints
where the in-process time goes (cProfile, the 25 functions with the most own time). Run:

    python bench/recall.py [--sizes 1000 10000] [--queries 200] [--plain] [--profile]

``--sizes 100000`` writes 100,000 files and a 410 MB index (about 1.6 GB of temporary
disk); its run time on the shared 2-core machine is in bench/RESULTS.md.

With ``--vectors`` (needs the
``vectors`` extra) the reindex, the in-process recall and the server run with the setting
``vectors`` on, and a second table gives the dense signal's own cost: the rows and bytes
of the ``vectors`` table (SQLite's ``dbstat``), the in-memory matrix, the time to score
every row against one query (``Matrix.scores``: ``einsum`` over int8 chunks, then the
scales) beside the floor (the faster of numpy's BLAS product and ``einsum`` over the same
rows as float32, already in memory: no conversion at all), and the server's resident
memory after the queries. Run with ``[--vectors]``.
``--dense-rows N [N ...]`` measures only the dense scoring, without generating a wiki:
N random unit vectors stored as the index stores them (int8 + scale, in a ``vectors``
table of a temp database), loaded as a server loads them, then the same table as above
(for sizes whose reindex would take too long here).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from serverproc import ServerProcess  # noqa: E402

SEED = 6


def vocabulary(rng: random.Random, n: int = 20000) -> list[str]:
    """``n`` made-up words of 3-10 letters (consonant-vowel patterns, so that words share
    prefixes about as often as English words do), shorter words more frequent."""
    cons, vows = "bcdfghjklmnprstvwz", "aeiou"
    words: set[str] = set()
    while len(words) < n:
        k = rng.randint(3, 10)
        words.add("".join(rng.choice(cons if i % 2 == 0 else vows) for i in range(k)))
    return sorted(words, key=lambda w: (len(w), w))


_CUM: dict[int, list[float]] = {}


def zipf_pick(rng: random.Random, vocab: list[str]) -> str:
    """A word with probability ~ 1/rank (Zipf's law), the 100 most frequent ranks left out
    as the function words a query drops anyway: the commonest word is in ~0.6% of words."""
    cum = _CUM.get(len(vocab))
    if cum is None:
        total = 0.0
        cum = []
        for r in range(len(vocab)):
            total += 1.0 / (r + 101)
            cum.append(total)
        _CUM[len(vocab)] = cum
    return rng.choices(vocab, cum_weights=cum)[0]


def sentence(rng: random.Random, vocab: list[str], n: int) -> str:
    return " ".join(zipf_pick(rng, vocab) for _ in range(n)).capitalize() + "."


def generate(wiki: Path, n: int, vocab: list[str]) -> list[str]:
    """Write ``n`` pages; returns their titles."""
    rng = random.Random(SEED + n)
    titles = [f"{zipf_pick(rng, vocab)} {zipf_pick(rng, vocab)} {i}".title() for i in range(n)]
    for i, title in enumerate(titles):
        folder = wiki / "projects" / f"p{i % 10}" / "notes"
        folder.mkdir(parents=True, exist_ok=True)
        meta = ["---", "type: note", f"title: {title}", f"updated: 2026-{1 + i % 12:02d}-01"]
        if i % 3 == 0:
            meta.append(f"tags: [{zipf_pick(rng, vocab)}, area/{i % 7}]")
        if i % 5 == 0:
            meta.append(f"aliases: [{zipf_pick(rng, vocab)} alias {i}]")
        meta.append("---")
        body = [f"# {title}", ""]
        for s in range(3):
            body += [f"## Part {s + 1}", ""]
            body.append(" ".join(sentence(rng, vocab, rng.randint(6, 14)) for _ in range(4)))
            body.append("")
        body.append(
            f"See [[{titles[rng.randrange(n)]}]]; call `get{zipf_pick(rng, vocab).title()}Value` "
            f"in `mod_{i % 50}.py` (error E{1000 + i % 300})."
        )
        (folder / f"note-{i}.md").write_text("\n".join(meta + body) + "\n", encoding="utf-8")
    return titles


def queries(vocab: list[str], titles: list[str], count: int) -> list[str]:
    rng = random.Random(SEED)
    out = []
    for i in range(count):
        kind = i % 5
        if kind == 0:
            out.append(f"{zipf_pick(rng, vocab)} {zipf_pick(rng, vocab)}")
        elif kind == 1:
            out.append(" ".join(zipf_pick(rng, vocab) for _ in range(4)))
        elif kind == 2:
            w = [zipf_pick(rng, vocab) for _ in range(4)]
            out.append(f"what did we decide about the {w[0]} {w[1]} when {w[2]} had {w[3]}?")
        elif kind == 3:
            out.append(f"get{zipf_pick(rng, vocab).title()}Value E{1000 + rng.randrange(300)}")
        else:
            out.append(rng.choice(titles).lower())
    return out


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def floor_db(wiki: Path, path: Path) -> Any:
    """The bare FTS5 table of the floor: one row per page, its title and body (the text
    after the frontmatter), default tokenizer, nothing else."""
    import apsw

    conn = apsw.Connection(str(path))
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(title, body)")
    with conn:
        for f in sorted(wiki.rglob("*.md")):
            text = f.read_text(encoding="utf-8")
            _, _, rest = text.partition("\n---\n")
            title = next((ln[7:] for ln in text.splitlines() if ln.startswith("title: ")), "")
            conn.execute("INSERT INTO t(title, body) VALUES (?, ?)", (title, rest))
    return conn


def floor_match(query: str) -> str:
    """The query's words, each quoted, OR-ed (what a minimal search box would send)."""
    words = re.findall(r"\w+", query.lower())
    return " OR ".join(f'"{w}"' for w in dict.fromkeys(words))


def fair_match(query: str) -> str:
    """The terms recall itself searches (its word split, stop words left out unless the
    query is only stop words), each quoted, OR-ed: the fair floor's query."""
    from wiki_memory.recall.terms import STOP_WORDS, words

    toks = words(query)
    kept = [t for t in toks if t not in STOP_WORDS] or toks
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in dict.fromkeys(kept))


def timed(fn: Callable[[str], Any], qs: list[str]) -> list[float]:
    for q in qs[:10]:  # warm caches and the tokenizer
        fn(q)
    out = []
    for q in qs:
        t1 = time.perf_counter()
        fn(q)
        out.append((time.perf_counter() - t1) * 1000)
    return out


def rss_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of process ``pid`` in MB, from /proc."""
    vals = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            vals[key] = int(rest.split()[0]) / 1024
    return vals["VmRSS"], vals["VmHWM"]


def dense_cost(mem: object, qs: list[str]) -> dict[str, float]:
    """The dense signal's storage and scoring time (ms per query), with numpy's floor."""
    import numpy as np

    from wiki_memory.index import vectors

    idx = mem.index  # type: ignore[attr-defined]
    conn = idx._conn()
    rows = conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
    stored = conn.execute("SELECT sum(pgsize) FROM dbstat WHERE name = 'vectors'").fetchone()[0]
    vecs = vectors.model().embed(qs)
    idx.dense(qs[0])  # load the matrix
    rowids, codes, scales = idx._matrix._current(conn)
    full = codes.astype(np.float32) * scales[:, None]
    ours, floor = [], []
    for q in vecs:
        t = time.perf_counter()
        idx._matrix.scores(conn, q)
        ours.append((time.perf_counter() - t) * 1000)
        best = float("inf")
        for blas in (True, False):
            t = time.perf_counter()
            _ = full @ q if blas else np.einsum("ij,j->i", full, q)
            best = min(best, (time.perf_counter() - t) * 1000)
        floor.append(best)
    return {
        "rows": rows,
        "stored_bytes": stored or 0,
        "matrix_bytes": idx.vector_bytes(),
        "score_p50": pct(ours, 50),
        "score_p95": pct(ours, 95),
        "floor_p50": pct(floor, 50),
        "floor_p95": pct(floor, 95),
    }


def dense_synthetic(n_rows: int, n_queries: int) -> dict[str, float]:
    """:func:`dense_cost` over ``n_rows`` random unit vectors (no pages, no model)."""
    import apsw
    import numpy as np

    from wiki_memory.index import vectors
    from wiki_memory.index.schema import SCHEMA

    rng = np.random.default_rng(SEED)
    with tempfile.TemporaryDirectory(prefix="dense-") as tmp:
        conn = apsw.Connection(str(Path(tmp) / "index.db"))
        conn.execute(SCHEMA)
        with conn:
            for i in range(0, n_rows, 50_000):
                m = min(50_000, n_rows - i)
                v = rng.standard_normal((m, vectors.dim())).astype(np.float32)
                v /= np.linalg.norm(v, axis=1, keepdims=True)
                conn.executemany(
                    "INSERT INTO vectors(rowid, v) VALUES (?, ?)",
                    zip(range(i + 1, i + m + 1), vectors.encode(v), strict=True),
                )
            conn.execute("INSERT INTO meta(key, value) VALUES ('vectors_gen', 'x')")
        stored = conn.execute("SELECT sum(pgsize) FROM dbstat WHERE name = 'vectors'").fetchone()[0]
        matrix = vectors.Matrix()
        qs = rng.standard_normal((n_queries, vectors.dim())).astype(np.float32)
        qs /= np.linalg.norm(qs, axis=1, keepdims=True)
        t = time.perf_counter()
        rowids, codes, scales = matrix._current(conn)
        load_s = time.perf_counter() - t
        full = codes.astype(np.float32) * scales[:, None]
        ours, floor = [], []
        for q in qs:
            t = time.perf_counter()
            matrix.scores(conn, q)
            ours.append((time.perf_counter() - t) * 1000)
            best = float("inf")
            for blas in (True, False):
                t = time.perf_counter()
                _ = full @ q if blas else np.einsum("ij,j->i", full, q)
                best = min(best, (time.perf_counter() - t) * 1000)
            floor.append(best)
        conn.close()
    return {
        "pages": 0,
        "rows": n_rows,
        "stored_bytes": stored or 0,
        "matrix_bytes": matrix.nbytes(),
        "load_s": load_s,
        "score_p50": pct(ours, 50),
        "score_p95": pct(ours, 95),
        "floor_p50": pct(floor, 50),
        "floor_p95": pct(floor, 95),
    }


LEFT_OUT_PAST = 50
"""Where a first page and its heads are settled for any budget (``fusion.HEAD_POOL``): a
match the near-duplicate rules leave out past this fused rank changes ``total``."""


def left_out_past(found: Any, rank_from: int = LEFT_OUT_PAST) -> int:
    """How many matches the near-duplicate rules (a copy on its own page or of a page
    already shown, a bare heading) left out of a whole ranking ``found`` (a
    ``rank.Ranked``) at fused rank ``rank_from`` or below: an exact pool would have to
    reach each of them to give the same ``total`` and ``omitted``."""
    from wiki_memory.recall.candidate import order_key

    shown = {found.key(i) for i in range(len(found))}
    fused = sorted((c for c in found._ranker.cands.values() if c.score > 0), key=order_key)
    keys = [
        f"spool:{c.spool.obs_id}" if c.spool is not None else f"{c.key[0]}#{c.key[1]}"
        for c in fused
    ]
    return sum(1 for k in keys[rank_from:] if k not in shown)


def paths(mem: Any, qs: list[str]) -> dict[str, float]:
    """How the queries were ranked: ``whole`` (at most ``rank.FULL_RANK`` matches, every
    one through the fusion) or ``pool`` (a pool, then the others by bm25); and, of the
    whole ones, ``left_out``: those with a match :func:`left_out_past` counts
    (docs/ranking.md, "Why every match, not an exact pool")."""
    from wiki_memory.recall import rank

    whole = left_out = 0
    for q in qs:
        found = rank.ranked(mem._sources, q)
        if found.whole:
            whole += 1
            left_out += left_out_past(found) > 0
    return {"whole": whole, "pool": len(qs) - whole, "left_out": left_out}


def measure(
    size: int, n_queries: int, plain: bool, profile: bool, dense: bool = False
) -> dict[str, float]:
    vocab = vocabulary(random.Random(SEED))
    with tempfile.TemporaryDirectory(prefix=f"recall-{size}-") as tmp:
        data = Path(tmp) / "data"
        wiki = data / "wiki"
        wiki.mkdir(parents=True)
        titles = generate(wiki, size, vocab)
        qs = queries(vocab, titles, n_queries)
        env = {**os.environ, "WIKI_MEMORY_HOME": str(data)}
        env["WIKI_MEMORY_VECTORS"] = "true" if dense else "false"
        t0 = time.perf_counter()
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
        reindex_s = time.perf_counter() - t0

        fconn = floor_db(wiki, Path(tmp) / "floor.db")
        floor_sql = "SELECT rowid, bm25(t) FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT 20"
        floor_ms = timed(lambda q: fconn.execute(floor_sql, (floor_match(q),)).fetchall(), qs)
        fair_ms = timed(lambda q: fconn.execute(floor_sql, (fair_match(q),)).fetchall(), qs)
        fconn.close()

        from wiki_memory.config import load_settings
        from wiki_memory.core.memory import Memory

        row: dict[str, float] = {"pages": size, "reindex_s": reindex_s}
        row["pages_per_s"] = size / reindex_s
        row["floor_p50"], row["floor_p95"] = pct(floor_ms, 50), pct(floor_ms, 95)
        row["fair_p50"], row["fair_p95"] = pct(fair_ms, 50), pct(fair_ms, 95)
        for label, is_plain in [("core", False)] + ([("plain", True)] if plain else []):
            mem = Memory(load_settings(data, watch=False, recall_plain=is_plain, vectors=dense))
            try:
                hits = sum(bool(mem.recall(q).items) for q in qs)
                if not is_plain:
                    row.update(paths(mem, qs))
                ms = timed(mem.recall, qs)
                if profile and not is_plain:
                    import cProfile
                    import pstats

                    prof = cProfile.Profile()
                    prof.enable()
                    for q in qs:
                        mem.recall(q)
                    prof.disable()
                    print(f"-- profile, {size} pages, {len(qs)} recalls in process")
                    pstats.Stats(prof).sort_stats("tottime").print_stats(25)
                if dense and not is_plain:
                    row.update(dense_cost(mem, qs))
            finally:
                mem.index.close()
            row[f"{label}_p50"], row[f"{label}_p95"] = pct(ms, 50), pct(ms, 95)
            row["answered"] = hits / len(qs)
        srv = ServerProcess(data, env={"WIKI_MEMORY_VECTORS": env["WIKI_MEMORY_VECTORS"]})
        srv.start(timeout=600)
        try:
            assert srv.proc is not None
            with httpx.Client(base_url=srv.url, headers=srv.headers, timeout=60) as cl:
                cl.get("/v1/health")
                time.sleep(1.0)
                row["rss_idle"], _ = rss_mb(srv.proc.pid)

                def post(q: str) -> None:
                    cl.post("/v1/recall", json={"query": q}).raise_for_status()

                http_ms = timed(post, qs)
            row["rss_serving"], row["rss_peak"] = rss_mb(srv.proc.pid)
        finally:
            srv.stop()
    row["http_p50"], row["http_p95"] = pct(http_ms, 50), pct(http_ms, 95)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--plain", action="store_true", help="also time the plain path in process")
    ap.add_argument("--profile", action="store_true", help="print a cProfile of recall")
    ap.add_argument("--vectors", action="store_true", help="the vectors setting on (the extra)")
    ap.add_argument("--dense-rows", type=int, nargs="+", default=None)
    args = ap.parse_args(argv)
    if args.dense_rows:
        print("dense scoring only: random unit vectors, ms per query; load: reading the table")
        print(
            f"{'rows':>9} {'stored MB':>10} {'matrix MB':>10} {'load s':>7} {'p50':>6} {'p95':>6} "
            f"{'floor p50':>10} {'floor p95':>10} {'ratio p50':>10}"
        )
        for n in args.dense_rows:
            r = dense_synthetic(n, args.queries)
            print(
                f"{r['rows']:>9} {r['stored_bytes'] / 1e6:>10.1f} {r['matrix_bytes'] / 1e6:>10.1f} "
                f"{r['load_s']:>7.2f} {r['score_p50']:>6.1f} {r['score_p95']:>6.1f} "
                f"{r['floor_p50']:>10.1f} {r['floor_p95']:>10.1f} "
                f"{r['score_p50'] / max(r['floor_p50'], 1e-9):>10.1f}",
                flush=True,
            )
        return 0
    rows = []
    for n in args.sizes:
        t0 = time.perf_counter()
        rows.append(measure(n, args.queries, args.plain, args.profile, args.vectors))
        print(f"({n} pages: {time.perf_counter() - t0:.0f} s in all) {rows[-1]}", flush=True)
    print(
        f"recall latency in ms ({args.queries} queries, budget_tokens 1000); reindex by the "
        "CLI; floor: bare FTS5 bm25 top-20 of every query word OR-ed; fair: the same over "
        "the terms recall searches (stop words out); x: p95 / floor p95; x fair: HTTP p95 / "
        "fair p95; memory of the server in MB; "
        f"vectors {'on' if args.vectors else 'off'}"
    )
    head = (
        f"{'pages':>7} {'reindex s':>9} {'pages/s':>7} {'floor p50':>9} {'floor p95':>9} "
        f"{'fair p50':>8} {'fair p95':>8} "
        f"{'core p50':>8} {'core p95':>8} {'x':>5} "
        + (f"{'plain p50':>9} {'plain p95':>9} " if args.plain else "")
        + f"{'HTTP p50':>8} {'HTTP p95':>8} {'x':>5} {'x fair':>6} "
        f"{'RSS idle':>8} {'serving':>7} {'peak':>6} {'answered':>8}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['pages']:>7.0f} {r['reindex_s']:>9.1f} {r['pages_per_s']:>7.0f} "
            f"{r['floor_p50']:>9.2f} {r['floor_p95']:>9.2f} "
            f"{r['fair_p50']:>8.2f} {r['fair_p95']:>8.2f} "
            f"{r['core_p50']:>8.1f} {r['core_p95']:>8.1f} {r['core_p95'] / r['floor_p95']:>5.1f} "
            + (f"{r['plain_p50']:>9.1f} {r['plain_p95']:>9.1f} " if args.plain else "")
            + f"{r['http_p50']:>8.1f} {r['http_p95']:>8.1f} "
            f"{r['http_p95'] / r['floor_p95']:>5.1f} {r['http_p95'] / r['fair_p95']:>6.1f} "
            f"{r['rss_idle']:>8.0f} {r['rss_serving']:>7.0f} {r['rss_peak']:>6.0f} "
            f"{r['answered']:>8.0%}"
        )
    for r in rows:
        print(
            f"{r['pages']:.0f} pages: {r['whole']:.0f} queries ranked whole (every match "
            f"through the fusion), {r['pool']:.0f} by a pool and a tail; of the whole ones, "
            f"{r['left_out']:.0f} had a match past fused rank {LEFT_OUT_PAST} that the "
            "near-duplicate rules left out (an exact pool could not stop above it)"
        )
    if args.vectors:
        print()
        print("dense signal: score every row for one query (ms) beside numpy's float32 floor")
        head = (
            f"{'pages':>7} {'rows':>8} {'stored MB':>10} {'matrix MB':>10} {'p50':>6} "
            f"{'p95':>6} {'floor p50':>10} {'floor p95':>10} {'ratio p50':>10}"
        )
        print(head)
        print("-" * len(head))
        for r in rows:
            print(
                f"{r['pages']:>7} {r['rows']:>8} {r['stored_bytes'] / 1e6:>10.1f} "
                f"{r['matrix_bytes'] / 1e6:>10.1f} {r['score_p50']:>6.1f} {r['score_p95']:>6.1f} "
                f"{r['floor_p50']:>10.1f} {r['floor_p95']:>10.1f} "
                f"{r['score_p50'] / max(r['floor_p50'], 1e-9):>10.1f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
