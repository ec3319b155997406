"""How the wiki's repository stores a new loose object: zlib level 1 unless the
repository's own config names a level (``core.looseCompression`` or
``core.compression``).

A session page is rewritten whole at each ``Stop`` and committed as a new blob: at
level 6 (git's and dulwich's default) compressing a 2 MB page took about 30-50 ms of a
turn, at level 1 about 8 ms, for a blob about 15 % larger until the next pack (packs
compress their objects again at their own level, see ``GitStore.maybe_pack``)."""

from __future__ import annotations

from dulwich.repo import Repo

#: the zlib level of a loose object the repository's config does not set
LOOSE_LEVEL = 1


def fast_loose(repo: Repo) -> Repo:
    """``repo`` with its loose objects written at :data:`LOOSE_LEVEL` when its config sets
    no level of its own; returns ``repo``."""
    config = repo.get_config()
    for key in (b"looseCompression", b"compression"):
        try:
            config.get((b"core",), key)
        except KeyError:
            continue
        return repo  # the person's setting stands
    store = repo.object_store
    if hasattr(store, "loose_compression_level"):
        store.loose_compression_level = LOOSE_LEVEL
    return repo
