"""A page's reply names a bounded number of links, backlinks and link diagnostics
(setting ``max_links_per_reply``), with a flag when there were more: a megabyte of
``[[design]]`` answered 18.5 MB of JSON before."""

from __future__ import annotations

import json
from pathlib import Path

from support import as_user, make_memory


def test_links_backlinks_and_diagnostics_are_capped(tmp_path: Path) -> None:
    files = {
        "notes/design.md": "# Design\n",
        "notes/many.md": "[[design]] [[nowhere]]\n" * 60,
        **{f"notes/src{i}.md": "see [[design]]\n" for i in range(30)},
    }
    m = make_memory(tmp_path / "d", files=files, max_links_per_reply=25)
    try:
        many = m.read_page("notes/many.md", user=as_user(m, "alice"))
        assert len(many["links"]) == 25 and many["links_truncated"] is True
        assert len([d for d in many["diagnostics"] if d["kind"] == "unresolved_link"]) <= 25
        assert many["backlinks_truncated"] is False
        design = m.read_page("notes/design.md", user=as_user(m, "alice"))
        assert len(design["backlinks"]) == 25 and design["backlinks_truncated"] is True
        assert design["links"] == [] and design["links_truncated"] is False
        whole = m.read_page("notes/src0.md", user=as_user(m, "alice"))
        assert len(whole["links"]) == 1 and not whole["links_truncated"]
    finally:
        m.stop()


def test_a_megabyte_of_links_answers_a_small_reply(tmp_path: Path) -> None:
    files = {"notes/design.md": "# Design\n", "notes/big.md": "[[design]] " * 95_000}
    m = make_memory(tmp_path / "d", files=files)
    try:
        reply = m.read_page("notes/big.md", 0, 64 * 1024, as_user(m, "alice"))
        size = len(json.dumps(reply))
        assert reply["links_truncated"] and len(reply["links"]) == 1000
        assert size < 400_000, size
    finally:
        m.stop()
