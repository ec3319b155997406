"""Round trips keep everything (docs/operations.md, "Export and import", "Backup and
restore"; the shared failure case C68): a wiki with a forgotten page, a pinned page,
claimed and open handoffs, a page with a BOM and CRLF, a page that is not UTF-8, a page
without frontmatter times (its file time is what recall's since/until use), an image
attachment, editor settings, a use record and pending observations, carried by export →
import and by backup → restore:

- export → import gives every page and attachment byte for byte and every file time; the
  export's header and its standard error say what it leaves out, with counts; import
  counts written, identical and conflicting files; importing again, or into the source
  itself, writes nothing and makes no commit;
- backup → restore gives the same files, times, refs and use record;
- recall with since/until and the handoffs answer the same on all three."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from appkit import AppServer
from clikit import run_cli_here
from support import files_of, refs_of, run_cli

pytestmark = pytest.mark.process

OLD = 1_615_000_000.0  # 2021-03-06, the file time of the page without frontmatter times
PNG = bytes(range(256)) * 8


def seed(wiki: Path) -> None:
    """The files a person put in the wiki before the server started."""
    files = {
        "notes/bom.md": "\ufeff---\r\ntitle: Bom\r\n---\r\n# Bom\r\n\r\nwindows lines\r\n".encode(),
        "notes/latin1.md": b"# Caf\xe9\n\nlatin one bytes\n",
        "notes/bare.md": b"# Bare\n\nthe quokka inventory, no frontmatter times\n",
        "notes/rules.md": b"---\ncreated: 2022-01-02T03:04:05Z\n---\n# Rules\n\nalways lint\n",
        "notes/gone.md": b"---\nid: gone-1\n---\n# Gone\n\nobsolete ferret notes\n",
        "notes/diagram.png": PNG,
        ".obsidian/app.json": b'{"theme": "dark"}\n',
    }
    for rel, data in files.items():
        (wiki / rel).parent.mkdir(parents=True, exist_ok=True)
        (wiki / rel).write_bytes(data)
    os.utime(wiki / "notes" / "bare.md", (OLD, OLD))
    (wiki / "projects" / "proj").mkdir(parents=True)


def visible(wiki: Path) -> dict[str, bytes]:
    """Every file outside dot folders: what an export carries."""
    return {
        rel: data
        for rel, data in files_of(wiki).items()
        if not any(part.startswith(".") for part in rel.split("/"))
    }


def mtimes(wiki: Path) -> dict[str, float]:
    return {rel: (wiki / rel).stat().st_mtime for rel in visible(wiki)}


def answers(data: Path) -> dict[str, object]:
    """What a server over ``data`` answers to the round trip's questions (the app in this
    process: what it answers is the point, not the process)."""
    srv = AppServer(data)
    srv.start()
    try:
        out: dict[str, object] = {}
        for name, body in {
            "old": {"query": "quokka inventory", "until": "2021-12-31"},
            "new": {"query": "quokka inventory", "since": "2022-01-01"},
            "rules": {"query": "lint", "until": "2022-06-01"},
            "ferret": {"query": "obsolete ferret"},
        }.items():
            r = srv.post("/v1/recall", body)
            assert r.status_code == 200, r.text
            out[name] = [(i["path"], i["updated"]) for i in r.json()["items"]]
        r = srv.get("/v1/handoffs", params={"project": "proj"})
        assert r.status_code == 200, r.text
        out["handoffs"] = sorted(
            (h["title"], h["status"], h.get("claimed_by"), h.get("claimed_at"))
            for h in r.json()["handoffs"]
        )
        return out
    finally:
        srv.stop()


def commits(wiki: Path) -> int:
    from dulwich.repo import Repo

    repo = Repo(str(wiki))
    try:
        return sum(1 for _ in repo.get_walker())
    finally:
        repo.close()


def test_export_import_and_backup_restore_keep_everything(tmp_path: Path) -> None:
    src = tmp_path / "s"
    wiki = src / "wiki"
    seed(wiki)
    srv = AppServer(src)
    srv.start()
    try:
        for title in ("open work", "claimed work"):
            r = srv.post("/v1/handoffs", {"project": "proj", "title": title, "next_steps": "go"})
            assert r.status_code == 201, r.text
        hid = r.json()["handoff"]["id"]
        r = srv.post(f"/v1/handoffs/{hid}/claim", {"harness": "codex", "session": "s-1"})
        assert r.status_code == 200, r.text
        assert srv.post("/v1/admin/pin", {"path": "notes/rules.md", "pinned": True}).is_success
        assert srv.post("/v1/forget", {"path": "notes/gone.md"}).is_success
        for _ in range(2):  # a repeat goes to the use record
            r = srv.post("/v1/remember", {"text": "the build needs node 22", "project": "proj"})
            assert r.status_code in (200, 201), r.text
        ev = {"harness": "codex", "event": "UserPromptSubmit", "session_id": "open-1",
              "cwd": "/x/proj", "payload": {"prompt": "pending otter plan"}}  # fmt: skip
        assert srv.post("/v1/observations", ev).status_code == 202
    finally:
        srv.stop()
    assert (src / "use").is_dir()
    want = answers(src)  # (its start compiles the pending session's page)
    assert want["old"] and not want["new"] and want["rules"] and not want["ferret"]
    before, before_times = visible(wiki), mtimes(wiki)
    assert before["notes/diagram.png"] == PNG and before_times["notes/bare.md"] == OLD

    # A: export -> import into an empty data directory (the commands in this process;
    # restore below runs as a process of its own)
    export = tmp_path / "export.jsonl"
    out = run_cli_here(src, "export", str(export))
    assert out.returncode == 0, out.stderr
    head = json.loads(export.read_text(encoding="utf-8").splitlines()[0])
    pages = sum(rel.endswith(".md") for rel in before)
    assert head["pages"] == pages and head["attachments"] == 1
    omitted = head["omitted"]
    assert omitted["history"] == commits(wiki) and omitted["spool"] >= 1
    assert omitted["tokens"] >= 1 and omitted["audit"] >= 1 and omitted["dot_files"] >= 1
    assert (
        f"exported {pages} pages and 1 attachments to {export}; left out: "
        f"{omitted['history']} commits of history, {omitted['spool']} spool files"
    ) in out.stderr
    d1 = tmp_path / "d1"
    out = run_cli_here(d1, "import", "--json", str(export))
    assert out.returncode == 0, out.stderr
    n = len(before)
    assert f"{n} written ({pages} pages, 1 attachments), 0 identical, 0 conflicting" in out.stdout
    assert visible(d1 / "wiki") == before
    assert mtimes(d1 / "wiki") == before_times
    # again, and into the source itself: nothing written, no commit
    for target in (d1, src):
        head_before = refs_of(target / "wiki")
        out = run_cli_here(target, "import", "--json", str(export))
        assert out.returncode == 0, out.stderr
        assert f"0 written (0 pages, 0 attachments), {n} identical, 0 conflicting" in out.stdout
        assert refs_of(target / "wiki") == head_before

    # B: backup -> restore into an empty data directory
    plain = tmp_path / "b.wmb"
    out = run_cli_here(src, "backup", str(plain))
    assert out.returncode == 0, out.stderr
    d2 = tmp_path / "d2"
    out = run_cli(d2, "restore", str(plain))
    assert out.returncode == 0, out.stderr
    assert files_of(d2 / "wiki") == files_of(wiki)
    assert mtimes(d2 / "wiki") == before_times
    assert refs_of(d2 / "wiki") == refs_of(wiki)
    assert files_of(d2 / "use") == files_of(src / "use")

    # the same answers everywhere: since/until, forgotten, handoffs with their holder
    got1, got2 = answers(d1), answers(d2)
    assert got1 == want, (got1, want)
    assert got2 == want, (got2, want)
    assert re.search(r"claimed", json.dumps(want["handoffs"]))


def test_a_backup_holds_the_data_directory_as_it_was_when_it_began(tmp_path: Path) -> None:
    """What a running server does while a backup runs (a session compiled and its spool
    file dropped, another appended to, a token added) does not change what the backup
    holds: every event acknowledged before it began is in it."""
    src = tmp_path / "s"
    seed(src / "wiki")
    srv = AppServer(src)  # its acknowledgement is the point, not its process
    srv.start()
    try:
        for sid in ("a-1", "b-1"):
            ev = {"harness": "codex", "event": "UserPromptSubmit", "session_id": sid,
                  "cwd": "/x/proj", "payload": {"prompt": f"acknowledged {sid} walrus"}}  # fmt: skip
            assert srv.post("/v1/observations", ev).status_code == 202
    finally:
        srv.stop()
    spool_before = files_of(src / "spool")
    assert any(b"acknowledged a-1" in v for v in spool_before.values())
    resume = tmp_path / "go"
    plain = tmp_path / "b.wmb"
    proc = subprocess.Popen(
        [sys.executable, "-m", "wiki_memory.cli.main", "--data-dir", str(src),
         "backup", str(plain)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "WIKI_MEMORY_HOME": str(src),
             "WIKI_MEMORY_BACKUP_PAUSE_AT": "opened", "WIKI_MEMORY_PAUSE_RESUME": str(resume)},
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline().strip() == "backup paused at opened"
        # meanwhile: one session's spool file goes (compiled), the other grows
        gone = [p for p in (src / "spool").rglob("*.jsonl") if b"a-1" in p.read_bytes()]
        grown = [p for p in (src / "spool").rglob("*.jsonl") if b"b-1" in p.read_bytes()]
        assert gone and grown
        for p in gone:
            p.unlink()
        with open(grown[0], "ab") as f:
            f.write(b'{"event": "after the backup began"}\n')
        resume.touch()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    d2 = tmp_path / "d2"
    done = run_cli(d2, "restore", str(plain))
    assert done.returncode == 0, done.stderr
    assert files_of(d2 / "spool") == spool_before
