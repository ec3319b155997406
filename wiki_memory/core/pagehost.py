"""What the page writers of the writer thread use of the Memory that owns them: the wiki
folder, the index, the hashes of what the server last wrote, and the compare-and-swap
write of one page (``Memory._cas_write``). Session pages (:mod:`wiki_memory.core.sessions`),
their parts (:mod:`wiki_memory.core.sessionpartwrite`) and topic pages
(:mod:`wiki_memory.core.topics`) each add what else they use."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from wiki_memory.index.store import Index

__all__ = ["PageWriteHost"]


class PageWriteHost(Protocol):
    """``wiki_dir`` (the wiki folder), ``index``, ``server_hashes`` (wiki path -> sha256
    hex of the bytes the server last wrote there) and ``_cas_write(rel, full, fn)``:
    ``fn(current bytes or None) -> new bytes or None`` applied until the file did not
    change under it; returns ``(current, written)``."""

    wiki_dir: Path
    index: Index
    server_hashes: dict[str, str]

    def _cas_write(
        self, rel: str, full: Path, fn: Callable[[bytes | None], bytes | None]
    ) -> tuple[bytes | None, bytes | None]: ...
