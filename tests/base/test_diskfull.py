"""The disk state: told apart by errno, logged once a minute, no flapping while a nearly
full disk takes small writes between refusals, ended by room or a write that works."""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import pytest

from wiki_memory import diskfull
from wiki_memory.diskfull import DiskState, is_disk_full

pytestmark = pytest.mark.fast

ENOSPC = OSError(errno.ENOSPC, "No space left on device")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_full_errors_are_told_apart() -> None:
    assert is_disk_full(ENOSPC)
    assert is_disk_full(OSError(errno.EDQUOT, "quota"))
    assert not is_disk_full(OSError(errno.EIO, "I/O"))
    try:
        try:
            raise ENOSPC
        except OSError as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as outer:
        assert is_disk_full(outer)


def test_one_line_a_minute_no_flapping_and_it_ends_by_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    monkeypatch.setattr(diskfull.time, "time", clock)
    room = {"free": False}
    monkeypatch.setattr(DiskState, "_room", lambda _self: room["free"])
    caplog.set_level(logging.WARNING, "wiki_memory.disk")
    disk = DiskState(tmp_path)
    for _ in range(100):  # 100 refusals in 50 s, small writes working in between
        disk.failed(ENOSPC, "spool", 150_000)
        clock.now += 0.25
        disk.succeeded()
        assert disk.full
        clock.now += 0.25
    st = disk.status()
    assert st["ok"] is False and st["cause"] == "disk full" and st["failures"] == 100
    assert "free disk space" in st["remedy"]
    assert len(caplog.records) == 1
    clock.now += 30  # past a minute: one more line
    disk.failed(ENOSPC, "spool")
    assert len(caplog.records) == 2
    clock.now += diskfull.SETTLE + 0.1
    assert disk.full  # no room yet
    room["free"] = True
    assert not disk.full and disk.status() == {"ok": True}
    assert "returned" in caplog.records[-1].getMessage()
    # a write that works after a quiet spell ends it too
    disk.failed(ENOSPC, "git repository")
    room["free"] = False
    clock.now += diskfull.SETTLE + 0.1
    disk.succeeded()
    assert not disk.full
