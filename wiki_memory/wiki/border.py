"""The border: one check for bytes that come from someone else.

Sync (a hub's commits), restore (a backup archive) and import (an export or a vault) all
hand what they received to :func:`check` before anything touches disk, and act on its
:class:`Verdict` without deciding again (docs/team-server.md, "Threat model"). The check
looks at three things, in this order:

1. **Paths.** Every component of an entry's path (``/``-separated, as stored): no empty
   component, no ``.`` or ``..``, no absolute path, no backslash, NUL or other control
   character, no component over 255 bytes, and no ``.git`` at any depth. Each component is
   also compared after folding (Unicode NFKC, case folding, code points that file systems
   ignore removed, trailing dots and spaces removed), so ``.GIT``, ``.git.``, fullwidth
   ``．ｇｉｔ``, ``.g\\u200cit`` and ``git~1`` (the 8.3 short name) are refused too.
2. **Modes.** Regular files and executables only: symbolic links, gitlinks (submodules),
   trees listed as files (an entry whose ``kind`` is not ``blob``) and anything else are
   refused.
3. **Sizes.** Each entry against ``limits.max_entry_bytes`` and the sum of accepted
   entries against ``limits.max_total_bytes``.

Then the scope part, which depends on :class:`Source`:

* ``HUB``: nothing under ``people/`` (compared with the identity fold, so ``People/`` and
  fullwidth ``ｐｅｏｐｌｅ/`` are the same folder) and no page that is personal by its
  frontmatter (read through the ``content`` callable, whole). Whether a page is pinned is
  not decided here: pins never travel between servers (the sync strips ``pinned`` on both
  ways, docs/git.md). Nor any ``.gitignore``, ``.gitattributes`` or ``.gitmodules`` (the
  identity fold too): they would tell this server's git what to leave untracked.
* ``OWN``: a restore or import of this owner's own backup or export: personal pages come
  back as they were.

With ``data_dir=True`` the paths are relative to a data directory rather than to the wiki
(a backup's members): besides the rules above, a path must name one of the places a backup
writes (:data:`BACKUP_PLACES`: ``wiki.bundle``, ``config.toml``, ``logs/audit.jsonl``, and
files under ``spool/``, ``auth/`` and ``use/``). Nothing of ``wiki/`` comes from a member:
the wiki comes from its bundle, whose tree is checked with ``data_dir=False``.

Authors and messages of hub commits are never an input here. The functions are pure: they
read no disk and raise nothing for hostile input; every refusal is a :class:`Refusal`
naming its reason.
"""

from __future__ import annotations

import functools
import re
import stat
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum

from wiki_memory.identity import people_owner

__all__ = [
    "BACKUP_PLACES",
    "Entry",
    "Limits",
    "Refusal",
    "Source",
    "Verdict",
    "check",
    "is_git_name",
    "mode_refusal",
    "path_refusal",
]

#: git's modes of a regular file and of an executable one
_FILE_MODES = frozenset({0o100644, 0o100755, 0o100664})
#: code points that some file systems drop from names (HFS+, NTFS): a name holding them
#: may open the same file as the name without them
_IGNORABLE = frozenset(
    [0x00AD, 0x034F, 0x180B, 0x180C, 0x180D, 0x180E, 0xFEFF]
    + list(range(0x200B, 0x2010))
    + list(range(0x202A, 0x202F))
    + list(range(0x2060, 0x2070))
    + list(range(0xFE00, 0xFE10))
)
_GIT_NAMES = frozenset({".git", "git~1"})
#: files in the working tree that tell git what to track or how to convert it: from a hub,
#: a ``.gitignore`` of ``*`` would keep every page written here out of git (unversioned,
#: never synced, never in a backup)
_GIT_FILES = frozenset({".gitignore", ".gitattributes", ".gitmodules"})
_CONTROL = re.compile("[\x00-\x1f\x7f]")

