"""How long ``wiki-memory serve`` takes to answer, beside its floor.

For each round: start ``python -m wiki_memory.cli.main --data-dir D serve`` on a fresh
data directory and time it from the spawn to the first 200 of ``/v1/health``; read its
resident memory then; then time the first MCP request (``initialize`` over streamable
HTTP, which loads the MCP face, docs/mcp.md "Start-up") and a second one. The floor is
a bare Starlette app with one route under uvicorn, started and asked the same way.
Rounds alternate the product and the floor; the table gives medians (seconds, MB) and
the ratio of the start to the floor's.

    python bench/startup.py --rounds 7
    python bench/startup.py --rounds 7 --python /other/checkout/.venv/bin/python

``--python`` adds a column for another interpreter (another checkout's venv), run in the
same alternation, so two trees compare side by side in one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from _server import free_port
from recall import rss_mb

FLOOR = """
import sys, uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
async def health(request):
    return JSONResponse({"ok": True})
app = Starlette(routes=[Route("/v1/health", health)])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}


def wait_health(url: str, proc: subprocess.Popen[bytes]) -> None:
    with httpx.Client(timeout=1) as c:
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"the server exited with {proc.returncode}")
            try:
                if c.get(url + "/v1/health").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.005)


def one(python: str | None, work: Path) -> dict[str, float]:
    """One start of the product (``python`` given) or of the floor (None)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    if python is None:
        cmd = [sys.executable, "-c", FLOOR, str(port)]
        env = dict(os.environ)
    else:
        data = Path(tempfile.mkdtemp(dir=work))
        cmd = [python, "-m", "wiki_memory.cli.main", "--data-dir", str(data)]
        cmd += ["serve", "--port", str(port)]
        env = dict(os.environ, WIKI_MEMORY_HOME=str(data))
    t0 = time.perf_counter()
    # a neutral working directory: ``-m`` puts it first on the path, so a checkout there
    # would be imported instead of the interpreter's own
    proc = subprocess.Popen(
        cmd, env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_health(url, proc)
        out = {"start": time.perf_counter() - t0, "rss": rss_mb(proc.pid)[0]}
        if python is not None:
            token = (data / "auth" / "owner.token").read_text().strip()
            headers = {
                "Authorization": f"Bearer {token}",
                "Accept": "application/json, text/event-stream",
            }
            with httpx.Client(timeout=60) as c:
                for key in ("mcp_first", "mcp_second"):
                    t = time.perf_counter()
                    r = c.post(url + "/mcp", json=INIT, headers=headers)
                    out[key] = time.perf_counter() - t
                    assert r.status_code == 200, r.text
            out["rss_mcp"] = rss_mb(proc.pid)[0]
        return out
    finally:
        proc.terminate()
        proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--python", help="another checkout's interpreter, compared side by side")
    args = ap.parse_args()
    sides: dict[str, str | None] = {"floor": None, "this tree": sys.executable}
    if args.python:
        sides["other"] = args.python
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in sides}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for name, py in sides.items():
                runs[name].append(one(py, Path(tmp)))
    floor = statistics.median(r["start"] for r in runs["floor"])
    print(f"load average at the end: {os.getloadavg()[0]:.2f}; {args.rounds} rounds, medians")
    print(
        "| side | start s | start / floor | RSS MB | first MCP s | second MCP s | RSS after MCP MB |"
    )
    print("|---|--:|--:|--:|--:|--:|--:|")
    for name, rows in runs.items():

        def med(key: str, rows: list[dict[str, float]] = rows) -> str:
            vals = [r[key] for r in rows if key in r]
            return f"{statistics.median(vals):.3f}" if vals else "-"

        start = statistics.median(r["start"] for r in rows)
        print(
            f"| {name} | {start:.3f} | {start / floor:.2f}x | {med('rss')} | "
            f"{med('mcp_first')} | {med('mcp_second')} | {med('rss_mcp')} |"
        )


if __name__ == "__main__":
    main()
