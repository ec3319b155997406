"""The shared failure case C68 as its input sets it (docs/operations.md, "Backup and
restore", "Export and import"): a source server S with two users, projects atlas and
borealis and 300 pages (a forgotten page F1, a superseded pair N1 → N2, a pinned page P1,
u-ana's personal pages, handoffs open, claimed by u-ben with an expiry, done and offered,
an open session with 12 events not compiled, a page with a BOM and CRLF, a file that is
not UTF-8, an image attachment, ``.obsidian/`` settings, a remote-tracking ref, 50 audit
lines), then:

- A: export → import into an empty D1;
- B: backup, plain and encrypted, while S takes 5 capture events a second → restore
  each into an empty D2;
- C: restore into a directory that is not empty, a backup cut short by 1 MiB, a wrong
  passphrase: non-zero exit, target untouched, no "restored" line;
- D: the export imported into S itself and into D1 again: all identical, no commit.

Compared: file bytes and times, page states, pins, handoff states and holders, recall of
20 fixed queries (ids in order), page list counts, since/until, the brief, and on D2 also
as_of, tokens (u-ana's and u-ben's work, see the same), the audit log, git refs, the
spool compiled at start and every event acknowledged before the backup began.

Vectors (the optional extra) are not installed in the test environment; recall here is
the text ranking. An offer is a lease kept in memory (docs/handoffs.md): after any
restart, the source's own included, the offered handoff is open again."""

from __future__ import annotations

import json
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from appkit import AppServer, http
from clikit import run_cli_here
from dulwich.repo import Repo
from serverproc import ServerProcess
from support import files_of, refs_of, run_cli, wait_for
from teamkit import make_token

pytestmark = pytest.mark.process

PASS = {"WIKI_MEMORY_BACKUP_PASSPHRASE": "correct horse battery staple"}
NOW = "2026-12-01T12:00:00Z"  # recall's clock, so recency weighs the same everywhere
WORDS = (
    "harbor lantern cobalt meadow falcon quartz willow ember glacier saffron "
    "orchid canyon tundra beacon marble cedar dune lagoon pebble thistle"
).split()
QUERIES = [
    *WORDS[:12],
    "harbor lantern",
    "cobalt meadow falcon",
    "quartz willow",
    "ember glacier saffron",
    "deploy kestrel",
    "ana secret garden",
    "windows lines",
    "latin one bytes",
]
WINDOWS = [("2021-01-01", "2021-12-31"), ("2022-01-01", "2022-12-31"),
           ("2023-06-01", "2024-06-30"), ("2019-01-01", "2020-12-31")]  # fmt: skip
OLD = 1_600_000_000.0  # 2020-09-13: the file time of the pages without frontmatter times


def page_text(i: int, rng: random.Random) -> tuple[str, float | None]:
    """Page ``i`` of 300: its text and, when its frontmatter has no times, its file time."""
    words = " ".join(rng.sample(WORDS, 3))
    body = (
        f"# Note {i}\n\nThis note is about {words}.\n\n## More\n\n{rng.choice(WORDS)} detail {i}\n"
    )
    if i % 3 == 0:
        return body, OLD + i * 86400.0  # no frontmatter times: the file time counts
    year = 2021 + i % 4
    created = f"{year}-{1 + i % 12:02d}-{1 + i % 27:02d}T10:00:00Z"
    return f"---\ncreated: {created}\nupdated: {created}\n---\n{body}", None


def seed(wiki: Path) -> None:
    """The files a person put in the wiki before the server started (250 of the notes;
    the other 50 are written through the server, so 50 page writes are audited)."""
    rng = random.Random(68)
    for i in range(300):
        text, mtime = page_text(i, rng)
        if 250 <= i:
            continue
        p = wiki / "projects" / ("atlas" if i % 2 else "borealis") / "notes" / f"n{i:03d}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
        if mtime is not None:
            os.utime(p, (mtime, mtime))
    extra = {
        "projects/atlas/notes/bom.md":
            "\ufeff---\r\ntitle: Bom\r\n---\r\n# Bom\r\n\r\nwindows lines\r\n".encode(),
        "projects/atlas/notes/latin1.md": b"# Caf\xe9\n\nlatin one bytes\n",
        "projects/atlas/notes/f1.md": b"---\nid: f1\n---\n# F1\n\nobsolete ferret notes\n",
        "projects/atlas/notes/diagram.png": b"\x89PNG\r\n\x1a\n" + random.Random(1).randbytes(
            2 << 20),
        "people/u-ana/notes/garden.md": b"# Garden\n\nana secret garden plans\n",
        "people/u-ana/notes/more.md": b"# More\n\nana secret garden budget\n",
        ".obsidian/app.json": b'{"theme": "dark"}\n',
    }  # fmt: skip
    for rel, data in extra.items():
        (wiki / rel).parent.mkdir(parents=True, exist_ok=True)
        (wiki / rel).write_bytes(data)


