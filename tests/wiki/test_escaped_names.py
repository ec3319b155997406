"""A file name that is not valid UTF-8 (a Latin-1 vault on Linux) is a page under its
escaped name (each such byte as ``%XX``): listed, served, recalled, written and its
history read by that name, committed under its exact bytes, and never renamed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import support
from appkit import AppServer
from support import as_user, committed

from wiki_memory.config import load_settings
from wiki_memory.core.backup import backup, restore
from wiki_memory.core.memory import Memory
from wiki_memory.core.writer import WriteResult
from wiki_memory.wiki.exchange import export_pages
from wiki_memory.wiki.oddnames import escaped, page_name, unescaped

LATIN = "notes/caf\udce9.md"  # b"notes/caf\xe9.md" as os spells it
SERVED = "notes/caf%E9.md"
TEXT = b"# Cafe\n\nzqxlatinword in a page from another system\n"


def put_odd(wiki: Path, name: bytes, data: bytes) -> None:
    (wiki / "notes").mkdir(parents=True, exist_ok=True)
    with open(os.fsencode(wiki / "notes") + b"/" + name, "wb") as f:
        f.write(data)


def hand(m: Memory, paths: list[str]) -> None:
    m.index.sync_paths(m.wiki_dir, paths)

    def job() -> WriteResult:
        m._commit_hand_edits_now(paths)
        return WriteResult()

    m.writer.call(job)


def test_the_escaped_name_is_one_to_one(tmp_path: Path) -> None:
    assert escaped(LATIN) == SERVED and unescaped(SERVED) == LATIN
    assert escaped("notes/café.md") == "notes/café.md"
    assert unescaped("notes/café.md") is None and unescaped("100%.md") is None
    assert unescaped("notes/caf%C3%A9.md") is None  # valid UTF-8 spelled out: no escape
    assert unescaped("notes/%41.md") is None  # an ASCII byte is never escaped
    # a file really named like the escape keeps that name; its odd twin has none
    (tmp_path / "notes").mkdir()
    assert page_name(tmp_path, LATIN) == SERVED
    (tmp_path / SERVED).write_text("literal")
    assert page_name(tmp_path, LATIN) is None
    assert page_name(tmp_path, "notes/\udcc3%A9.md") is None  # would unescape to é


def test_a_latin1_name_is_listed_read_recalled_written_and_committed(
    tmp_path: Path, stop_after: Any
) -> None:
    data = tmp_path / "data"
    put_odd(data / "wiki", b"caf\xe9.md", TEXT)
    m = support.make_memory(data, owner="owner", files={"notes/plain.md": "# plain\n"})
    stop_after(m)
    wiki = m.wiki_dir
    assert SERVED in m.index.paths()
    assert LATIN in committed(wiki) and SERVED not in committed(wiki)  # its own bytes
    page = m.read_page(SERVED)
    assert page["path"] == SERVED and page["content"] == TEXT.decode()
    got = m.recall("zqxlatinword", user=as_user(m, "owner"))
    assert [i["path"] for i in got.items] == [SERVED]
    # a write by the escaped name reaches the file; no second file appears
    new = b"# Cafe\n\nzqxnewword\n"
    m.write_page(SERVED, new, user="owner", message="w", expected_hash=page["hash"])
    assert sorted(os.listdir(wiki / "notes")) == ["caf\udce9.md", "plain.md"]
    assert (wiki / LATIN).read_bytes() == b"# Cafe\n\nzqxnewword\n"
    support.wait_for(
        lambda: len(m.page_history(SERVED, as_user(m, "owner"))) == 2, 20, "the write's commit"
    )
    assert [i["path"] for i in m.recall("zqxnewword", user=as_user(m, "owner")).items] == [SERVED]
    # a hand edit and a removal are committed under the exact bytes too
    (wiki / LATIN).write_bytes(b"# Cafe\n\nby hand\n")
    hand(m, [LATIN])
    assert m.git.read_at(SERVED) == b"# Cafe\n\nby hand\n"
    (wiki / LATIN).unlink()
    hand(m, [LATIN])
    assert SERVED not in m.index.paths() and LATIN not in committed(wiki)


def test_a_literal_name_wins_over_its_odd_twin(tmp_path: Path, stop_after: Any) -> None:
    data = tmp_path / "data"
    put_odd(data / "wiki", b"caf\xe9.md", b"# odd twin zqxoddtwin\n")
    (data / "wiki" / SERVED).write_bytes(b"# literal zqxliteral\n")
    m = support.make_memory(data, owner="owner")
    stop_after(m)
    assert m.read_page(SERVED)["content"] == "# literal zqxliteral\n"
    assert m.recall("zqxoddtwin", user=as_user(m, "owner")).items == []
    assert LATIN not in committed(m.wiki_dir) and SERVED in committed(m.wiki_dir)
    assert os.path.exists(m.wiki_dir / LATIN)  # left as it is


def test_served_over_http_by_the_escaped_name(tmp_path: Path) -> None:
    data = tmp_path / "data"
    put_odd(data / "wiki", b"caf\xe9.md", TEXT)
    put_odd(data / "wiki", b"img\xfe.png", b"\x89PNG\r\n")
    # Starlette's TestClient decodes the path once more than a server does: quoted twice
    url = "/v1/pages/" + quote(quote(SERVED))
    with AppServer(data) as srv:
        listed = {p["path"] for p in srv.get("/v1/pages").json()["pages"]}
        assert SERVED in listed
        r = srv.get(url)
        assert r.status_code == 200, r.text
        assert r.json()["path"] == SERVED and "zqxlatinword" in r.json()["content"]
        r = srv.post("/v1/recall", {"query": "zqxlatinword"})
        assert r.status_code == 200, r.text
        assert SERVED in {i["path"] for i in r.json()["items"]}


def test_export_and_backup_carry_a_latin1_page(tmp_path: Path, stop_after: Any) -> None:
    """An export names the page by its escaped name (before, writing it failed with a
    UnicodeEncodeError); a backup restores the file under its exact bytes."""
    data = tmp_path / "data"
    put_odd(data / "wiki", b"caf\xe9.md", TEXT)
    m = support.make_memory(data, owner="owner")
    stop_after(m)
    out = tmp_path / "export.jsonl"
    with open(out, "w", encoding="utf-8") as f:
        got = export_pages(m.wiki_dir, f)
    assert got.pages == 1
    rec = json.loads(out.read_text().splitlines()[1])
    assert (rec["path"], rec["text"]) == (SERVED, TEXT.decode())
    backup(m.settings, tmp_path / "b.wmbak")
    m.stop()
    again = load_settings(tmp_path / "restored")
    restore(again, tmp_path / "b.wmbak")
    assert (again.wiki_dir / LATIN).read_bytes() == TEXT
    assert LATIN in committed(again.wiki_dir)
