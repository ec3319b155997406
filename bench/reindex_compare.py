"""Reindex speed and content of two source trees, side by side. Prints one table.

Copies the vaults in ../shared/data/vaults side by side ``--copies`` times (34: 10,098
pages, as ``bench/watcher.py``), then, ``--rounds`` times, rebuilds an index of them with
the code of ``--old`` (a source tree, e.g. ``git archive main | tar -x -C /tmp/old``) and
with this tree, alternating, with the default worker processes and with one process
(``WIKI_MEMORY_REINDEX_WORKERS=1``); each rebuild runs in a fresh interpreter. Prints
pages/s and CPU time a page (the rebuilding process and its helpers: on a shared,
loaded host the wall-clock rate swings by 2x between runs, CPU time far less). Then dumps
every index and checks that they hold the same content:

- every row of every ordinary table (``pages``, ``sections``, ``links``, ``names``,
  ``files``, ``file_keys``, ``meta``, ``spool``, ``vectors``), sorted, with each section
  rowid replaced by its ``(path, ord)`` (rowids follow the order parsed pages arrive in,
  which varies with helper processes);
- every token of the FTS index (``fts5vocab`` ``instance``: term, document, column,
  offset) with the same rowid mapping, and the per-column token counts;
- for one-process builds (deterministic order), also the FTS index's own bytes
  (``fts_data``, ``fts_idx``, ``fts_docsize``) and the section rowids.

Any difference is printed and the exit status is 1.

    python bench/reindex_compare.py --old /tmp/old [--copies 34] [--rounds 2]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VAULTS = REPO.parent / "shared" / "data" / "vaults"

_BUILD = """
import resource, sys, time
from wiki_memory.index.store import Index
idx = Index(sys.argv[1])
t0, c0 = time.perf_counter(), time.process_time()
n = idx.rebuild(sys.argv[2])
dt, cpu = time.perf_counter() - t0, time.process_time() - c0
idx.close()
r = resource.getrusage(resource.RUSAGE_CHILDREN)  # the helpers, ended and waited for
print(n, dt, cpu + r.ru_utime + r.ru_stime)
"""


def build(tree: Path, db: Path, corpus: Path, workers: str | None) -> tuple[int, float, float]:
    """Rebuild ``db`` from ``corpus`` with the code in ``tree``: (pages, seconds, CPU
    seconds of the rebuilding process and its helpers)."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("WIKI_MEMORY_REINDEX_WORKERS", None)
    if workers is not None:
        env["WIKI_MEMORY_REINDEX_WORKERS"] = workers
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    out = subprocess.run(
        [sys.executable, "-c", _BUILD, str(db), str(corpus)],
        env=env,
        cwd=str(tree),
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return int(out[0]), float(out[1]), float(out[2])


def dump(db: Path, exact: bool) -> dict[str, str]:
    """Part name -> sha256 of a canonical dump of the index at ``db`` (see the module
    docstring); ``exact``: rowids and the FTS index's bytes as well."""
    import apsw

    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    key = {r: (p, o) for r, p, o in conn.execute("SELECT rowid, path, ord FROM sections")}
    out: dict[str, str] = {}

    def put(name: str, rows: list[object]) -> None:
        h = hashlib.sha256()
        for row in rows:
            h.update(repr(row).encode("utf-8", "surrogatepass"))
            h.update(b"\n")
        out[name] = f"{len(rows)} rows {h.hexdigest()[:16]}"

    tables = [
        n
        for (n,) in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'"
            " AND name NOT LIKE 'fts_%' AND name NOT LIKE 'spool_fts_%'"
            " AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )
    ]
    for t in tables:
        rows = [list(r) for r in conn.execute(f'SELECT rowid, * FROM "{t}"')]
        for r in rows:
            if t in ("sections", "vectors") and not exact:
                r[0] = key[r[0]]
                if t == "sections":
                    r[1] = None  # the rowid column again
            elif t not in ("sections", "vectors", "spool"):
                r[0] = None  # implicit rowids of tables without a key follow insert order
        put(t, sorted(rows, key=repr))
    put("schema", sorted(conn.execute("SELECT type, name, sql FROM sqlite_schema"), key=repr))
    conn.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, fts, instance)")
    inst = [(t, key[d] if not exact else d, c, o) for t, d, c, o in conn.execute("SELECT * FROM v")]
    put("fts tokens", sorted(inst, key=repr))
    sizes = [
        (key[i] if not exact else i, bytes(s))
        for i, s in conn.execute("SELECT id, sz FROM fts_docsize")
    ]
    put("fts docsize", sorted(sizes, key=repr))
    if exact:
        for t in ("fts_data", "fts_idx", "fts_config"):
            put(
                t,
                sorted(
                    (
                        tuple(bytes(x) if isinstance(x, bytes) else x for x in r)
                        for r in conn.execute(f"SELECT * FROM {t}")
                    ),
                    key=repr,
                ),
            )
    conn.close()
    return out


