"""A page whose frontmatter holds text the YAML library refuses (a control character in
a quoted title, NEL, a lone surrogate) cannot be edited by forget or pin: the edit is
refused with a 400 naming the frontmatter, never a 500, and the page's bytes stay."""

from __future__ import annotations

import pytest

from wiki_memory.core.forget import forget_bytes
from wiki_memory.core.pins import pin_bytes
from wiki_memory.errors import BadRequest
from wiki_memory.wiki.frontmatter import FrontmatterError, set_keys
from wiki_memory.wiki.page import parse_page

pytestmark = pytest.mark.fast

REFUSED = [
    '---\ntitle: "Deploy\x1b guide"\n---\nhow to deploy\n',
    "---\ntitle: 'a\x7fb'\n---\nbody\n",
    '---\ntitle: "\x81"\n---\nbody\n',
    '---\ntitle: "a\x01b"\nkind: note\n---\nbody\n',
]


@pytest.mark.parametrize("text", REFUSED)
def test_forget_and_pin_refuse_with_a_bad_request_and_keep_the_page(text: str) -> None:
    raw = text.encode()
    with pytest.raises(BadRequest, match="cannot edit the frontmatter"):
        forget_bytes(raw, "projects/atlas/notes/deploy.md", "owner", "2026-12-07T00:00:00Z")
    with pytest.raises(BadRequest, match="cannot edit the frontmatter"):
        pin_bytes(raw, True)
    with pytest.raises(FrontmatterError):
        set_keys(raw, {"state": "forgotten"})
    # the page reads as before: its frontmatter marked invalid, its body kept
    page = parse_page(raw, "projects/atlas/notes/deploy.md")
    assert any(d.kind == "frontmatter_invalid" for d in page.diagnostics)
