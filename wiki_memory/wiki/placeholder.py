"""Cloud placeholders: a page a file-sync client evicted is not a deletion (docs/git.md,
"Conflict copies and cloud placeholders").

A wiki kept in a cloud-synced folder can lose a file's bytes to the sync client ("free up
space", "online-only"). What this module recognises, on any system unless said:

* an iCloud Drive stub: ``notes/deploy.md`` gone and ``notes/.deploy.md.icloud`` beside it;
* a Nextcloud or ownCloud virtual file: ``notes/deploy.md`` gone and
  ``notes/deploy.md.nextcloud`` (``.owncloud``) beside it;
* a dataless file: the ``SF_DATALESS`` flag in ``st_flags`` (macOS, where iCloud, Dropbox
  and OneDrive's File Provider keep online-only files) or, on Windows, the
  recall-on-access, recall-on-open or offline attributes (Dropbox, OneDrive, Drive);
  Linux has neither field, and no common client there makes such files;
* a zero-length file where git holds a version with content (how a client shows a file
  it has not downloaded yet; to empty a page, leave a line in it).

:class:`wiki_memory.wiki.git.GitStore` leaves such a path out of every commit (HEAD keeps
the page, so sync never pushes a deletion), and never commits a stub.
"""

from __future__ import annotations

import os
import stat

__all__ = ["dataless", "evicted", "is_stub"]

#: ``st_flags`` bit of a file whose data lives in the cloud only (macOS ``sys/stat.h``)
SF_DATALESS = 0x40000000
#: Windows ``st_file_attributes`` bits of a file whose data is not on this disk: offline,
#: recall on open, recall on data access
_WINDOWS_OFFLINE = 0x00001000 | 0x00040000 | 0x00400000
_SUFFIXES = (b".nextcloud", b".owncloud")


def is_stub(name: bytes) -> bool:
    """True for the name of a placeholder stub file (never committed): ``.x.md.icloud``,
    ``x.md.nextcloud``, ``x.md.owncloud``."""
    return (name.startswith(b".") and name.endswith(b".icloud")) or name.endswith(_SUFFIXES)


def evicted(root: bytes, rel: bytes) -> bool:
    """True when the file at ``rel`` (under the folder ``root``; both bytes) is gone and a
    sync client's stub for it stands beside it."""
    head, sep, name = rel.rpartition(b"/")
    if not name:
        return False
    stubs = [head + sep + b"." + name + b".icloud"] + [rel + s for s in _SUFFIXES]
    return any(os.path.lexists(os.path.join(root, s)) for s in stubs)


def dataless(st: os.stat_result, committed_size: int | None) -> bool:
    """True when a regular file's stat says its bytes are not on this disk: a dataless
    flag or attribute (see the module), or zero bytes where git's version
    (``committed_size``: None when git has none) has some."""
    if not stat.S_ISREG(st.st_mode):
        return False
    if getattr(st, "st_flags", 0) & SF_DATALESS:
        return True
    if getattr(st, "st_file_attributes", 0) & _WINDOWS_OFFLINE:
        return True
    return st.st_size == 0 and bool(committed_size)
