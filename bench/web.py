"""Web view render time of one of the shared vault's largest pages.

Starts a real server (``wiki-memory serve`` on 127.0.0.1) over a copy of
``../shared/data/vaults/obsidian-tasks-docs`` and requests ``/page/<Queries/Filters.md>``
(76 KB of markdown, ~100 wikilinks, the vault's largest page) 100 times over one
keep-alive connection, signed in with the owner's token. Prints the latency of the
requests (first, p50, p95, max, in ms; the target is p95 < 50 ms) and, for comparison,
the cost of rendering the page in-process with an empty render cache every time (what
the first request after a change to the page pays).

    python bench/web.py [--requests 100] [--page "Queries/Filters.md"] [--json]

``--scale 10000`` measures instead a generated wiki of that many pages (the generator of
``bench/recall.py``: ten projects of 1,000 notes each) on one server, in the same run:
the web search (``GET /search?q=``: recall plus grouping, plain snippets and marking)
beside ``POST /v1/recall`` with the same budget (its floor: search is recall plus
shaping; target p95 ≤ 2×), and a folder page (``GET /f/...``: 250 of a folder's 1,000
pages, its subfolders and the tree) beside a plain page view (``GET /page/...``, a
different page each time, so each is rendered; target p95 ≤ 3×).

    python bench/web.py --scale 10000 [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from serverproc import ServerProcess  # noqa: E402

VAULT = REPO.parent / "shared" / "data" / "vaults" / "obsidian-tasks-docs" / "vault"


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s)) - 1))]


def cold_render_ms(wiki: Path, rel: str, runs: int) -> list[float]:
    """Render the page in-process with a fresh cache each time (parse, resolve, render)."""
    from wiki_memory.index.store import Index
    from wiki_memory.web import views as web

    idx = Index(wiki.parent / "bench-index.db")
    idx.rebuild(wiki)
    view = web._View.__new__(web._View)

    class Memory:
        index = idx
        wiki_dir = wiki

        @staticmethod
        def names_for(keys: object, who: object = None) -> object:
            return idx.names_for(keys, None)  # type: ignore[arg-type]

    view.memory = Memory()  # type: ignore[assignment]
    view.resolver_cls = web.Resolver
    raw = (wiki / rel).read_bytes()
    out = []
    for _ in range(runs):
        view.ctx = type("Ctx", (), {"cache": web.RenderCache()})()  # type: ignore[assignment]
        t = time.perf_counter()
        view._render_page("owner", rel, raw)
        out.append((time.perf_counter() - t) * 1000)
    idx.close()
    return out


def timed(c: httpx.Client, method: str, url: str, **kw: object) -> float:
    """Milliseconds one request takes (raises on a non-2xx answer)."""
    t = time.perf_counter()
    r = c.request(method, url, **kw)  # type: ignore[arg-type]
    ms = (time.perf_counter() - t) * 1000
    r.raise_for_status()
    return ms


def scale(pages: int, n_queries: int) -> dict[str, object]:
    """Search against recall and a folder page against a page view, on ``pages`` pages."""
    import os
    import random
    import subprocess

    sys.path.insert(0, str(REPO / "bench"))
    import recall as rb  # bench/recall.py: the same generated wiki and queries

    vocab = rb.vocabulary(random.Random(rb.SEED))
    tmp = Path(tempfile.mkdtemp(prefix="wm-bench-web-scale-"))
    try:
        data = tmp / "data"
        wiki = data / "wiki"
        wiki.mkdir(parents=True)
        titles = rb.generate(wiki, pages, vocab)
        qs = rb.queries(vocab, titles, n_queries)
        env = {**os.environ, "WIKI_MEMORY_HOME": str(data)}
        subprocess.run(
            [sys.executable, "-m", "wiki_memory.cli.main", "--data-dir", str(data)]
            + ["reindex", "--quiet"],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        srv = ServerProcess(data).start(timeout=600)
        try:
            rng = random.Random(7)
            with httpx.Client(base_url=srv.url, headers=srv.headers, timeout=120) as c:
                for q in qs[:10]:  # warm up: tokenizer, caches, connections
                    timed(c, "GET", "/search", params={"q": q})
                    timed(c, "POST", "/v1/recall", json={"query": q, "budget_tokens": 8000})
                recall_ms, search_ms = [], []
                for q in qs:  # interleaved, so that both see the same load
                    recall_ms.append(
                        timed(c, "POST", "/v1/recall", json={"query": q, "budget_tokens": 8000})
                    )
                    search_ms.append(timed(c, "GET", "/search", params={"q": q}))
                page_ms, folder_ms = [], []
                order = list(range(pages))
                rng.shuffle(order)
                folders = [f"/f/projects/p{i}/notes" for i in range(10)] + ["/f", "/f/projects"]
                for k in range(n_queries):
                    i = order[k % pages]
                    page_ms.append(timed(c, "GET", f"/page/projects/p{i % 10}/notes/note-{i}.md"))
                    folder_ms.append(timed(c, "GET", folders[k % len(folders)]))
                repeat_ms = [
                    timed(c, "GET", "/page/projects/p1/notes/note-1.md") for _ in range(n_queries)
                ]
        finally:
            srv.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out: dict[str, object] = {"pages": pages, "requests": n_queries}
    for name, values in (
        ("recall", recall_ms),
        ("search", search_ms),
        ("page", page_ms),
        ("page_repeat", repeat_ms),
        ("folder", folder_ms),
    ):
        out[f"{name}_p50_ms"] = round(statistics.median(values), 1)
        out[f"{name}_p95_ms"] = round(pct(values, 95), 1)
    out["search_over_recall_p95"] = round(
        float(out["search_p95_ms"]) / float(out["recall_p95_ms"]),
        2,  # type: ignore[arg-type]
    )
    out["folder_over_page_p95"] = round(
        float(out["folder_p95_ms"]) / float(out["page_p95_ms"]),
        2,  # type: ignore[arg-type]
    )
    return out


def print_scale(r: dict[str, object]) -> None:
    rows = [
        ("web search GET /search", "search", "POST /v1/recall (budget 8000)", "recall", 2.0),
        ("folder page GET /f/...", "folder", "page view GET /page/... (each new)", "page", 3.0),
    ]
    print(f"{r['pages']} pages, {r['requests']} requests each, one server, interleaved")
    head = f"{'product':<26} {'p50':>7} {'p95':>7}   {'floor':<36} {'p50':>7} {'p95':>7}  ratio p95 (target)"
    print(head)
    print("-" * len(head))
    for label, key, flabel, fkey, target in rows:
        ratio = float(r[f"{key}_p95_ms"]) / float(r[f"{fkey}_p95_ms"])  # type: ignore[arg-type]
        print(
            f"{label:<26} {r[f'{key}_p50_ms']:>7} {r[f'{key}_p95_ms']:>7}   {flabel:<36} "
            f"{r[f'{fkey}_p50_ms']:>7} {r[f'{fkey}_p95_ms']:>7}  {ratio:.2f}x "
            f"(<= {target:.0f}x: {'met' if ratio <= target else 'MISSED'})"
        )
    print(
        f"(the same page again, cached: p50 {r['page_repeat_p50_ms']} ms, "
        f"p95 {r['page_repeat_p95_ms']} ms)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--page", default="Queries/Filters.md", help="path inside the vault")
    ap.add_argument("--scale", type=int, default=0, help="pages of a generated wiki (10000)")
    ap.add_argument("--queries", type=int, default=200, help="requests of each kind (--scale)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.scale:
        res = scale(args.scale, args.queries)
        if args.json:
            print(json.dumps(res))
        else:
            print_scale(res)
        ok = float(res["search_over_recall_p95"]) <= 2 and float(res["folder_over_page_p95"]) <= 3  # type: ignore[arg-type]
        return 0 if ok else 1
    if not VAULT.is_dir():
        print(f"the shared vault is missing: {VAULT}", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="wm-bench-web-"))
    try:
        data = tmp / "data"
        wiki = data / "wiki"
        shutil.copytree(VAULT, wiki / "vault")
        rel = f"vault/{args.page}"
        size = (wiki / rel).stat().st_size
        srv = ServerProcess(data).start(timeout=120)
        try:
            url = srv.url + "/page/" + quote(rel)
            times = []
            with httpx.Client(headers=srv.headers, timeout=60) as c:
                for _ in range(args.requests):
                    t = time.perf_counter()
                    r = c.get(url)
                    times.append((time.perf_counter() - t) * 1000)
                    if r.status_code != 200:
                        print(f"HTTP {r.status_code}: {r.text[:300]}", file=sys.stderr)
                        return 1
            body = len(r.content)
        finally:
            srv.stop()
        cold = cold_render_ms(wiki, rel, 20)
        result = {
            "page": rel,
            "page_bytes": size,
            "html_bytes": body,
            "requests": len(times),
            "http_first_ms": round(times[0], 1),
            "http_p50_ms": round(statistics.median(times), 1),
            "http_p95_ms": round(pct(times, 95), 1),
            "http_max_ms": round(max(times), 1),
            "cold_render_p50_ms": round(statistics.median(cold), 1),
            "cold_render_p95_ms": round(pct(cold, 95), 1),
            "target_p95_ms": 50,
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"{result['page']} ({size / 1024:.0f} KB markdown -> {body / 1024:.0f} KB HTML)\n"
            f"  HTTP GET x{len(times)}: first {result['http_first_ms']} ms, "
            f"p50 {result['http_p50_ms']} ms, p95 {result['http_p95_ms']} ms, "
            f"max {result['http_max_ms']} ms (target p95 < 50 ms: "
            f"{'met' if result['http_p95_ms'] < 50 else 'MISSED'})\n"
            f"  in-process render with an empty cache x20: p50 {result['cold_render_p50_ms']} ms, "
            f"p95 {result['cold_render_p95_ms']} ms"
        )
    return 0 if result["http_p95_ms"] < 50 else 1


if __name__ == "__main__":
    sys.exit(main())
