"""Killed work leaves nothing half-done (docs/operations.md, "Storage at the edges"): a
``backup`` killed at any of its steps leaves the previous backup file as it was and only
temporary files, which the next backup removes (never those of a backup still running);
a ``purge`` killed before or after its history rewrite has written ``purge.start`` to the
audit log, and the next start finishes it: history, working tree and index purged, the
closing line written, and a second purge of the page answers with what was done.

Each kill point is a step the command stops at when ``WIKI_MEMORY_BACKUP_PAUSE_AT`` /
``WIKI_MEMORY_PURGE_PAUSE_AT`` names it, so the kill lands exactly there."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from appkit import AppServer, http
from clikit import run_cli_here
from dulwich import porcelain
from serverproc import ServerProcess
from support import git_objects

from wiki_memory.auth import TokenStore
from wiki_memory.config import load_settings
from wiki_memory.core.backup import restore, verify

pytestmark = pytest.mark.process

PASS = {"WIKI_MEMORY_BACKUP_PASSPHRASE": "correct horse battery staple"}
BACKUP_STEPS = [
    "started",
    "cleared",
    "temporary",
    "opened",
    "bundle",
    "member",
    "members",
    "manifest",
    "written",
    "verified",
    "replaced",
]
# built at run time so this file does not hold it whole
SECRET = "-".join(["tangerine", "vault", "code", "5521"])
PAGE = "notes/keys.md"


def make_data(root: Path) -> Path:
    """A data directory: a wiki of a few committed pages, tokens, a spool, an audit log."""
    data = root / "data"
    wiki = data / "wiki"
    (wiki / "notes").mkdir(parents=True)
    porcelain.init(str(wiki))

    def commit(msg: str, **files: str) -> None:
        for rel, text in files.items():
            (wiki / rel).write_text(text, encoding="utf-8")
            porcelain.add(str(wiki), [str(wiki / rel)])
        porcelain.commit(str(wiki), msg.encode(), author=b"t <t@example.org>",
                         committer=b"t <t@example.org>")  # fmt: skip

    commit("first", **{PAGE: "---\nid: keys-1\n---\n# Keys\n\nnone yet\n",
                       "notes/other.md": "# Other\n\nkept\n"})  # fmt: skip
    commit("second", **{PAGE: f"---\nid: keys-1\n---\n# Keys\n\nthe door code {SECRET}\n"})
    TokenStore(data / "auth").ensure_owner()
    (data / "spool" / "proj").mkdir(parents=True)
    (data / "spool" / "proj" / "s1.jsonl").write_text('{"event": "x"}\n')
    return data


def kill_at(args: list[str], data: Path, env: dict[str, str], what: str, step: str) -> None:
    """Run ``wiki-memory --data-dir DATA ARGS`` until it says ``<what> paused at <step>``,
    then SIGKILL it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "wiki_memory.cli.main", "--data-dir", str(data), *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "WIKI_MEMORY_HOME": str(data), **env},
    )  # fmt: skip
    assert proc.stderr is not None
    seen = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            seen.append(line)
            if line.strip() == f"{what} paused at {step}":
                return
        raise AssertionError(f"{what} never paused at {step}: {''.join(seen)[-2000:]}")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stderr.close()


def partials(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".wiki-memory-backup-"))


