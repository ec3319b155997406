"""An index one schema version behind, whose stored rows are unchanged, is upgraded in
place at open (a secondary index added) instead of rebuilt; older versions rebuild."""

from __future__ import annotations

import json
from pathlib import Path

import apsw
import pytest
from support import make_memory, run_cli

from tests.index.test_index import write_page
from wiki_memory.index.schema import SCHEMA_VERSION, upgrade_path
from wiki_memory.index.store import Index


def _index_names(db: Path) -> set[str]:
    conn = apsw.Connection(str(db))
    try:
        return {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    finally:
        conn.close()


def _as_version_14(db: Path) -> None:
    conn = apsw.Connection(str(db))
    conn.execute("DROP INDEX pages_supersede")
    conn.pragma("user_version", 14)
    conn.close()


def test_a_version_14_index_gains_the_supersession_index_without_a_rebuild(
    tmp_path: Path,
) -> None:
    wiki = tmp_path / "wiki"
    write_page(wiki, "notes/old.md", "the port is 8080", superseded_by='"[[new]]"')
    write_page(wiki, "notes/new.md", "the port is 9090", supersedes='"[[old]]"')
    db = tmp_path / "index.db"
    ix = Index(db)
    ix.rebuild(wiki)
    assert ix.chains().by == {"notes/old.md": "notes/new.md"}
    ix.close()
    _as_version_14(db)
    assert "pages_supersede" not in _index_names(db)

    ix = Index(db)
    assert not ix.needs_rebuild  # the rows were kept: no rebuild at upgrade
    assert ix.count_pages() == 2
    assert ix.chains().by == {"notes/old.md": "notes/new.md"}
    ix.close()
    assert "pages_supersede" in _index_names(db)
    conn = apsw.Connection(str(db))
    assert conn.pragma("user_version") == SCHEMA_VERSION
    conn.close()


def test_a_version_without_an_upgrade_step_rebuilds(tmp_path: Path) -> None:
    assert upgrade_path(SCHEMA_VERSION) == []
    assert upgrade_path(13) is None
    wiki = tmp_path / "wiki"
    write_page(wiki, "notes/a.md", "hello")
    db = tmp_path / "index.db"
    ix = Index(db)
    ix.rebuild(wiki)
    ix.close()
    conn = apsw.Connection(str(db))
    conn.pragma("user_version", 13)
    conn.close()
    ix = Index(db)
    assert ix.needs_rebuild and ix.count_pages() == 0
    ix.close()


@pytest.mark.process  # doctor asks systemctl about the service
def test_doctor_takes_a_version_14_index_as_current(tmp_path: Path) -> None:
    data = tmp_path / "data"
    m = make_memory(data)
    m.stop()
    _as_version_14(data / "index.db")
    res = run_cli(data, "doctor", "--json")
    report = json.loads(res.stdout)
    assert "has schema" not in res.stdout + res.stderr, res.stdout
    assert report["index_check"] == "ok"
    assert "pages_supersede" in _index_names(data / "index.db")  # doctor's open upgraded it
