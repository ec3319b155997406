"""Writes stay inside the wiki: a link, a ``..`` or ``.git`` on the way ends the write,
and nothing outside the root changes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from wiki_memory.wiki.inside import Outside, read_inside, remove_inside, write_inside

pytestmark = pytest.mark.fast


def _sandbox(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "wiki"
    out = tmp_path / "outside"
    root.mkdir()
    out.mkdir()
    os.symlink(out, root / "link")
    return root, out


@pytest.mark.parametrize(
    "rel",
    [
        "link/x.md",
        "../x.md",
        "a/../../x.md",
        "/tmp/x.md",
        "a/./b.md",
        "a//b.md",
        "",
        ".git/config",
        "a/.GIT/x",
        "a/git~1/x",
        "a/.git./x",
        "nul\0.md",
    ],
)
def test_a_write_that_would_leave_the_folder_is_refused(tmp_path: Path, rel: str) -> None:
    root, out = _sandbox(tmp_path)
    with pytest.raises(Outside):
        write_inside(root, rel, b"payload")
    assert list(out.iterdir()) == []
    assert sorted(p.name for p in root.iterdir()) == ["link"]


def test_a_link_at_the_target_is_replaced_not_followed(tmp_path: Path) -> None:
    root, out = _sandbox(tmp_path)
    (root / "notes").mkdir()
    os.symlink(out / "victim", root / "notes" / "a.md")
    write_inside(root, "notes/a.md", b"new")
    assert not (out / "victim").exists()
    assert (root / "notes" / "a.md").read_bytes() == b"new"
    assert not (root / "notes" / "a.md").is_symlink()


def test_write_read_remove_round_trip(tmp_path: Path) -> None:
    root, _ = _sandbox(tmp_path)
    write_inside(root, "a/b/c.md", b"x", fsync=True)
    write_inside(root, "a/run.sh", b"#!/bin/sh\n", executable=True)
    assert read_inside(root, "a/b/c.md") == b"x"
    assert read_inside(root, "link") is None  # a link is not a regular file
    assert read_inside(root, "missing/c.md") is None
    assert remove_inside(root, "a/b/c.md")
    assert not (root / "a" / "b").exists() and (root / "a" / "run.sh").is_file()
    assert not remove_inside(root, "a/b/c.md")
    assert not any(".wm-tmp" in p.name for p in root.rglob("*"))
    write_inside(root, ".git/config", b"[core]\n", git_ok=True)
    assert (root / ".git" / "config").is_file()


def test_a_fifo_is_not_a_file_and_reading_it_does_not_block(tmp_path: Path) -> None:
    import threading

    os.mkfifo(tmp_path / "pipe.md")
    got: list[object] = []
    t = threading.Thread(target=lambda: got.append(read_inside(tmp_path, "pipe.md")), daemon=True)
    t.start()
    t.join(5)
    assert got == [None]
