"""Purge's copies beside the page, in process (docs/operations.md, "Purge"): a page
purged whole leaves its path, name and title in no commit message, file name or page of
any commit; links to it in every version of every page read ``[purged]`` while other
links stay; a page renamed by a text purge keeps resolving through relative links; the
audit log is rewritten with the value as ``[purged]``."""

from __future__ import annotations

import json
from pathlib import Path

from dulwich.repo import Repo
from support import make_memory

from wiki_memory.core.purge import purge_page

VALUE = "-".join(["umber", "gannet", "5102"])


def _commit(m, rel: str, text: str) -> None:
    full = m.wiki_dir / rel
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_text(text, encoding="utf-8")
    m._commit_hand_edits_now([rel])


def _history(wiki: Path) -> list[tuple[bytes, dict[bytes, bytes]]]:
    """(message, path -> bytes) of every commit of HEAD, newest first."""
    repo = Repo(str(wiki))
    try:
        out = []
        for entry in repo.get_walker():
            c = entry.commit
            files = {
                e.path: repo[e.sha].data
                for e in repo.object_store.iter_tree_contents(c.tree)
                if e.path.endswith(b".md")
            }
            out.append((c.message, files))
        return out
    finally:
        repo.close()


def test_a_page_purged_whole_leaves_no_name_title_or_link_in_history(tmp_path: Path) -> None:
    m = make_memory(tmp_path / "d", files={"projects/p/index.md": "# p\n"})
    try:
        page = f"projects/p/notes/{VALUE}.md"
        _commit(m, page, f"---\ntitle: Gannet {VALUE}\n---\n# gannet\nbody\n")
        _commit(
            m, "projects/p/notes/links.md", f"# links\nsee [[{VALUE}|the gannet]] and [[index]]\n"
        )
        _commit(
            m, "projects/p/notes/links.md", f"# links\nsee [[{VALUE}]] then [[Gannet {VALUE}]]\n"
        )
        m.audit.record(None, "page.write", page)
        assert any(VALUE.encode() in msg for msg, _f in _history(m.wiki_dir))

        res = purge_page(m, page, None)
        assert res["path"] == "projects/p/notes/[purged]" and VALUE not in json.dumps(res)
        assert res["removed"]["links"] == 2 and res["removed"]["audit_lines"] >= 1
        for msg, files in _history(m.wiki_dir):
            assert VALUE.encode() not in msg
            for path, data in files.items():
                assert VALUE.encode() not in path + data, path
        text = (m.wiki_dir / "projects/p/notes/links.md").read_text()
        assert text == "# links\nsee [purged] then [purged]\n"
        assert VALUE not in (m.settings.logs_dir / "audit.jsonl").read_text()
        # a link that was never to it is kept, byte for byte
        first = [f for _m, f in _history(m.wiki_dir) if b"projects/p/notes/links.md" in f][-1]
        assert first[b"projects/p/notes/links.md"] == b"# links\nsee [purged] and [[index]]\n"
    finally:
        m.stop()


def test_a_renamed_page_keeps_its_relative_links(tmp_path: Path) -> None:
    m = make_memory(tmp_path / "d", files={"projects/p/index.md": "# p\n"})
    try:
        page = f"projects/p/notes/door {VALUE}.md"
        _commit(m, page, f"# door\nthe code is {VALUE}\n")
        _commit(m, "projects/p/other/see.md", f"# see\n[[../notes/door {VALUE}.md#door]]\n")
        res = purge_page(m, page, None, text=VALUE)
        new = res["path"]
        stem = new.rsplit("/", 1)[1][:-3]
        assert (m.wiki_dir / new).read_text() == "# door\nthe code is [purged]\n"
        assert (m.wiki_dir / "projects/p/other/see.md").read_text() == f"# see\n[[{stem}#door]]\n"
        for msg, files in _history(m.wiki_dir):
            assert VALUE.encode() not in msg and not any(VALUE.encode() in p for p in files)
    finally:
        m.stop()


def test_links_by_a_title_that_held_the_text_now_name_the_file(tmp_path: Path) -> None:
    m = make_memory(tmp_path / "d", files={"projects/p/index.md": "# p\n"})
    try:
        page = "projects/p/notes/vault.md"
        _commit(m, page, f"---\ntitle: Vault {VALUE}\n---\n# vault\n{VALUE}\n")
        _commit(m, "projects/p/notes/setup.md", "# setup\nthe other setup\n")
        _commit(m, "projects/q/notes/setup.md", "# setup\none more\n")
        _commit(m, "projects/p/notes/see.md", f"# see\n[[Vault {VALUE}|vault]] and [[setup]]\n")
        m.index.rebuild(m.wiki_dir)
        res = purge_page(m, page, None, text=VALUE)
        assert not res["renamed"] and res["removed"]["links"] == 1
        see = (m.wiki_dir / "projects/p/notes/see.md").read_text()
        assert see == "# see\n[[vault|vault]] and [[setup]]\n"
        for msg, files in _history(m.wiki_dir):
            assert VALUE.encode() not in msg
            assert not any(VALUE.encode() in p + d for p, d in files.items())
    finally:
        m.stop()


