"""What the logs and the door leave out: query-string keys in the access log, audit
lines for refused writes into hidden projects, refused pins and refused audit reads,
control characters on every output of the audit log, personal paths in its targets; an
empty Host on every face; HSTS over TLS; a backup passphrase's length. In-process: a
Memory and the app under Starlette's TestClient."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from support import make_memory

from wiki_memory.audit import escape
from wiki_memory.auth import TokenStore
from wiki_memory.cli.tokens import cmd_audit
from wiki_memory.core.backup import BackupError, backup
from wiki_memory.server.app import create_app

pytestmark = pytest.mark.fast

GHP = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
DIARY = "people/alice/diary.md"
PERSONAL_PAGE = "projects/open/notes/private.md"


@pytest.fixture
def w(tmp_path: Path) -> Iterator[dict[str, Any]]:
    data = tmp_path / "data"
    m = make_memory(
        data,
        files={
            "projects/secret/a.md": "# a\n",
            "projects/open/b.md": "# b\n",
            DIARY: "# diary\n",
            PERSONAL_PAGE: "---\nvisibility: personal\nuser: alice\n---\n# mine\n",
        },
    )
    tokens = TokenStore(data / "auth", owner_user="alice")
    alice = tokens.ensure_owner()[0]
    carol = tokens.create("carol", projects=["open"])
    lee = tokens.create("lee", role="admin")
    m.scope.directory = tokens
    app = create_app(m, tokens)
    try:
        with TestClient(app, base_url="http://127.0.0.1") as c:
            yield {"m": m, "c": c, "data": data, "alice": alice, "carol": carol, "lee": lee}
    finally:
        m.stop()


def _h(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _audit(data: Path) -> list[dict[str, Any]]:
    text = (data / "logs" / "audit.jsonl").read_text(encoding="utf-8")
    return [json.loads(x) for x in text.splitlines()]


def test_access_log_redacts_query_keys_like_values(w, caplog):
    with caplog.at_level(logging.INFO, logger="wiki_memory.access"):
        assert w["c"].get(f"/v1/health?{GHP}").status_code == 200
        w["c"].get(f"/v1/pages?{GHP}=1&limit=2", headers=_h(w["alice"]))
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name == "wiki_memory.access")
    assert "/v1/health?REDACTED=REDACTED " in logged
    assert "?REDACTED=REDACTED&REDACTED=REDACTED " in logged
    assert "ghp_" not in logged


def test_refused_writes_pins_and_audit_reads_are_audited(w):
    c, carol = w["c"], w["carol"]
    r = c.post("/v1/remember", json={"text": "a fact", "project": "secret"}, headers=_h(carol))
    assert r.status_code == 404
    r = c.post("/v1/handoffs", json={"title": "t", "project": "secret"}, headers=_h(carol))
    assert r.status_code == 404
    r = c.post(
        "/v1/admin/pin", json={"path": "projects/secret/a.md", "pinned": True}, headers=_h(carol)
    )
    assert r.status_code == 404
    assert c.get("/v1/audit", headers=_h(carol)).status_code == 403
    got = {(x["op"], x["target"], x["result"]) for x in _audit(w["data"]) if x["user"] == "carol"}
    assert ("page.write", "projects/secret", "not_found") in got
    assert ("handoff.create", "projects/secret", "not_found") in got
    assert ("pin", "projects/secret/a.md", "not_found") in got
    assert ("audit.read", "", "denied") in got


def test_admins_see_a_personal_pages_owner_not_its_path(w):
    c = w["c"]
    for path in (DIARY, PERSONAL_PAGE):
        r = c.post("/v1/admin/pin", json={"path": path, "pinned": True}, headers=_h(w["lee"]))
        assert r.status_code == 404  # not the admin's page
        r = c.post("/v1/admin/pin", json={"path": path, "pinned": True}, headers=_h(w["alice"]))
        assert r.status_code == 200, r.text
    text = c.get("/v1/audit", headers=_h(w["lee"])).text
    assert "diary" not in text and "private.md" not in text
    pins = [x for x in json.loads(text)["lines"] if x["op"] == "pin"]
    assert len(pins) == 4
    assert all(x["target"] == "[personal page]" and x["owner"] == "alice" for x in pins)


def test_bidi_and_c1_controls_are_escaped_on_every_output_of_the_audit_log(w, capsys):
    c, m = w["c"], w["m"]
    evil = "projects/open/notes/x\u202egpj.exe\x85\u2066.md"
    r = c.put("/v1/pages/" + evil, content=b"# x\n", headers=_h(w["carol"]))
    assert r.status_code in (200, 201), r.text
    raw = (w["data"] / "logs" / "audit.jsonl").read_bytes()
    for ch in ("\u202e", "\x85", "\u2066"):
        assert ch.encode() not in raw
    assert b"\\u202e" in raw
    http = c.get("/v1/audit", headers=_h(w["lee"]))
    for ch in ("\u202e", "\x85", "\u2066"):
        assert ch.encode() not in http.content
    assert any("\u202e" in x["target"] for x in http.json()["lines"])  # the value, escaped
    m.stop()  # the CLI reads the file when no server runs
    for as_json in (True, False):
        args = argparse.Namespace(
            url=None, user=None, since=None, json=as_json, data_dir=str(w["data"]), wiki=None
        )
        assert cmd_audit(args) == 0
        out = capsys.readouterr().out
        assert "gpj.exe" in out
        for ch in ("\u202e", "\x85", "\u2066"):
            assert ch not in out, (as_json, ch)


def test_an_empty_or_missing_host_is_refused_on_every_face(w):
    c = w["c"]
    for path in ("/v1/pages", "/", "/mcp"):
        r = c.get(path, headers={**_h(w["alice"]), "Host": ""})
        assert r.status_code == 421, (path, r.status_code)
        r = c.get(path, headers={**_h(w["alice"]), "Host": "evil.example"})
        assert r.status_code == 421, path
    assert c.get("/v1/pages", headers=_h(w["alice"])).status_code == 200


def test_hsts_on_every_answer_over_tls_only(w):
    m = w["m"]
    app = create_app(m, TokenStore(w["data"] / "auth", owner_user="alice"))
    with TestClient(app, base_url="https://127.0.0.1") as tls:
        for path in ("/v1/health", "/v1/pages", "/login"):
            r = tls.get(path)
            assert r.headers["strict-transport-security"] == "max-age=31536000", path
    assert "strict-transport-security" not in w["c"].get("/v1/health").headers


def test_a_backup_passphrase_needs_twelve_characters(w, tmp_path):
    m = w["m"]
    with pytest.raises(BackupError, match="12 characters"):
        backup(m.settings, tmp_path / "b.tar", "x")
    assert not (tmp_path / "b.tar").exists()
    backup(m.settings, tmp_path / "b.tar", "twelve chars")
    assert (tmp_path / "b.tar").exists()


def test_the_cli_asks_for_twelve_characters(monkeypatch):
    from wiki_memory.cli.carry import PASSPHRASE_ENV, ask_passphrase
    from wiki_memory.cli.common import CliError

    monkeypatch.setenv(PASSPHRASE_ENV, "short")
    with pytest.raises(CliError, match="12 characters"):
        ask_passphrase(True)
    assert ask_passphrase(False) == "short"  # a restore takes what the backup was made with


def test_a_log_value_is_kept_as_it_is_unless_it_holds_a_control_or_a_backslash():
    # escape() returns a value with nothing to escape untouched (a method, a user name:
    # the common case of every access line), and rewrites every control it holds
    bidi = {0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}
    for o in [*range(0x3000), 0xFEFF, 0x1F600]:
        ch = chr(o)
        special = o < 0x20 or 0x7F <= o < 0xA0 or o in (0x2028, 0x2029) or o in bidi
        out = escape(f"user{ch}name")
        if ch == "\\":
            assert out == "user\\\\name"
        elif special:
            assert ch not in out and "\n" not in out and out.isprintable(), (hex(o), out)
            assert out.startswith("user\\") and out.endswith("name")
        else:
            assert out == f"user{ch}name", hex(o)
