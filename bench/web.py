"""Web view render time of one of the shared vault's largest pages.

Starts a real server (``wiki-memory serve`` on 127.0.0.1) over a copy of
``../shared/data/vaults/obsidian-tasks-docs`` and requests ``/page/<Queries/Filters.md>``
(76 KB of markdown, ~100 wikilinks, the vault's largest page) 100 times over one
keep-alive connection, signed in with the owner's token. Prints the latency of the
requests (first, p50, p95, max, in ms; the target is p95 < 50 ms) and, for comparison,
the cost of rendering the page in-process with an empty render cache every time (what
the first request after a change to the page pays).

    python bench/web.py [--requests 100] [--page "Queries/Filters.md"] [--json]
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--page", default="Queries/Filters.md", help="path inside the vault")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
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
