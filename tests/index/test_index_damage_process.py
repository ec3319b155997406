"""A real server on a damaged index: 8 KiB of random bytes in the middle of ``index.db``
while it is stopped, on a wiki large enough to be rebuilt in the background. The server
logs it once and answers at once; recall (HTTP and the CLI) says ``complete: false``
meanwhile and never ``total: 0`` for a word the pages hold; a kill -9 in the middle of
the rebuild is no crash loop (the next start rebuilds again); afterwards the answers
equal those of a fresh ``wiki-memory reindex``."""

from __future__ import annotations

import random
import signal
from pathlib import Path
from typing import Any

import apsw
import httpx
import pytest
from serverproc import ServerProcess
from support import run_cli, wait_for

from wiki_memory.core.scanrecall import INCOMPLETE
from wiki_memory.index.db import quick_check

pytestmark = pytest.mark.process

PAGES = 8000  # over the 5,000 from which a rebuild at start runs in the background
WORDS = [f"kw{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(400)]
PROBES = WORDS[::50]


def write_wiki(wiki: Path) -> None:
    rng = random.Random(11)
    for i in range(PAGES):
        p = wiki / f"projects/p/notes/n{i:05d}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        words = " ".join(rng.choice(WORDS) for _ in range(30))
        p.write_text(f"# Note {i}\n\n{words}\n", encoding="utf-8")


def recall(srv: ServerProcess, q: str) -> dict[str, Any]:
    r = httpx.post(
        srv.url + "/v1/recall",
        json={"query": q, "budget_tokens": 3000},
        headers=srv.headers,
        timeout=60,
    )
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def complete_answers(srv: ServerProcess) -> dict[str, tuple[int, list[str]]]:
    wait_for(lambda: recall(srv, PROBES[0])["complete"], timeout=300, what="rebuilt")
    out = {}
    for q in PROBES:
        body = recall(srv, q)
        assert body["complete"] is True
        out[q] = (body["total"], [i["path"] for i in body["items"]])
    return out


def damage(db: Path, seed: int) -> None:
    """8 KiB of random bytes in the middle of the pages in use (the middle of the file
    can be free pages after a rebuild: bytes there harm nothing)."""
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    used = sorted(p for (p,) in conn.execute("SELECT DISTINCT pageno FROM dbstat"))
    size = conn.pragma("page_size")
    conn.close()
    with open(db, "r+b") as f:
        f.seek((used[len(used) // 2] - 1) * size)
        f.write(random.Random(seed).randbytes(8192))
    assert quick_check(db), "the quick check names the damage (doctor runs it too)"


def test_a_damaged_index_under_a_real_server_answers_incomplete_survives_kill_and_rebuilds(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    write_wiki(data / "wiki")
    srv = ServerProcess(data).start()
    try:
        before = complete_answers(srv)
        assert all(total > 0 for total, _ in before.values())
    finally:
        srv.stop()
    damage(data / "index.db", 1)

    srv = ServerProcess(data).start()
    try:
        first = recall(srv, PROBES[0])
        assert first["complete"] is False, "the rebuild runs in the background"
        assert first["total"] > 0 and first["items"]
        cli = run_cli(data, "recall", PROBES[1], "--url", srv.url)
        still = recall(srv, PROBES[2])
        assert cli.returncode == 0, cli.stderr
        print(f"the CLI ran while the rebuild did: {not still['complete']}")
        if not still["complete"]:  # the CLI ran while the rebuild did
            assert cli.stdout.startswith(INCOMPLETE), cli.stdout
            assert "n0" in cli.stdout  # and listed pages
            assert still["total"] > 0
        wait_for(lambda: "index.db is damaged" in srv.stderr(), timeout=30, what="logged")
        assert srv.stderr().count("index.db is damaged") == 1
        # killed in the middle of the rebuild it started
        assert srv.proc is not None
        srv.proc.send_signal(signal.SIGKILL)
        srv.proc.wait(30)
    finally:
        srv.stop()

    srv = ServerProcess(data).start()  # no crash loop: it starts, and rebuilds
    try:
        after_kill = complete_answers(srv)
        assert not (data / "index.db.new").exists(), "the killed rebuild's file is gone"
    finally:
        srv.stop()

    reindex = run_cli(data, "reindex", "--quiet", timeout=300)
    assert reindex.returncode == 0, reindex.stderr
    srv = ServerProcess(data).start()
    try:
        fresh = complete_answers(srv)
    finally:
        srv.stop()
    assert after_kill == fresh == before
