"""Page parsing (wiki_memory.wiki.page) and frontmatter writing (wiki_memory.wiki.frontmatter).

Cases C01-C11 come from ../shared/cases; the round-trip tests run over every page of the
real Obsidian vaults in ../shared/data/vaults.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from pathlib import Path
from typing import Any

import pytest
from support import shared_path

from wiki_memory.plainfile import page_hash
from wiki_memory.wiki.frontmatter import (
    FrontmatterError,
    dump_page,
    set_keys,
)
from wiki_memory.wiki.page import Link, ParsedPage, page_links, parse_page


def case(name: str) -> bytes:
    return shared_path("cases", "inputs", name).read_bytes()


def vault_pages() -> list[Path]:
    root = shared_path("data", "vaults")
    pages = sorted(root.glob("*/vault/**/*.md"))
    assert len(pages) > 200
    return pages


def all_strings(value: Any) -> list[str]:
    """Every string inside a parse result (fields, metadata keys and values, links...)."""
    if isinstance(value, str):
        return [value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [s for f in dataclasses.fields(value) for s in all_strings(getattr(value, f.name))]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in all_strings(k) + all_strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in all_strings(v)]
    return []


def targets(p: ParsedPage) -> list[str]:
    return [lk.target for lk in p.page_links]


# ----------------------------------------------------------------------------- C01


def test_c01_bom_crlf_parses_like_lf_twin() -> None:
    raw = case("C01.md")
    assert raw.startswith(b"\xef\xbb\xbf") and b"\r\n" in raw  # the input is byte-exact
    twin = raw[3:].replace(b"\r\n", b"\n")
    p, q = parse_page(raw, "ops/release.md"), parse_page(twin, "ops/release.md")
    assert p == q
    assert p.title == "Release checklist"
    assert p.tags == ["ops", "release"]
    assert p.body.startswith("# Release checklist")
    assert [lk.target for lk in p.links] == ["Deploy Guide"]
    assert not any("\r" in s or "\ufeff" in s for s in all_strings(p))
    assert p.diagnostics == []


def test_c01_cr_only_and_text_input() -> None:
    raw = case("C01.md")
    cr = raw.replace(b"\r\n", b"\r")
    assert parse_page(cr, "ops/release.md") == parse_page(raw, "ops/release.md")
    assert parse_page(raw.decode("utf-8"), "ops/release.md") == parse_page(raw, "ops/release.md")


# ----------------------------------------------------------------------------- C02, C03


def test_c02_non_string_keys_and_content_key() -> None:
    p = parse_page(case("C02.md"), "retro.md")
    assert p.metadata == {
        "title": "Retro notes",
        "2024": "quarterly",
        "true": "archived",
        "content": "one-line summary of the retro",
        "handler": "ops-team",
    }
    assert list(p.metadata) == ["title", "2024", "true", "content", "handler"]
    assert json.dumps(p.metadata)
    assert p.body == "Body of the retro page."
    assert p.title == "Retro notes"


def test_c03_dates_are_iso_strings() -> None:
    p = parse_page(case("C03.md"), "standup.md")
    assert p.metadata["created"] == "2024-05-01"
    assert p.metadata["updated"] == "2024-05-01T10:30:00"
    assert p.metadata["review_at"] == "2024-05-01T10:30:00+02:00"
    assert json.loads(json.dumps(p.metadata)) == p.metadata
    assert sorted(["2024-06-01", p.metadata["created"], "2023-12-31"])[1] == "2024-05-01"


def test_yaml_values_become_json_safe() -> None:
    text = (
        "---\n"
        "s: !!set {a, b}\n"
        "b: !!binary aGVsbG8=\n"
        "n: .nan\n"
        "bad_date: 2024-02-30\n"
        "z: 2026-01-01T00:00:00Z\n"
        "frac: 2024-05-01 10:30:00.5\n"
        "keys: {2024-05-01: d, 1.5: f, null: n}\n"
        "custom: !include other.yml\n"
        "---\n"
    )
    p = parse_page(text, "x.md")
    assert p.metadata == {
        "s": ["a", "b"],
        "b": "hello",
        "n": ".nan",
        "bad_date": "2024-02-30",
        "z": "2026-01-01T00:00:00Z",
        "frac": "2024-05-01T10:30:00.5",
        "keys": {"2024-05-01": "d", "1.5": "f", "null": "n"},
        "custom": "other.yml",
    }
    json.dumps(p.metadata, allow_nan=False)


@pytest.mark.parametrize(
    "yaml_text",
    [
        "a: &a [*a]",  # recursive
        "a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
        "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
        "e: [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]",  # alias bomb
    ],
)
def test_recursive_or_exploding_yaml_is_a_diagnostic(yaml_text: str) -> None:
    p = parse_page(f"---\n{yaml_text}\n---\nbody", "x.md")
    assert p.metadata == {}
    assert [d.kind for d in p.diagnostics] == ["frontmatter_invalid"]
    assert p.body == "body"


# ----------------------------------------------------------------------------- C05, C06, C07


def test_c05_non_mapping_block_stays_in_body() -> None:
    p = parse_page(case("C05.md"), "vendor.md")
    assert p.metadata == {}
    assert p.body.startswith("---\nVENDOR NOTES (INTERNAL)\n---\n")
    assert "VENDOR NOTES (INTERNAL)" in "\n".join(s.text for s in p.sections)
    assert "vendor" in p.body
    assert p.body_line == 1 and p.frontmatter_end is None
    assert [d.kind for d in p.diagnostics] == ["frontmatter_not_mapping"]


def test_c05_unclosed_fence_is_body() -> None:
    p = parse_page(b"---\nno closing fence\n", "open.md")
    assert p.metadata == {}
    assert p.body == "---\nno closing fence"
    assert p.sections[0].text == "---\nno closing fence"
    assert [d.kind for d in p.diagnostics] == ["frontmatter_unclosed"]


def test_c05_writes_refuse_and_keep_the_preamble() -> None:
    raw = case("C05.md")
    with pytest.raises(FrontmatterError):
        set_keys(raw, {"id": "x"})
    with pytest.raises(FrontmatterError):
        set_keys(b"---\nno closing fence\n", {"id": "x"})


C06_TAB = b"---\ntitle: Runbook rules\ntags:\n\t- ops\n---\n# Runbook rules\nEvery runbook names its owner page.\n"


@pytest.mark.parametrize(("name", "line"), [("C06.md", 3), ("tab", 4)])
def test_c06_invalid_yaml_is_served_with_a_diagnostic(name: str, line: int) -> None:
    raw = case(name) if name.endswith(".md") else C06_TAB
    p = parse_page(raw, "runbook.md")
    assert p.metadata == {}
    assert [(d.kind, d.line) for d in p.diagnostics] == [("frontmatter_invalid", line)]
    assert p.diagnostics[0].as_dict()["kind"] == "frontmatter_invalid"
    assert p.body.startswith("# Runbook rules")
    assert p.title == "Runbook rules"
    assert p.frontmatter_text is not None and "title: Runbook rules" in p.frontmatter_text
    # Decision: the unreadable frontmatter stays searchable as part of the preamble section.
    pre = p.sections[0]
    assert pre.anchor == "" and pre.line == 1 and pre.text.startswith("---\ntitle: Runbook rules")
    assert "owner" in " ".join(s.text for s in p.sections)


@pytest.mark.parametrize("name", ["C06.md", "tab"])
def test_c06_writes_are_refused_and_bytes_untouched(name: str, tmp_path: Path) -> None:
    raw = case(name) if name.endswith(".md") else C06_TAB
    f = tmp_path / "runbook.md"
    f.write_bytes(raw)
    before = page_hash(f.read_bytes())
    for updates in ({"updated": "2026-01-01T00:00:00Z"}, {"tags": ["ops", "new"]}, {}):
        with pytest.raises(FrontmatterError) as err:
            set_keys(f.read_bytes(), updates, remove=["handoff"])
        assert isinstance(err.value, ValueError)
        assert err.value.line == (3 if name == "C06.md" else 4)
    parse_page(f.read_bytes(), str(f))
    assert page_hash(f.read_bytes()) == before


def test_c07_duplicate_key_last_wins_with_diagnostic() -> None:
    raw = case("C07.md")
    p = parse_page(raw, "draft.md")
    assert p.title == "Draft B"
    assert p.metadata == {"title": "Draft B", "status": "open"}
    dup = [d for d in p.diagnostics if d.kind == "duplicate_key"]
    assert [(d.key, d.line) for d in dup] == [("title", 4)]
    assert dup[0].as_dict() == {
        "kind": "duplicate_key",
        "line": 4,
        "message": dup[0].message,
        "key": "title",
    }
    assert case("C07.md") == raw


def test_c07_set_keys_replaces_the_winning_duplicate() -> None:
    raw = case("C07.md")
    out = set_keys(raw, {"title": "Draft C"})
    assert out == raw.replace(b"title: Draft B", b"title: Draft C")
    assert parse_page(out, "d.md").title == "Draft C"
    gone = set_keys(raw, {}, remove=["title"])
    assert b"title" not in gone and parse_page(gone, "d.md").metadata == {"status": "open"}


# ----------------------------------------------------------------------------- links


def test_c09_alias_pipes_in_tables() -> None:
    p = parse_page(case("C09.md"), "owners.md")
    assert [(lk.target, lk.alias, lk.line) for lk in p.links] == [
        ("Auth Service", "auth", 3),
        ("Billing Service", "billing", 4),
        ("Auth Service", "the auth service", 6),
    ]
    for lk in p.links:
        assert not lk.target.endswith("\\") and not lk.target.startswith("[[")


def test_c10_fragments_and_same_page_references() -> None:
    p = parse_page(case("C10.md"), "runbook.md")
    assert [(lk.target, lk.fragment) for lk in p.page_links] == [
        ("Deploy Guide", "Rollback"),
        ("Deploy Guide", "^warn-1"),
    ]
    same = [lk for lk in p.links if not lk.target]
    assert [lk.fragment for lk in same] == ["Escalation", "^step-one", "^step-one"]
    assert page_links(p) == p.page_links
    anchors = [s.anchor for s in p.sections]
    assert anchors == ["Runbook", "^step-one", "Escalation"]


def test_c11_code_is_not_linked_but_stays_searchable() -> None:
    p = parse_page(case("C11.md"), "build.md")
    assert {lk.target for lk in p.links} == {"Release Process"}
    assert len(p.links) == 1
    for bad in ("$BUILD_ID", "servers.backup", "not-a-link", "also-not-a-link", "indented-code"):
        assert not any(bad in (lk.target + (lk.fragment or "")) for lk in p.links)
    assert "servers.backup" in p.body
    assert "servers.backup" in "\n".join(s.text for s in p.sections)


def test_c13_unresolved_links_keep_literal_text() -> None:
    raw = shared_path("cases", "inputs", "C13.txt").read_text()
    page = raw.split("----- source.md -----\n", 1)[1].split("----- end -----", 1)[0]
    p = parse_page(page, "source.md")
    assert p.title == "Source note"
    assert targets(p) == ["Target Not Yet Written", "summary (billing-pipeline)"]


def test_wikilink_forms() -> None:
    text = (
        "![[diagram.png|400]] and ![[Other#Part]]\n"
        "[[a#h1#h2|two headings]] [[ spaced | x ]] [[Note.md]] [[|nothing]] [[]]\n"
        "\\[\\[escaped\\]\\] [[p#^blk|block alias]] [[#^b2]]\n"
        "<!-- [[commented]] --> %% [[obsidian comment]] %%\n"
        "    [[not indented code: inside a paragraph]]\n"
    )
    p = parse_page(text, "x.md")
    got = [(lk.target, lk.fragment, lk.alias, lk.embed, lk.line) for lk in p.links]
    assert got == [
        ("diagram.png", None, "400", True, 1),
        ("Other", "Part", None, True, 1),
        ("a", "h1#h2", "two headings", False, 2),
        ("spaced", None, "x", False, 2),
        ("Note.md", None, None, False, 2),
        ("p", "^blk", "block alias", False, 3),
        ("", "^b2", None, False, 3),
        ("obsidian comment", None, None, False, 4),
        ("not indented code: inside a paragraph", None, None, False, 5),
    ]


def test_code_in_lists_quotes_and_spans() -> None:
    text = (
        "- item\n"
        "  ```\n"
        "  [[in list fence]]\n"
        "  ```\n"
        "\n"
        "      [[list continuation is not code]]\n"
        "\n"
        "> ```\n"
        "> [[in quote fence]]\n"
        "> ```\n"
        "\n"
        "``double `[[in span]]` ticks`` and `multi\n"
        "line [[span]]` then [[real]]\n"
        "````\n"
        "```\n"
        "[[inner fence is text of the outer]]\n"
        "````\n"
        "```unclosed\n"
        "[[runs to end]]\n"
    )
    p = parse_page(text, "x.md")
    assert [lk.target for lk in p.links] == ["list continuation is not code", "real"]
    assert [lk.line for lk in p.links] == [6, 13]


def test_frontmatter_links_are_marked() -> None:
    text = '---\nrelated: "[[Other page]]"\nlist:\n  - "[[Third|3]]"\n---\nBody [[Body link]]\n'
    p = parse_page(text, "x.md")
    assert [(lk.target, lk.in_frontmatter, lk.line) for lk in p.links] == [
        ("Other page", True, 2),
        ("Third", True, 4),
        ("Body link", False, 6),
    ]


# ----------------------------------------------------------------------------- tags, aliases, title


@pytest.mark.parametrize(
    ("yaml_text", "tags"),
    [
        ("tags: [ops, release]", ["ops", "release"]),
        ("tags:\n  - '#ops'\n  - release", ["ops", "release"]),
        ("tags: ops, release", ["ops", "release"]),
        ("tags: ops release", ["ops", "release"]),
        ("tags: '#ops #release'", ["ops", "release"]),
        ("tags:", []),
        ("tags: []", []),
        ("tags: [2024, y2024]", ["y2024"]),
        ("TAG: [x]", []),
    ],
)
def test_frontmatter_tag_shapes(yaml_text: str, tags: list[str]) -> None:
    assert parse_page(f"---\n{yaml_text}\n---\ntext\n", "x.md").tags == tags


def test_inline_tags() -> None:
    text = (
        "---\ntags: [Ops]\n---\n"
        "# Heading #in-heading\n"
        "#ops #Nested/tag/ and #123 but #y2024, (#paren) x#mid http://h.com/#frag\n"
        "`#code` <!-- #commented --> <span>#in-html</span> #中文，标点\n"
        "```\n#fenced\n```\n"
        "    #indented-code\n"
    )
    p = parse_page(text, "x.md")
    assert p.tags == ["Ops", "in-heading", "Nested/tag", "y2024", "in-html", "中文"]


def test_aliases_and_title_fallbacks() -> None:
    p = parse_page("---\naliases: one, two words\ntitle: ''\n---\n\n## Sub\n# Main\n", "a/b.md")
    assert p.aliases == ["one", "two words"]
    assert p.title == "Main"
    p = parse_page("---\naliases:\n  - YAML Alias 1\n  - YAML Alias 1\n---\ntext", "dir\\Stem.md")
    assert p.aliases == ["YAML Alias 1"]
    assert p.title == "Stem"
    assert parse_page("```\n# not a heading\n```\n", "notes/code.md").title == "code"
    assert parse_page("# Closing hashes ##\n", "x.md").title == "Closing hashes"


def test_invalid_utf8_is_replaced_with_a_diagnostic() -> None:
    p = parse_page(b"---\ntitle: ok\n---\nfine\r\nbad \xff\xfe here\nlast \xc3", "x.md")
    assert p.title == "ok"
    assert [(d.kind, d.line) for d in p.diagnostics] == [("invalid_utf8", 5), ("invalid_utf8", 6)]
    assert "\ufffd" in p.body


# ----------------------------------------------------------------------------- sections


SESSION = """---
type: session
---
# Fix login

