"""The three file rules (wiki_memory/plainfile.py): a plain file is read only when it is
a regular file reached without a link, and never waits on a FIFO; the page hash; the
atomic write leaves the old bytes or the new and never a temporary file."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from wiki_memory.plainfile import atomic_write, page_hash, read_plain


def test_reads_a_regular_file(tmp_path: Path) -> None:
    f = tmp_path / "page.md"
    f.write_bytes(b"hello\n")
    assert read_plain(f) == b"hello\n"


def test_missing_file_and_folder_read_as_absent(tmp_path: Path) -> None:
    assert read_plain(tmp_path / "gone.md") is None
    assert read_plain(tmp_path / "no-folder" / "gone.md") is None
    assert read_plain(tmp_path) is None


def test_symlink_is_refused_even_to_a_readable_file(tmp_path: Path) -> None:
    target = tmp_path / "secret.md"
    target.write_bytes(b"someone else's\n")
    link = tmp_path / "link.md"
    link.symlink_to(target)
    assert read_plain(link) is None
    assert read_plain(target) == b"someone else's\n"


def test_fifo_reads_as_absent_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "page.md"
    os.mkfifo(fifo)
    got: list[bytes | None] = []
    t = threading.Thread(target=lambda: got.append(read_plain(fifo)), daemon=True)
    t.start()
    t.join(timeout=5)
    if t.is_alive():  # unblock the reader so the test run can go on
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("reading a FIFO waited for a writer")
    assert got == [None]


def test_device_reads_as_absent() -> None:
    assert read_plain("/dev/null") is None


def test_page_hash_is_sha256_hex() -> None:
    assert page_hash(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert page_hash(b"a") != page_hash(b"a\n")


def test_atomic_write_replaces_and_keeps_the_mode(tmp_path: Path) -> None:
    f = tmp_path / "notes" / "x.md"
    atomic_write(f, b"one\n")
    assert f.read_bytes() == b"one\n"
    assert stat.S_IMODE(f.stat().st_mode) == 0o600  # a new file is owner-only
    os.chmod(f, 0o640)
    atomic_write(f, b"two\n")
    assert f.read_bytes() == b"two\n"
    assert stat.S_IMODE(f.stat().st_mode) == 0o640  # an existing file keeps its bits
    atomic_write(f, b"three\n", 0o644)
    assert stat.S_IMODE(f.stat().st_mode) == 0o644
    assert sorted(p.name for p in f.parent.iterdir()) == ["x.md"]


def test_atomic_write_that_fails_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "x.md"
    target.mkdir()
    (target / "inside").write_bytes(b"")  # the rename over a full folder fails
    with pytest.raises(OSError):
        atomic_write(target, b"new\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.md"]
    assert target.is_dir()


def test_scrub_files_rewrites_in_place_and_passes_over_links(tmp_path: Path) -> None:
    from wiki_memory.plainfile import scrub_files

    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "a.log").write_bytes(b"key=SECRET and SECRET\n")
    (folder / "b.log").write_bytes(b"nothing here\n")
    (folder / "skip.log").write_bytes(b"SECRET\n")
    outside = tmp_path / "outside.log"
    outside.write_bytes(b"SECRET\n")
    (folder / "link.log").symlink_to(outside)
    inode = (folder / "a.log").stat().st_ino
    with open(folder / "a.log", "ab") as appender:  # a writer's open descriptor
        changed = scrub_files(folder, [b"SECRET", b""], b"[X]", skip="skip")
        appender.write(b"later\n")
    assert changed == {"a.log": 2}
    assert (folder / "a.log").read_bytes() == b"key=[X] and [X]\nlater\n"
    assert (folder / "a.log").stat().st_ino == inode
    assert (folder / "skip.log").read_bytes() == b"SECRET\n"
    assert outside.read_bytes() == b"SECRET\n"  # never through a link
    assert scrub_files(tmp_path / "missing", [b"SECRET"], b"[X]") == {}