def _table(
    what: str,
    values: dict[tuple[str, str], list[float]],
    workers: list[str],
    fmt: str,
    note: str = "",
) -> None:
    """One markdown table: per worker count, the old and the new tree's values of each
    round and their ratios (new over old)."""
    print(f"\n| workers | old {what} | new {what} | new/old |{note}")
    print("|---|---|---|---|")
    for w in workers:
        o, nw = values[(w, "old")], values[(w, "new")]
        ratios = [b / a for a, b in zip(o, nw, strict=True)]
        print(
            f"| {w} | {' '.join(fmt.format(x) for x in o)} | {' '.join(fmt.format(x) for x in nw)}"
            f" | {' '.join(f'{x:.2f}' for x in ratios)} |"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--old", type=Path, required=True, help="source tree of the code before")
    ap.add_argument("--copies", type=int, default=34)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workers", default="default,1", help="comma list: default and/or N")
    ap.add_argument("--no-check", action="store_true", help="speed only")
    args = ap.parse_args()
    trees = {"old": args.old.resolve(), "new": REPO}
    root = Path(tempfile.mkdtemp(prefix="reindex-compare-"))
    try:
        corpus = root / "corpus"
        for i in range(args.copies):
            for v in ("obsidian-tasks-docs", "obsidian-tasks-demo"):
                shutil.copytree(VAULTS / v / "vault", corpus / f"copy-{i:02d}" / v)
        rates: dict[tuple[str, str], list[float]] = {}
        cpus: dict[tuple[str, str], list[float]] = {}
        n = 0
        for rnd in range(args.rounds):
            order = ("old", "new") if rnd % 2 == 0 else ("new", "old")
            for w in args.workers.split(","):
                for name in order:
                    n, dt, cpu = build(
                        trees[name], root / f"{name}-{w}.db", corpus, None if w == "default" else w
                    )
                    rates.setdefault((w, name), []).append(n / dt)
                    cpus.setdefault((w, name), []).append(cpu * 1000 / n)
                    print(
                        f"round {rnd + 1} workers={w} {name}: {n} pages in {dt:.2f} s "
                        f"= {n / dt:,.0f} pages/s, CPU {cpu * 1000 / n:.3f} ms a page "
                        f"(load {os.getloadavg()[0]:.2f})",
                        flush=True,
                    )
        workers = args.workers.split(",")
        _table("pages/s", rates, workers, "{:,.0f}", f"  ({n} pages)")
        _table("CPU ms/page", cpus, workers, "{:.3f}")
        if args.no_check:
            return 0
        bad = 0
        for w in args.workers.split(","):
            exact = w == "1"
            a, b = dump(root / f"old-{w}.db", exact), dump(root / f"new-{w}.db", exact)
            for part in sorted(set(a) | set(b)):
                same = a.get(part) == b.get(part)
                bad += not same
                print(
                    f"workers={w} {part}: {'same' if same else 'DIFFERENT'} "
                    f"({a.get(part)}{'' if same else ' vs ' + str(b.get(part))})"
                )
        print(json.dumps({"identical": bad == 0}))
        return 1 if bad else 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
