"""Users, roles and grants at the command line (``wiki-memory token ...``): exact revokes,
members told they hold no project, grants shown by ``token list``, every change audited."""

from __future__ import annotations

import json
from pathlib import Path

from clikit import run_cli_here as run_cli

from wiki_memory.auth import TokenStore


def _audit(data: Path) -> list[dict]:
    path = data / "logs" / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_revoke_by_user_never_matches_another_users_token_id(tmp_path: Path):
    data = tmp_path / "data"
    assert run_cli(data, "token").returncode == 0
    store = TokenStore(data / "auth")
    c_token = run_cli(data, "token", "create", "--user", "c", "--project", "p").stdout.strip()
    assert c_token
    # another user's token whose id starts with "c" (ids are hex: 1 in 16 does)
    for _ in range(200):
        store.create("dan", projects=["p"])
        if any(r.token_id.startswith("c") for r in store.list() if r.user == "dan"):
            break
        store.revoke(user="dan")
    dan_ids = {r.token_id for r in store.list() if r.user == "dan"}
    assert any(i.startswith("c") for i in dan_ids), "no id starting with c in 200 tries"
    (c_id,) = {r.token_id for r in store.list() if r.user == "c"}

    r = run_cli(data, "token", "revoke", "--user", "c")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"revoked {c_id}  c", r.stdout  # it says what it revoked
    left = TokenStore(data / "auth").list()
    assert {x.token_id for x in left if x.user == "dan"} == dan_ids  # untouched
    assert not [x for x in left if x.user == "c"]

    # an id is matched exactly, never as a prefix
    prefix = next(iter(dan_ids))[:3]
    r = run_cli(data, "token", "revoke", "--id", prefix)
    assert r.returncode == 4 and "no token matched" in r.stderr, (r.returncode, r.stderr)
    assert {x.token_id for x in TokenStore(data / "auth").list() if x.user == "dan"} == dan_ids
    one = next(iter(dan_ids))
    r = run_cli(data, "token", "revoke", "--id", one)
    assert r.returncode == 0 and r.stdout.strip() == f"revoked {one}  dan", r.stdout
    # the owner's token is never revoked
    owner = next(x for x in TokenStore(data / "auth").list() if x.owner)
    assert run_cli(data, "token", "revoke", "--id", owner.token_id).returncode == 4
    revokes = [a for a in _audit(data) if a["op"] == "token.revoke"]
    assert {a["target"] for a in revokes} >= {one}
    assert all(a["face"] == "cli" and a["result"] == "ok" for a in revokes)


def test_roles_grants_and_the_listing(tmp_path: Path):
    data = tmp_path / "data"
    assert run_cli(data, "token").returncode == 0
    r = run_cli(data, "token", "create", "--user", "mia")
    assert r.returncode == 0 and "mia holds no project yet" in r.stderr, r.stderr
    r = run_cli(data, "token", "create", "--user", "rae", "--role", "reader", "--project", "atlas")
    assert r.returncode == 0 and "holds no project" not in r.stderr, r.stderr
    r = run_cli(data, "token", "create", "--user", "ada", "--role", "admin")
    assert r.returncode == 0 and "holds no project" not in r.stderr
    r = run_cli(data, "token", "grant", "--user", "mia", "--project", "atlas", "--read-only")
    assert r.returncode == 0 and r.stdout.strip() == "granted mia read on atlas", r.stdout
    r = run_cli(data, "token", "grant", "--user", "mia", "--project", "borealis")
    assert r.stdout.strip() == "granted mia read and write on borealis"
    # a reader's grant is read, whatever is asked
    assert (
        "granted rae read on borealis"
        in run_cli(data, "token", "grant", "--user", "rae", "--project", "borealis").stdout
    )
    bad = run_cli(data, "token", "grant", "--user", "nobody", "--project", "atlas")
    assert bad.returncode == 2 and "no user" in bad.stderr
    bad = run_cli(data, "token", "grant", "--user", "mia", "--project", "../x")
    assert bad.returncode == 2
    listing = run_cli(data, "token", "list").stdout
    rows = {line.split()[1]: line for line in listing.splitlines()}
    assert "member" in rows["mia"] and "atlas (read), borealis (write)" in rows["mia"]
    assert "reader" in rows["rae"] and "atlas (read), borealis (read)" in rows["rae"]
    assert "admin" in rows["ada"] and "every project" in rows["ada"]
    assert "wm_" not in listing  # ids only, never a token
    ops = [(a["op"], a.get("subject")) for a in _audit(data)]
    assert ("token.create", "mia") in ops and ("grant", "mia") in ops
    assert all(a["token_id"] is None and a["face"] == "cli" for a in _audit(data))
