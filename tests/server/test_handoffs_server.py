"""Handoffs and the brief over real server processes: claim once under 50 concurrent
claimers (threads and CLI processes), C30, a SIGKILL between a claim's page write and its
commit, leases, the A → B → C hand-over across harnesses, no false automatic handoffs,
personal handoffs, and brief budgets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from appkit import AppServer, http
from clikit import run_cli_here
from dulwich.object_store import tree_lookup_path
from dulwich.repo import Repo
from serverproc import ServerProcess
from support import shared_path, wait_for

from wiki_memory.auth import TokenStore
from wiki_memory.recall.tokens import count_tokens
from wiki_memory.wiki.page import parse_page

# the tier is per test here: most need real processes, the lease test does not


def cli(data_dir: Path, *args: str, env: dict[str, str] | None = None, **kw):
    return subprocess.Popen(
        [sys.executable, "-m", "wiki_memory.cli.main", "--data-dir", str(data_dir), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "WIKI_MEMORY_HOME": str(data_dir), **(env or {})},
        **kw,
    )


#: the projects the handoff tests use: every test user holds a write grant on each
HANDOFF_PROJECTS = ["race", "c30", "budget", "crash", "errs", "lease", "lease2", "private"]


def token_for(srv: ServerProcess | AppServer, user: str) -> dict[str, str]:
    tok = TokenStore(srv.data_dir / "auth").create(user, projects=HANDOFF_PROJECTS)
    return {"Authorization": f"Bearer {tok}"}


def post(srv: ServerProcess | AppServer, path: str, body: dict, headers: dict | None = None):
    return http(srv).post(srv.url + path, json=body, headers=headers or srv.headers, timeout=60)


def get(srv: ServerProcess | AppServer, path: str, headers: dict | None = None, **kw):
    return http(srv).get(srv.url + path, headers=headers or srv.headers, timeout=60, **kw)


def known(data_dir: Path, *projects: str) -> None:
    """Projects the wiki knows (their folders), as earlier sessions would leave them: an
    explicit project must name one."""
    for name in projects:
        (data_dir / "wiki" / "projects" / name).mkdir(parents=True, exist_ok=True)


def create(srv: ServerProcess | AppServer, headers: dict | None = None, **body) -> dict:
    known(srv.data_dir, str(body.get("project", "proj")))
    r = post(srv, "/v1/handoffs", {"project": "proj", "title": "Fix it", **body}, headers)
    assert r.status_code == 201, r.text
    return r.json()["handoff"]


def status_in(blob: bytes | None, path: str) -> str | None:
    return None if blob is None else parse_page(blob, path).metadata.get("status")


def claim_commits(wiki: Path, path: str) -> int:
    """Commits in which the page went from not claimed to claimed."""
    repo = Repo(str(wiki))
    try:
        n = 0
        for entry in repo.get_walker(paths=[path.encode()]):
            c = entry.commit

            def blob_of(tree_id):
                try:
                    _, sha = tree_lookup_path(repo.object_store.__getitem__, tree_id, path.encode())
                except KeyError:
                    return None
                return repo.object_store[sha].data

            now = status_in(blob_of(c.tree), path)
            before = status_in(blob_of(repo[c.parents[0]].tree), path) if c.parents else None
            if now == "claimed" and before != "claimed":
                n += 1
        return n
    finally:
        repo.close()


def head_blob(wiki: Path, path: str) -> bytes | None:
    repo = Repo(str(wiki))
    try:
        tree = repo[repo.head()].tree
        try:
            _, sha = tree_lookup_path(repo.object_store.__getitem__, tree, path.encode())
        except KeyError:
            return None
        return repo.object_store[sha].data
    finally:
        repo.close()


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    data = tmp_path_factory.mktemp("handoffs") / "data"
    s = ServerProcess(data, env={"WIKI_MEMORY_COMMIT_DELAY_SECONDS": "0.05"})
    s.start()
    yield s
    s.stop()


# --------------------------------------------------------------------------- claim once


@pytest.mark.process
def test_fifty_claimers_threads_and_cli_processes_twenty_times(srv):
    """Each round: 47 HTTP threads (5 users) + 3 CLI processes claim one handoff at once."""
    users = [token_for(srv, f"racer{i}") for i in range(5)]
    started = time.monotonic()
    # no kept-alive connections: a round under load can outlast the server's keep-alive
    # timeout, and a pooled connection the server closes as the next round reuses it is
    # dropped by the client (RemoteProtocolError), a race of the test's pool, not of claims
    limits = httpx.Limits(max_connections=60, max_keepalive_connections=0)
    with httpx.Client(base_url=srv.url, timeout=60, limits=limits) as c:
        for rnd in range(20):
            h = create(srv, project="race", title=f"round {rnd}")
            hid = h["id"]
            procs = [
                cli(srv.data_dir, "handoff", "claim", hid, "--session", f"cli-{rnd}-{k}")
                for k in range(3)
            ]
            time.sleep(0.25)  # the CLI processes are starting up: fire the threads with them
            barrier = threading.Barrier(47)
            results: list[tuple[int, str, str]] = []

            def claim(
                i: int,
                hid: str = hid,
                rnd: int = rnd,
                barrier: threading.Barrier = barrier,
                results: list = results,
            ) -> None:
                barrier.wait()
                try:
                    r = c.post(
                        f"/v1/handoffs/{hid}/claim",
                        json={"harness": "codex", "session_id": f"t-{rnd}-{i}"},
                        headers=users[i % 5],
                    )
                except httpx.HTTPError as exc:  # named in the assertion, not lost
                    results.append((-1, repr(exc), f"t-{rnd}-{i}"))
                    return
                results.append((r.status_code, r.text, f"t-{rnd}-{i}"))

            threads = [threading.Thread(target=claim, args=(i,)) for i in range(47)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for k, p in enumerate(procs):
                out, err = p.communicate(timeout=60)
                code = {0: 200, 3: 409}.get(p.returncode, p.returncode)
                results.append((code, out + err, f"cli-{rnd}-{k}"))
            wins = [r for r in results if r[0] == 200]
            assert len(wins) == 1, [r[:2] for r in results if r[0] not in (200, 409)]
            winner = wins[0][2]
            losses = [r for r in results if r[0] == 409]
            assert len(losses) == 49, [r for r in results if r[0] not in (200, 409)]
            assert all(f"session {winner}" in r[1] for r in losses), losses[0][1]
            shown = get(srv, f"/v1/handoffs/{hid}").json()["handoff"]
            assert shown["status"] == "claimed" and shown["claimed_session"] == winner
    wiki = srv.data_dir / "wiki"
    for n in range(1, 21):
        path = f"projects/race/handoffs/H-{n:04d}.md"
        if (wiki / path).exists():
            assert claim_commits(wiki, path) == 1, path
    elapsed = time.monotonic() - started
    print(f"20 rounds of 50 claimers: {elapsed:.1f} s")


@pytest.mark.process
def test_c30_eight_agents_one_claim(srv, shared):
    spec = json.loads((shared / "cases" / "inputs" / "C30.json").read_text())
    agents = {f["agent"]: token_for(srv, f["agent"]) for f in spec["fire_together"]}
    agents["agent-a"] = token_for(srv, "agent-a")
    agents["agent-j"] = token_for(srv, "agent-j")
    h = create(srv, agents["agent-a"], project="c30", title="H-0001 of C30")
    hid = h["id"]
    env_i = {"WIKI_MEMORY_TOKEN": agents["agent-i"]["Authorization"].split()[1]}
    results: dict[str, tuple[int, str]] = {}
    barrier = threading.Barrier(len(spec["fire_together"]) - 1)

    def fire(agent: str) -> None:
        barrier.wait()
        # agents g and h would use MCP's claim_handoff, which calls this same service;
        # they go over HTTP here
        r = post(
            srv, f"/v1/handoffs/{hid}/claim", {"harness": agent, "session_id": agent}, agents[agent]
        )
        results[agent] = (r.status_code, r.text)

    proc = cli(
        srv.data_dir,
        "handoff",
        "claim",
        hid,
        "--harness",
        "cli",
        "--session",
        "agent-i",
        env=env_i,
    )
    time.sleep(0.3)
    threads = [
        threading.Thread(target=fire, args=(f["agent"],))
        for f in spec["fire_together"]
        if f["agent"] != "agent-i"
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out, err = proc.communicate(timeout=60)
    results["agent-i"] = ({0: 200, 3: 409}.get(proc.returncode, proc.returncode), out + err)
    wins = [a for a, (code, _) in results.items() if code == 200]
    assert len(wins) == 1, results
    winner = wins[0]
    for a, (code, text) in results.items():
        if a != winner:
            assert code == 409 and winner in text, (a, code, text)
    body = get(srv, f"/v1/handoffs/{hid}").json()["handoff"]
    assert body["claimed_by"] == winner and body["status"] == "claimed"
    wiki = srv.data_dir / "wiki"
    path = body["path"]
    assert claim_commits(wiki, path) == 1
    before = len(list(Repo(str(wiki)).get_walker(paths=[path.encode()])))
    # the winner's repeat claim: 200, no new commit
    w_harness = "cli" if winner == "agent-i" else winner
    r = post(
        srv,
        f"/v1/handoffs/{hid}/claim",
        {"harness": w_harness, "session_id": winner},
        agents[winner],
    )
    assert r.status_code == 200 and r.json()["repeat"] is True
    time.sleep(0.3)
    assert len(list(Repo(str(wiki)).get_walker(paths=[path.encode()]))) == before
    r = post(srv, f"/v1/handoffs/{hid}/complete", {"note": "done"}, agents[winner])
    assert r.status_code == 200 and r.json()["handoff"]["status"] == "done"
    r = post(srv, f"/v1/handoffs/{hid}/claim", {"session_id": "j"}, agents["agent-j"])
    assert r.status_code == 409 and r.json()["error"] == "done" and "done" in r.json()["message"]
    assert claim_commits(wiki, path) == 1


# --------------------------------------------------------------------------- crash


@pytest.mark.process
def test_sigkill_between_claim_write_and_commit(tmp_path):
    data = tmp_path / "data"
    s = ServerProcess(data, env={"WIKI_MEMORY_COMMIT_DELAY_SECONDS": "0.05"}).start()
    try:
        hid = create(s, project="crash", title="survive a crash")["id"]
        path = f"projects/crash/handoffs/{hid}.md"
        wiki = data / "wiki"
        assert status_in(head_blob(wiki, path), path) == "open"
        # an outside git holds the index: the claim's page is written, its commit waits
        lock = wiki / ".git" / "index.lock"
        lock.write_bytes(b"")
        box: dict = {}

        def claim():
            try:
                box["r"] = post(
                    s, f"/v1/handoffs/{hid}/claim", {"harness": "codex", "session_id": "k1"}
                )
            except httpx.HTTPError as exc:
                box["err"] = exc

        t = threading.Thread(target=claim)
        t.start()
        # the claim's page write is the event: waited on generously (a busy machine
        # takes seconds to answer; while the lock is held no commit happens, however long)
        wait_for(
            lambda: b"status: claimed" in (wiki / path).read_bytes(),
            timeout=120,
            what="the claim's page written",
        )
        s.kill()
        t.join(timeout=30)
        lock.unlink()
        # killed after the page write and before its commit
        assert status_in(head_blob(wiki, path), path) == "open"
        assert status_in((wiki / path).read_bytes(), path) == "claimed"
        s = ServerProcess(data, env={"WIKI_MEMORY_COMMIT_DELAY_SECONDS": "0.05"}).start()
        # after restart: the page, git and every brief agree
        assert status_in(head_blob(wiki, path), path) == "claimed"
        h = get(s, f"/v1/handoffs/{hid}").json()["handoff"]
        assert (h["status"], h["claimed_session"]) == ("claimed", "k1")
        other = post(
            s, "/v1/brief", {"project": "crash", "harness": "codex", "session_id": "k2"}
        ).json()
        assert hid not in json.dumps(other["parts"]) and not other["offers"]
        mine = post(
            s, "/v1/brief", {"project": "crash", "harness": "codex", "session_id": "k1"}
        ).json()
        assert [p["kind"] for p in mine["parts"] if p.get("id") == hid] == ["held"]
        r = post(s, f"/v1/handoffs/{hid}/claim", {"harness": "codex", "session_id": "k1"})
        assert r.status_code == 200 and r.json()["repeat"] is True
        r = post(s, f"/v1/handoffs/{hid}/claim", {"harness": "codex", "session_id": "k2"})
        assert r.status_code == 409 and "session k1" in r.json()["message"]
        assert claim_commits(wiki, path) == 1
        st = subprocess.run(
            ["git", "status", "--porcelain"], cwd=wiki, capture_output=True, text=True
        )
        if st.returncode == 0:
            assert st.stdout == ""
    finally:
        s.stop()


# --------------------------------------------------------------------------- leases


@pytest.mark.fast
def test_an_unconfirmed_offer_reopens_and_a_late_claim_gets_409(tmp_path):
    data = tmp_path / "data"
    with AppServer(data, commit_delay_seconds=0.05) as s:
        # the handoffs' clock, moved past the lease instead of sleeping through it
        svc = s.memory.handoffs
        ahead = [0.0]
        svc.clock = lambda: time.time() + ahead[0]
        yann = token_for(s, "yann")  # another user: the owner's own sessions are one claimant
        hid = create(s, project="lease", title="lease me")["id"]
        x = post(s, "/v1/brief", {"project": "lease", "harness": "codex", "session_id": "X"}).json()
        assert [o["id"] for o in x["offers"]] == [hid] and hid in x["text"]
        listed = get(s, "/v1/handoffs", params={"project": "lease"}).json()["handoffs"]
        assert listed[0]["status"] == "offered" and listed[0]["offered_to"]["session"] == "X"
        y = post(
            s, "/v1/brief", {"project": "lease", "harness": "claude-code", "session_id": "Y"}, yann
        ).json()
        assert y["offers"] == [] and hid not in y["text"]
        r = post(
            s, f"/v1/handoffs/{hid}/claim", {"harness": "claude-code", "session_id": "Y"}, yann
        )
        assert (
            r.status_code == 409
            and r.json()["error"] == "offered"
            and "session X" in r.json()["message"]
        )
        ahead[0] = svc.config.lease_seconds + 1  # X never confirms
        assert get(s, f"/v1/handoffs/{hid}").json()["handoff"]["status"] == "open"
        # X's offer code died with the offer: it answers like a missing handoff
        code = x["offers"][0]["code"]
        assert post(s, f"/v1/handoffs/{code}/claim", {}).status_code == 404
        y = post(
            s, "/v1/brief", {"project": "lease", "harness": "claude-code", "session_id": "Y"}, yann
        ).json()
        assert [o["id"] for o in y["offers"]] == [hid]
        r = post(
            s, f"/v1/handoffs/{hid}/claim", {"harness": "claude-code", "session_id": "Y"}, yann
        )
        assert r.status_code == 200
        r = post(s, f"/v1/handoffs/{hid}/claim", {"harness": "codex", "session_id": "X"})
        assert r.status_code == 409 and r.json()["error"] == "claimed"
        assert r.json()["holder"] == {"user": "yann", "harness": "claude-code", "session": "Y"}
        # two sessions starting together with two open handoffs get one each
        a = create(s, project="lease2", title="one")["id"]
        b = create(s, project="lease2", title="two")["id"]
        out: dict[str, dict] = {}

        def start(sid: str) -> None:
            out[sid] = post(
                s,
                "/v1/brief",
                {"project": "lease2", "harness": "codex", "session_id": sid, "max_offers": 1},
            ).json()

        ts = [threading.Thread(target=start, args=(sid,)) for sid in ("P", "Q")]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        got = sorted(o["id"] for sid in ("P", "Q") for o in out[sid]["offers"])
        assert got == sorted([a, b]) and all(len(out[sid]["offers"]) == 1 for sid in ("P", "Q"))


# --------------------------------------------------------------------------- end to end


def hook_event(harness: str, name: str, session_id: str, i: int, **over) -> dict:
    folder = {"claude-code": "claude-code", "codex": "codex"}[harness]
    payload = json.loads(shared_path("data", "hooks", folder, f"{name}.json").read_text())
    payload["session_id"] = session_id
    payload.update(over)
    return {
        "harness": harness,
        "event": name,
        "session_id": session_id,
        "cwd": payload["cwd"],
        "event_id": f"{session_id}-{i}",
        "ts": f"2026-11-30T10:{i:02d}:00Z",
        "payload": payload,
    }


@pytest.mark.process
def test_a_fails_b_takes_it_up_c_is_not_offered_it(srv):
    # A (claude-code) ends with a failing test run
    for i, name in enumerate(
        ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUseFailure", "SessionEnd"]
    ):
        over = {"tool_use_id": "toolu_0003"} if name == "PreToolUse" else {}
        r = post(srv, "/v1/observations", hook_event("claude-code", name, "e2e-A", i, **over))
        assert r.status_code == 202, r.text

    def a_page():
        pages = get(srv, "/v1/pages", params={"project": "project", "kind": "session"}).json()
        return [p for p in pages["pages"] if p["path"].endswith(".md")]

    def auto():
        hs = get(srv, "/v1/handoffs", params={"project": "project"}).json()["handoffs"]
        return [h for h in hs if h["auto"] and h["status"] == "open"]

    hs = wait_for(auto)
    assert len(hs) == 1
    h = hs[0]
    page = get(srv, f"/v1/pages/{h['session_page']}").json()
    assert page["metadata"]["session_id"] == "e2e-A" and page["metadata"]["status"] == "ended"
    full = get(srv, f"/v1/handoffs/{h['id']}").json()["handoff"]
    assert f"[[{h['session_page'].removesuffix('.md')}|" in full["content"]
    assert "test_rounding" in full["sections"]["what_failed"]
    assert "pytest -q tests/test_billing.py" in full["sections"]["what_failed"]
    assert a_page()
    # B (codex, same project) starts: its brief holds the handoff
    assert (
        post(srv, "/v1/observations", hook_event("codex", "SessionStart", "e2e-B", 0)).status_code
        == 202
    )
    b = post(
        srv, "/v1/brief", {"project": "project", "harness": "codex", "session_id": "e2e-B"}
    ).json()
    assert [o["id"] for o in b["offers"]] == [h["id"]]
    assert h["id"] in b["text"] and "test_rounding" in b["text"]
    assert count_tokens(b["text"]) <= 1500
    r = post(srv, f"/v1/handoffs/{h['id']}/claim", {"harness": "codex", "session_id": "e2e-B"})
    assert r.status_code == 200 and r.json()["handoff"]["claimed_harness"] == "codex"
    # C's brief no longer offers it
    c = post(
        srv, "/v1/brief", {"project": "project", "harness": "gemini-cli", "session_id": "e2e-C"}
    ).json()
    assert c["offers"] == [] and h["id"] not in c["text"]
    # and B's own brief, on resume, shows it held
    b2 = post(
        srv, "/v1/brief", {"project": "project", "harness": "codex", "session_id": "e2e-B"}
    ).json()
    assert [p["kind"] for p in b2["parts"] if p.get("id") == h["id"]] == ["held"]


@pytest.mark.process
def test_the_clean_claude_code_session_opens_no_handoff(srv):
    names = [
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "Notification",
        "SubagentStop",
        "PreCompact",
        "Stop",
        "SessionEnd",
    ]
    for i, name in enumerate(names):
        ev = hook_event("claude-code", name, "clean-1", i)
        ev["project"] = "clean"
        assert post(srv, "/v1/observations", ev).status_code == 202

    def ended():
        pages = get(srv, "/v1/pages", params={"project": "clean", "kind": "session"}).json()[
            "pages"
        ]
        if not pages:
            return False
        return get(srv, f"/v1/pages/{pages[0]['path']}").json()["metadata"].get("status") == "ended"

    wait_for(ended)
    time.sleep(0.3)
    assert get(srv, "/v1/handoffs", params={"project": "clean"}).json()["handoffs"] == []
    assert not (srv.data_dir / "wiki" / "projects" / "clean" / "handoffs").exists()


# --------------------------------------------------------------------------- scope


@pytest.mark.process
def test_personal_handoffs_never_reach_another_token(srv):
    proc = run_cli_here(srv.data_dir, "token", "create", "--user", "bob", "--project", "private")
    assert proc.returncode == 0, proc.stderr
    bob = {"Authorization": f"Bearer {proc.stdout.strip()}"}
    carol = token_for(srv, "carol")
    (srv.data_dir / "wiki" / "projects" / "private").mkdir(parents=True, exist_ok=True)
    h = create(
        srv,
        bob,
        project="private",
        title="Quetzal zeppelin refactor",
        visibility="personal",
        where_we_left_off="quetzal zeppelin half done",
    )
    assert h["visibility"] == "personal" and h["path"].startswith("people/bob/")
    hid = h["id"]
    # the owner sees it everywhere
    assert [x["id"] for x in get(srv, "/v1/handoffs", bob).json()["handoffs"] if x["id"] == hid]
    assert get(srv, f"/v1/handoffs/{hid}", bob).status_code == 200
    rb = post(
        srv, "/v1/brief", {"project": "private", "harness": "codex", "session_id": "b"}, bob
    ).json()
    assert hid in rb["text"]
    post(srv, f"/v1/handoffs/{hid}/release", {}, bob)  # (not claimed: 409, no change)
    rec = post(srv, "/v1/recall", {"query": "quetzal zeppelin"}, bob).json()
    assert any("quetzal" in json.dumps(i).lower() for i in rec["items"])
    # nobody else does: list, show, claim, brief, recall
    for who in (carol, srv.headers):
        assert hid not in json.dumps(get(srv, "/v1/handoffs", who).json())
        assert hid not in json.dumps(
            get(srv, "/v1/handoffs", who, params={"project": "private"}).json()
        )
        r = get(srv, f"/v1/handoffs/{hid}", who)
        assert r.status_code == 404 and "quetzal" not in r.text.lower()
        assert post(srv, f"/v1/handoffs/{hid}/claim", {}, who).status_code == 404
        rc = post(
            srv, "/v1/brief", {"project": "private", "harness": "codex", "session_id": "c"}, who
        )
        assert rc.status_code == 200, rc.text
        assert "quetzal" not in rc.text.lower() and hid not in rc.text
        rr = post(srv, "/v1/recall", {"query": "quetzal zeppelin", "budget_tokens": 5000}, who)
        assert rr.status_code == 200 and "quetzal" not in rr.text.lower()
    # bob's session "b" was offered it in its brief: it confirms
    assert (
        post(
            srv, f"/v1/handoffs/{hid}/claim", {"harness": "codex", "session_id": "b"}, bob
        ).status_code
        == 200
    )


# --------------------------------------------------------------------------- brief


@pytest.mark.process
def test_brief_budgets_over_http(srv):
    for i in range(4):
        create(
            srv,
            project="budget",
            title=f"Budget handoff {i}",
            where_we_left_off="Parser half way; grammar pending. " * 5,
            next_steps=["finish", "test", "document"],
        )
    wiki = srv.data_dir / "wiki"
    (wiki / "projects" / "budget" / "notes").mkdir(parents=True, exist_ok=True)
    (wiki / "projects" / "budget" / "notes" / "rules.md").write_text(
        "---\ntitle: Rules\npinned: true\n---\n\nAlways run the tests before a commit.\n"
    )
    wait_for(
        lambda: "Rules" in post(srv, "/v1/brief", {"project": "budget", "budget_tokens": 1500}).text
    )
    for budget in (0, 50, 200, 1500):
        r = post(
            srv,
            "/v1/brief",
            {
                "project": "budget",
                "harness": "codex",
                "session_id": f"bud-{budget}",
                "budget_tokens": budget,
            },
        )
        assert r.status_code == 200, r.text
        b = r.json()
        assert count_tokens(b["text"]) <= budget and b["used_tokens"] == count_tokens(b["text"])
        assert b["budget_tokens"] == budget
        if budget < 1500:
            assert b["omitted"] and all(o["reason"] == "budget" for o in b["omitted"])
        if budget == 0:
            assert b["text"] == ""
    unknown = post(srv, "/v1/brief", {"project": "nothing-here", "session_id": "s"})
    assert unknown.status_code == 404 and unknown.json()["error"] == "unknown_project"
    assert unknown.json()["field"] == "project" and "budget" in unknown.json()["projects"]
    known(srv.data_dir, "nothing-here")
    empty = post(srv, "/v1/brief", {"project": "Nothing-Here", "session_id": "s"}).json()
    assert empty["text"] == "" and empty["parts"] == []
    assert post(srv, "/v1/brief", {"project": "x", "budget_tokens": -1}).status_code == 400
    assert post(srv, "/v1/brief", {"budget_tokens": 10}).json()["field"] == "project"
    p = run_cli_here(srv.data_dir, "brief", "--project", "budget", "--budget", "200")
    out, err = p.stdout, p.stderr
    assert p.returncode == 0 and count_tokens(out) <= 200 and "/200 tokens" in err


@pytest.mark.process
def test_http_errors_and_cli_exit_codes(srv):
    known(srv.data_dir, "p")
    assert post(srv, "/v1/handoffs", {"title": "x"}).json()["field"] == "project"
    assert post(srv, "/v1/handoffs", {"project": "p"}).json()["field"] == "title"
    r = post(srv, "/v1/handoffs", {"project": "p", "title": "x", "visibility": "secret"})
    assert r.status_code == 400
    r = post(srv, "/v1/handoffs", {"project": "../p", "title": "x"})
    assert r.status_code == 400
    assert get(srv, "/v1/handoffs/H-9999").status_code == 404
    assert get(srv, "/v1/handoffs/..%2Fetc").status_code in (400, 404, 405)
    assert get(srv, "/v1/handoffs", params={"status": "weird"}).status_code == 400
    hid = create(srv, project="errs")["id"]
    r = httpx.post(srv.url + f"/v1/handoffs/{hid}/claim", content=b"{nope", headers=srv.headers)
    assert r.status_code == 400 and r.json()["error"] == "bad_json"
    assert post(srv, f"/v1/handoffs/{hid}/explode", {}).status_code == 404
    dora = token_for(srv, "dora")
    r = post(srv, f"/v1/handoffs/{hid}/cancel", {}, dora)
    assert r.status_code == 403
    # CLI (in this process: its messages and exit statuses are the point): create, show,
    # claim (conflict exits 3), complete, list
    p = run_cli_here(
        srv.data_dir,
        "handoff",
        "create",
        "--project",
        "errs",
        "--title",
        "From the CLI",
        "--next",
        "one",
        "--json",
    )
    assert p.returncode == 0, p.stderr
    cid = json.loads(p.stdout)["id"]
    p = run_cli_here(srv.data_dir, "handoff", "claim", cid, "--session", "me")
    assert p.returncode == 0
    p = run_cli_here(srv.data_dir, "handoff", "claim", cid, "--session", "other")
    assert p.returncode == 3 and "session me" in p.stderr and "Traceback" not in p.stderr
    p = run_cli_here(srv.data_dir, "handoff", "complete", cid, "--note", "all good")
    assert p.returncode == 0
    p = run_cli_here(srv.data_dir, "handoff", "show", cid)
    assert "done" in p.stdout and "all good" in p.stdout
    p = run_cli_here(srv.data_dir, "handoff", "list", "--project", "errs", "--status", "done")
    assert cid in p.stdout and hid not in p.stdout
    p = run_cli_here(srv.data_dir, "handoff", "show", "H-9999")
    assert p.returncode == 4
