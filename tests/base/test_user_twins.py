"""User names are unique after the identity fold (case and width): pages' owners are
compared folded, so ``ALICE`` beside ``alice`` would own each other's personal pages.
A twin is refused at creation; a data directory from before the rule that holds twin
tokens keeps the older user and refuses the newer (401 ``user_name_twin``, audited)
until the owner revokes it; doctor lists the twins."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from support import make_memory

from wiki_memory.auth import TokenStore, token_hash
from wiki_memory.cli.checks_install import check_user_twins
from wiki_memory.cli.doctor import Context
from wiki_memory.server.app import create_app

pytestmark = pytest.mark.fast


def test_a_twin_is_refused_at_creation_and_named(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "auth", owner_user="olivia")
    store.ensure_owner()
    store.create("alice")
    store.create("bob")
    for twin, existing in (("ALICE", "alice"), ("Bob", "bob"), ("OLIVIA", "olivia")):
        with pytest.raises(ValueError, match=f"existing user '{existing}'"):
            store.create(twin)
    store.create("alice")  # the same user may hold more tokens
    assert store.twins() == {}


def _old_data_dir(data: Path) -> tuple[str, str]:
    """``auth/tokens.json`` as an older release left it: ``alice`` first, ``ALICE``
    later. Returns both tokens."""
    auth = data / "auth"
    store = TokenStore(auth, owner_user="olivia")
    store.ensure_owner()
    older = store.create("alice", projects=["p"])
    raw = json.loads((auth / "tokens.json").read_text())
    newer = "wm_" + "n" * 43
    raw["tokens"].append({"hash": token_hash(newer), "user": "ALICE", "created": time.time() + 5})
    raw["users"]["ALICE"] = {"role": "member", "grants": {"p": "write"}}
    (auth / "tokens.json").write_text(json.dumps(raw))
    return older, newer


def test_an_upgraded_data_directory_refuses_the_newer_twin(tmp_path: Path) -> None:
    data = tmp_path / "data"
    older, newer = _old_data_dir(data)
    m = make_memory(data, owner="olivia", files={"people/alice/diary.md": "# zqx diary\n"})
    tokens = TokenStore(data / "auth", owner_user="olivia")
    m.scope.directory = tokens
    try:
        assert tokens.identity_for(newer) is None
        assert tokens.identity_of("ALICE") is None
        assert tokens.twin_for(newer) == ("ALICE", token_hash(newer)[:8], "alice")
        with TestClient(create_app(m, tokens), base_url="http://127.0.0.1") as c:
            r = c.get(
                "/v1/pages/people/alice/diary.md", headers={"Authorization": f"Bearer {newer}"}
            )
            assert r.status_code == 401 and r.json()["error"] == "user_name_twin", r.text
            assert "zqx" not in r.text
            web = c.get("/page/people/alice/diary.md", headers={"Authorization": f"Bearer {newer}"})
            assert web.status_code == 401 and "zqx" not in web.text
            # a sign-in cookie made from the twin's token before the upgrade: no longer live
            from wiki_memory.web.session import SESSION_COOKIE, load_key, make_session_cookie

            key = load_key(data / "auth")
            c.cookies.set(SESSION_COOKIE, make_session_cookie(key, "ALICE", token_hash(newer)[:8]))
            web = c.get("/page/people/alice/diary.md", follow_redirects=False)
            assert web.status_code in (303, 401) and "zqx" not in web.text, web.status_code
            c.cookies.clear()
            ok = c.get(
                "/v1/pages/people/alice/diary.md", headers={"Authorization": f"Bearer {older}"}
            )
            assert ok.status_code == 200
        lines = [json.loads(x) for x in (data / "logs" / "audit.jsonl").read_text().splitlines()]
        refused = [x for x in lines if x.get("result") == "user_name_twin"]
        assert refused and refused[0]["user"] == "ALICE" and refused[0]["twin_of"] == "alice"
        ctx = Context(m.settings, 0.0)
        check_user_twins(ctx)
        assert ctx.rep["user_twins"] == [{"user": "ALICE", "existing": "alice"}]
        assert any("revoke --user ALICE" in (f.fix or "") for f in ctx.findings)
        # revoked: the older user is the only alice, and doctor is quiet
        tokens.revoke(user="ALICE")
        assert tokens.twins() == {}
        assert tokens.identity_for(older) is not None
    finally:
        m.stop()
