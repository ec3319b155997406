"""The wiki's repository writes new loose objects at zlib level 1 (a session page is
committed whole at each turn), unless the person's git config names a level."""

from __future__ import annotations

import zlib
from pathlib import Path

from dulwich.objects import Blob
from dulwich.repo import Repo

from wiki_memory.wiki import gitloose


def loose_bytes(repo: Repo, blob: Blob) -> bytes:
    sha = blob.id.decode()
    return (Path(repo.controldir()) / "objects" / sha[:2] / sha[2:]).read_bytes()


def test_a_new_blob_is_written_fast_and_reads_back(tmp_path: Path) -> None:
    repo = gitloose.fast_loose(Repo.init(str(tmp_path), mkdir=False))
    try:
        blob = Blob.from_string(b"^t1 the parser keeps offsets\n" * 20_000)
        repo.object_store.add_object(blob)
        raw = loose_bytes(repo, blob)
        assert raw[:2] == b"\x78\x01"  # a zlib stream made at level 1
        assert zlib.decompress(raw).endswith(blob.as_raw_string())
        again = Repo(str(tmp_path))
        try:
            assert again[blob.id].as_raw_string() == blob.as_raw_string()
        finally:
            again.close()
    finally:
        repo.close()


def test_a_level_the_person_set_stands(tmp_path: Path) -> None:
    init = Repo.init(str(tmp_path), mkdir=False)
    config = init.get_config()
    config.set((b"core",), b"compression", b"9")
    config.write_to_path()
    init.close()
    repo = gitloose.fast_loose(Repo(str(tmp_path)))
    try:
        blob = Blob.from_string(b"a page\n" * 1000)
        repo.object_store.add_object(blob)
        assert loose_bytes(repo, blob)[:2] == b"\x78\xda"  # level 9
    finally:
        repo.close()