def test_a_backup_killed_at_any_step_leaves_the_previous_file_and_no_temporary_file(
    tmp_path: Path,
) -> None:
    data = make_data(tmp_path)
    out_dir = tmp_path / "backups"
    out_dir.mkdir()
    plain, sealed = out_dir / "b.wmb", out_dir / "b.wmb.enc"
    for target, env in ((plain, {}), (sealed, PASS)):
        done = run_cli_here(data, "backup", str(target), env=env)
        assert done.returncode == 0, done.stderr
    before = {plain: plain.read_bytes(), sealed: sealed.read_bytes()}
    (data / "wiki" / "notes" / "new.md").write_text("# New\n\nafter the first backup\n")
    porcelain.add(str(data / "wiki"), [str(data / "wiki" / "notes" / "new.md")])
    porcelain.commit(str(data / "wiki"), b"new", author=b"t <t@example.org>",
                     committer=b"t <t@example.org>")  # fmt: skip
    previous: list[str] = []
    for i, step in enumerate(BACKUP_STEPS):
        target, env = (sealed, PASS) if i % 2 else (plain, {})
        kill_at(["backup", str(target)] + (["--encrypt"] if env else []), data,
                {**env, "WIKI_MEMORY_BACKUP_PAUSE_AT": step}, "backup", step)  # fmt: skip
        if step == "replaced":
            # the new backup is whole: it verifies and restores the new page
            assert target.read_bytes() != before[target]
            verify(target, PASS["WIKI_MEMORY_BACKUP_PASSPHRASE"] if env else None)
            restore(load_settings(tmp_path / "restored"), target,
                    PASS["WIKI_MEMORY_BACKUP_PASSPHRASE"] if env else None)  # fmt: skip
            assert (tmp_path / "restored" / "wiki" / "notes" / "new.md").is_file()
        else:
            # the previous backup is untouched; nothing half-written took its name
            assert target.read_bytes() == before[target], step
        assert sorted(p.name for p in out_dir.iterdir() if not p.name.startswith(".")) == [
            "b.wmb",
            "b.wmb.enc",
        ], step
        now = partials(out_dir)
        # what the killed run before left was removed by this run; this one's may stay
        assert not set(now) & set(previous), (step, previous, now)
        if step in ("bundle", "member", "members", "manifest"):
            assert len(now) == 2, (step, now)  # the archive and the bundle
        previous = now

    # stale files are removed; those of a backup still running stay
    running = subprocess.Popen(
        [sys.executable, "-m", "wiki_memory.cli.main", "--data-dir", str(data),
         "backup", str(out_dir / "other.wmb")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "WIKI_MEMORY_HOME": str(data),
             "WIKI_MEMORY_BACKUP_PAUSE_AT": "members"},
    )  # fmt: skip
    try:
        assert running.stderr is not None
        assert running.stderr.readline().strip() == "backup paused at members"
        theirs = partials(out_dir)
        assert len(theirs) == 2
        # a backup started and killed meanwhile removes nothing of the running one's
        kill_at(["backup", str(plain)], data, {"WIKI_MEMORY_BACKUP_PAUSE_AT": "members"},
                "backup", "members")  # fmt: skip
        assert set(theirs) < set(partials(out_dir)) and len(partials(out_dir)) == 4
        done = run_cli_here(data, "backup", str(plain))
        assert done.returncode == 0, done.stderr
        assert "removed 2 temporary file(s) a stopped backup left" in done.stderr
        assert partials(out_dir) == theirs
    finally:
        os.kill(running.pid, signal.SIGKILL)
        running.wait(timeout=30)
        running.stderr.close()  # type: ignore[union-attr]
    verify(plain)
    done = run_cli_here(data, "backup", str(sealed), "--encrypt", env=PASS)
    assert done.returncode == 0, done.stderr
    assert partials(out_dir) == []
    assert sorted(p.name for p in out_dir.iterdir()) == ["b.wmb", "b.wmb.enc"]


def audit(data: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (data / "logs" / "audit.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("step", ["started", "rewritten", "cleared"])
def test_a_purge_killed_mid_way_is_finished_at_the_next_start(tmp_path: Path, step: str) -> None:
    data = make_data(tmp_path)
    wiki = data / "wiki"
    secret = SECRET.encode()
    assert secret in git_objects(wiki)
    kill_at(["purge", PAGE, "--yes"], data, {"WIKI_MEMORY_PURGE_PAUSE_AT": step}, "purge", step)
    lines = [a for a in audit(data) if str(a["op"]).startswith("purge")]
    # the start line is there, with the page's id and neither its path nor its text
    assert [a["op"] for a in lines] == ["purge.start"]
    assert lines[0]["page_id"] == "keys-1" and lines[0]["target"] == ""
    assert PAGE not in json.dumps(lines[0]) and SECRET not in json.dumps(lines[0])
    if step == "started":
        assert secret in git_objects(wiki)  # untouched so far: history not rewritten
    else:
        assert secret not in git_objects(wiki)  # rewritten whole
    # the next start: a server process after the first kill point, the app in this
    # process (the same Memory start) after the others
    server = ServerProcess if step == "started" else AppServer
    srv = server(data)
    srv.start()
    try:
        # the start finished it: nothing of the page in history, the tree or the index
        assert secret not in git_objects(wiki)
        assert not (wiki / PAGE).exists()
        assert (wiki / "notes" / "other.md").read_text() == "# Other\n\nkept\n"
        r = srv.post("/v1/recall", {"query": "door code tangerine"})
        assert r.status_code == 200 and r.json()["total"] == 0, r.text
        assert srv.get("/v1/pages/" + PAGE).status_code == 404
        ops = [a for a in audit(data) if str(a["op"]).startswith("purge")]
        assert [a["op"] for a in ops] == ["purge.start", "purge"]
        assert ops[1]["result"] == "ok" and ops[1]["finished_at_start"] is True
        # the closing line says what was done in each place
        # (the counts of the rewrite made before the kill, not zeros)
        places = {"commits_rewritten", "versions", "refs", "spool_files", "logs", "removed"}
        assert places <= set(ops[1]), ops[1]
        assert ops[1]["commits_rewritten"] >= 1 and ops[1]["versions"] >= 1, ops[1]
        assert ops[1]["removed"]["page_versions"] == ops[1]["versions"]
        assert not (data / "purge-pending.json").exists()
        # a second purge of that page answers with what was done, not "no such page"
        r = http(srv).post(srv.url + "/v1/admin/purge", json={"path": PAGE},
                           headers=srv.headers, timeout=120)  # fmt: skip
        assert r.status_code == 200, r.text
        assert r.json()["finished_at_start"] is True
    finally:
        srv.stop()
    # and the start after that has nothing more to do
    srv = server(data)
    srv.start()
    srv.stop()
    ops = [a for a in audit(data) if str(a["op"]).startswith("purge")]
    assert [a["op"] for a in ops] == ["purge.start", "purge"] * 2
    assert all(a["result"] == "ok" for a in ops)
