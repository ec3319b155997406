"""The frontmatter read without the YAML library (docs/pages.md, "Frontmatter") gives
what the library gives, and leaves to it every form it is not certain of: bool and null
words, numbers, dates, escapes, blocks, comments, duplicate keys. Checked on the shared
vaults' pages too (skipped without them)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from wiki_memory.wiki import frontmatter_read as fr
from wiki_memory.wiki.frontmatter_fast import simple_mapping

pytestmark = pytest.mark.fast

SHARED = Path(os.environ.get("WIKI_MEMORY_SHARED", "/work/shared"))


def library(text: str) -> Any:
    loader = fr.PageLoader(text)
    try:
        node = loader.get_single_node()
        return fr.json_safe(loader.construct_document(node)) if node is not None else None
    finally:
        loader.dispose()


READ_FAST = [
    'type: topic\ntitle: "Fri"\ntopic: name\ntags: [topic]',
    "title: Plan B (draft)\ntags: [a, b-c, d_e]\nempty:\nlist: []",
    "title: 'single quoted: with colon'\nkind: note",
    'title: "Café, naïve"\nstate: current',
]
LEFT_TO_YAML = [
    "draft: yes",
    "flag: off",
    "tags: [a, no]",
    "n: 12",
    "when: 2023-11-15T22:13:20Z",
    'title: "a \\"quoted\\" word"',
    "title: it''s",
    "title: 'it''s'",
    "tags:\n  - a\n  - b",
    "title: x # a comment",
    "title: a\ntitle: b",
    "on: x",
    "title: x\r",
    "ref: &a x\nother: *a",
    "",
    # what YAML refuses or folds, though the line's shape is simple
    'title: "a\x01b"',
    'title: "a\x1b[31mb"',
    "title: 'a\x7fb'",
    'title: "\ufffe"',
    'title: "\x81"',
    'title: "a\x85b"',
    "k: '\x85'",
    'title: "a\rb"',
    "a: x\n\x0b\nb: y",
    "a: x\n\x0c\nb: y",
    "a: x\n\x1c\nb: y",
    "a: x\n\xa0\nb: y",
    "a: x\n\u3000\nb: y",
    "a: x\n\u2009\nb: y",
    "k" * 1025 + ": x",
    'title: "a\ud800b"',
]


@pytest.mark.parametrize("text", READ_FAST)
def test_simple_frontmatters_read_fast_as_the_library_reads_them(text: str) -> None:
    fast = simple_mapping(text)
    assert fast is not None and fast == library(text)
    assert fr.load_yaml(text).data == fast


@pytest.mark.parametrize("text", LEFT_TO_YAML)
def test_every_other_form_is_left_to_the_library(text: str) -> None:
    assert simple_mapping(text) is None
    res = fr.load_yaml(text)  # never raises, whatever the text
    if res.ok and not res.duplicates:
        assert res.data == library(text)


def test_the_shared_vaults_read_the_same_both_ways() -> None:
    vaults = SHARED / "data" / "vaults"
    if not vaults.is_dir():
        pytest.skip(f"no shared vaults at {vaults} (set WIKI_MEMORY_SHARED)")
    fast = 0
    for f in sorted(vaults.rglob("*.md")):
        text = f.read_text("utf-8", "replace")
        end = text.find("\n---", 4)
        if not text.startswith("---\n") or end < 0:
            continue
        got = simple_mapping(text[4:end])
        if got is not None:
            fast += 1
            assert got == library(text[4:end]), f
    assert fast > 0
