"""Any lock: git locks another process left or holds stall commits. Every
accepted change stays on disk; health, doctor and the brief say so; ``doctor --fix``
removes only locks no process holds; commits resume by themselves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from gitkit import take_lock
from serverproc import ServerProcess
from support import committed, run_cli, wait_for

from wiki_memory.wiki.locks import lock_files, remove_stale

pytestmark = pytest.mark.process

ENV = {
    "WIKI_MEMORY_COMMIT_DELAY_SECONDS": "0.05",
    "WIKI_MEMORY_IDLE_CHECK_SECONDS": "1",
    # each try waits out the lock and the next one comes soon: the same stall, sooner
    "WIKI_MEMORY_GIT_LOCK_WAIT_SECONDS": "0.5",
    "WIKI_MEMORY_COMMIT_RETRY_SECONDS": "0.5",
    "WIKI_MEMORY_STALL_RECOVER_SECONDS": "3",
}


def put(srv: ServerProcess, path: str, text: str) -> httpx.Response:
    return httpx.put(
        srv.url + "/v1/pages/" + quote(path), content=text.encode(), headers=srv.headers, timeout=60
    )


def old(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    t = time.time() - 3600
    os.utime(path, (t, t))


def hold_open(path: Path) -> subprocess.Popen[str]:
    """A live process that keeps ``path`` open until killed."""
    code = "import sys, time; f = open(sys.argv[1], 'rb'); print('ok', flush=True); time.sleep(600)"
    p = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "ok"
    return p


def test_locks_unit(tmp_path: Path) -> None:
    git_dir = tmp_path / ".git"
    old(git_dir / "index.lock")
    old(git_dir / "refs" / "heads" / "main.lock")
    (git_dir / "HEAD.lock").write_bytes(b"")  # young: not stale yet
    holder = hold_open(git_dir / "index.lock")
    try:
        locks = {lk.name: lk for lk in lock_files(git_dir)}
        assert set(locks) == {"index.lock", "refs/heads/main.lock", "HEAD.lock"}
        assert locks["index.lock"].holders == [holder.pid]
        assert locks["refs/heads/main.lock"].stale and not locks["HEAD.lock"].stale
        removed, kept = remove_stale(git_dir)
        assert len(removed) == 1 and "main.lock" in removed[0]
        assert (git_dir / "index.lock").exists() and (git_dir / "HEAD.lock").exists()
    finally:
        holder.kill()
        holder.wait()


def test_stale_locks_stall_commits_until_doctor_fix(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with ServerProcess(data, env=ENV) as srv:
        wiki = data / "wiki"
        assert put(srv, "notes/first.md", "# first\n").status_code == 201
        wait_for(lambda: "notes/first.md" in committed(wiki), 30, "first commit")
        assert srv.get("/v1/health").json()["commits"] == {"ok": True}
        git_dir = wiki / ".git"
        # taken as another git takes them: the first commit may still hold index.lock
        take_lock(git_dir / "index.lock")
        take_lock(git_dir / "refs" / "heads" / "main.lock")
        # accepted writes stay on disk
        r = put(srv, "notes/second.md", "# second\n")
        assert r.status_code == 201, r.text
        assert (wiki / "notes" / "second.md").read_text() == "# second\n"

        def stalled() -> bool:
            return srv.get("/v1/health").json()["commits"]["ok"] is False

        wait_for(stalled, 60, "health reports the stall")
        health = srv.get("/v1/health").json()
        assert health["ok"] is False and "lock" in health["commits"]["cause"]
        assert "doctor --fix" in health["commits"]["remedy"]
        assert "notes/second.md" not in committed(wiki)
        # doctor: never healthy while commits stall
        rep = json.loads(run_cli(data, "doctor", "--json").stdout)
        assert not rep["ok"]
        assert any("cannot commit" in e for e in rep["errors"]), rep["errors"]
        assert any("index.lock" in e and "held by no process" in e for e in rep["errors"])
        # the next brief says memory is not being committed
        (wiki / "projects" / "notes").mkdir(parents=True, exist_ok=True)  # a known project
        b = srv.post("/v1/brief", {"project": "notes"}).json()
        assert "not being committed" in b["text"], b["text"]
        # a lock a live process holds is never removed
        holder = hold_open(git_dir / "refs" / "heads" / "main.lock")
        try:
            out = run_cli(data, "doctor", "--fix")
            assert "removed .git/index.lock" in out.stdout, out.stdout
            assert "not removed: .git/refs/heads/main.lock" in out.stdout
            # the server keeps retrying and takes index.lock for a moment on each try
            # (it fails on main.lock and lets go): the stale one must be gone for good
            wait_for(lambda: not (git_dir / "index.lock").exists(), 30, "index.lock released")
            assert (git_dir / "refs" / "heads" / "main.lock").exists()
            time.sleep(1.0)
            assert "notes/second.md" not in committed(wiki)
        finally:
            holder.kill()
            holder.wait()
        out = run_cli(data, "doctor", "--fix")
        assert "removed .git/refs/heads/main.lock" in out.stdout, out.stdout
        # commits resume by themselves
        wait_for(lambda: "notes/second.md" in committed(wiki), 60, "commits resume")
        wait_for(lambda: srv.get("/v1/health").json()["commits"]["ok"], 30, "health ok")
        assert put(srv, "notes/third.md", "# third\n").status_code == 201
        wait_for(lambda: "notes/third.md" in committed(wiki), 30, "later commit")
    log = (data / "logs" / "server.log").read_text()
    assert log.count("memory is not being committed") == 1
    assert "Traceback" not in log
    assert "commits resumed" in log
