"""Link resolution (wiki_memory.wiki.links and the index's links table) and portable page
names (wiki_memory.wiki.names): exact names only, NFC and case-insensitive, ambiguity
reported, forward references resolving by themselves, renames keeping the table escape."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import pytest

from wiki_memory.index.store import Index
from wiki_memory.wiki import links as wl
from wiki_memory.wiki.names import file_stem, is_portable, unique_page_path

# --------------------------------------------------------------------------- pure rules


def names_of(pages: dict[str, tuple[str, list[str]]]) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    for path, (title, aliases) in pages.items():
        for k, src in wl.page_name_keys(path, title, aliases):
            out.setdefault(k, []).append((path, src))
    return out


PAGES = {
    "notes/Deploy Guide.md": ("Deploy Guide", ["DG"]),
    "notes/Café résumé.md": ("Café résumé", []),
    "a/Setup.md": ("Setup A", []),
    "b/Setup.md": ("Setup B", []),
    "b/sub/Readme.md": ("Readme", []),
    "Billing Pipeline Summary.md": ("Billing Pipeline Summary", []),
    "sessions/2026-01-01-x-abc.md": ("Fix login", []),
}


@pytest.mark.parametrize(
    "target,src,status,path",
    [
        ("Deploy Guide", "x.md", "resolved", "notes/Deploy Guide.md"),
        ("deploy guide", "x.md", "resolved", "notes/Deploy Guide.md"),  # case-insensitive
        ("Deploy Guide.md", "x.md", "resolved", "notes/Deploy Guide.md"),
        ("dg", "x.md", "resolved", "notes/Deploy Guide.md"),  # alias
        ("notes/Deploy Guide", "x.md", "resolved", "notes/Deploy Guide.md"),  # path
        ("../notes/Deploy Guide", "q/x.md", "resolved", "notes/Deploy Guide.md"),
        ("Cafe\u0301 Re\u0301sume\u0301", "x.md", "resolved", "notes/Café résumé.md"),  # NFD
        ("CAFÉ RÉSUMÉ", "x.md", "resolved", "notes/Café résumé.md"),
        ("Fix login", "x.md", "resolved", "sessions/2026-01-01-x-abc.md"),  # title
        ("Setup", "x.md", "ambiguous", None),  # two files named Setup, neither near
        ("Setup", "a/x.md", "resolved", "a/Setup.md"),  # the one in the same folder
        ("b/Setup", "x.md", "resolved", "b/Setup.md"),
        ("sub/Readme", "x.md", "resolved", "b/sub/Readme.md"),  # a path suffix
        ("Setup A", "x.md", "resolved", "a/Setup.md"),
        ("summary (billing-pipeline)", "x.md", "unresolved", None),  # never fuzzy (C13)
        ("Billing Pipeline", "x.md", "unresolved", None),
        ("Deploy", "x.md", "unresolved", None),
        ("diagram.png", "x.md", "attachment", None),
    ],
)
def test_resolve_rules(target, src, status, path):
    res = wl.resolve(target, src, names_of(PAGES), {})
    assert (res.status, res.path) == (status, path)
    # the batch resolver used by the index agrees
    assert wl.Resolver(names_of(PAGES), {}).resolve_key(wl.target_key(target, src), src) == res
    if status == "ambiguous":
        assert res.candidates == ("a/Setup.md", "b/Setup.md")


def test_attachments_are_found_by_name_or_path():
    files = {}
    for p in ("images/diagram.png", "docs/spec.pdf"):
        for k in wl.file_name_keys(p):
            files.setdefault(k, []).append(p)
    names = names_of(PAGES)
    assert wl.resolve("diagram.png", "x.md", names, files) == wl.Resolution(
        "attachment", "images/diagram.png"
    )
    assert wl.resolve("images/Diagram.PNG", "x.md", names, files).path == "images/diagram.png"
    assert wl.resolve("missing.png", "x.md", names, files) == wl.Resolution("attachment", None)


def test_a_page_named_after_its_title_wins_over_copies_with_the_same_title():
    pages = {
        "notes/Sync On-Off Toggle.md": ("Sync On/Off Toggle", []),
        "notes/Sync On-Off Toggle 2.md": ("Sync On/Off Toggle", []),
    }
    res = wl.resolve("Sync On/Off Toggle", "notes/other.md", names_of(pages), {})
    assert (res.status, res.path) == ("resolved", "notes/Sync On-Off Toggle.md")
    twins = {"a/X.md": ("Same", []), "b/Y.md": ("Same", [])}
    assert wl.resolve("Same", "c.md", names_of(twins), {}).status == "ambiguous"


def test_name_keys_fold_case_and_unicode_forms():
    assert wl.name_key("Café") == wl.name_key(unicodedata.normalize("NFD", "CAFÉ"))
    assert wl.name_key("Straße") == wl.name_key("STRASSE")  # full case folding
    assert wl.name_key("  a   b ") == "a b"
    assert wl.target_key("./x.md", "a/b/page.md") == "a/b/x"
    assert wl.target_key("../../../x", "a/page.md") == "x"  # never above the root


def test_fragments_match_headings_loosely_and_blocks_exactly():
    headings = ["Rollback", "Step 1: drain the queue", "Ünïcode"]
    assert wl.fragment_found("rollback", headings, [])
    assert wl.fragment_found("Step 1 drain the queue", headings, [])  # ':' as Obsidian
    assert wl.fragment_found("Top#Rollback", headings, [])  # nested: last part
    assert wl.fragment_found("^warn-1", headings, ["^warn-1"])
    assert not wl.fragment_found("^warn-2", headings, ["^warn-1"])
    assert not wl.fragment_found("Escalation", headings, [])


def test_rename_keeps_table_escapes_fragments_aliases_and_code():
    text = (
        "| a | [[Auth Service\\|auth]] |\n"
        "Prose [[Auth Service|the auth service]], [[auth service#Tokens]], ![[Auth Service]].\n"
        "`[[Auth Service]]` stays.\n\n```\n[[Auth Service]]\n```\n[[Other]]\n"
    )
    out = wl.rename_links(text, {wl.name_key("Auth Service")}, "Identity Service")
    assert out == (
        "| a | [[Identity Service\\|auth]] |\n"
        "Prose [[Identity Service|the auth service]], [[Identity Service#Tokens]], "
        "![[Identity Service]].\n"
        "`[[Auth Service]]` stays.\n\n```\n[[Auth Service]]\n```\n[[Other]]\n"
    )


def test_rename_keeps_crlf_and_bom():
    text = '\ufeff---\r\nrel: "[[A]]"\r\n---\r\n[[A|x]]\r\n'
    out = wl.rename_links(text, {wl.name_key("A")}, "B")
    assert out == '\ufeff---\r\nrel: "[[B]]"\r\n---\r\n[[B|x]]\r\n'


# --------------------------------------------------------------------------- C27 names

C27_TITLES = [
    "Sync On/Off Toggle",
    "Q&A: what ships next?",
    "CON",
    "a<b>c|d*e",
    "  trailing dots...  ",
]


def test_c27_file_names_are_portable_and_distinct():
    stems = [file_stem(t) for t in C27_TITLES]
    assert stems == [
        "Sync On-Off Toggle",
        "Q&A what ships next",
        "CON_",
        "a b c d e",
        "trailing dots",
    ]
    for s in stems:
        assert is_portable(s + ".md"), s
        assert not any(c in s for c in '<>:"/\\|?*')
    assert len(set(stems)) == len(stems)


@pytest.mark.parametrize(
    "title",
    ["con.txt", "LPT9", "nul ", "...", "", "a" * 400, "é" * 300, "\x00\x1f", ".hidden", "x/../y"],
)
def test_file_stem_is_always_portable(title):
    s = file_stem(title)
    assert s and is_portable(s + ".md")
    assert not s.startswith(".")
    assert len((s + " 999.md").encode("utf-8")) <= 255
    assert "/" not in s


def test_unique_page_path_never_reuses_a_name_case_insensitively(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "sync on-off toggle.md").write_text("x")
    p = unique_page_path(tmp_path, "notes", "Sync On/Off Toggle")
    assert p == "notes/Sync On-Off Toggle 2.md"
    (tmp_path / p).write_text("y")
    assert (
        unique_page_path(tmp_path, "notes/", "Sync On/Off Toggle")
        == "notes/Sync On-Off Toggle 3.md"
    )
    assert unique_page_path(tmp_path, "", "New") == "New.md"


# --------------------------------------------------------------------------- the index


def write(wiki: Path, rel: str, text: str) -> None:
    p = wiki / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


@pytest.fixture
def idx(tmp_path):
    index = Index(tmp_path / "index.db")
    yield index
    index.close()


def statuses(index: Index, path: str) -> list[tuple[str, str, str | None]]:
    return [(lk["target"], lk["status"], lk["path"]) for lk in index.outlinks(path) if lk["target"]]


def test_c13_forward_links_resolve_when_the_target_appears_on_disk(tmp_path, idx):
    wiki = tmp_path / "wiki"
    write(
        wiki,
        "Billing Pipeline Summary.md",
        "# Billing Pipeline Summary\nbilling pipeline summary\n",
    )
    write(
        wiki,
        "source.md",
        "---\ntitle: Source note\n---\n- relates_to [[Target Not Yet Written]]\n"
        "- see_also [[summary (billing-pipeline)]]\n",
    )
    idx.sync_paths(wiki, [""])
    assert statuses(idx, "source.md") == [
        ("Target Not Yet Written", "unresolved", None),
        ("summary (billing-pipeline)", "unresolved", None),
    ]
    write(wiki, "notes/Target Not Yet Written.md", "# Target Not Yet Written\n")
    idx.sync_paths(wiki, ["notes/Target Not Yet Written.md"])
    assert statuses(idx, "source.md")[0] == (
        "Target Not Yet Written",
        "resolved",
        "notes/Target Not Yet Written.md",
    )
    assert statuses(idx, "source.md")[1][1] == "unresolved"  # never fuzzy
    back = idx.backlinks("notes/Target Not Yet Written.md")
    assert [(b["src_path"], b["title"]) for b in back] == [("source.md", "Source note")]
    # gone again: unresolved again, the literal text kept
    (wiki / "notes/Target Not Yet Written.md").unlink()
    idx.sync_paths(wiki, ["notes/Target Not Yet Written.md"])
    assert statuses(idx, "source.md")[0] == ("Target Not Yet Written", "unresolved", None)


def test_links_follow_renames_titles_aliases_and_ambiguity(tmp_path, idx):
    wiki = tmp_path / "wiki"
    write(wiki, "notes/alpha.md", "---\nid: a-1\n---\n# Alpha\n")
    write(wiki, "notes/index.md", "[[alpha]] [[Alpha]] [[The First]]\n")
    idx.sync_paths(wiki, [""])
    assert [s[1] for s in statuses(idx, "notes/index.md")] == ["resolved", "resolved", "unresolved"]
    # an alias appears: the third link resolves
    write(wiki, "notes/alpha.md", "---\nid: a-1\naliases: [The First]\n---\n# Alpha\n")
    idx.sync_paths(wiki, ["notes/alpha.md"])
    assert {s[2] for s in statuses(idx, "notes/index.md")} == {"notes/alpha.md"}
    # moved to another folder: still resolved, to the new path, same id
    (wiki / "archive").mkdir()
    os.rename(wiki / "notes/alpha.md", wiki / "archive/alpha.md")
    idx.sync_paths(wiki, ["notes/alpha.md", "archive/alpha.md"])
    assert {s[2] for s in statuses(idx, "notes/index.md")} == {"archive/alpha.md"}
    assert idx.page_meta("archive/alpha.md")["id"] == "a-1"  # type: ignore[index]
    # a second page named alpha elsewhere: ambiguous, not guessed
    write(wiki, "other/alpha.md", "# Other alpha\n")
    idx.sync_paths(wiki, ["other/alpha.md"])
    st = statuses(idx, "notes/index.md")
    assert st[0] == ("alpha", "ambiguous", None)
    assert idx.outlinks("notes/index.md")[0]["candidates"] == ["archive/alpha.md", "other/alpha.md"]
    assert st[1][1] == "ambiguous"  # "Alpha" is both files' name (file names come first)
    assert st[2] == ("The First", "resolved", "archive/alpha.md")  # the alias is unique
    # a third one: every report of the ambiguity names all three, sorted
    write(wiki, "third/Alpha.md", "# Third\n")
    idx.sync_paths(wiki, ["third/Alpha.md"])
    three = ["archive/alpha.md", "other/alpha.md", "third/Alpha.md"]
    assert idx.outlinks("notes/index.md")[0]["candidates"] == three
    problems = [p for p in idx.problem_links() if p["src_path"] == "notes/index.md"]
    assert [(p["target"], p["status"], p["candidates"]) for p in problems] == [
        ("alpha", "ambiguous", three),
        ("Alpha", "ambiguous", three),
    ]
    # two of them go: the link resolves again and no longer lists candidates
    os.remove(wiki / "other/alpha.md")
    os.remove(wiki / "third/Alpha.md")
    idx.sync_paths(wiki, ["other/alpha.md", "third/Alpha.md"])
    first = idx.outlinks("notes/index.md")[0]
    assert (first["status"], first["path"], first["candidates"]) == (
        "resolved",
        "archive/alpha.md",
        [],
    )


def test_attachments_resolve_when_the_file_appears(tmp_path, idx):
    wiki = tmp_path / "wiki"
    write(wiki, "page.md", "![[diagram.png|400]] and [[spec.pdf]]\n")
    idx.sync_paths(wiki, [""])
    assert [(lk["status"], lk["path"]) for lk in idx.outlinks("page.md")] == [
        ("attachment", None),
        ("attachment", None),
    ]
    (wiki / "img").mkdir()
    (wiki / "img" / "diagram.png").write_bytes(b"\x89PNG")
    idx.sync_paths(wiki, ["img/diagram.png"])
    assert idx.outlinks("page.md")[0]["path"] == "img/diagram.png"
    assert idx.link_stats()["missing_attachments"] == 1
    (wiki / "img" / "diagram.png").unlink()
    idx.sync_paths(wiki, ["img"])
    assert idx.outlinks("page.md")[0]["path"] is None


def test_rebuild_resolves_like_incremental_updates(tmp_path, idx):
    wiki = tmp_path / "wiki"
    write(wiki, "a.md", "[[b]] [[c|see c]] [[nope]] ![[b#Part]]\n")
    write(wiki, "b.md", "# Part\n[[a]]\n")
    write(wiki, "x/c.md", "---\naliases: [cee]\n---\n[[cee]]\n")
    idx.sync_paths(wiki, ["a.md"])
    idx.sync_paths(wiki, ["x", "b.md"])
    live = {p: idx.outlinks(p) for p in ("a.md", "b.md", "x/c.md")}
    fresh = Index(tmp_path / "fresh.db")
    fresh.rebuild(wiki)
    assert {p: fresh.outlinks(p) for p in live} == live
    assert fresh.link_stats() == idx.link_stats()
    fresh.close()


def test_symlinks_and_hard_links_are_not_indexed(tmp_path, idx):
    wiki = tmp_path / "wiki"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\nOUTSIDE-MARKER\n")
    (outside / "dir").mkdir()
    (outside / "dir" / "s.md").write_text("OUTSIDE-MARKER\n")
    write(wiki, "ok.md", "fine\n")
    os.symlink(outside / "secret.md", wiki / "link.md")
    os.symlink(outside / "dir", wiki / "linkdir")
    os.link(outside / "secret.md", wiki / "hard.md")
    idx.rebuild(wiki)
    assert set(idx.paths()) == {"ok.md"}
    idx.sync_paths(wiki, ["link.md", "hard.md", "linkdir", "linkdir/s.md", ""])
    assert set(idx.paths()) == {"ok.md"}
    assert idx.query("OUTSIDE-MARKER") == []
