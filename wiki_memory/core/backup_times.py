"""Each wiki file's modification time in a backup (the manifest's ``mtimes``), given back
by restore: for a page whose frontmatter has no ``updated`` or ``created``, it is the
time recall's ``since``/``until`` filter on, and a checkout alone would make it the
restore's own time (docs/operations.md, "Backup and restore")."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from dulwich.index import index_entry_from_stat
from dulwich.repo import Repo

from wiki_memory.wiki.paths import PathRefused, clean_rel, is_plain

__all__ = ["file_times", "keep_file_times"]


def file_times(wiki: Path) -> dict[str, float]:
    """Every working-tree file's modification time (epoch seconds) by wiki path: the time
    recall filters on for a page whose frontmatter has none, which a checkout would set
    to the restore's own time."""
    out: dict[str, float] = {}
    for root, dirs, files in os.walk(wiki):
        dirs[:] = [d for d in dirs if not (root == str(wiki) and d == ".git")]
        for name in files:
            full = os.path.join(root, name)
            rel = os.path.relpath(full, wiki).replace(os.sep, "/")
            try:
                rel.encode("utf-8")
                st = os.lstat(full)
            except (UnicodeEncodeError, OSError):
                continue
            if stat.S_ISREG(st.st_mode):
                out[rel] = st.st_mtime
    return out


def keep_file_times(wiki: Path, mtimes: Any) -> None:
    """Give the restored files of ``wiki`` the times the manifest recorded (a crafted
    manifest's odd entries are skipped: only plain files inside ``wiki``, never through a
    symbolic link)."""
    if not isinstance(mtimes, dict):
        return
    repo = Repo(str(wiki))
    try:
        index = repo.open_index()
        _set_mtimes(wiki, mtimes, index)
        index.write()  # its entries' times follow, so git sees no change
    finally:
        repo.close()


def _set_mtimes(wiki: Path, mtimes: dict[Any, Any], index: Any) -> None:
    for rel, when in mtimes.items():
        if not isinstance(rel, str) or not isinstance(when, (int, float)) or isinstance(when, bool):
            continue
        if not 0 <= when < 253402300800:
            continue
        try:
            rel = clean_rel(rel)
        except PathRefused:
            continue
        if is_plain(wiki, rel) and os.path.isfile(wiki / rel):
            os.utime(wiki / rel, (when, when), follow_symlinks=False)
            key = rel.encode("utf-8")
            if key in index:
                old = index[key]
                index[key] = index_entry_from_stat(os.lstat(wiki / rel), old.sha, old.mode)
