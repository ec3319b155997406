"""Pages' end times kept between recalls (``index/pageends.py``) follow every write: a
page written on the same connection, one written by another connection (another
thread's, as the server's writer), a removed page, and an ``ended`` added later."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from wiki_memory.index import signals
from wiki_memory.index.store import Index

pytestmark = pytest.mark.fast


def _raw(updated: str, ended: str | None = None) -> bytes:
    extra = f"ended: {ended}\n" if ended else ""
    return f"---\ntitle: T\nupdated: {updated}\n{extra}---\n# T\n\nbody words\n".encode()


def _in_thread(fn) -> None:
    t = threading.Thread(target=fn)
    t.start()
    t.join()


def test_kept_ends_follow_writes_on_this_and_other_connections(tmp_path: Path) -> None:
    ix = Index(tmp_path / "index.db")
    try:
        ix.upsert_page("notes/a.md", _raw("2026-01-01T00:00:00Z"))
        ix.upsert_page("notes/b.md", _raw("2026-01-02T00:00:00Z"))
        paths = ["notes/a.md", "notes/b.md", "notes/none.md"]
        first = signals.page_ends(ix, paths)
        assert first == {"notes/a.md": "2026-01-01T00:00:00Z", "notes/b.md": "2026-01-02T00:00:00Z"}
        assert signals.page_ends(ix, paths) == first  # kept, the same

        ix.upsert_page("notes/a.md", _raw("2026-03-01T00:00:00Z"))  # this connection
        assert signals.page_ends(ix, paths)["notes/a.md"] == "2026-03-01T00:00:00Z"

        # another thread's connection writes: this one's kept ends are not served stale
        _in_thread(lambda: ix.upsert_page("notes/b.md", _raw("2026-01-02T00:00:00Z", "2026-05-05")))
        assert signals.page_ends(ix, paths)["notes/b.md"] == "2026-05-05"

        wiki = tmp_path / "wiki"
        wiki.mkdir()
        # a page whose file is gone leaves the index when its path is synced
        _in_thread(lambda: ix.sync_paths(wiki, ["notes/a.md"]))
        assert signals.page_ends(ix, paths) == {"notes/b.md": "2026-05-05"}
    finally:
        ix.close()
