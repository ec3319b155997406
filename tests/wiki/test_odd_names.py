"""Any file name: names that are not UTF-8, decomposed Unicode and names that
differ only in case never stop the server, and every page is indexed and committed (a
name that is not UTF-8 under its escaped name, ``%XX`` for each such byte, and committed
under its exact bytes); a page is read and written by the exact path it is listed under."""

from __future__ import annotations

import json
import os
import subprocess
import time
import unicodedata
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
import support
from clikit import run_cli_here
from dulwich.repo import Repo
from serverproc import ServerProcess
from support import committed, quiet, wait_for

from wiki_memory.core.memory import Memory
from wiki_memory.wiki.paths import PathRefused, clean_rel, locate

NFD = unicodedata.normalize("NFD", "notes/Café.md")
NFC = unicodedata.normalize("NFC", "notes/Café.md")


def odd_files(wiki: Path, tag: str = "") -> None:
    """A page and an image whose names hold a byte that is not UTF-8, a page in
    decomposed Unicode and two names differing only in case."""
    d = wiki / "notes"
    d.mkdir(parents=True, exist_ok=True)
    base = os.fsencode(d)
    with open(base + f"/bad{tag}\xff".encode("latin-1") + b".md", "wb") as f:
        f.write(b"# bad\n")
    with open(base + f"/img{tag}\xfe".encode("latin-1") + b".png", "wb") as f:
        f.write(b"\x89PNG\r\n")
    (wiki / unicodedata.normalize("NFD", f"notes/Café{tag}.md")).write_text("# café\n")
    (d / f"Case{tag}.md").write_text("# Case\n")
    (d / f"case{tag}.md").write_text("# case\n")


