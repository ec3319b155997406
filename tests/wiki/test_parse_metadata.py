"""``parse_metadata`` reads exactly the frontmatter ``parse_page`` reads (the border and
the shared projection decide on it), on every page of the shared vaults and on odd
fences, BOMs, line endings and broken YAML."""

from __future__ import annotations

import pytest

from wiki_memory.wiki.page import parse_metadata, parse_page

pytestmark = pytest.mark.fast

ODD = [
    b"",
    b"no frontmatter\nvisibility: personal\n",
    b"---\nvisibility: personal\nuser: a\n---\nbody\n",
    b"\xef\xbb\xbf---\r\nvisibility: personal\r\n...\r\nbody",
    b"-\xef\xbb\xbf--\nvisibility: personal\n---\n",
    b'---  \n"visibil\\x69ty": personal\n---\n',
    b"---\rpinned: true\r---\r",
    b"---\nvisibility: [personal\n---\n",
    b"---\n- a list\n---\n",
    b"---\nvisibility: personal\n",
    b"---\ntitle: \xff\xfe bad bytes\npinned: true\n---\n",
    b" ---\npinned: true\n---\n",
]


@pytest.mark.parametrize("raw", ODD)
def test_odd_pages_read_the_same(raw: bytes) -> None:
    assert parse_metadata(raw) == parse_page(raw, "x.md").metadata


def test_every_vault_page_reads_the_same(shared) -> None:
    pages = sorted((shared / "data" / "vaults").rglob("*.md"))
    assert pages
    for p in pages:
        raw = p.read_bytes()
        assert parse_metadata(raw) == parse_page(raw, p.name).metadata, p
