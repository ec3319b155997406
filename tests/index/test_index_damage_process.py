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
import pytest
from appkit import AppServer, http
from clikit import run_cli_here as run_cli
from serverproc import ServerProcess
from support import wait_for

from wiki_memory.core.indexcheck import PAUSE_ENV
from wiki_memory.core.pausepoint import RESUME_ENV
from wiki_memory.core.scanrecall import INCOMPLETE
from wiki_memory.index.db import quick_check

pytestmark = pytest.mark.process

PAGES = 1500
#: a rebuild at start runs in the background from this many pages (the setting
#: ``rebuild_background_pages``, 5,000 by default), so these pages count as a large wiki
LARGE = {"WIKI_MEMORY_REBUILD_BACKGROUND_PAGES": "1000"}
WORDS = [f"kw{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(400)]
PROBES = WORDS[::50]


def write_wiki(wiki: Path) -> None:
    rng = random.Random(11)
    for i in range(PAGES):
        p = wiki / f"projects/p/notes/n{i:05d}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        words = " ".join(rng.choice(WORDS) for _ in range(30))
        p.write_text(f"# Note {i}\n\n{words}\n", encoding="utf-8")


def recall(srv: AppServer | ServerProcess, q: str) -> dict[str, Any]:
    r = http(srv).post(
        srv.url + "/v1/recall",
        json={"query": q, "budget_tokens": 3000},
        headers=srv.headers,
        timeout=60,
    )
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def complete_answers(srv: AppServer | ServerProcess) -> dict[str, tuple[int, list[str]]]:
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
    # the answers before and after: the app in this process; the damaged starts, the
    # kill -9 and the start after it: server processes
    srv = AppServer(data).start()
    try:
        before = complete_answers(srv)
        assert all(total > 0 for total, _ in before.values())
    finally:
        srv.stop()
    damage(data / "index.db", 1)

    # the background rebuild waits at its start until the test lets it go on (a fast
    # machine finished it before the first request)
    resume = tmp_path / "resume-rebuild"
    held = {PAUSE_ENV: "started", RESUME_ENV: str(resume), **LARGE}
    srv = ServerProcess(data, env=held).start()
    try:
        first = recall(srv, PROBES[0])
        assert first["complete"] is False, "the rebuild runs in the background"
        assert first["total"] > 0 and first["items"]
        cli = run_cli(data, "recall", PROBES[1], "--url", srv.url)
        still = recall(srv, PROBES[2])
        assert cli.returncode == 0, cli.stderr
        assert not still["complete"]  # the rebuild is held: the CLI ran while it did
        assert cli.stdout.startswith(INCOMPLETE), cli.stdout
        assert "n0" in cli.stdout  # and listed pages
        assert still["total"] > 0
        wait_for(lambda: "index.db is damaged" in srv.stderr(), timeout=30, what="logged")
        assert srv.stderr().count("index.db is damaged") == 1
        # killed in the middle of the rebuild it started: let it go on until it writes
        # its new file (or, on a fast machine, is done), then kill
        resume.touch()
        wait_for(
            lambda: (data / "index.db.new").exists() or "index.db rebuilt" in srv.stderr(),
            timeout=120,
            interval=0.005,
            what="the rebuild writing",
        )
        assert srv.proc is not None
        srv.proc.send_signal(signal.SIGKILL)
        srv.proc.wait(30)
    finally:
        srv.stop()

    srv = ServerProcess(data, env=LARGE).start()  # no crash loop: it starts, and rebuilds
    try:
        after_kill = complete_answers(srv)
        assert not (data / "index.db.new").exists(), "the killed rebuild's file is gone"
    finally:
        srv.stop()

    reindex = run_cli(data, "reindex", "--quiet")
    assert reindex.returncode == 0, reindex.stderr
    srv = AppServer(data).start()
    try:
        fresh = complete_answers(srv)
    finally:
        srv.stop()
    assert after_kill == fresh == before


def test_the_cli_says_incomplete_while_the_index_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI against a real socket while the rebuild is held (the app in this process,
    so the rebuild can be held until the CLI has answered)."""
    import threading

    import uvicorn
    from serverproc import free_port
    from support import make_memory

    from wiki_memory.auth import TokenStore
    from wiki_memory.config import load_settings
    from wiki_memory.core.memory import Memory
    from wiki_memory.index.store import Index
    from wiki_memory.server.app import create_app

    data = tmp_path / "data"
    for i in range(60):
        p = data / "wiki" / f"projects/p/notes/n{i:02d}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"# Note {i}\n\nquokkadata {WORDS[i]}\n", encoding="utf-8")
    make_memory(data).stop()
    (data / "index.db").unlink()
    monkeypatch.setenv("WIKI_MEMORY_REBUILD_BACKGROUND_PAGES", "10")
    gate = threading.Event()
    real = Index.rebuild

    def held(self: Index, *a: Any, **kw: Any) -> int:
        gate.wait(120)
        return real(self, *a, **kw)

    monkeypatch.setattr(Index, "rebuild", held)
    settings = load_settings(data, watch=False)
    tokens = TokenStore(settings.auth_dir)
    tokens.ensure_owner()
    memory = Memory(settings, owner_user=tokens.owner_name(), directory=tokens)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(memory, tokens, manage_memory=True),
            host="127.0.0.1",
            port=port,
            log_level="warning",
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, timeout=60, what="the server listens")
        url = f"http://127.0.0.1:{port}"
        r = run_cli(data, "recall", "quokkadata", "--url", url)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith(INCOMPLETE + "\n"), r.stdout
        assert "n00.md" in r.stdout or "Note" in r.stdout
        j = run_cli(data, "recall", "quokkadata", "--url", url, "--json")
        assert json_of(j.stdout)["complete"] is False
        gate.set()
        wait_for(lambda: memory.index.damaged is None, timeout=120, what="rebuilt")
        r = run_cli(data, "recall", "quokkadata", "--url", url)
        assert r.returncode == 0 and INCOMPLETE not in r.stdout, r.stdout
    finally:
        gate.set()
        server.should_exit = True
        thread.join(60)


def json_of(text: str) -> dict[str, Any]:
    import json

    out: dict[str, Any] = json.loads(text)
    return out
