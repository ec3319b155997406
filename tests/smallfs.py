"""A small file system for the full-disk tests (``tests/server/test_disk_full.py``,
``tests/harness/test_outbox_full.py``): tmpfs, else ext4 on a loop device, and a file
that fills it to the last byte."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_fs(where: Path, size_mb: int = 24) -> Iterator[str]:
    """A file system of ``size_mb`` MiB mounted at ``where``: tmpfs, else an ext4 image
    on a loop device; skips with the reason when neither can be mounted. Unmounted at
    the end whatever happens."""
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0700", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    kind = "tmpfs"
    if r.returncode != 0:
        img = where.parent / "small-fs.img"
        with open(img, "wb") as f:
            f.truncate(size_mb << 20)
        mk = subprocess.run(["mkfs.ext4", "-q", "-F", str(img)], capture_output=True, text=True)
        lo = subprocess.run(
            ["mount", "-o", "loop", str(img), str(where)], capture_output=True, text=True
        )
        if mk.returncode != 0 or lo.returncode != 0:
            pytest.skip(
                f"neither tmpfs ({r.stderr.strip()}) nor a loop mount "
                f"({(mk.stderr or lo.stderr).strip()}) could be mounted"
            )
        kind = "ext4 on a loop device"
    try:
        yield kind
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(where: Path) -> Path:
    """Write a file at ``where`` until the file system has no byte left; returns it."""
    filler = where / "filler.bin"
    block = b"\0" * 65536
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while True:
            try:
                os.write(fd, block)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
        for size in (4096, 512, 1):  # the last partial blocks too
            while True:
                try:
                    os.write(fd, block[:size])
                except OSError:
                    break
    finally:
        os.close(fd)
    return filler