#: the data directory's places a backup holds: ``(files, folders)``; a member is one of the
#: files, or a file at any depth under one of the folders
BACKUP_PLACES: tuple[frozenset[str], frozenset[str]] = (
    frozenset({"wiki.bundle", "config.toml", "logs/audit.jsonl"}),
    frozenset({"spool", "auth", "use"}),
)


class Source(Enum):
    """Where the bytes come from: ``HUB`` (a git remote another server or anyone may
    write), ``OWN`` (this owner's own backup or export: personal pages and pins come back
    as they were)."""

    HUB = "hub"
    OWN = "own"


@dataclass(frozen=True)
class Entry:
    """One incoming file: ``path`` (wiki-relative, ``/``-separated, as the source spells
    it; bytes that are not UTF-8 decoded with ``surrogateescape``), ``mode`` (git's mode,
    or ``st_mode`` of an archive member), ``size`` (bytes), ``blob`` (its id or hash, as
    the source names it; recorded with a refusal), ``kind`` (what the object really is:
    ``blob``, or ``tree``/``commit``/``missing`` for a git entry whose mode says file but
    whose object is not one)."""

    path: str
    mode: int
    size: int
    blob: str = ""
    kind: str = "blob"


@dataclass(frozen=True)
class Refusal:
    """An entry left out: ``path`` and ``blob`` as the entry gave them (the path escaped
    for display by the caller), ``reason`` a short phrase such as ``"path: '..'"``,
    ``"mode: symbolic link"``, ``"size: 31457280 bytes over 52428800"``,
    ``"scope: personal page"``."""

    path: str
    blob: str
    reason: str

    def to_json(self) -> dict[str, str]:
        """``{"path", "blob", "reason"}``."""
        return {"path": self.path, "blob": self.blob, "reason": self.reason}


@dataclass(frozen=True)
class Limits:
    """Size bounds in bytes: one entry, and the sum of every accepted entry."""

    max_entry_bytes: int = 50 * 1024 * 1024
    max_total_bytes: int = 1024 * 1024 * 1024


@dataclass
class Verdict:
    """What :func:`check` decided: ``accepted`` entries (in input order) and ``refused``
    ones, each once."""

    accepted: list[Entry] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)

    @property
    def refused_paths(self) -> set[str]:
        """The paths of the refused entries."""
        return {r.path for r in self.refused}


@functools.lru_cache(maxsize=65536)
def _fold_component(part: str) -> str:
    if part.isascii():  # NFKC and the ignorable code points change no ASCII text
        return part.lower().rstrip(". ")
    text = unicodedata.normalize("NFKC", part).casefold()
    text = "".join(ch for ch in text if ord(ch) not in _IGNORABLE)
    text = unicodedata.normalize("NFKC", text)
    return text.rstrip(". ")


def is_git_name(part: str) -> bool:
    """True when the path component ``part`` may open git's own folder on some file system
    (``.git`` after the fold of :func:`path_refusal`: ``.GIT``, ``.git.``, ``git~1``...)."""
    return _fold_component(part) in _GIT_NAMES


def path_refusal(path: str | bytes) -> str | None:
    """Why ``path`` may not be written inside the wiki, or None when every component is
    safe (see the module, item 1). ``bytes`` are decoded with ``surrogateescape``."""
    if isinstance(path, bytes):
        path = path.decode("utf-8", "surrogateescape")
    if not path:
        return "path: empty"
    if path.startswith("/"):
        return "path: absolute"
    if "\\" in path:
        return "path: backslash"
    has_control = _CONTROL.search(path) is not None
    for part in path.split("/"):
        if not part:
            return "path: empty component"
        if has_control and _CONTROL.search(part):
            return "path: control character"
        if len(part.encode("utf-8", "surrogateescape")) > 255:
            return "path: component over 255 bytes"
        if part in (".", ".."):
            return f"path: {part!r}"
        folded = _fold_component(part)
        if folded in ("", ".", ".."):
            return f"path: {part!r} folds to {folded!r}"
        if folded in _GIT_NAMES:
            return "path: .git"
    return None


