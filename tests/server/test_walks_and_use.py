"""Over HTTP in process (docs/api.md): a recall cursor of another query is a 400 naming
``cursor``, and ``GET /v1/use`` gives a caller their own rows of the use record only."""

from __future__ import annotations

import pytest
from appkit import AppServer

pytestmark = pytest.mark.fast


def test_another_query_s_cursor_is_a_400_and_use_rows_are_the_caller_s(tmp_path):
    data = tmp_path / "data"
    notes = data / "wiki" / "notes"
    notes.mkdir(parents=True)
    for i in range(12):
        (notes / f"n{i}.md").write_text(
            f"# N{i}\n\nokapi {' '.join(f'w{i}x{j}' for j in range(30))}\n"
        )
    with AppServer(data) as srv:
        first = srv.post("/v1/recall", {"query": "okapi", "budget_tokens": 300})
        assert first.status_code == 200, first.text
        nxt = first.json()["next_cursor"]
        assert nxt is not None
        again = srv.post("/v1/recall", {"query": "okapi", "budget_tokens": 300, "cursor": nxt})
        assert again.status_code == 200 and again.json()["cursor"] == len(first.json()["items"])
        other = srv.post("/v1/recall", {"query": "w1x1", "budget_tokens": 300, "cursor": nxt})
        assert other.status_code == 400 and other.json()["field"] == "cursor", other.text
        bob = {"Authorization": "Bearer " + srv.token_for("bob", role="member")}
        assert srv.post("/v1/recall", {"query": "w1x1"}, headers=bob).status_code == 200
        mine = srv.get("/v1/use?days=1").json()["rows"]
        his = srv.get("/v1/use?days=1", headers=bob).json()["rows"]
        assert mine and {r["user"] for r in mine} == {srv.tokens.owner_name()}
        assert [(r["path"], r["user"]) for r in his] == [("notes/n1.md", "bob")]
        assert srv.get("/v1/use?days=0").status_code == 400
