"""A team server end to end (docs/team-server.md): the upgrade of a data directory from
the release before roles, a scripted day of a team in the audit log, forged newlines in
both logs, and cases C39 (per-project grants, deny by default) and C41 (revocation binds
at once; tokens and grants are audited) of ``../shared/cases/README.md``."""

from __future__ import annotations

import hashlib
import json
import secrets
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from appkit import AppServer, http
from clikit import run_cli_here as run_cli
from serverproc import ServerProcess
from support import wait_for
from teamkit import McpRaw, make_token

pytestmark = pytest.mark.process

OWNER = "olivia"
ENV = {"USER": OWNER, "LOGNAME": OWNER}


def audit_lines(data: Path) -> list[dict[str, Any]]:
    path = data / "logs" / "audit.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def token_id(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:8]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class As:
    """Requests to an ``AppServer`` with one bearer token, called like an
    ``httpx.Client(base_url=srv.url, headers=bearer(token))``."""

    def __init__(self, srv: AppServer, token: str) -> None:
        self.srv = srv
        self.headers = bearer(token)

    def request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        kw["headers"] = {**self.headers, **kw.get("headers", {})}
        return self.srv.client.request(method, self.srv.url + path, **kw)

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("POST", path, **kw)

    def put(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("PUT", path, **kw)

    def close(self) -> None:
        """Nothing to close: the app's client is the ``AppServer``'s."""


def fake_token() -> str:
    # shaped like the previous release's tokens, made at run time
    return "wm" + "_" + secrets.token_urlsafe(32)


# --------------------------------------------------------------------------------------
# Upgrade
# --------------------------------------------------------------------------------------


def previous_release_data_dir(data: Path) -> dict[str, str]:
    """A data directory as the release before roles left it (commit eeec819's
    ``auth.py``): ``owner.token`` in clear, ``tokens.json`` with ``tokens`` (hash, user,
    created, owner) and ``owner_user``, no ``users`` and no ``version``; two projects."""
    auth = data / "auth"
    auth.mkdir(parents=True, mode=0o700)
    tokens = {OWNER: fake_token(), "alice": fake_token(), "carl": fake_token()}
    (auth / "owner.token").write_text(tokens[OWNER] + "\n")
    records = []
    for user, tok in tokens.items():
        rec: dict[str, Any] = {
            "hash": hashlib.sha256(tok.encode()).hexdigest(),
            "user": user,
            "created": 1796160000.5,
        }
        if user == OWNER:
            rec["owner"] = True
        records.append(rec)
    (auth / "tokens.json").write_text(
        json.dumps({"tokens": records, "owner_user": OWNER}, indent=1)
    )
    for proj in ("atlas", "borealis"):
        p = data / "wiki" / "projects" / proj / "notes" / "n.md"
        p.parent.mkdir(parents=True)
        p.write_text(f"# {proj} notes\n\n{proj}word\n")
    return tokens


def test_upgrade_from_the_previous_release(tmp_path: Path) -> None:
    data = tmp_path / "data"
    tokens = previous_release_data_dir(data)
    srv = ServerProcess(data, env=ENV).start()
    try:
        said = srv.stderr()
        assert said.count("upgraded tokens to roles") == 1, said
        assert "alice, carl became members" in said and "(atlas, borealis)" in said
        ups = [a for a in audit_lines(data) if a["op"] == "token.upgrade"]
        assert [(a["subject"], a["grants"]) for a in ups] == [
            ("alice", {"atlas": "write", "borealis": "write"}),
            ("carl", {"atlas": "write", "borealis": "write"}),
        ]
        # old tokens keep working, with the grants the upgrade gave
        with httpx.Client(base_url=srv.url, headers=bearer(tokens["alice"]), timeout=60) as c:
            assert c.get("/v1/pages/projects/atlas/notes/n.md").status_code == 200
            r = c.put("/v1/pages/projects/borealis/notes/new.md", content="# New\n")
            assert r.status_code == 201, r.text
        # a project made after the upgrade is not theirs: a new grant is needed
        p = data / "wiki" / "projects" / "later" / "notes" / "x.md"
        p.parent.mkdir(parents=True)
        p.write_text("# later\n\nlaterword\n")
        wait_for(
            lambda: (
                httpx.get(
                    srv.url + "/v1/pages/projects/later/notes/x.md", headers=srv.headers
                ).status_code
                == 200
            ),
            20,
        )
        r = httpx.get(
            srv.url + "/v1/pages/projects/later/notes/x.md", headers=bearer(tokens["carl"])
        )
        assert r.status_code == 404
    finally:
        srv.stop()
    listing = run_cli(data, "token", "list").stdout
    assert (
        "alice" in listing and "member" in listing and "atlas (write), borealis (write)" in listing
    )
    # the next start says nothing more
    srv2 = ServerProcess(data, env=ENV).start()
    try:
        assert "upgraded tokens" not in srv2.stderr()
        assert len([a for a in audit_lines(data) if a["op"] == "token.upgrade"]) == 2
    finally:
        srv2.stop()


# --------------------------------------------------------------------------------------
# A day of a team, in the audit log; forged newlines in both logs
# --------------------------------------------------------------------------------------


def raw_request(port: int, head: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(head)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk


def test_a_day_of_a_team_in_the_audit_log(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert run_cli(data, "token", env=ENV).returncode == 0
    ana = make_token(data, "ana", None, "atlas", here=True)
    ben = make_token(data, "ben", None, "borealis", here=True)
    cal = make_token(data, "cal", "admin", here=True)
    ids = {u: token_id(t) for u, t in (("ana", ana), ("ben", ben), ("cal", cal))}
    with ServerProcess(data, env={**ENV, "WIKI_MEMORY_COMMIT_DELAY_SECONDS": "0.05"}) as srv:
        a = httpx.Client(base_url=srv.url, headers=bearer(ana), timeout=60)
        b = httpx.Client(base_url=srv.url, headers=bearer(ben), timeout=60)
        c = httpx.Client(base_url=srv.url, headers=bearer(cal), timeout=60)
        # captures: two sessions of ana in atlas, one of ben in borealis
        for who, proj, sid in ((a, "atlas", "a1"), (a, "atlas", "a2"), (b, "borealis", "b1")):
            for ev in ("UserPromptSubmit", "PostToolUse", "Stop"):
                r = who.post(
                    "/v1/observations",
                    json={
                        "harness": "claude-code",
                        "event": ev,
                        "session_id": sid,
                        "cwd": f"/w/{proj}",
                        "payload": {"prompt": "work"},
                    },
                )
                assert r.status_code == 202, r.text
        assert (
            a.put("/v1/pages/projects/atlas/notes/plan.md", content="# Plan\n").status_code == 201
        )
        mcp = McpRaw(srv.url, ben)
        assert (
            mcp.call("page_write", {"path": "projects/borealis/notes/b.md", "text": "# B\n"})[0]
            == "ok"
        )
        h = a.post("/v1/handoffs", json={"project": "atlas", "title": "finish the plan"})
        assert h.status_code == 201, h.text
        hid = h.json()["handoff"]["id"]
        assert c.post(f"/v1/handoffs/{hid}/claim", json={}).status_code == 200
        assert c.post(f"/v1/handoffs/{hid}/complete", json={"note": "done"}).status_code == 200
        r = run_cli(data, "token", "grant", "--user", "ben", "--project", "atlas", "--read-only")
        assert r.returncode == 0
        denied = b.put("/v1/pages/projects/atlas/notes/plan2.md", content="# no\n")
        assert denied.status_code == 403 and denied.json()["grant"] == "write on project atlas"
        r = c.post("/v1/admin/pin", json={"path": "projects/atlas/notes/plan.md", "pinned": True})
        assert r.status_code == 200, r.text
        assert c.post("/v1/admin/reindex").status_code == 200
        assert b.post("/v1/admin/reindex").status_code == 403
        assert run_cli(data, "token", "revoke", "--user", "ana").returncode == 0
        assert a.get("/v1/pages").status_code == 401
        # forged newlines: in a path (percent-encoded) and in a header (the line breaks the
        # HTTP parser lets through: NEL, LINE SEPARATOR, DEL; a bare CR or VT is a 400)
        ua = b"User-Agent: agent\xc2\x85FORGED-NEL\xe2\x80\xa8FORGED-LS\x7fFORGED-DEL\r\n"
        auth = b"Authorization: Bearer " + ben.encode() + b"\r\n"
        forged = (
            b"PUT /v1/pages/projects/atlas/notes/x%0A%7B%22forged%22%3A1%7D.md HTTP/1.1\r\n"
            b"Host: 127.0.0.1\r\n"
            + auth
            + ua
            + b"Content-Length: 4\r\nConnection: close\r\n\r\n# x\n"
        )
        assert b" 404 " in raw_request(srv.port, forged).split(b"\r\n", 1)[0]
        body = json.dumps({"path": 'projects/atlas/notes/x\n{"forged":1}.md'}).encode()
        auth = b"Authorization: Bearer " + cal.encode() + b"\r\n"
        forged = (
            b"POST /v1/admin/pin HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth + ua
            + b"Content-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body
        )  # fmt: skip
        assert b" 404 " in raw_request(srv.port, forged).split(b"\r\n", 1)[0]
        for x in (a, b, c):
            x.close()
    lines = audit_lines(data)
    got = {(x["op"], x["user"], x["token_id"], x["result"]) for x in lines}
    want = {
        ("capture", "ana", ids["ana"], "ok"),
        ("capture", "ben", ids["ben"], "ok"),
        ("page.write", "ana", ids["ana"], "ok"),
        ("page.write", "ben", ids["ben"], "ok"),
        ("handoff.create", "ana", ids["ana"], "ok"),
        ("handoff.claim", "cal", ids["cal"], "ok"),
        ("handoff.complete", "cal", ids["cal"], "ok"),
        ("grant", OWNER, None, "ok"),
        ("page.write", "ben", ids["ben"], "denied"),
        ("pin", "cal", ids["cal"], "ok"),
        ("reindex", "cal", ids["cal"], "ok"),
        ("reindex", "ben", ids["ben"], "denied"),
        ("token.revoke", OWNER, None, "ok"),
        ("request", "ana", ids["ana"], "revoked_token"),
    }
    assert want <= got, sorted(want - got)
    # captures are grouped per session: one line each, not one per event
    caps = [x for x in lines if x["op"] == "capture"]
    assert sorted(x["session"] for x in caps) == [
        "claude-code/a1",
        "claude-code/a2",
        "claude-code/b1",
    ]
    faces = {(x["op"], x["user"]): x["face"] for x in lines}
    assert faces[("page.write", "ben")] in ("mcp", "http")
    assert any(x["op"] == "page.write" and x["face"] == "mcp" for x in lines)
    assert faces[("grant", OWNER)] == "cli" and faces[("pin", "cal")] == "http"
    text = (data / "logs" / "audit.jsonl").read_text()
    assert ana not in text and ben not in text and cal not in text  # ids, never tokens
    # the forged newlines are escaped in both logs: no line starts with what was forged
    access = (data / "logs" / "access.log").read_text()
    for log in (text, access):
        for ln in log.splitlines():
            assert not ln.startswith(('{"forged"', "FORGED", '"forged"')), ln
            assert "\x85" not in ln and "\u2028" not in ln and "\x7f" not in ln, ln
    forged_line = next(x for x in lines if '"forged"' in x["target"])
    assert forged_line["target"] == 'projects/atlas/notes/x\n{"forged":1}.md'
    assert forged_line["result"] == "not_found" and "FORGED-NEL" in forged_line["agent"]
    assert 'x\\n{\\"forged' in text  # one JSON line: the newline written as \n
    acc = next(ln for ln in access.splitlines() if "forged" in ln)
    assert "x\\n{" in acc and "\\x85FORGED-NEL" in acc and "\\x7fFORGED-DEL" in acc, acc
    # admins read it; others may not
    r = run_cli(data, "audit", "--user", "cal")
    assert r.returncode == 0 and all(" cal " in ln for ln in r.stdout.splitlines()), r.stdout


# --------------------------------------------------------------------------------------
# C39: per-project grants on a team server (deny by default)
# --------------------------------------------------------------------------------------

RATES = "projects/atlas/notes/rates.md"
PLAN = "projects/borealis/notes/borealis-plan.md"
SECRET = "-".join(["ATLAS", "CONF", "7Q3"])  # the case's marker (built: it looks like a key)


def test_c39_per_project_grants_deny_by_default(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert run_cli(data, "token", env=ENV).returncode == 0
    t = {
        "u-admin": make_token(data, "u-admin", "admin", here=True),
        "u-ana": make_token(data, "u-ana", None, "atlas", here=True),
        "u-ben": make_token(data, "u-ben", None, "borealis", here=True),
        "u-cyd": make_token(data, "u-cyd", None, "atlas", here=True),
        "u-dov": make_token(data, "u-dov", here=True),
    }
    assert (
        run_cli(
            data, "token", "grant", "--user", "u-cyd", "--project", "atlas", "--read-only"
        ).returncode
        == 0
    )
    # the app in this process: what is checked is who may see what, through every face
    with AppServer(data, env=ENV) as srv:
        cl = {u: As(srv, k) for u, k in t.items()}
        rates = (
            "---\ntitle: Contractor rates\n---\n"
            f"{SECRET} the contractor day rate is 640 per day; see [[borealis-plan]].\n"
        )
        assert cl["u-ana"].put(f"/v1/pages/{RATES}", content=rates).status_code == 201
        plan = "BOREALIS-PLAN-2K9 links [[Contractor rates]]\n"
        assert cl["u-ben"].put(f"/v1/pages/{PLAN}", content=plan).status_code == 201
        h = cl["u-ana"].post(
            "/v1/handoffs", json={"project": "atlas", "title": "finish the rate table"}
        )
        assert h.status_code == 201
        hid = h.json()["handoff"]["id"]
        ben, bodies = cl["u-ben"], []

        def keep(r: httpx.Response) -> httpx.Response:
            bodies.append(r.text)
            return r

        # 1 and its control: byte-identical once the path is swapped
        r1 = keep(ben.get(f"/v1/pages/{RATES}"))
        ctl = ben.get("/v1/pages/projects/atlas/notes/nosuch.md")
        assert r1.status_code == ctl.status_code == 404
        assert r1.text.replace("rates", "nosuch") == ctl.text
        # 2-4
        r2 = keep(ben.post("/v1/recall", json={"query": "contractor day rate"})).json()
        assert not [i for i in r2["items"] if "atlas" in i["path"]]
        # a project the caller may not read is answered like one that does not exist (the
        # unknown-project error of docs/mcp.md, listing only what ben may read)
        r3 = keep(ben.post("/v1/recall", json={"query": "rate", "project": "atlas"}))
        c3 = ben.post("/v1/recall", json={"query": "rate", "project": "nosuch"})
        assert r3.status_code == c3.status_code == 404
        assert r3.json()["error"] == "unknown_project" and "atlas" not in str(r3.json()["projects"])
        assert r3.text.replace("atlas", "nosuch") == c3.text
        assert keep(ben.get("/v1/pages", params={"project": "atlas"})).json()["pages"] == []
        # 5-8 over MCP
        m = McpRaw(srv.url, t["u-ben"], via=http(srv))
        ans, text = m.call("memory_recall", {"query": SECRET})
        # the reply quotes the query ben sent; nothing else may hold it
        bodies.append(text.replace(f"'{SECRET}'", "").replace(f'"{SECRET}"', ""))
        assert ans == "ok" and "atlas/" not in text
        ans6, text6 = m.call("page_read", {"path": RATES})
        ctl6 = m.call("page_read", {"path": "projects/atlas/notes/nosuch.md"})
        bodies.append(text6)
        assert ans6 == "404" and text6.replace("rates", "nosuch") == ctl6[1]
        ans7, text7 = m.call("memory_expand", {"ids": [RATES]})
        bodies.append(text7)
        assert ans7 == "ok" and RATES in text7  # listed as missing, with no text
        ans8, text8 = m.call("memory_brief", {"project": "atlas"})
        ctl8 = m.call("memory_brief", {"project": "nosuchproj"})
        bodies.append(text8)
        assert ans8 == ctl8[0] and text8.replace("atlas", "nosuchproj") == ctl8[1]
        # 9: the web view
        found = keep(ben.get("/search", params={"q": "contractor"})).text
        assert RATES not in found and "atlas" not in found.lower()
        assert keep(ben.get(f"/page/{RATES}")).status_code == 404
        assert keep(ben.get("/p/atlas")).status_code == 404
        page = keep(ben.get(f"/v1/pages/{PLAN}")).json()
        assert RATES not in json.dumps(page.get("backlinks", []))
        assert [x for x in page.get("links", []) if x.get("status") == "unresolved"] or (
            RATES not in json.dumps(page)
        )
        # 10: a write into atlas
        before = (data / "wiki" / RATES).read_bytes()
        r10 = keep(ben.put(f"/v1/pages/{RATES}", content="# mine\n"))
        assert r10.status_code in (403, 404) and (data / "wiki" / RATES).read_bytes() == before
        # 11: handoffs
        ans, text = m.call("handoff_list", {"project": "atlas"})
        bodies.append(text)
        # like a project that does not exist: the unknown-project answer
        assert ans == "404" and "unknown_project" in text and hid not in text
        ans, text = m.call("handoff_claim", {"id": hid})
        assert ans == "404"
        assert cl["u-ana"].get(f"/v1/handoffs/{hid}").json()["handoff"]["status"] == "open"
        # 12: capture into atlas
        r12 = keep(
            ben.post(
                "/v1/observations",
                json={
                    "harness": "claude-code",
                    "event": "UserPromptSubmit",
                    "session_id": "sess-0390",
                    "cwd": "/home/dev/atlas",
                    "payload": {"prompt": "note the rate"},
                },
            )
        )
        assert r12.status_code == 404 and r12.json()["error"] == "capture_refused"
        assert sorted(p.name for p in (data / "wiki" / "projects" / "atlas").rglob("*.md")) == [
            hid + ".md",
            "rates.md",
        ]
        # 13-14: cyd reads, may not write
        assert cl["u-cyd"].get(f"/v1/pages/{RATES}").status_code == 200
        r14 = cl["u-cyd"].put(
            f"/v1/pages/{RATES}",
            content="# no\n",
            headers={"If-Match": cl["u-cyd"].get(f"/v1/pages/{RATES}").json()["hash"]},
        )
        assert r14.status_code == 403 and r14.json()["grant"] == "write on project atlas"
        # 15: dov has nothing
        r15 = cl["u-dov"].post("/v1/recall", json={"query": "rate"})
        assert r15.status_code == 200 and r15.json()["items"] == []
        assert SECRET not in r15.text
        assert not [b for b in bodies if SECRET in b], "ATLAS-CONF-7Q3 reached u-ben"
        # 16: a grant binds the next request, no restart
        r = run_cli(data, "token", "grant", "--user", "u-ben", "--project", "atlas", "--read-only")
        assert r.returncode == 0
        r16 = ben.get(f"/v1/pages/{RATES}")
        assert r16.status_code == 200 and SECRET in r16.text  # the marker was really there
        for x in cl.values():
            x.close()


# --------------------------------------------------------------------------------------
# C41: revocation takes effect at once; tokens and grants are audited
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["revoke", "ungrant"])
def test_c41_revocation_binds_at_once(tmp_path: Path, variant: str) -> None:
    data = tmp_path / "data"
    assert run_cli(data, "token", env=ENV).returncode == 0
    eve = make_token(data, "u-eve", None, "atlas", here=True)
    env = {**ENV, "WIKI_MEMORY_AUDIT_READS": "1"}
    (data / "wiki" / "projects" / "atlas" / "notes").mkdir(parents=True)
    (data / "wiki" / RATES).write_text("# Rates\n\nthe day rate is 640\n")
    (data / "wiki" / "notes").mkdir()
    (data / "wiki" / "notes" / "team.md").write_text("# Team\n\nthe team rate card\n")
    # the app in this process: the tokens change through the command, as on a server
    with AppServer(data, env=env) as srv:
        m = McpRaw(srv.url, eve, via=http(srv))
        ans, text = m.call("memory_recall", {"query": "rate"})
        assert ans == "ok" and RATES in text
        web = As(srv, eve)
        assert web.get("/search", params={"q": "rate"}).status_code == 200
        if variant == "revoke":
            r = run_cli(data, "token", "revoke", "--id", token_id(eve))
            assert r.returncode == 0 and r.stdout.strip() == f"revoked {token_id(eve)}  u-eve"
        else:
            r = run_cli(data, "token", "ungrant", "--user", "u-eve", "--project", "atlas")
            assert r.returncode == 0, r.stderr
        t0 = time.monotonic()
        answers = {
            "recall": m.call("memory_recall", {"query": "rate"}),
            "read": m.call("page_read", {"path": RATES}),
            "write": m.call("page_write", {"path": "projects/atlas/notes/e.md", "text": "# e\n"}),
        }
        web_search = web.get("/search", params={"q": "rate"}, follow_redirects=False)
        fresh = web.get(f"/v1/pages/{RATES}")
        assert time.monotonic() - t0 < 10
        if variant == "revoke":
            assert {k: v[0] for k, v in answers.items()} == dict.fromkeys(answers, "401")
            assert web_search.status_code in (303, 401) and fresh.status_code == 401
        else:
            assert answers["recall"][0] == "ok" and RATES not in answers["recall"][1]
            assert answers["read"][0] == "404" and answers["write"][0] == "404"
            assert fresh.status_code == 404
            assert web.get("/v1/pages/notes/team.md").status_code == 200
        web.close()
    listing = run_cli(data, "token", "list").stdout
    assert eve not in listing
    if variant == "revoke":
        assert "u-eve" not in listing
    else:  # id, user, role, created, last used, grants; never the token
        row = next(ln for ln in listing.splitlines() if "u-eve" in ln)
        assert token_id(eve) in row and "created 20" in row and "used 20" in row, row
    for f in data.rglob("*"):
        if f.is_file():
            assert eve.encode() not in f.read_bytes(), f
    eve_lines = [
        a for a in audit_lines(data) if a["user"] == "u-eve" or a.get("subject") == "u-eve"
    ]
    ops = [(a["op"], a["result"]) for a in eve_lines]
    first_recall = ops.index(("recall", "ok"))
    change = ops.index(("token.revoke", "ok") if variant == "revoke" else ("ungrant", "ok"))
    assert first_recall < change, ops
    after = eve_lines[change + 1 :]
    if variant == "revoke":
        assert {a["face"] for a in after if a["result"] == "revoked_token"} >= {"mcp", "http"}
    else:
        assert ("page.write", "not_found") in [(a["op"], a["result"]) for a in after]
    assert all(a.get("token_id") in (None, token_id(eve)) for a in eve_lines)
    # a restart keeps the audit log and the revocation
    with AppServer(data, env=env) as srv:
        r = As(srv, eve).get(f"/v1/pages/{RATES}")
        assert r.status_code == (401 if variant == "revoke" else 404)
    assert len(audit_lines(data)) >= len(eve_lines)
