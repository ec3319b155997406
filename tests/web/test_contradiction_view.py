"""The web page view of a note that disagrees with another names the other page and what
it says, with the way to resolve it; a reader who may not read the other side sees no
such notice (docs/knowledge.md, "Contradictions")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from appkit import AppServer

pytestmark = pytest.mark.fast

A, B = "projects/p/notes/ci.md", "people/bob/notes/ci.md"


def test_the_page_names_the_note_it_disagrees_with_only_to_who_may_read_it(
    tmp_path: Path,
) -> None:
    with AppServer(tmp_path / "data") as srv:
        assert srv.memory is not None
        srv.memory.write_page(A, b"---\ntitle: CI system\n---\nCI runs on GitHub Actions.\n",
                              user="alice", message="w")  # fmt: skip
        srv.memory.write_page(
            B, b"---\ntitle: CI system\nproject: p\n---\nCI runs on GitLab CI.\n",
            user="bob", message="w",
        )  # fmt: skip
        bob = srv.token_for("bob", role="member", projects=("p",))
        sam = srv.token_for("sam", role="member", projects=("p",))
        c = srv.sign_in(bob)
        page = c.get(srv.url + "/page/" + A).text  # type: ignore[attr-defined]
        notice = re.search(r'<p class="notice state-broken" id="contradicts">(.*?)</p>', page, re.S)
        assert notice is not None, page[:2000]
        assert B in notice[1] and "GitLab CI" in notice[1] and "compatible_with" in notice[1]
        c = srv.sign_in(sam)
        page = c.get(srv.url + "/page/" + A).text  # type: ignore[attr-defined]
        assert 'id="contradicts"' not in page and "GitLab" not in page
