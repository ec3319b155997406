"""What the core's page writers use of the Memory that owns them, for modules below
:mod:`wiki_memory.core.memory` (importing it would be a loop).

:class:`PageDoor`: Memory's two doors for a page write (``update_page``, ``write_page``),
declared once for the services that write through them (handoffs, ``remember``).
:class:`PageWriteHost`: what the page writers of the writer thread use: the wiki folder,
the index, the hashes of what the server last wrote, and the compare-and-swap write of
one page (``Memory._cas_write``). Session pages (:mod:`wiki_memory.core.sessions`), their
parts (:mod:`wiki_memory.core.sessionpartwrite`) and topic pages
(:mod:`wiki_memory.core.topics`) each add what else they use."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from wiki_memory.identity import Identity
from wiki_memory.index.store import Index

if TYPE_CHECKING:
    from wiki_memory.core.writer import WriteResult

__all__ = ["PageDoor", "PageWriteHost"]


class PageDoor(Protocol):
    """Memory's doors for writing a page, as its callers below it see them: ``update_page``
    reads, modifies and writes one page with ``fn(current bytes or None) -> new bytes or
    None``; ``write_page`` writes a whole page, create-only when asked. Both return the
    ``WriteResult`` and raise what :meth:`wiki_memory.core.memory.Memory.update_page` and
    :meth:`wiki_memory.core.memory.Memory.write_page` raise."""

    def update_page(
        self,
        path: str,
        fn: Callable[[bytes | None], bytes | None],
        *,
        user: str,
        message: str,
        commit_now: bool = False,
        who: Identity | None = None,
        op: str = "page.write",
    ) -> WriteResult: ...

    def write_page(
        self,
        path: str,
        data: bytes,
        *,
        user: str,
        message: str,
        create_only: bool = ...,
        who: Identity | None = ...,
    ) -> WriteResult: ...


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
