"""A part is visible exactly as its session page (docs/sessions.md, "Parts"): a caller
who may not see a session learns nothing of it from ``POST /v1/forget`` of one of its
entries, not even that it exists or how many parts it has. The answer must be the
``404`` of a session that does not exist, naming only the path the caller sent.
Real apsw, real dulwich, the app in process."""

from __future__ import annotations

from pathlib import Path

import pytest
from appkit import AppServer
from sessionpartkit import PER, six_turns

from wiki_memory.wiki.sessionparts import part_path

pytestmark = pytest.mark.fast


def test_forget_of_an_entry_on_a_part_tells_an_outsider_nothing(tmp_path: Path) -> None:
    with AppServer(tmp_path / "data", session_part_events=PER) as srv:
        m = srv.memory
        assert m is not None and srv.tokens is not None
        me = srv.tokens.owner_name()
        path = six_turns(m, me)  # t1..t12: the page and parts 2, 3
        part3 = part_path(path, 3)
        assert (m.wiki_dir / part3).exists()
        bob = {"Authorization": "Bearer " + srv.token_for("bob", projects=("beta",))}
        missing = path.rsplit("/", 1)[0] + "/2026-01-01-00000000.md"
        on_part = srv.post("/v1/forget", {"path": f"{path}#^t9"}, headers=bob)
        beyond = srv.post("/v1/forget", {"path": f"{path}#^t99"}, headers=bob)
        nothing = srv.post("/v1/forget", {"path": f"{missing}#^t9"}, headers=bob)
        assert on_part.status_code == beyond.status_code == nothing.status_code == 404
        assert part3 not in on_part.text, on_part.text  # names the hidden part
        assert on_part.json() == {
            k: (v.replace(missing, path) if isinstance(v, str) else v)
            for k, v in nothing.json().items()
        }
        assert (m.wiki_dir / part3).exists()
