"""The supersession chains kept between recalls (``index/keptchains.py``) follow every
write and every caller: a supersession written on the same connection, one written by
another connection (another thread's, as the server's writer), one removed, and a
caller who may not see the successor."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from wiki_memory.identity import Identity
from wiki_memory.index.keptchains import kept_chains
from wiki_memory.index.store import Index

pytestmark = pytest.mark.fast


def _raw(title: str, extra: str = "") -> bytes:
    return f"---\ntitle: {title}\n{extra}---\n# {title}\n\nbody words\n".encode()


def _in_thread(fn) -> None:
    t = threading.Thread(target=fn)
    t.start()
    t.join()


def test_kept_chains_follow_writes_and_callers(tmp_path: Path) -> None:
    ix = Index(tmp_path / "index.db")
    try:
        ix.upsert_page("notes/old.md", _raw("Old"))
        ix.upsert_page("notes/new.md", _raw("New"))
        ix.upsert_page("notes/newer.md", _raw("Newer"))
        assert kept_chains(ix).head == {}
        assert kept_chains(ix) is kept_chains(ix)  # kept: read once

        # this connection writes a supersession
        ix.upsert_page("notes/old.md", _raw("Old", "state: superseded\nsuperseded_by: New\n"))
        assert kept_chains(ix).head == {"notes/old.md": "notes/new.md"}

        # another thread's connection writes: the kept chains are not served stale
        _in_thread(
            lambda: ix.upsert_page(
                "notes/new.md", _raw("New", "state: superseded\nsuperseded_by: Newer\n")
            )
        )
        assert kept_chains(ix).head == {
            "notes/old.md": "notes/newer.md",
            "notes/new.md": "notes/newer.md",
        }

        # a caller who may not see the head gets its own chains, then the server's again
        ix.upsert_page("notes/newer.md", _raw("Newer", "user: bob\nvisibility: personal\n"))
        alice = Identity("alice")
        assert kept_chains(ix, alice).head == ix.chains(alice).head != ix.chains().head
        assert kept_chains(ix).head == ix.chains().head
        assert "notes/new.md" not in kept_chains(ix, alice).head  # its successor is hidden

        # a supersession taken back
        ix.upsert_page("notes/old.md", _raw("Old"))
        ix.upsert_page("notes/new.md", _raw("New"))
        assert kept_chains(ix).head == {}
    finally:
        ix.close()
