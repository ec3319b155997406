"""A full disk, injected in-process (ENOSPC at ``os.write`` of the spool's files and at
``os.fsync`` for git): refusals are 507 ``disk_full`` JSON from the error table, health
and the brief say "disk full" with the remedy, a failed commit leaves HEAD where it was
and no lock behind, and everything resumes by itself when the space returns."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from support import as_user

from wiki_memory import diskfull
from wiki_memory.auth import TokenStore
from wiki_memory.core.brief import build_brief
from wiki_memory.core.memory import Memory
from wiki_memory.server.app import create_app

pytestmark = pytest.mark.fast


def event(n: int, session: str = "s1") -> dict[str, Any]:
    return {
        "harness": "claude-code",
        "event": "UserPromptSubmit",
        "session_id": session,
        "cwd": "/home/u/proj",
        "project": "proj",
        "event_id": f"e{n}",
        "payload": {"prompt": f"zebracorn prompt {n}"},
    }


class _FullFile:
    """A file opened while the disk is full: writes are buffered, and the flush (at
    ``close`` too) fails with ENOSPC, as a buffered file's does: its descriptor is
    closed anyway and nothing reached it (a 0-byte file)."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def write(self, data: Any) -> int:
        return len(data)

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def fileno(self) -> int:
        return int(self.real.fileno())

    def __getattr__(self, name: str) -> Any:  # tell, seek, read: the real file's
        return getattr(self.real, name)

    def close(self) -> None:
        self.real.close()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __enter__(self) -> _FullFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Full:
    """A disk that is full while ``on``: the spool's writes, files opened with
    ``os.fdopen`` (git's lock files, pages) and every fsync fail."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, mem: Memory) -> None:
        self.on = False
        real_write, real_fsync, real_fdopen = os.write, os.fsync, os.fdopen
        spool = mem.spool

        def fdopen(fd: int, *args: Any, **kw: Any) -> Any:
            f = real_fdopen(fd, *args, **kw)
            return _FullFile(f) if self.on else f

        def write(fd: int, data: Any) -> int:
            if self.on and fd in spool._fds.values():
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real_write(fd, data)

        def fsync(fd: int) -> None:
            if self.on:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            real_fsync(fd)

        monkeypatch.setattr(os, "write", write)
        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "fdopen", fdopen)
        # the filesystem has no room while full (the real one under tmp_path has)
        monkeypatch.setattr(diskfull.DiskState, "_room", lambda _self: not self.on)
        monkeypatch.setattr(diskfull, "SETTLE", 0.0)  # flapping: tests/base/test_diskfull.py


def test_capture_at_a_full_disk_is_refused_visibly_and_resumes(
    mem: Memory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    tokens = TokenStore(mem.settings.auth_dir, owner_user="alice")
    token, _ = tokens.ensure_owner()
    full = Full(monkeypatch, mem)
    with TestClient(create_app(mem, tokens), base_url="http://127.0.0.1") as http:
        auth = {"Authorization": f"Bearer {token}"}
        assert http.post("/v1/observations", json=event(1), headers=auth).status_code == 202
        full.on = True
        refusals = [http.post("/v1/observations", json=event(n), headers=auth) for n in (2, 3)]
        refusals.append(http.post("/v1/observations", json=[event(4), event(5)], headers=auth))
        for r in refusals:
            assert r.status_code == 507, r.text
            assert r.json()["error"] == "disk_full"
            assert int(r.headers["Retry-After"]) > 0
        health = http.get("/v1/health").json()
        assert health["ok"] is False
        assert health["commits"]["cause"] == "disk full"
        assert "free disk space" in health["commits"]["remedy"]
        brief = build_brief(mem, as_user(mem, "alice"), project="proj")
        assert "disk full" in brief["text"]
        lines = [r for r in caplog.records if "disk full" in r.getMessage()]
        assert len(lines) == 1  # once a minute, not once a refusal
        full.on = False
        # the hook sends its outbox again: every refused event is accepted, none lost
        for n in (2, 3):
            r = http.post("/v1/observations", json=event(n), headers=auth)
            assert r.status_code == 202 and r.json()["duplicate"] is False
        r = http.post("/v1/observations", json=[event(4), event(5)], headers=auth)
        assert r.status_code == 202
        assert http.get("/v1/health").json()["ok"] is True
    key = mem.spool.current_part("alice", "claude-code", "s1")
    assert key is not None
    assert [o.event_id for o in mem.spool.observations(key.key)] == [f"e{n}" for n in range(1, 6)]


def test_a_commit_at_a_full_disk_leaves_head_and_no_lock_and_catches_up(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    full = Full(monkeypatch, mem)
    git_dir = Path(mem.wiki_dir) / ".git"
    page = Path(mem.wiki_dir) / "projects/proj/notes/plan.md"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text("# Plan\n\nold words\n", encoding="utf-8")
    first = mem.git.commit(["projects/proj/notes/plan.md"], "alice", "a@x", "plan")
    ref = git_dir / "refs/heads/main"
    head = ref.read_bytes() if ref.exists() else None
    page.write_text("# Plan\n\nnew words\n", encoding="utf-8")
    full.on = True
    with pytest.raises(OSError):
        mem._git_commit(["projects/proj/notes/plan.md"], "alice", "a@x", "plan 2")
    assert mem.commit_status()["cause"] == "disk full"
    full.on = False
    assert mem.git.head() == first
    if head is not None:
        assert ref.read_bytes() == head
    left = [p for p in git_dir.rglob("*.lock")]
    assert left == [], left
    # space returned: the next commit works and ends the state
    second = mem._git_commit(["projects/proj/notes/plan.md"], "alice", "a@x", "plan 2")
    assert second and second != first
    assert mem.commit_status()["ok"] is True


def test_a_page_written_at_a_full_disk_keeps_its_old_bytes(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokens = TokenStore(mem.settings.auth_dir, owner_user="alice")
    token, _ = tokens.ensure_owner()
    full = Full(monkeypatch, mem)
    url = "/v1/pages/projects/proj/notes/plan.md"
    page = Path(mem.wiki_dir) / "projects/proj/notes/plan.md"
    with TestClient(create_app(mem, tokens), base_url="http://127.0.0.1") as http:
        auth = {"Authorization": f"Bearer {token}"}
        r = http.put(url, json={"text": "# Plan\n\nold words\n"}, headers=auth)
        assert r.status_code in (200, 201), r.text
        old = page.read_bytes()
        full.on = True
        new = "# Plan\n\n" + "new words " * 3000 + "\n"
        r = http.put(url, json={"text": new}, headers={**auth, "If-Match": r.json()["hash"]})
        assert r.status_code == 507 and r.json()["error"] == "disk_full", r.text
        assert page.read_bytes() == old
        assert not list(page.parent.glob(".*wm-tmp*"))
        full.on = False
        cur = http.get(url, headers=auth).json()["hash"]
        r = http.put(url, json={"text": new}, headers={**auth, "If-Match": cur})
        assert r.status_code == 200, r.text
        assert page.read_text(encoding="utf-8") == new


def test_a_reindex_at_a_full_disk_is_507_and_keeps_the_old_index(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import apsw

    from wiki_memory.index import build

    tokens = TokenStore(mem.settings.auth_dir, owner_user="alice")
    token, _ = tokens.ensure_owner()
    page = Path(mem.wiki_dir) / "projects/proj/notes/kept.md"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text("# Kept\n\nzebracorn stays findable\n", encoding="utf-8")
    mem.index.sync_paths(mem.wiki_dir, ["projects/proj/notes/kept.md"])

    def full(*_a: Any, **_kw: Any) -> int:
        raise apsw.FullError("database or disk is full")

    monkeypatch.setattr(build, "rebuild", full)
    with TestClient(create_app(mem, tokens), base_url="http://127.0.0.1") as http:
        auth = {"Authorization": f"Bearer {token}"}
        r = http.post("/v1/admin/reindex", json={}, headers=auth)
        assert r.status_code == 507 and r.json()["error"] == "disk_full", r.text
        assert mem.recall("zebracorn", user=as_user(mem, "alice")).total == 1