def visible(wiki: Path) -> dict[str, bytes]:
    """Every file outside dot folders and session pages (what an export carries; a start
    compiles the pending sessions into pages of their own)."""
    return {
        rel: data
        for rel, data in files_of(wiki).items()
        if not any(part.startswith(".") for part in rel.split("/")) and "/sessions/" not in rel
    }


def mtimes(wiki: Path) -> dict[str, float]:
    return {rel: (wiki / rel).stat().st_mtime for rel in visible(wiki)}


def tokens(data: Path) -> dict[str, bytes]:
    """The token files (their hashes, roles and grants; lock files and the last-used
    times left out)."""
    return {
        rel: v
        for rel, v in files_of(data / "auth").items()
        if not rel.endswith(".lock") and rel != "last_used.json"
    }


def commits(wiki: Path) -> int:
    repo = Repo(str(wiki))
    try:
        return sum(1 for _ in repo.get_walker())
    finally:
        repo.close()


def post(srv: Any, path: str, body: dict[str, Any], token: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else srv.headers
    r = http(srv).post(srv.url + path, json=body, headers=headers, timeout=60)
    assert r.is_success, (path, r.status_code, r.text)
    return r.json()


def get(srv: Any, path: str, token: str | None = None, **params: Any) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else srv.headers
    r = http(srv).get(srv.url + path, params=params, headers=headers, timeout=60)
    assert r.is_success, (path, r.status_code, r.text)
    return r.json()


def ids(reply: dict[str, Any]) -> list[tuple[str, str]]:
    return [(i["id"], i["path"]) for i in reply["items"] if not i["id"].startswith("spool:")]


def brief_of(srv: Any, token: str | None, session: str) -> tuple[list[Any], list[str]]:
    """The brief of project atlas for ``session`` (harness codex): its parts (kind, path,
    title) in order, and the ids of the handoffs it offers (their codes are new each time)."""
    body = {"project": "atlas", "harness": "codex", "session_id": session}
    brief = post(srv, "/v1/brief", body, token)
    parts = [(p["kind"], p.get("path"), p.get("title")) for p in brief["parts"]]
    return parts, sorted(o["id"] for o in brief["offers"])


def lasting(brief: tuple[list[Any], list[str]]) -> list[Any]:
    """The parts of a brief that its pages alone decide: pins and the handoffs the
    session holds (offers are leases kept in memory, sessions pages compiled at start)."""
    return [p for p in brief[0] if p[0] in ("pinned", "held")]


def answers(data: Path, users: dict[str, str] | None, as_of: float | None) -> dict[str, Any]:
    """What a server over ``data`` answers to C68's questions; ``users``: u-ana's and
    u-ben's tokens (asked too: their tokens must work and see what they saw);
    ``as_of``: a moment to search the history at. The app runs in this process (its
    answers are the point); each call starts it afresh, as a restart does."""
    srv = AppServer(data).start()
    try:
        out: dict[str, Any] = {}
        for q in QUERIES:
            out[f"q:{q}"] = ids(post(srv, "/v1/recall", {"query": q, "now": NOW}))
        for since, until in WINDOWS:
            body = {"query": "note", "since": since, "until": until, "now": NOW,
                    "budget_tokens": 20000}  # fmt: skip
            out[f"window:{since}"] = sorted(p for _, p in ids(post(srv, "/v1/recall", body)))
        out["ferret"] = ids(post(srv, "/v1/recall", {"query": "obsolete ferret", "now": NOW}))
        for project in ("atlas", "borealis"):
            listed = get(srv, "/v1/pages", project=project, limit=1000)["pages"]
            out[f"pages:{project}"] = sorted((p["path"], p.get("state")) for p in listed)
            out[f"handoffs:{project}"] = sorted(
                (
                    h["title"],
                    h["status"],
                    h.get("claimed_by"),
                    h.get("claimed_at"),
                    h.get("expires"),
                )  # fmt: skip
                for h in get(srv, "/v1/handoffs", project=project)["handoffs"]
            )
        out["brief"] = brief_of(srv, None, "brief-check")
        if as_of is not None:
            body = {"query": "obsolete ferret", "as_of": as_of, "now": NOW}
            out["as_of:ferret"] = ids(post(srv, "/v1/recall", body))
            body = {"query": "harbor lantern", "as_of": as_of, "now": NOW}
            out["as_of:harbor"] = ids(post(srv, "/v1/recall", body))
        for user, token in (users or {}).items():
            for q in ("ana secret garden", "harbor lantern"):
                body = {"query": q, "now": NOW}
                out[f"{user}:{q}"] = ids(post(srv, "/v1/recall", body, token))
            out[f"{user}:brief"] = brief_of(srv, token, f"s-{user}")
            out[f"{user}:handoffs"] = sorted(
                (h["title"], h["status"], h.get("claimed_by"))
                for h in get(srv, "/v1/handoffs", token, project="atlas")["handoffs"]
            )
        return out
    finally:
        srv.stop()


class Load:
    """5 capture events a second into one session, each numbered; ``acked`` holds the
    numbers answered 202 with the time of the answer."""

    def __init__(self, srv: ServerProcess) -> None:
        self.srv, self.acked = srv, list[tuple[int, float]]()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            ev = {"harness": "codex", "event": "UserPromptSubmit", "session_id": "load-1",
                  "cwd": "/x/borealis", "payload": {"prompt": f"load tick {n:05d} done"}}  # fmt: skip
            r = httpx.post(self.srv.url + "/v1/observations", json=ev, headers=self.srv.headers)
            if r.status_code == 202:
                self.acked.append((n, time.time()))
            n += 1
            self.stop.wait(0.2)

    def before(self, t: float) -> list[int]:
        return [n for n, at in self.acked if at < t]


def backup_under_load(
    load: Load, data: Path, target: Path, env: dict[str, str] | None
) -> list[int]:
    """A backup of ``data`` taken while ``load`` runs; the events acknowledged before it began."""
    time.sleep(1.0)
    began = time.time()
    out = run_cli(data, "backup", str(target), *(["--encrypt"] if env else []), env=env)
    assert out.returncode == 0, out.stderr
    acked = load.before(began)
    assert acked
    return acked


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("c68")
    src = tmp / "s"
    wiki = src / "wiki"
    seed(wiki)
    ana = make_token(src, "u-ana", "member", "atlas", "borealis", here=True)
    ben = make_token(src, "u-ben", "member", "atlas", here=True)
    srv = ServerProcess(src).start()
    w: dict[str, Any] = {"tmp": tmp, "src": src, "users": {"u-ana": ana, "u-ben": ben}}
    try:
        rng = random.Random(68)
        for i in range(300):
            text, _ = page_text(i, rng)
            if i < 250:
                continue
            r = httpx.put(
                f"{srv.url}/v1/pages/projects/{'atlas' if i % 2 else 'borealis'}/notes/n{i:03d}.md",
                json={"text": text}, headers=srv.headers, timeout=60,
            )  # fmt: skip
            assert r.status_code == 201, r.text
        n1 = post(srv, "/v1/remember", {"text": "deploy uses kestrel one", "project": "atlas"})
        time.sleep(1.1)
        w["before_forget"] = time.time()
        time.sleep(1.1)
        post(srv, "/v1/remember", {"text": "deploy uses kestrel two, not one",
                                   "project": "atlas", "supersedes": n1["path"]})  # fmt: skip
        w["n1"] = n1["path"]
        post(srv, "/v1/forget", {"path": "projects/atlas/notes/f1.md"})
        post(srv, "/v1/admin/pin", {"path": "projects/atlas/notes/n001.md", "pinned": True})
        hs = {}
        for name in ("H1", "H2", "H3", "H4"):
            body = {"project": "atlas", "title": f"{name} work", "next_steps": "go on"}
            if name == "H2":
                body["expires_in_seconds"] = 3600
            hs[name] = post(srv, "/v1/handoffs", body)["handoff"]["id"]
        post(
            srv,
            f"/v1/handoffs/{hs['H2']}/claim",
            {"harness": "codex", "session_id": "s-u-ben"},
            ben,
        )
        post(srv, f"/v1/handoffs/{hs['H3']}/claim", {"harness": "codex", "session_id": "s-own"})
        post(srv, f"/v1/handoffs/{hs['H3']}/complete", {"harness": "codex", "session_id": "s-own"})
        brief = post(srv, "/v1/brief", {"project": "atlas", "harness": "codex",
                                        "session_id": "s-u-ana"}, ana)  # fmt: skip
        assert brief.get("offers"), brief  # H1 and H4 offered to u-ana's session
        for k in range(12):
            ev = {"harness": "codex", "event": "UserPromptSubmit", "session_id": "open-12",
                  "cwd": "/x/atlas", "payload": {"prompt": f"pending heron step {k:02d}"}}  # fmt: skip
            r = httpx.post(srv.url + "/v1/observations", json=ev, headers=srv.headers)
            assert r.status_code == 202, r.text
        repo = Repo(str(wiki))
        try:
            repo.refs[b"refs/remotes/origin/main"] = repo.head()
        finally:
            repo.close()
        held = ("held", f"projects/atlas/handoffs/{hs['H2']}.md", "H2 work")
        # (the index the brief reads catches up with the claim within moments)
        wait_for(lambda: held in lasting(brief_of(srv, ben, "s-u-ben")), 30, "u-ben's claim")
        w["brief_before"] = {
            user: lasting(brief_of(srv, token, f"s-{user}")) for user, token in w["users"].items()
        }
        assert held in w["brief_before"]["u-ben"]
        assert ("pinned", "projects/atlas/notes/n001.md", "Note 1") in w["brief_before"]["u-ana"]
        audit = src / "logs" / "audit.jsonl"
        assert sum(1 for _ in audit.open()) >= 50
        # B: two backups while S takes 5 capture events a second
        load = Load(srv)
        load.thread.start()
        w["audit_before"] = audit.read_bytes()
        try:
            w["acked_plain"] = backup_under_load(load, src, tmp / "b.wmb", None)
            w["acked_sealed"] = backup_under_load(load, src, tmp / "b.wmb.enc", PASS)
        finally:
            load.stop.set()
            load.thread.join()
        w["audit_after"] = audit.read_bytes()
    finally:
        srv.stop()
    assert not any(b"heron" in v for v in files_of(wiki).values())  # still pending
    w["files"], w["visible"], w["mtimes"] = files_of(wiki), visible(wiki), mtimes(wiki)
    w["refs"], w["auth"] = refs_of(wiki), tokens(src)
    assert sum(rel.endswith(".md") for rel in w["visible"]) >= 300
    # A: the export, made while S is stopped
    export = tmp / "export.jsonl"
    out = run_cli_here(src, "export", str(export))
    assert out.returncode == 0, out.stderr
    w["export"], w["export_err"], w["commits"] = export, out.stderr, commits(wiki)
    w["want"] = answers(src, w["users"], w["before_forget"])
    return w


def test_c68_export_import_keeps_every_answer(world: dict[str, Any]) -> None:
    """D1: the pages byte for byte with their times, F1 still forgotten, N1 still
    superseded, P1 pinned in the brief, H2 claimed by u-ben, the same since/until sets,
    the 20 queries' ids in the same order; the export names what it left out."""
    export, want = world["export"], world["want"]
    head = json.loads(export.read_text(encoding="utf-8").splitlines()[0])
    pages = sum(rel.endswith(".md") for rel in world["visible"])
    assert head["pages"] == pages and head["attachments"] == 1
    om = head["omitted"]
    assert om["history"] == world["commits"] and om["spool"] >= 2
    assert om["tokens"] >= 3 and om["audit"] >= 50 and om["dot_files"] >= 1
    assert f"left out: {om['history']} commits of history" in world["export_err"]
    d1 = world["tmp"] / "d1"
    out = run_cli_here(d1, "import", "--json", str(export))
    assert out.returncode == 0, out.stderr
    n = len(world["visible"])
    assert f"{n} written ({pages} pages, 1 attachments), 0 identical, 0 conflicting" in out.stdout
    assert visible(d1 / "wiki") == world["visible"]
    assert mtimes(d1 / "wiki") == world["mtimes"]
    got = answers(d1, None, None)
    for key, value in want.items():
        if key.startswith(("u-", "as_of")):
            continue  # D1 has no tokens but its owner's, and no history (export omits both)
        if key.startswith("pages:"):
            # the pending sessions are compiled into pages at S's start; their events
            # are the spool, which an export leaves out (counted)
            value = [row for row in value if "/sessions/" not in row[0]]
        if key == "brief":
            value = ([p for p in value[0] if p[0] != "session"], value[1])
        assert got[key] == value, key
    assert want["ferret"] == []
    assert ("pinned", "projects/atlas/notes/n001.md", "Note 1") in want["brief"][0]
    atlas = dict(want["pages:atlas"])
    assert atlas[world["n1"]] == "superseded" and atlas["projects/atlas/notes/n003.md"] is None
    assert ("H2 work", "claimed", "u-ben") == want["handoffs:atlas"][1][:3]

    # D: again into D1, and into S itself: all identical, nothing written, no commit
    for target in (d1, world["src"]):
        before = refs_of(target / "wiki")
        out = run_cli_here(target, "import", "--json", str(export))
        assert out.returncode == 0, out.stderr
        assert f"0 written (0 pages, 0 attachments), {n} identical, 0 conflicting" in out.stdout
        assert refs_of(target / "wiki") == before


@pytest.mark.parametrize("kind", ["plain", "encrypted"])
def test_c68_backup_restore_keeps_everything(world: dict[str, Any], kind: str) -> None:
    """D2, from a plain and from an encrypted backup: as D1, plus the same git refs, the
    same tokens (u-ana's and u-ben's work and see what they saw), the audit log as it was
    when the backup began (and what was appended while it ran, at most), as_of answers,
    the pending session compiled at start, and every capture event acknowledged before the
    backup began."""
    tmp = world["tmp"]
    backup, env = (tmp / "b.wmb", None) if kind == "plain" else (tmp / "b.wmb.enc", PASS)
    acked = world["acked_plain" if kind == "plain" else "acked_sealed"]
    d2 = tmp / f"d2-{kind}"
    out = run_cli(d2, "restore", str(backup), env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"restored {backup} into {d2}"), out.stdout
    assert files_of(d2 / "wiki") == world["files"]
    assert mtimes(d2 / "wiki") == world["mtimes"]
    assert refs_of(d2 / "wiki") == world["refs"]
    assert tokens(d2) == world["auth"]
    audit = (d2 / "logs" / "audit.jsonl").read_bytes()
    assert audit.startswith(world["audit_before"]) and world["audit_after"].startswith(audit)
    spooled = b"".join(files_of(d2 / "spool").values())
    assert b"pending heron step 11" in spooled
    missing = [n for n in acked if f"load tick {n:05d} done".encode() not in spooled]
    assert not missing, missing
    got = answers(d2, world["users"], world["before_forget"])
    assert got == world["want"]
    assert world["want"]["as_of:ferret"]  # F1 was there before it was forgotten
    # the brief after the restore: the pins and u-ben's claimed handoff, as before the backup
    for user, before in world["brief_before"].items():
        assert lasting(got[f"{user}:brief"]) == before, user
    # the pending session was compiled at start
    wait_for(lambda: any(b"pending heron step 11" in v for v in files_of(d2 / "wiki").values()),
             60, "the pending session compiled")  # fmt: skip


def test_c68_failing_restores_write_nothing(world: dict[str, Any]) -> None:
    """C: a directory that is not empty, a backup cut short by 1 MiB (plain and
    encrypted), a wrong passphrase: non-zero exit, no "restored" line, the target as it
    was (absent, or the same files), and no folder left beside it."""
    tmp = world["tmp"]
    before = files_of(world["src"])
    out = run_cli(world["src"], "restore", str(tmp / "b.wmb"))
    assert out.returncode != 0 and "restored" not in out.stdout.lower()
    assert files_of(world["src"]) == before
    for name, env in (("b.wmb", None), ("b.wmb.enc", PASS)):
        whole = (tmp / name).read_bytes()
        assert len(whole) > 2 << 20
        cut = tmp / f"cut-{name}"
        cut.write_bytes(whole[: len(whole) - (1 << 20)])
        target = tmp / f"c-{name}"
        out = run_cli(target, "restore", str(cut), env=env)
        assert out.returncode != 0, out.stdout
        assert "restored" not in out.stdout.lower(), out.stdout
        assert not target.exists() or not any(target.iterdir())
    target = tmp / "c-wrong"
    wrong = {"WIKI_MEMORY_BACKUP_PASSPHRASE": "not the passphrase"}
    out = run_cli(target, "restore", str(tmp / "b.wmb.enc"), env=wrong)
    assert out.returncode != 0 and "wrong passphrase" in out.stderr
    assert not target.exists() or not any(target.iterdir())
    # and over the data directory it came from: refused, nothing of it changed
    out = run_cli(world["src"], "restore", str(tmp / "b.wmb.enc"), env=wrong)
    assert out.returncode != 0 and "restored" not in out.stdout.lower()
    assert files_of(world["src"]) == before
    assert not [p.name for p in tmp.iterdir() if ".restoring-" in p.name]
