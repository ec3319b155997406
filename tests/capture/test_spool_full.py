"""A full disk at the spool's write and fsync (ENOSPC injected at ``os.write`` and
``os.fsync`` for the spool's own files): nothing acknowledged is lost, nothing later is
glued to a torn line, and a refused event can be sent again."""

from __future__ import annotations

import errno
import json
import os

import pytest

from wiki_memory.capture.observation import parse_event
from wiki_memory.capture.spool import Spool

pytestmark = pytest.mark.fast


def ev(n: int, session: str = "s1", size: int = 10) -> dict[str, object]:
    return {
        "harness": "claude-code",
        "event": "PostToolUse",
        "session_id": session,
        "cwd": "/home/u/proj",
        "event_id": f"e{n}",
        "payload": {"tool_output": f"out {n} " + "x" * size},
    }


def obs(n: int, **kw: object):  # type: ignore[no-untyped-def]
    return parse_event(ev(n, **kw), "alice")  # type: ignore[arg-type]


class Disk:
    """``os.write``/``os.fsync`` of the spool's session files, failing on demand: a
    write takes ``room`` more bytes at most (then ENOSPC, after a short write)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, sp: Spool) -> None:
        self.sp = sp
        self.room: int | None = None
        self.fsync_fails = False
        real_write, real_fsync = os.write, os.fsync

        def write(fd: int, data: bytes) -> int:  # type: ignore[no-untyped-def]
            if self.room is not None and fd in self.sp._fds.values():
                if self.room <= 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                n = real_write(fd, bytes(data[: self.room]))
                self.room -= n
                return n
            return real_write(fd, data)

        def fsync(fd: int) -> None:
            if self.fsync_fails and fd in self.sp._fds.values():
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            real_fsync(fd)

        monkeypatch.setattr(os, "write", write)
        monkeypatch.setattr(os, "fsync", fsync)


def lines(path) -> list[dict[str, object]]:  # type: ignore[no-untyped-def]
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    return [json.loads(x) for x in raw.splitlines()]


def test_a_short_write_is_cut_back_and_the_next_event_is_whole(tmp_path, monkeypatch):
    sp = Spool(tmp_path)
    disk = Disk(monkeypatch, sp)
    key = sp.append([obs(1)])[0].session_key
    f = tmp_path / f"{key}.jsonl"
    before = f.stat().st_size
    disk.room = 40  # part of the next line fits, then the disk is full
    with pytest.raises(OSError) as err:
        sp.append([obs(2, size=500)])
    assert err.value.errno == errno.ENOSPC
    assert f.stat().st_size == before  # no torn line left
    assert sp.sessions[key].count == 1
    disk.room = None
    acc = sp.append([obs(3), obs(2, size=500)])  # the refused one, sent again
    assert [a.duplicate for a in acc] == [False, False]
    assert [r["event_id"] for r in lines(f)[1:]] == ["e1", "e3", "e2"]
    sp.close()
    again = Spool(tmp_path)
    assert [o.event_id for o in again.observations(key)] == ["e1", "e3", "e2"]
    assert again.sessions[key].count == 3
    again.close()


def test_a_new_session_whose_first_write_fails_leaves_nothing(tmp_path, monkeypatch):
    sp = Spool(tmp_path)
    disk = Disk(monkeypatch, sp)
    disk.room = 0
    with pytest.raises(OSError):
        sp.append([obs(1, session="new"), obs(2, session="new")])
    assert sp.sessions == {}
    assert list(tmp_path.glob("*.jsonl")) == []
    disk.room = None
    acc = sp.append([obs(1, session="new")])
    assert not acc[0].duplicate
    assert [r.get("event_id") for r in lines(tmp_path / f"{acc[0].session_key}.jsonl")] == [
        None,
        "e1",
    ]
    sp.close()


def test_a_failed_fsync_takes_back_what_it_covered(tmp_path, monkeypatch):
    sp = Spool(tmp_path)
    disk = Disk(monkeypatch, sp)
    key = sp.append([obs(1)])[0].session_key
    f = tmp_path / f"{key}.jsonl"
    before = f.stat().st_size
    _, target = sp.write([obs(2)])
    _, later = sp.write([obs(3)])  # written before the failed fsync, not covered by it
    disk.fsync_fails = True
    with pytest.raises(OSError):
        sp.sync_to(target)
    disk.fsync_fails = False
    # cut back to the last fsync that worked; both writes refused for good
    assert f.stat().st_size == before
    for t in (target, later):
        assert not sp.synced(t)
        with pytest.raises(OSError):
            sp.sync_to(t)
    acc = sp.append([obs(2), obs(3)])  # sent again: not taken for duplicates
    assert [a.duplicate for a in acc] == [False, False]
    assert [r["event_id"] for r in lines(f)[1:]] == ["e1", "e2", "e3"]
    sp.close()


def test_a_failed_fsync_of_a_new_session_forgets_it(tmp_path, monkeypatch):
    sp = Spool(tmp_path)
    disk = Disk(monkeypatch, sp)
    _, target = sp.write([obs(1, session="fresh")])
    disk.fsync_fails = True
    with pytest.raises(OSError):
        sp.sync_to(target)
    disk.fsync_fails = False
    assert sp.sessions == {}
    acc = sp.append([obs(1, session="fresh")])
    assert not acc[0].duplicate
    assert len(lines(tmp_path / f"{acc[0].session_key}.jsonl")) == 2
    sp.close()


def test_a_cut_that_fails_is_made_before_the_next_write(tmp_path, monkeypatch):
    sp = Spool(tmp_path)
    disk = Disk(monkeypatch, sp)
    key = sp.append([obs(1)])[0].session_key
    real = os.ftruncate
    monkeypatch.setattr(os, "ftruncate", lambda fd, n: (_ for _ in ()).throw(OSError(5, "EIO")))
    disk.room = 30
    with pytest.raises(OSError):
        sp.append([obs(2)])
    monkeypatch.setattr(os, "ftruncate", real)
    disk.room = None
    sp.append([obs(3)])
    assert [r["event_id"] for r in lines(tmp_path / f"{key}.jsonl")[1:]] == ["e1", "e3"]
    sp.close()


def test_a_line_glued_to_an_old_fragment_is_read(tmp_path):
    # spool files written before failed writes were cut back may hold a fragment with
    # the next whole line glued to it: that line is read, the fragment skipped
    sp = Spool(tmp_path)
    key = sp.append([obs(1), obs(2)])[0].session_key
    sp.close()
    f = tmp_path / f"{key}.jsonl"
    head, first, second = f.read_bytes().splitlines(keepends=True)
    f.write_bytes(head + first + second[:25] + second)
    again = Spool(tmp_path)
    assert [o.event_id for o in again.observations(key)] == ["e1", "e2"]
    assert again.append([obs(2)])[0].duplicate
    again.close()


def test_a_purge_that_shortens_a_file_then_a_full_disk_cuts_back_to_the_purged_file(
    tmp_path, monkeypatch
):
    # the spool keeps its files' lengths in memory: a purge rewrites a file shorter in
    # place, and a write that fails after it must cut back to the purged length, not to
    # the length before the purge (which would leave bytes of zeros or a torn line)
    sp = Spool(tmp_path)
    disk = Disk(monkeypatch, sp)
    key = sp.append([obs(1, size=300), obs(2)])[0].session_key
    f = tmp_path / f"{key}.jsonl"
    assert sp.scrub([b"x" * 300], b"[PURGED]") == 1
    purged = f.read_bytes()
    disk.room = 25
    with pytest.raises(OSError):
        sp.append([obs(3, size=500)])
    assert f.read_bytes() == purged
    disk.room = None
    sp.append([obs(4)])
    assert [r["event_id"] for r in lines(f)[1:]] == ["e1", "e2", "e4"]
    assert b"x" * 300 not in f.read_bytes()
    sp.close()


@pytest.mark.parametrize("after", [10, 600], ids=["shorter-than-before", "longer-than-before"])
def test_a_purge_that_shortens_a_synced_file_then_a_failed_fsync_takes_back_to_it(
    tmp_path, monkeypatch, after
):
    # a failed fsync cuts a file back to its length at its last good fsync; a purge that
    # rewrote the file shorter in place (and fsynced it) moves that length: cutting to the
    # length before the purge would leave bytes of zeros or a torn half of the new line
    sp = Spool(tmp_path)
    disk = Disk(monkeypatch, sp)
    key = sp.append([obs(1, size=300), obs(2)])[0].session_key  # written and fsynced
    f = tmp_path / f"{key}.jsonl"
    assert sp.scrub([b"x" * 300], b"[PURGED]") == 1
    purged = f.read_bytes()
    _, target = sp.write([obs(3, size=after)])
    disk.fsync_fails = True
    with pytest.raises(OSError):
        sp.sync_to(target)
    disk.fsync_fails = False
    assert f.read_bytes() == purged
    sp.append([obs(4)])
    assert [r["event_id"] for r in lines(f)[1:]] == ["e1", "e2", "e4"]
    sp.close()