def data_dir_refusal(path: str) -> str | None:
    """Why the data-directory-relative ``path`` is not a place a backup writes (see
    :data:`BACKUP_PLACES`), or None. Call it after :func:`path_refusal` (it compares the
    spelling as given: ``Auth/x`` is not ``auth/x``)."""
    files, folders = BACKUP_PLACES
    top, sep, _rest = path.partition("/")
    if path in files or (sep and top in folders):
        return None
    return "place: not a part of a backup"


def mode_refusal(mode: int) -> str | None:
    """Why an entry of ``mode`` may not be written, or None for a regular file or an
    executable. Accepts git modes (``0o100644``) and ``st_mode`` values alike."""
    if mode in _FILE_MODES or (stat.S_ISREG(mode) and not mode & 0o7000):
        return None
    if stat.S_ISLNK(mode):
        return "mode: symbolic link"
    if mode == 0o160000:
        return "mode: gitlink"
    if stat.S_ISDIR(mode):
        return "mode: tree"
    if stat.S_ISREG(mode):
        return "mode: set-id or sticky bits"
    return f"mode: {mode:o}"


def _hub_scope_refusal(entry: Entry, content: Callable[[Entry], bytes] | None) -> str | None:
    if people_owner(entry.path) is not None or _fold_component(entry.path.split("/")[0]) == (
        "people"
    ):
        return "scope: under people/"
    if content is None or not entry.path.lower().endswith(".md"):
        return None
    from wiki_memory.wiki.personal import page_owner

    if page_owner(entry.path, content(entry)) is not None:
        return "scope: personal page"
    return None


def check(
    entries: Iterable[Entry],
    source: Source,
    *,
    limits: Limits | None = None,
    content: Callable[[Entry], bytes] | None = None,
    data_dir: bool = False,
) -> Verdict:
    """Split ``entries`` into accepted and refused (see the module for the rules).

    ``content`` returns an entry's bytes; it is called only for ``.md`` entries from a
    ``HUB`` whose path, mode and size passed, to decide whether the page is personal (an
    entry whose content cannot be read is refused). ``limits`` default to
    :class:`Limits`'s. ``data_dir``: the paths are relative to a data directory and must
    name a place a backup writes (:func:`data_dir_refusal`). Never raises for hostile
    input."""
    lim = limits or Limits()
    verdict = Verdict()
    by_blob: dict[tuple[str, bool], str | None] = {}
    total = 0
    for entry in entries:
        reason = path_refusal(entry.path) or mode_refusal(entry.mode)
        if reason is None and data_dir:
            reason = data_dir_refusal(entry.path)
        if reason is None and entry.kind != "blob":
            reason = f"object: a {entry.kind} listed as a file"
        if reason is None and entry.size > lim.max_entry_bytes:
            reason = f"size: {entry.size} bytes over {lim.max_entry_bytes}"
        if reason is None and total + entry.size > lim.max_total_bytes:
            reason = f"size: the total would pass {lim.max_total_bytes} bytes"
        if reason is None and source is Source.HUB:
            # the content part depends on the bytes alone: once per blob (a history holds
            # the same page under many paths); the people/ part on the path, every time
            key = (entry.blob, entry.path.lower().endswith(".md"))
            if (
                people_owner(entry.path) is not None
                or _fold_component(entry.path.split("/")[0]) == "people"
            ):
                reason = "scope: under people/"
            elif any(_fold_component(p) in _GIT_FILES for p in entry.path.split("/")):
                reason = "scope: git's own settings file"
            elif entry.blob and key in by_blob:
                reason = by_blob[key]
            else:
                try:
                    reason = _hub_scope_refusal(entry, content)
                except Exception as exc:  # noqa: BLE001 - hostile bytes never raise out of here
                    reason = f"unreadable: {type(exc).__name__}"
                if entry.blob:
                    by_blob[key] = reason
        if reason is not None:
            verdict.refused.append(Refusal(entry.path, entry.blob, reason))
            continue
        total += entry.size
        verdict.accepted.append(entry)
    return verdict