def test_a_link_that_may_mean_another_page_of_the_same_name_is_left_alone(tmp_path: Path) -> None:
    m = make_memory(tmp_path / "d", files={"projects/p/index.md": "# p\n"})
    try:
        _commit(m, "projects/p/notes/setup.md", "# setup\nsecret-ish\n")
        _commit(m, "projects/q/notes/setup.md", "# setup\nthe other one\n")
        body = "# see\n[[setup]] and [[projects/p/notes/setup]]\n"
        _commit(m, "projects/q/notes/see.md", body)
        purge_page(m, "projects/p/notes/setup.md", None)
        see = (m.wiki_dir / "projects/q/notes/see.md").read_text()
        assert see == "# see\n[[setup]] and [purged]\n"
    finally:
        m.stop()


def _rename(m, old: str, new: str, text: str) -> None:
    """A rename by hand (the old file gone, the new one saved), one commit."""
    (m.wiki_dir / old).unlink()
    full = m.wiki_dir / new
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_text(text, encoding="utf-8")
    m._commit_hand_edits_now([old, new])


def test_a_text_purge_reaches_the_page_under_the_name_it_had_before_a_rename(
    tmp_path: Path,
) -> None:
    """The text in a page's earlier file name and in its versions there (the page was
    renamed since, then edited: the same frontmatter id), and in a link by that earlier
    name: none of it stays in any commit; the earlier name becomes a neutral one that the
    old link follows."""
    m = make_memory(tmp_path / "d", files={"projects/p/index.md": "# p\n"})
    try:
        before = f"projects/p/notes/door {VALUE}.md"
        page = "projects/p/notes/door.md"
        _commit(m, before, f"---\nid: n_door1\n---\n# door\nthe code is {VALUE}\n")
        _commit(m, "projects/p/notes/see.md", f"# see\n[[door {VALUE}#door]]\n")
        _rename(m, before, page, f"---\nid: n_door1\n---\n# door\nthe code is {VALUE}\nnow\n")
        _commit(m, "projects/p/notes/see.md", "# see\n[[door#door]]\n")
        assert any(VALUE.encode() in p for _m, f in _history(m.wiki_dir) for p in f)

        res = purge_page(m, page, None, text=VALUE)
        assert not res["renamed"] and res["path"] == page  # its name now never held it
        assert res["removed"]["page_versions"] == 2
        earlier = set()
        for msg, files in _history(m.wiki_dir):
            assert VALUE.encode() not in msg
            for path, data in files.items():
                assert VALUE.encode() not in path + data, path
            earlier |= {p for p in files if b"/purged-" in p}
        assert len(earlier) == 1  # the earlier name, neutral in the commits that had it
        stem = earlier.pop().rsplit(b"/", 1)[1][:-3].decode()
        first = [f for _m, f in _history(m.wiki_dir) if b"projects/p/notes/see.md" in f][-1]
        assert first[b"projects/p/notes/see.md"] == f"# see\n[[{stem}#door]]\n".encode()
        assert (m.wiki_dir / page).read_text().endswith("the code is [purged]\nnow\n")
        assert (m.wiki_dir / "projects/p/notes/see.md").read_text() == "# see\n[[door#door]]\n"
    finally:
        m.stop()


def test_a_page_purged_whole_goes_from_the_folder_it_was_moved_from(tmp_path: Path) -> None:
    """A page moved to another folder and edited there (the same frontmatter id): a
    whole purge removes its versions at the old path too, that path from every commit
    message, and links by the old path read ``[purged]``."""
    m = make_memory(tmp_path / "d", files={"projects/p/index.md": "# p\n"})
    try:
        before = f"projects/p/drafts/{VALUE}.md"
        page = "projects/p/notes/plover.md"
        _commit(m, before, f"---\nid: n_plover\n---\n# plover\n{VALUE} body\n")
        _commit(m, "projects/p/notes/see.md", f"# see\n[[projects/p/drafts/{VALUE}]]\n")
        _rename(m, before, page, "---\nid: n_plover\n---\n# plover\nedited\n")
        res = purge_page(m, page, None)
        assert res["removed"]["page_versions"] == 2
        for msg, files in _history(m.wiki_dir):
            assert VALUE.encode() not in msg
            assert not any(b"n_plover" in d for d in files.values())
            assert not any(VALUE.encode() in p + d for p, d in files.items())
        assert (m.wiki_dir / "projects/p/notes/see.md").read_text() == "# see\n[purged]\n"
    finally:
        m.stop()


def test_an_earlier_release_session_name_goes_when_its_slug_holds_the_text(
    tmp_path: Path,
) -> None:
    """Session pages named by earlier releases carry the title's slug (lower case,
    dashes): a text with capitals and spaces is in the name in that form only; the page
    gets a neutral name all the same."""
    m = make_memory(tmp_path / "d", files={"projects/p/index.md": "# p\n"})
    try:
        text = "Umber Gannet 5102"
        page = "projects/p/sessions/2026-01-02-where-is-umber-gannet-5102-1a2b3c4d.md"
        _commit(m, page, f"---\ntitle: where is {text}?\n---\n# where is {text}?\n")
        res = purge_page(m, page, None, text=text)
        assert res["renamed"]
        for msg, files in _history(m.wiki_dir):
            for needle in (text.encode(), b"umber-gannet-5102"):
                assert needle not in msg
                assert not any(needle in p + d for p, d in files.items())
    finally:
        m.stop()