Intro text.

## Timeline

- 10:01:02 **prompt** Fix the login test ^t1
- 10:01:09 **tool** ran pytest
  3 failed, 1 passed ^t2
- 10:02:00 no id here
- 10:03:00 **note** nested parent ^t3
  - child item
- 10:04:00 **tool** code
  ```
  x ^not-an-id
  ```

A paragraph
ending with an id ^p-1

| a | b |
|---|---|

^table-1

## Notes ^not-heading-id
Tail ^t1
"""


def test_block_ids_become_sections() -> None:
    p = parse_page(SESSION, "projects/x/sessions/s.md")
    by = {s.anchor: s for s in p.sections}
    assert [s.anchor for s in p.sections] == [
        "Fix login",
        "Timeline",
        "^t1",
        "^t2",
        "^t3",
        "^p-1",
        "^table-1",
        "Notes ^not-heading-id",
        "^t1",
    ]
    assert by["^t2"].text == "- 10:01:09 **tool** ran pytest\n  3 failed, 1 passed"
    assert (by["^t2"].line, by["^t2"].level, by["^t2"].heading) == (11, 0, "Timeline")
    assert by["^t3"].text == "- 10:03:00 **note** nested parent"
    assert by["^p-1"].text == "A paragraph\nending with an id"
    assert by["^table-1"].text == "| a | b |\n|---|---|"
    timeline = by["Timeline"]
    assert (timeline.level, timeline.line) == (2, 8)
    assert "^t1" not in timeline.text and "ran pytest" not in timeline.text
    assert "no id here" in timeline.text and "child item" in timeline.text
    assert "x ^not-an-id" in timeline.text
    assert by["Fix login"].text == "Intro text."
    dup = [d for d in p.diagnostics if d.kind == "duplicate_block_id"]
    assert [(d.key, d.line) for d in dup] == [("^t1", 30)]


def test_standalone_block_id_names_the_whole_entry() -> None:
    """Session pages: an entry of several blocks, then a blank line and ``^tN`` alone."""
    text = (
        "# S\n\n## Timeline\n\n"
        "**10:00:01** · prompt\n\n~~~~\nFix the [[login]] test #nottag ^t9\n~~~~\n\n^t1\n\n"
        "**10:00:05** · tool Bash\n\n~~~~\npytest\n~~~~\n\n~~~~\n1 failed\n~~~~\n\n^t2\n\n"
        "^orphan\n"
    )
    p = parse_page(text, "s.md")
    assert [(s.anchor, s.line) for s in p.sections] == [
        ("S", 1),
        ("Timeline", 3),
        ("^t1", 5),
        ("^t2", 13),
    ]
    by = {s.anchor: s for s in p.sections}
    assert (
        by["^t1"].text == "**10:00:01** · prompt\n\n~~~~\nFix the [[login]] test #nottag ^t9\n~~~~"
    )
    assert by["^t2"].text.startswith("**10:00:05** · tool Bash") and "1 failed" in by["^t2"].text
    assert by["Timeline"].text == "^orphan"  # a lone id with nothing before it names nothing
    assert p.links == [] and p.tags == []


def test_preamble_section() -> None:
    p = parse_page("\n\nIntro\n\n# H\ntext\n", "x.md")
    assert [(s.anchor, s.line, s.text) for s in p.sections] == [("", 3, "Intro"), ("H", 5, "text")]
    assert parse_page("# H\n", "x.md").sections == [parse_page("# H\n", "x.md").sections[0]]
    assert [s.anchor for s in parse_page("  \n# H\n", "x.md").sections] == ["H"]


# ----------------------------------------------------------------------------- robustness


#: Inputs that make a careless parser (nested quantifiers, rescans) take quadratic or
#: exponential time. bench/parse.py times each against an ordinary page of the same size.
PATHOLOGICAL = [
    "` `` " * 20000,
    "`a" * 50000 + "\n\n",
    "# a" + " " * 20000 + "b\n",
    "<!--" * 20000,
    "[[" * 30000 + "]]",
    "#" * 50000,
    "- " * 20000 + "\n" + "  ^x\n" * 2000,
]
PATHOLOGICAL_FRONTMATTER = "---\n" + "k: v\n" * 20000 + "---\n"

# A hang guard, not a speed target (the timing is in bench/parse.py). The thread method,
# because a runaway regular expression never returns to the interpreter for SIGALRM.
hang_guard = pytest.mark.timeout(60, method="thread")


@hang_guard
@pytest.mark.parametrize("text", PATHOLOGICAL)
def test_pathological_input_parses(text: str) -> None:
    p = parse_page(text, "x.md")
    assert p.body == text.strip()
    assert p.metadata == {} and p.diagnostics == []
    assert p.links == [] and p.tags == []  # none of them is a link or a tag
    heading = text.startswith("# ")
    assert p.title == (text[2:].strip() if heading else "x")
    assert len(p.sections) == 1


@hang_guard
def test_pathological_frontmatter_parses() -> None:
    p = parse_page(PATHOLOGICAL_FRONTMATTER, "x.md")
    assert p.metadata == {"k": "v"} and p.body == "" and p.title == "x"
    kinds = {d.as_dict()["kind"] for d in p.diagnostics}
    assert kinds == {"duplicate_key"} and len(p.diagnostics) == 20000 - 1


@hang_guard
def test_binary_file_is_diagnosed() -> None:
    p = parse_page(b"\xff\n" * 50_000 + b"\xfe" * 200_000, "blob.md")
    assert len(p.diagnostics) == 100 and p.diagnostics[0].as_dict()["line"] == 1


def test_vault_pages_parse() -> None:
    for path in vault_pages():
        raw = path.read_bytes()
        p = parse_page(raw, str(path))
        json.dumps(p.metadata, allow_nan=False)
        assert p.title
        assert not any("\r" in s or "\ufeff" in s for s in all_strings(p))


# ----------------------------------------------------------------------------- writing


def changed_lines(a: bytes, b: bytes) -> tuple[list[str], list[str]]:
    diff = list(
        difflib.ndiff(
            a.decode("utf-8").splitlines(keepends=True), b.decode("utf-8").splitlines(keepends=True)
        )
    )
    return [d[2:] for d in diff if d.startswith("- ")], [d[2:] for d in diff if d.startswith("+ ")]


def test_vault_round_trip_changes_only_the_stamped_key() -> None:
    stamp = {"updated": "2026-01-01T00:00:00Z"}
    for path in vault_pages():
        raw = path.read_bytes()
        before = parse_page(raw, str(path))
        unreadable = any(d.kind.startswith("frontmatter_") for d in before.diagnostics)
        if unreadable:
            with pytest.raises(FrontmatterError):
                set_keys(raw, stamp)
            continue
        out = set_keys(raw, stamp)
        removed, added = changed_lines(raw, out)
        after = parse_page(out, str(path))
        assert after.metadata["updated"] == "2026-01-01T00:00:00Z", path
        assert {k: v for k, v in after.metadata.items() if k != "updated"} == {
            k: v for k, v in before.metadata.items() if k != "updated"
        }, path
        assert after.body == before.body, path
        if before.frontmatter_end is None:
            assert removed == [], path
            assert added == ["---\n", "updated: 2026-01-01T00:00:00Z\n", "---\n"], path
            assert out.endswith(raw)
        else:
            assert all("updated" in line for line in removed + added), (path, removed, added)
            assert len(added) == 1, path
        assert set_keys(out, stamp) == out  # already set: nothing to do


def test_c01_set_keys_keeps_bom_and_crlf() -> None:
    raw = case("C01.md")
    out = set_keys(raw, {"id": "p-1", "tags": ["ops", "release", "ci"]}, remove=["nope"])
    assert out.startswith(b"\xef\xbb\xbf---\r\n")
    assert out.count(b"\n") == out.count(b"\r\n")  # never mixed endings
    assert out == raw.replace(
        b"tags: [ops, release]\r\n", b"tags: [ops, release, ci]\r\nid: p-1\r\n"
    )
    p = parse_page(out, "x.md")
    assert p.metadata == {
        "title": "Release checklist",
        "tags": ["ops", "release", "ci"],
        "id": "p-1",
    }


def test_set_keys_keeps_comments_order_and_quoting() -> None:
    raw = (
        b"---\n"
        b"title: 'Quoted: title'  # a comment\n"
        b"# standalone comment\n"
        b"tags:\n"
        b"  - a\n"
        b"  - b\n"
        b"\n"
        b"# about status\n"
        b"status: open\n"
        b"notes: |\n"
        b"  line one\n"
        b"  line two\n"
        b"# trailing\n"
        b"---\n"
        b"# Body\n"
    )
    out = set_keys(raw, {"tags": ["c"], "status": "closed", "new": {"k": [1, 2]}})
    assert out == (
        b"---\n"
        b"title: 'Quoted: title'  # a comment\n"
        b"# standalone comment\n"
        b"tags: [c]\n"
        b"\n"
        b"# about status\n"
        b"status: closed\n"
        b"notes: |\n"
        b"  line one\n"
        b"  line two\n"
        b"# trailing\n"
        b"new:\n"
        b"  k:\n"
        b"    - 1\n"
        b"    - 2\n"
        b"---\n"
        b"# Body\n"
    )
    out2 = set_keys(out, {}, remove=["notes", "new"])
    assert b"notes" not in out2 and b"new:" not in out2 and b"# trailing\n---\n" in out2
    assert set_keys(raw, {"status": "open"}) == raw  # unchanged value: bytes untouched


def test_set_keys_without_frontmatter_adds_one_block() -> None:
    assert set_keys(b"# Hand written\r\ntext\r\n", {"id": "n1", "tags": ["a"]}) == (
        b"---\r\nid: n1\r\ntags: [a]\r\n---\r\n# Hand written\r\ntext\r\n"
    )
    assert set_keys(b"", {"id": "n1"}) == b"---\nid: n1\n---\n"
    assert set_keys(b"\xef\xbb\xbfplain", {"id": 1}) == b"\xef\xbb\xbf---\nid: 1\n---\nplain"
    assert set_keys(b"plain\n", {}, remove=["id"]) == b"plain\n"


def test_set_keys_refuses_unreadable_frontmatter() -> None:
    for raw, line in [
        (b"---\na: [unclosed\n---\nbody", 3),
        (b"---\n- list\n---\nbody", 2),
        (b"---\nnever closed\n", 1),
        (b"---\na: \xff\n---\n", 2),
    ]:
        with pytest.raises(FrontmatterError) as err:
            set_keys(raw, {"id": "x"})
        assert err.value.line == line


def test_set_keys_json_frontmatter_only_adds_keys() -> None:
    raw = b'---\n{\n  "tags": "journal",\n  "publish": false\n}\n---\n\n# J\n'
    out = set_keys(raw, {"updated": "2026-01-01T00:00:00Z", "publish": False})
    removed, added = changed_lines(raw, out)
    assert removed == [] and added == ['  , "updated": "2026-01-01T00:00:00Z"\n']
    assert parse_page(out, "j.md").metadata == {
        "tags": "journal",
        "publish": False,
        "updated": "2026-01-01T00:00:00Z",
    }
    with pytest.raises(FrontmatterError):
        set_keys(raw, {"publish": True})


def test_set_keys_value_types() -> None:
    import datetime as dt

    raw = b"---\ntitle: x\n---\n"
    out = set_keys(
        raw,
        {
            "when": dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
            "day": dt.date(2026, 1, 2),
            "text": "multi\nline",
            "colon": "a: b",
            "yes": "true",
            "none": None,
        },
    )
    meta = parse_page(out, "x.md").metadata
    assert meta == {
        "title": "x",
        "when": "2026-01-02T03:04:05+00:00",
        "day": "2026-01-02",
        "text": "multi\nline",
        "colon": "a: b",
        "yes": "true",
        "none": None,
    }


def test_dump_page_round_trips() -> None:
    meta = {
        "type": "note",
        "id": "n-1",
        "title": "Colon: in title",
        "created": "2026-01-01T00:00:00Z",
        "tags": ["a", "b"],
        "user": "alice",
    }
    text = dump_page(meta, "# Colon: in title\n\nSee [[Other]].")
    assert text.startswith("---\ntype: note\nid: n-1\n")
    assert text.endswith("---\n\n# Colon: in title\n\nSee [[Other]].\n")
    p = parse_page(text, "notes/n.md")
    assert p.metadata == meta and list(p.metadata) == list(meta)
    assert p.body == "# Colon: in title\n\nSee [[Other]]."
    assert [lk.target for lk in p.links] == ["Other"]


def test_link_dataclass_defaults_unchanged() -> None:
    assert Link("x") == Link(target="x", fragment=None, alias=None, embed=False, line=0)
