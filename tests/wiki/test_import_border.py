"""``wiki-memory import PATH`` hands every file of the vault to the border
(wiki/border.py, ``Source.OWN``) before copying: a ``.GIT`` folder or a ``.git.`` one, a
symbolic link (to a file or a folder), a FIFO, a set-id file and a file over 50 MiB are
skipped with the border's reason; the rest, a personal page included, is copied."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from wiki_memory.cli.wiki import import_vault

pytestmark = pytest.mark.fast


def test_the_border_decides_what_a_vault_import_copies(tmp_path: Path) -> None:
    src = tmp_path / "vault"
    (src / ".GIT").mkdir(parents=True)
    (src / ".GIT" / "config").write_text("[core]\n\tfsmonitor = touch pwned\n")
    (src / "notes" / ".git." / "hooks").mkdir(parents=True)
    (src / "notes" / ".git." / "hooks" / "post-checkout").write_text("#!/bin/sh\n")
    (src / "notes" / "a.md").write_text("# A\n")
    (src / "people" / "me").mkdir(parents=True)
    (src / "people" / "me" / "profile.md").write_text("# me\n")
    (src / "tool.sh").write_text("#!/bin/sh\necho hi\n")
    (src / "tool.sh").chmod(0o755)
    (src / "setid.sh").write_text("#!/bin/sh\n")
    (src / "setid.sh").chmod(0o4755)
    with open(src / "huge.bin", "wb") as f:
        f.truncate(60 * 1024 * 1024)  # sparse: its size is what the border judges
    os.mkfifo(src / "pipe", 0o644)
    (src / "pipe").chmod(0o644)
    os.symlink("/etc/hostname", src / "link.md")
    os.symlink("/etc", src / "etc")
    wiki = tmp_path / "wiki"
    wiki.mkdir()

    res = import_vault(src, wiki)

    assert sorted(res["copied"]) == ["notes/a.md", "people/me/profile.md", "tool.sh"]
    assert sorted(res["skipped"]) == [
        ".GIT/config (path: .git)",
        "etc (mode: symbolic link)",
        f"huge.bin (size: {60 * 1024 * 1024} bytes over {50 * 1024 * 1024})",
        "link.md (mode: symbolic link)",
        "notes/.git./hooks/post-checkout (path: .git)",
        "pipe (mode: 10644)",
        "setid.sh (mode: set-id or sticky bits)",
    ]
    on_disk = sorted(p.relative_to(wiki).as_posix() for p in wiki.rglob("*") if not p.is_dir())
    assert on_disk == ["notes/a.md", "people/me/profile.md", "tool.sh"]
    assert (wiki / "tool.sh").stat().st_mode & 0o100
    assert not (wiki / "setid.sh").exists() and not (wiki / "etc").exists()


def test_a_folder_swapped_for_a_link_after_the_listing_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the listing and the read, a folder of the vault becomes a link to a folder
    outside holding a file of the same name and size: nothing of it is copied."""
    import shutil

    src = tmp_path / "vault"
    (src / "notes").mkdir(parents=True)
    (src / "notes" / "a.md").write_text("# a harmless page\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.md").write_text("TOP SECRET 123456\n")  # the same size
    assert (outside / "a.md").stat().st_size == (src / "notes" / "a.md").stat().st_size
    real = shutil.disk_usage

    def swap(path: object) -> object:  # runs after the listing, before any read
        os.rename(src / "notes", src / "notes.old")
        os.symlink(outside, src / "notes")
        return real(path)

    monkeypatch.setattr(shutil, "disk_usage", swap)
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    res = import_vault(src, wiki)
    assert "notes/a.md" not in res["copied"]
    assert not (wiki / "notes" / "a.md").exists()