def run_cli(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``wiki-memory`` in this process (doctor changes nothing of the process)."""
    return run_cli_here(data, *args)


def make_memory(tmp_path: Path, files: dict[str, str] | None = None) -> Memory:
    return support.make_memory(
        tmp_path / "data",
        owner="owner",
        files=files,
        watch=True,
        commit_delay_seconds=0.05,
        hand_edit_settle_seconds=0.3,
        idle_check_seconds=60,
    )


def test_clean_rel_keeps_the_spelling_and_locate_finds_the_existing_one(tmp_path: Path) -> None:
    assert clean_rel(NFD) == NFD  # never folded
    with pytest.raises(PathRefused):
        clean_rel("notes/bad\udcff.md")
    (tmp_path / "notes").mkdir()
    (tmp_path / NFD).write_text("x")
    assert locate(tmp_path, NFC)[0] == NFD  # the one canonically equal entry
    assert locate(tmp_path, NFD)[0] == NFD
    (tmp_path / NFC).write_text("y")  # now both exist: each by its own name
    assert locate(tmp_path, NFC)[0] == NFC and locate(tmp_path, NFD)[0] == NFD
    assert locate(tmp_path, "notes/new.md")[0] == "notes/new.md"


def _check_server(srv: ServerProcess, wiki: Path, tag: str = "") -> None:
    listed = {p["path"] for p in srv.get("/v1/pages").json()["pages"]}
    nfd = unicodedata.normalize("NFD", f"notes/Café{tag}.md")
    assert nfd in listed
    assert {f"notes/Case{tag}.md", f"notes/case{tag}.md", "notes/plain.md"} <= listed
    assert not any("\ufffd" in p for p in listed)
    assert f"notes/bad{tag}%FF.md" in listed  # not UTF-8: under its escaped name
    r0 = srv.get("/v1/pages/" + quote(f"notes/bad{tag}%FF.md"))
    assert r0.status_code == 200 and r0.json()["content"] == "# bad\n", r0.text
    # read and update by the listed path; no second file appears
    r = srv.get("/v1/pages/" + quote(nfd))
    assert r.status_code == 200, r.text
    assert r.json()["path"] == nfd
    r2 = httpx.put(
        srv.url + "/v1/pages/" + quote(nfd),
        content="# café\n\nupdated\n".encode(),
        headers={**srv.headers, "If-Match": r.json()["hash"]},
        timeout=60,
    )
    assert r2.status_code == 200, r2.text
    assert r2.json()["path"] == nfd
    # the composed spelling reaches the same file
    nfc = unicodedata.normalize("NFC", nfd)
    r3 = srv.get("/v1/pages/" + quote(nfc))
    assert r3.status_code == 200 and "updated" in r3.json()["content"]
    r4 = httpx.put(
        srv.url + "/v1/pages/" + quote(nfc),
        content="# café\n\nagain\n".encode(),
        headers={**srv.headers, "If-Match": r3.json()["hash"]},
        timeout=60,
    )
    assert r4.status_code == 200, r4.text
    names = [n for n in os.listdir(wiki / "notes") if n.startswith("Caf")]
    assert names == [unicodedata.normalize("NFD", f"Café{tag}.md")]
    assert (wiki / nfd).read_text() == "# café\n\nagain\n"
    wait_for(lambda: nfd in committed(wiki) and not wiki_dirty(wiki, nfd), 20, "commit")
    assert nfc not in committed(wiki)


def wiki_dirty(wiki: Path, rel: str) -> bool:
    repo = Repo(str(wiki))
    try:
        tree = repo[repo[repo.head()].tree]  # type: ignore[attr-defined]
        _, sha = tree.lookup_path(repo.object_store.__getitem__, rel.encode())
        return bool(repo[sha].as_raw_string() != (wiki / rel).read_bytes())
    finally:
        repo.close()


@pytest.mark.process
def test_odd_names_at_start_and_after_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    wiki = data / "wiki"
    (wiki / "notes").mkdir(parents=True)
    (wiki / "notes" / "plain.md").write_text("# plain\n")
    odd_files(wiki)  # before the repository exists: the first commit holds them all
    # a server process (Starlette's TestClient decodes a path's %25 twice)
    with ServerProcess(data) as srv:
        _check_server(srv, wiki)
        got = committed(wiki)
        assert {"notes/plain.md", "notes/Case.md", "notes/case.md"} <= got
        assert {"notes/bad\udcff.md", "notes/img\udcfe.png"} <= got  # their exact bytes
        assert not any("%FF" in p or "%FE" in p for p in got)
    # more odd files while no server runs: the start-up recovery commits their pages
    odd_files(wiki, "2")
    (wiki / "notes" / "later.md").write_text("# later\n")
    with ServerProcess(data) as srv:
        listed = {p["path"] for p in srv.get("/v1/pages").json()["pages"]}
        assert {"notes/later.md", "notes/Case2.md", "notes/case2.md"} <= listed
        assert unicodedata.normalize("NFD", "notes/Café2.md") in listed
        wait_for(lambda: "notes/later.md" in committed(wiki), 20, "recovery commit")
        assert {"notes/Case2.md", "notes/case2.md"} <= committed(wiki)
        wait_for(lambda: "notes/bad2\udcff.md" in committed(wiki), 20, "recovery commit")
        assert "notes/bad2%FF.md" in listed
        logged = (data / "logs" / "server.log").read_text()
        assert "serving notes/bad2\\xff.md as notes/bad2%FF.md" in logged
    # never moved or renamed
    assert os.path.exists(os.fsencode(wiki / "notes") + b"/bad2\xff.md")
    assert os.path.exists(os.fsencode(wiki / "notes") + b"/img\xfe.png")
    # doctor names the odd ones
    r = run_cli(data, "doctor", "--json")
    rep = json.loads(r.stdout)
    skipped = {s["path"]: s["reason"] for s in rep["skipped"]}
    assert not any("\\x" in p for p in skipped), skipped  # served, not skipped
    odd = {e["file"]: e for e in rep["names"]["not_utf8"]}
    for name in ("bad\\xff.md", "img\\xfe.png", "bad2\\xff.md", "img2\\xfe.png"):
        e = odd["notes/" + name]
        assert e["path"] == "notes/" + name.replace("\\xff", "%FF").replace("\\xfe", "%FE")
    assert odd["notes/bad\\xff.md"]["rename_to"] == "notes/badÿ.md"  # the fix: a UTF-8 name
    assert unicodedata.normalize("NFD", "notes/Café.md") in rep["names"]["decomposed"]
    assert ["notes/Case.md", "notes/case.md"] in rep["names"]["case_twins"]
    assert rep["ok"], rep["errors"]
    text = run_cli(data, "doctor").stdout
    assert "notes/bad\\xff.md" in text and "decomposed" in text
    assert "notes/bad\\xff.md as notes/bad%FF.md" in text and "rename" in text


@pytest.mark.slow
def test_odd_names_arriving_in_one_batch_with_ordinary_pages(tmp_path: Path, stop_after) -> None:
    m = make_memory(tmp_path, {"notes/x.md": "# x\n"})
    stop_after(m)
    wiki = m.wiki_dir
    (wiki / "notes" / "a.md").write_text("# a\n")
    odd_files(wiki)
    (wiki / "notes" / "b.md").write_text("# b\n")
    want = {"notes/a.md", "notes/b.md", "notes/Case.md", "notes/case.md"}
    wait_for(lambda: want | {"notes/bad%FF.md"} <= set(m.index.paths()), 20, "indexed")
    quiet(m)
    wait_for(lambda: want | {"notes/bad\udcff.md"} <= committed(wiki), 20, "committed")
    assert unicodedata.normalize("NFD", "notes/Café.md") in m.index.paths()
    assert unicodedata.normalize("NFD", "notes/Café.md") in committed(wiki)
    # the watcher keeps working afterwards
    (wiki / "notes" / "c.md").write_text("# c\n")
    wait_for(lambda: "notes/c.md" in m.index.paths(), 20, "watcher alive")
    quiet(m)
    wait_for(lambda: "notes/c.md" in committed(wiki), 20, "committed after")
    page = m.read_page(unicodedata.normalize("NFD", "notes/Café.md"))
    assert page["path"] == unicodedata.normalize("NFD", "notes/Café.md")
    m.write_page(NFC, b"# cafe\n\nnew\n", user="owner", message="w", expected_hash=page["hash"])
    assert sorted(n for n in os.listdir(wiki / "notes") if n.startswith("Caf")) == [
        unicodedata.normalize("NFD", "Café.md")
    ]
    time.sleep(0.1)
