"""``stream_inside`` (wiki/inside.py): a restore's members written block by block, owner-only
whatever the umask, never through a link, and never half-written."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from wiki_memory.wiki.inside import Outside, stream_inside

pytestmark = pytest.mark.fast


def test_blocks_are_written_owner_only_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        n = stream_inside(tmp_path, "auth/owner.token", iter([b"wmo_", b"abc\n"]))
    finally:
        os.umask(old)
    assert n == 8
    f = tmp_path / "auth" / "owner.token"
    assert f.read_bytes() == b"wmo_abc\n"
    assert stat.S_IMODE(f.stat().st_mode) == 0o600


def test_a_link_on_the_way_is_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(outside, root / "spool")
    with pytest.raises(Outside):
        stream_inside(root, "spool/x.jsonl", iter([b"x"]))
    with pytest.raises(Outside):
        stream_inside(root, "../outside/x", iter([b"x"]))
    assert list(outside.iterdir()) == []


def test_a_failing_source_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    stream_inside(tmp_path, "logs/audit.jsonl", iter([b"old\n"]))

    def broken() -> Iterator[bytes]:
        yield b"new, half"
        raise ValueError("the backup is damaged")

    with pytest.raises(ValueError):
        stream_inside(tmp_path, "logs/audit.jsonl", broken())
    assert (tmp_path / "logs" / "audit.jsonl").read_bytes() == b"old\n"
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == ["audit.jsonl"]
