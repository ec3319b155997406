"""Recall latency over 1k and 10k pages, and reindex speed. Prints one table.

For each size, a temp data directory gets that many generated markdown pages (notes with
frontmatter, 3 sections of about 300 bytes of English-like text drawn from a 20,000-word
vocabulary with Zipf's 1/rank spread, a wikilink to another page, an identifier or two,
tags on some, aliases on some), then:

1. ``wiki-memory reindex`` (the CLI, no server running) builds the index from the files:
   wall time of the command and pages/s;
2. recall in process (``Memory.recall``, the core every face calls) for a fixed mix of
   queries: 2-word keywords, 4-word keywords, 9-word natural-language questions, code
   identifiers and a page title; p50 / p95 ms;
3. the same queries through ``POST /v1/recall`` of a real server (127.0.0.1): p50 / p95 ms.

Every recall uses ``budget_tokens`` 1000 (the default). With ``--vectors`` (needs the
``vectors`` extra) the reindex, the in-process recall and the server run with the setting
``vectors`` on, and a second table gives the dense signal's own cost: the rows and bytes
of the ``vectors`` table (SQLite's ``dbstat``), the in-memory matrix, the time to score
every row against one query (``Matrix.scores``: ``einsum`` over int8 chunks, then the
scales) beside the floor (the faster of numpy's BLAS product and ``einsum`` over the same
rows as float32, already in memory: no conversion at all), and the server's resident
memory after the queries. Run:

    python bench/recall.py [--sizes 1000 10000] [--queries 200] [--vectors]

``--dense-rows N [N ...]`` measures only the dense scoring, without generating a wiki:
N random unit vectors stored as the index stores them (int8 + scale, in a ``vectors``
table of a temp database), loaded as a server loads them, then the same table as above
(for sizes whose reindex would take too long here).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def rss_kb(pid: int) -> int:
    """Resident memory of process ``pid`` in KiB (Linux ``/proc``; 0 elsewhere)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


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
                v = rng.standard_normal((m, vectors.DIM)).astype(np.float32)
                v /= np.linalg.norm(v, axis=1, keepdims=True)
                conn.executemany(
                    "INSERT INTO vectors(rowid, v) VALUES (?, ?)",
                    zip(range(i + 1, i + m + 1), vectors.encode(v), strict=True),
                )
            conn.execute("INSERT INTO meta(key, value) VALUES ('vectors_gen', 'x')")
        stored = conn.execute("SELECT sum(pgsize) FROM dbstat WHERE name = 'vectors'").fetchone()[0]
        matrix = vectors.Matrix()
        qs = rng.standard_normal((n_queries, vectors.DIM)).astype(np.float32)
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


def measure(size: int, n_queries: int, dense: bool = False) -> dict[str, float]:
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

        from wiki_memory.config import load_settings
        from wiki_memory.core.memory import Memory

        mem = Memory(load_settings(data, watch=False, vectors=dense))
        cost: dict[str, float] = {}
        try:
            for q in qs[:10]:  # warm caches and the tokenizer
                mem.recall(q)
            core_ms = []
            hits = 0
            for q in qs:
                t1 = time.perf_counter()
                res = mem.recall(q)
                core_ms.append((time.perf_counter() - t1) * 1000)
                hits += bool(res.items)
            if dense:
                cost = dense_cost(mem, qs)
        finally:
            mem.index.close()
        srv = ServerProcess(data, env={"WIKI_MEMORY_VECTORS": env["WIKI_MEMORY_VECTORS"]})
        srv.start(timeout=600)
        try:
            http_ms = []
            with httpx.Client(base_url=srv.url, headers=srv.headers, timeout=60) as cl:
                for q in qs[:10]:
                    cl.post("/v1/recall", json={"query": q})
                for q in qs:
                    t1 = time.perf_counter()
                    r = cl.post("/v1/recall", json={"query": q})
                    http_ms.append((time.perf_counter() - t1) * 1000)
                    r.raise_for_status()
            assert srv.proc is not None
            server_rss = rss_kb(srv.proc.pid)
        finally:
            srv.stop()
    return {
        "pages": size,
        "reindex_s": reindex_s,
        "pages_per_s": size / reindex_s,
        "core_p50": pct(core_ms, 50),
        "core_p95": pct(core_ms, 95),
        "http_p50": pct(http_ms, 50),
        "http_p95": pct(http_ms, 95),
        "answered": hits / len(qs),
        "server_rss_mb": server_rss / 1024,
        **cost,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--queries", type=int, default=200)
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
    rows = [measure(n, args.queries, args.vectors) for n in args.sizes]
    head = (
        f"{'pages':>7} {'reindex s':>10} {'pages/s':>8} {'core p50':>9} {'core p95':>9} "
        f"{'HTTP p50':>9} {'HTTP p95':>9} {'answered':>9} {'RSS MB':>7}"
    )
    print(
        f"recall latency in ms ({args.queries} queries, budget_tokens 1000); reindex by the CLI; "
        f"vectors {'on' if args.vectors else 'off'}; RSS: the server's after the queries"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['pages']:>7} {r['reindex_s']:>10.1f} {r['pages_per_s']:>8.0f} "
            f"{r['core_p50']:>9.1f} {r['core_p95']:>9.1f} {r['http_p50']:>9.1f} "
            f"{r['http_p95']:>9.1f} {r['answered']:>9.0%} {r['server_rss_mb']:>7.0f}"
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
