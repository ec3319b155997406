"""Replication over git (docs/git.md, "Replication"; docs/operations.md, "More than one
machine"): two servers with their own data directories and one bare remote converge;
personal pages never reach the remote's objects; a purge reaches every replica through
``sync --after-purge``; an unreachable remote never stops capture or recall; case C47.

The remote is a bare repository made by stock git; every check of "is it stored there"
reads git's own object listing (``git cat-file --batch-all-objects --batch``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from clikit import run_cli_here
from gitkit import all_objects, holding
from serverproc import ServerProcess
from support import as_user, make_memory, run_cli, wait_for

from wiki_memory.core.purge import purge_page
from wiki_memory.errors import SyncRefused, Unavailable
from wiki_memory.wiki import replicate as rp

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs stock git")


def bare(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    return path


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


def fsck_clean(repo: Path) -> None:
    out = subprocess.run(["git", "-C", str(repo), "fsck", "--full"], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "missing" not in out.stdout + out.stderr
    assert "broken" not in out.stdout + out.stderr


def shared_files(wiki: Path) -> dict[str, bytes]:
    """The wiki's files a remote may carry: everything but .git, people/ and pages marked
    personal."""
    out = {}
    for f in sorted(wiki.rglob("*")):
        rel = f.relative_to(wiki).as_posix()
        if not f.is_file() or rel.startswith((".git/", "people/")):
            continue
        data = f.read_bytes()
        if b"visibility: personal" in data:
            continue
        out[rel] = data
    return out


# ------------------------------------------------------------------ two servers, one hub


def capture(srv: ServerProcess, session: str, text: str) -> None:
    for i, (event, payload) in enumerate(
        [
            ("UserPromptSubmit", {"prompt": text}),
            ("Stop", {"last_assistant_message": f"noted {text}"}),
            ("SessionEnd", {"reason": "exit"}),
        ]
    ):
        r = srv.post(
            "/v1/observations",
            {
                "harness": "codex",
                "event": event,
                "session_id": session,
                "project": "p",
                "event_id": f"{session}-{i}",
                "payload": payload,
            },
        )
        assert r.status_code == 202, r.text


def recall_paths(srv: ServerProcess, query: str) -> set[str]:
    r = srv.post("/v1/recall", {"query": query, "budget_tokens": 4000})
    assert r.status_code == 200, r.text
    return {i["path"] for i in r.json()["items"]}


def start_together(servers: Iterable[ServerProcess]) -> None:
    """Start the servers side by side (each start waits for its process to answer); when
    one fails, every one is stopped and the failure raised."""
    servers = list(servers)
    try:
        with ThreadPoolExecutor() as pool:
            for f in [pool.submit(s.start) for s in servers]:
                f.result()
    except BaseException:
        for s in servers:
            s.stop()
        raise


def committed_clean(wiki: Path) -> bool:
    return git(wiki, "status", "--porcelain").strip() == ""


@pytest.mark.process
def test_two_servers_converge_three_rounds_and_keep_personal_pages_home(tmp_path):
    hub = bare(tmp_path / "hub.git")
    servers = {}
    for name, owner in (("a", "ana"), ("b", "ben")):
        data = tmp_path / name
        wiki = data / "wiki"
        (wiki / "projects" / "p").mkdir(parents=True)
        (wiki / "projects" / "p" / "index.md").write_text("# p\n")
        (wiki / "people" / owner).mkdir(parents=True)
        # personal: a people/ folder, and a page marked personal inside the project
        (wiki / "people" / owner / "diary.md").write_text(f"# diary\nDIARY-{owner}-kiwi\n")
        (wiki / "projects" / "p" / f"private-{name}.md").write_text(
            f"---\nvisibility: personal\nuser: {owner}\n---\nPRIVATE-{owner}-fig\n"
        )
        servers[name] = ServerProcess(data)
    start_together(servers.values())
    a, b = servers["a"], servers["b"]
    try:
        for srv in (a, b):
            r = run_cli_here(srv.data_dir, "remote", "add", "origin", str(hub))
            assert r.returncode == 0, r.stderr
        shared = a.data_dir / "wiki" / "projects" / "p" / "notes" / "shared.md"
        shared.parent.mkdir(parents=True, exist_ok=True)
        shared.write_text("# shared\nfirst line\n")
        wait_for(lambda: committed_clean(a.data_dir / "wiki"))
        for srv in (a, b):
            r = run_cli_here(srv.data_dir, "sync")
            assert r.returncode == 0, r.stdout + r.stderr
        wait_for(lambda: (b.data_dir / "wiki" / "projects/p/notes/shared.md").is_file())

        written: dict[str, list[str]] = {"a": [], "b": []}
        for rnd in range(1, 4):
            for name, srv in servers.items():
                wiki = srv.data_dir / "wiki"
                capture(srv, f"{name}-s{rnd}", f"capture{name}word{rnd} about the build")
                note = wiki / "projects" / "p" / "notes" / f"{name}-{rnd}.md"
                note.write_text(f"# {name} {rnd}\nhandnote{name}{rnd}\n")
                # both sides append to the same page (merged line by line), and in the
                # first round both rewrite its first line differently: a true overlap
                page = wiki / "projects" / "p" / "notes" / "shared.md"
                text = page.read_text()
                if rnd == 1:
                    text = text.replace("first line", f"first line by {name}")
                page.write_text(text + f"edit{name}{rnd}\n")
                written[name] += [f"handnote{name}{rnd}", f"edit{name}{rnd}"]
            for srv in servers.values():
                wiki = srv.data_dir / "wiki"
                wait_for(lambda wiki=wiki: committed_clean(wiki), timeout=60)
            # captures keep arriving on both servers while they sync
            during = threading.Thread(
                target=lambda rnd=rnd: [
                    capture(srv, f"{name}-d{rnd}-{k}", f"during{name}word{rnd}x{k} sync")
                    for k in range(3)
                    for name, srv in servers.items()
                ]
            )
            during.start()
            for srv in (a, b, a):
                r = run_cli_here(srv.data_dir, "sync")
                assert r.returncode == 0, r.stdout + r.stderr
            during.join()
        # once everything is committed, one more round brings the last pages across
        for srv in (a, b):
            wiki = srv.data_dir / "wiki"
            wait_for(lambda wiki=wiki: committed_clean(wiki), timeout=60)
        for srv in (a, b, a):
            r = run_cli_here(srv.data_dir, "sync")
            assert r.returncode == 0, r.stdout + r.stderr
        for srv in (a, b):
            wiki = srv.data_dir / "wiki"
            wait_for(lambda wiki=wiki: committed_clean(wiki), timeout=60)
        wa, wb = a.data_dir / "wiki", b.data_dir / "wiki"
        # the same pages on both, byte for byte
        assert shared_files(wa) == shared_files(wb)
        together = b"".join(shared_files(wa).values())
        for name in written:
            for text in written[name]:
                assert text.encode() in together, f"{text} was lost"
        # conflicts are kept as copies beside the page and reported
        copies = [p for p in shared_files(wa) if ".conflict-origin-" in p]
        assert len(copies) == 1, "both sides rewrote shared.md's first line: one copy"
        merged = (wa / "projects/p/notes/shared.md").read_text()
        assert "edita3" in merged and "editb3" in merged  # later appends merged, no copy
        for srv in (a, b):
            doc = run_cli_here(srv.data_dir, "doctor")
            # one line naming whose version is where, and the fix that resolves it
            assert f"version is in {copies[0]}" in doc.stdout, doc.stdout
            assert "fix: wiki-memory sync-conflicts" in doc.stdout
            assert "sync:  origin" in doc.stdout
            brief = srv.post("/v1/brief", {"project": "p"})
            assert brief.status_code == 200, brief.text
            assert "1 sync conflict copy(ies) to resolve" in json.dumps(brief.json())
        # personal pages stay home: absent from every object of the remote
        hub_objects = all_objects(hub)
        for marker in (
            b"DIARY-ana-kiwi",
            b"DIARY-ben-kiwi",
            b"PRIVATE-ana-fig",
            b"PRIVATE-ben-fig",
        ):
            assert marker not in hub_objects
        assert b"people/" not in git(hub, "log", "--all", "--name-only", "--format=%B").encode()
        # and still at home, with their history
        assert b"DIARY-ana-kiwi" in all_objects(wa)
        for repo in (wa, wb, hub):
            fsck_clean(repo)
        # each server's recall finds the other's captured pages
        wait_for(lambda: recall_paths(a, "capturebword3"), timeout=60)
        wait_for(lambda: recall_paths(b, "captureaword3"), timeout=60)
        assert any("/sessions/" in p for p in recall_paths(b, "captureaword2"))
        # and the captures made during the syncs are pages on both sides
        for name in ("a", "b"):
            for rnd in range(1, 4):
                for k in range(3):
                    word = f"during{name}word{rnd}x{k}".encode()
                    assert word in b"".join(shared_files(wa).values()), word
                    assert word in b"".join(shared_files(wb).values()), word
    finally:
        for srv in servers.values():
            srv.stop()


# ------------------------------------------------------------------ purge across replicas


SECRET = " ".join(["PURGE-7Z1K", "card", "ending", "4417", "exp", "09/29", "cvv", "311"])
NEEDLES = (b"PURGE-7Z1K", b"4417 exp 09/29")
#: the purge announcements' key, the same on every server of a hub
PURGE_KEY = "team-purge-key"


def _write(m, rel: str, text: str) -> None:
    full = m.wiki_dir / rel
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_text(text)
    # on the writer thread, as the watcher commits a hand edit: a commit made from the
    # test's own thread runs beside the writer's jobs and their git locks (under load a
    # purge test's sync once ended in dulwich's FileLocked)
    m.commit_hand_edits([rel]).result(timeout=120)


@pytest.mark.process
def test_purge_reaches_every_replica_with_after_purge(tmp_path, stop_after):
    hub = bare(tmp_path / "hub.git")
    a = make_memory(
        tmp_path / "a",
        owner="ana",
        files={"projects/p/index.md": "# p\n"},
        sync_purge_secret=PURGE_KEY,
    )
    stop_after(a)
    b = make_memory(tmp_path / "b", owner="ben", sync_purge_secret=PURGE_KEY)
    stop_after(b)
    for m in (a, b):
        rp.add_remote(m.wiki_dir, "origin", str(hub))
    _write(a, "projects/p/notes/vendor.md", f"# vendor\n{SECRET}\n")
    _write(a, "projects/p/notes/vendor.md", f"# vendor\n{SECRET}\nsecond version\n")
    a.sync.sync()
    b.sync.sync()
    a.sync.sync()
    assert SECRET in (b.wiki_dir / "projects/p/notes/vendor.md").read_text()
    _write(b, "projects/p/notes/runbook.md", "# runbook\nfrom b, before the purge\n")

    purge_page(a, "projects/p/notes/vendor.md", None)
    # a plain sync would fetch the old history back: refused, and nothing fetched
    with pytest.raises(SyncRefused):
        a.sync.sync()
    assert a.sync.status()["remotes"]["origin"]["purge_pending"]
    for needle in NEEDLES:
        assert needle not in all_objects(a.wiki_dir)
    rep = a.sync.sync(after_purge=True)
    assert rep[0].action == "forced after purge" and rep[0].remote_gc == "pruned"
    # B follows the rewritten branch, keeps its own unsynced page, and drops the old history
    rep = b.sync.sync()
    assert rep[0].action == "followed rewrite"
    assert not (b.wiki_dir / "projects/p/notes/vendor.md").exists()
    a.sync.sync()
    assert (a.wiki_dir / "projects/p/notes/runbook.md").read_text().endswith("before the purge\n")
    for repo in (a.wiki_dir, b.wiki_dir, hub):
        objects = all_objects(repo)
        for needle in NEEDLES:
            assert needle not in objects, f"{needle!r} still in {repo}"
        fsck_clean(repo)
    assert b"PURGE-7Z1K" not in (Path(b.settings.index_path)).read_bytes()


@pytest.mark.process
def test_after_purge_takes_in_what_another_server_pushed_meanwhile(tmp_path, stop_after):
    hub = bare(tmp_path / "hub.git")
    a = make_memory(
        tmp_path / "a",
        owner="ana",
        files={"projects/p/index.md": "# p\n"},
        sync_purge_secret=PURGE_KEY,
    )
    stop_after(a)
    b = make_memory(tmp_path / "b", owner="ben", sync_purge_secret=PURGE_KEY)
    stop_after(b)
    for m in (a, b):
        rp.add_remote(m.wiki_dir, "origin", str(hub))
    _write(a, "projects/p/notes/vendor.md", f"# vendor\n{SECRET}\n")
    a.sync.sync()
    b.sync.sync()
    purge_page(a, "projects/p/notes/vendor.md", None)
    _write(b, "projects/p/notes/late.md", "# late\nwritten on b after the purge\n")
    b.sync.sync()  # the remote moves past what A last saw, old history and all
    rep = a.sync.sync(after_purge=True)
    assert "remote's new pages" in rep[0].action
    assert (a.wiki_dir / "projects/p/notes/late.md").is_file()
    assert not (a.wiki_dir / "projects/p/notes/vendor.md").exists()
    b.sync.sync()
    assert not (b.wiki_dir / "projects/p/notes/vendor.md").exists()
    for repo in (a.wiki_dir, b.wiki_dir, hub):
        for needle in NEEDLES:
            assert needle not in all_objects(repo), f"{needle!r} still in {repo}"
        fsck_clean(repo)


@pytest.mark.process
def test_a_text_purge_renames_its_page_and_reaches_two_replicas_and_the_hub(tmp_path, stop_after):
    """The purged text in a page's file name, in another page's links to it and in a
    commit message: after ``purge --text`` and ``sync --after-purge``, both replicas
    follow, and no file of any data directory or of the hub holds it; the links on every
    replica lead to the page's new name. Then a page purged whole: its name is nowhere
    either, and the link to it reads ``[purged]`` on every replica."""
    value = "-".join(["quince", "harbor", "4471"])
    hub = bare(tmp_path / "hub.git")
    a = make_memory(tmp_path / "a", owner="ana", files={"projects/p/index.md": "# p\n"},
                    sync_purge_secret=PURGE_KEY)  # fmt: skip
    stop_after(a)
    b = make_memory(tmp_path / "b", owner="ben", sync_purge_secret=PURGE_KEY)
    stop_after(b)
    c = make_memory(tmp_path / "c", owner="cyd", sync_purge_secret=PURGE_KEY)
    stop_after(c)
    for m in (a, b, c):
        rp.add_remote(m.wiki_dir, "origin", str(hub))
    page = f"projects/p/notes/door {value}.md"
    _write(a, page, f"---\ntitle: door {value}\n---\n# door\nthe code is {value}\n")
    _write(a, page, f"---\ntitle: door {value}\n---\n# door\nthe code is {value}\nagain\n")
    _write(a, "projects/p/notes/keys.md", f"# keys\n[[door {value}]] and [[door {value}#door]]\n")
    for m in (a, b, c, a):
        m.sync.sync()
    assert (c.wiki_dir / page).is_file()
    assert value in git(a.wiki_dir, "log", "--format=%B")  # messages name the path
    assert all(value.encode() in all_objects(r) for r in (hub, b.wiki_dir, c.wiki_dir))

    res = purge_page(a, page, None, text=value)
    assert res["renamed"] and res["removed"]["links"] >= 1
    new = res["path"]
    rep = a.sync.sync(after_purge=True)
    assert rep[0].remote_gc == "pruned"
    for m in (b, c):
        assert m.sync.sync()[0].action == "followed rewrite"
    for m in (a, b, c):
        assert not (m.wiki_dir / page).exists()
        assert (m.wiki_dir / new).read_text().endswith("the code is [purged]\nagain\n")
        keys = (m.wiki_dir / "projects/p/notes/keys.md").read_text()
        stem = new.rsplit("/", 1)[1][:-3]
        assert keys == f"# keys\n[[{stem}]] and [[{stem}#door]]\n", keys
        fsck_clean(m.wiki_dir)
    for root in (tmp_path / "a", tmp_path / "b", tmp_path / "c", hub):
        assert holding(root, value.encode()) == [], root

    # then a page purged whole, linked from the same page: its name and title go too
    whole = "-".join(["sable", "plover", "2290"])
    gone = f"projects/p/notes/{whole}.md"
    _write(a, gone, f"---\ntitle: plover {whole}\n---\n# plover\n")
    keys_rel = "projects/p/notes/keys.md"
    _write(a, keys_rel, (a.wiki_dir / keys_rel).read_text() + f"[[{whole}]]\n")
    for m in (a, b, c):
        m.sync.sync()
    assert (c.wiki_dir / gone).is_file()
    purge_page(a, gone, None)
    a.sync.sync(after_purge=True)
    for m in (b, c):
        assert m.sync.sync()[0].action == "followed rewrite"
        assert not (m.wiki_dir / gone).exists()
        assert (m.wiki_dir / keys_rel).read_text().endswith("[purged]\n")
    for root in (tmp_path / "a", tmp_path / "b", tmp_path / "c", hub):
        assert holding(root, whole.encode()) == [], root


# ------------------------------------------------------------------ C47


@pytest.mark.process
def test_c47_purge_removes_a_value_from_server_remotes_and_later_syncs(tmp_path, stop_after):
    origin = bare(tmp_path / "wiki.git")
    mirror = bare(tmp_path / "wiki-mirror.git")
    w = make_memory(
        tmp_path / "w",
        owner="u-admin",
        files={"projects/atlas/index.md": "# atlas\n"},
        sync_purge_secret=PURGE_KEY,
    )
    stop_after(w)
    for name, hub in (("origin", origin), ("mirror", mirror)):
        rp.add_remote(w.wiki_dir, name, str(hub))
    # the laptop: another data directory syncing with origin, made before step 1
    lap = make_memory(tmp_path / "laptop", owner="u-ana", sync_purge_secret=PURGE_KEY)
    stop_after(lap)
    rp.add_remote(lap.wiki_dir, "origin", str(origin))
    w.sync.sync()
    lap.sync.sync()
    note = "projects/atlas/notes/vendor-call.md"
    # 1: remembered, synced to both remotes, pulled by the laptop
    _write(w, note, f"# vendor call\n{SECRET}\n")
    w.sync.sync()
    lap.sync.sync()
    # 2: two more edits, a page linking it, a session-like log quoting the value
    _write(w, note, f"# vendor call\n{SECRET}\nfollow-up\n")
    _write(w, note, f"# vendor call\n{SECRET}\nfollow-up\nclosed\n")
    _write(w, "projects/atlas/notes/index-of-calls.md", "# calls\nsee [[vendor-call]]\n")
    _write(w, "projects/atlas/notes/call-log.md", f"# log\n- said {SECRET} ^t4\n")
    w.sync.sync()
    lap.sync.sync()
    assert SECRET in (lap.wiki_dir / "projects/atlas/notes/call-log.md").read_text()
    # 3: purge by page and by string
    out = purge_page(w, note, None)
    assert set(out["remotes"]) == {"origin", "mirror"}
    purge_page(w, "projects/atlas/notes/call-log.md", None, text="PURGE-7Z1K card ending 4417")
    for hub in (origin, mirror):
        name = "origin" if hub == origin else "mirror"
        rep = w.sync.sync(name, after_purge=True)
        assert rep[0].remote_gc == "pruned"
    checks_after = [w.wiki_dir, origin, mirror]
    for repo in checks_after:
        objects = all_objects(repo)
        for needle in NEEDLES:
            assert needle not in objects, f"{needle!r} in {repo}"
        assert "PURGE-7Z1K" not in git(repo, "log", "-p", "--all")
        fsck_clean(repo)
    assert "PURGE-7Z1K" not in git(w.wiki_dir, "reflog")
    unreachable = git(w.wiki_dir, "fsck", "--unreachable", "--no-reflogs")
    assert unreachable.strip() == ""
    for f in [w.settings.index_path, *Path(w.settings.spool_dir).rglob("*")]:
        if Path(f).is_file():
            assert b"PURGE-7Z1K" not in Path(f).read_bytes()
    # the quoting entry keeps its anchor, the value replaced
    log_text = (w.wiki_dir / "projects/atlas/notes/call-log.md").read_text()
    assert "^t4" in log_text and "PURGE-7Z1K" not in log_text
    # 4: the laptop, offline since 2, edits an unrelated page and syncs
    _write(lap, "projects/atlas/notes/runbook.md", "# runbook\nrestart the worker\n")
    rep = lap.sync.sync()
    assert rep[0].action == "followed rewrite" and rep[0].pushed
    w.sync.sync("origin")
    w.sync.sync("mirror")
    assert (w.wiki_dir / "projects/atlas/notes/runbook.md").is_file()
    for repo in (w.wiki_dir, lap.wiki_dir, origin, mirror):
        assert "PURGE-7Z1K" not in git(repo, "log", "-p", "--all")
        for needle in NEEDLES:
            assert needle not in all_objects(repo)
        fsck_clean(repo)
    assert not (lap.wiki_dir / note).exists()
    # the audit log has the purge, with no content
    audit = (w.settings.logs_dir / "audit.jsonl").read_text()
    assert '"op": "purge"' in audit.replace('"op":"purge"', '"op": "purge"')
    assert "PURGE-7Z1K" not in audit


# ------------------------------------------------------------------ an unreachable remote


@pytest.mark.process
def test_unreachable_remote_never_blocks_capture_or_recall(tmp_path):
    hub = bare(tmp_path / "hub.git")
    data = tmp_path / "a"
    (data / "wiki" / "projects" / "p").mkdir(parents=True)
    (data / "wiki" / "projects" / "p" / "index.md").write_text("# p\n")
    srv = ServerProcess(data).start()
    try:
        assert run_cli_here(data, "remote", "add", "origin", str(hub)).returncode == 0
        ok = run_cli_here(data, "sync")
        assert ok.returncode == 0, ok.stderr
        hub.rename(tmp_path / "gone.git")  # the hub is away
        fail = run_cli_here(data, "sync")
        assert fail.returncode == 7, fail.stdout + fail.stderr
        t0 = time.monotonic()
        capture(srv, "away-1", "offlinecapture while the hub is away")
        assert time.monotonic() - t0 < 10
        wait_for(lambda: recall_paths(srv, "offlinecapture"), timeout=60)
        status = json.loads((data / "wiki" / ".git" / "wiki-memory-sync.json").read_text())
        entry = status["remotes"]["origin"]
        assert entry["last_success"] and entry["last_error"]
        doc = run_cli_here(data, "doctor")
        assert f"last success {entry['last_success']}" in doc.stdout, doc.stdout
        assert "sync failing" in doc.stdout
        brief = srv.post("/v1/brief", {"project": "p"})
        assert "sync failing" in json.dumps(brief.json())
    finally:
        srv.stop()


# ------------------------------------------------------------------ remotes and visibility


def test_remote_commands_refuse_passwords_and_list_and_remove(tmp_path, stop_after):
    m = make_memory(tmp_path / "d")
    stop_after(m)
    pw = "https://ana:" + "hunter" + "2@git.example.org/wiki.git"
    r = run_cli_here(tmp_path / "d", "remote", "add", "origin", pw)
    assert r.returncode == 2 and "password" in r.stderr
    assert pw not in (m.wiki_dir / ".git" / "config").read_text()
    token_url = "https://ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8" + "@github.com/t/w.git"
    r = run_cli_here(tmp_path / "d", "remote", "add", "origin", token_url)
    assert r.returncode == 2 and "token" in r.stderr
    assert (
        run_cli_here(
            tmp_path / "d", "remote", "add", "origin", "git@example.org:t/w.git"
        ).returncode
        == 0
    )
    assert (
        "origin\tgit@example.org:t/w.git" in run_cli_here(tmp_path / "d", "remote", "list").stdout
    )
    config = (m.wiki_dir / ".git" / "config").read_text()
    assert "push = refs/wiki-memory/shared:refs/heads/main" in config
    assert run_cli_here(tmp_path / "d", "remote", "remove", "origin").returncode == 0
    assert run_cli_here(tmp_path / "d", "remote", "list").stdout == ""
    with pytest.raises(Exception, match="no remote"):
        m.sync.sync()


@pytest.mark.process
def test_a_page_that_turns_personal_stops_reaching_the_remote(tmp_path, stop_after):
    hub = bare(tmp_path / "hub.git")
    m = make_memory(tmp_path / "d", files={"projects/p/index.md": "# p\n"})
    stop_after(m)
    rp.add_remote(m.wiki_dir, "origin", str(hub))
    page = "projects/p/notes/plan.md"
    _write(m, page, "# plan\nSHAREDVERSION one\n")
    m.sync.sync()
    _write(m, page, "---\nvisibility: personal\n---\n# plan\nLATERPERSONAL two\n")
    m.sync.sync()
    objects = all_objects(hub)
    assert b"SHAREDVERSION" in objects  # published before it turned personal: stays published
    assert b"LATERPERSONAL" not in objects
    assert page not in git(hub, "ls-tree", "-r", "--name-only", "main")
    _write(m, page, "# plan\nSHAREDAGAIN three\n")
    m.sync.sync()
    assert page in git(hub, "ls-tree", "-r", "--name-only", "main")
    assert b"LATERPERSONAL" not in all_objects(hub)
    # commit messages never name a personal page
    _write(m, "people/alice/secret-plans.md", "# mine\n")
    m.sync.sync()
    assert "secret-plans" not in git(hub, "log", "--all", "--format=%B")


@pytest.mark.process  # sync runs its network steps in a child process
def test_sync_with_an_unreachable_remote_is_recorded_not_raised_into_capture(tmp_path, stop_after):
    m = make_memory(tmp_path / "d", files={"projects/p/index.md": "# p\n"})
    stop_after(m)
    rp.add_remote(m.wiki_dir, "origin", str(tmp_path / "nowhere.git"))
    with pytest.raises(Unavailable):
        m.sync.sync()
    st = m.sync.status()
    assert st["last_success"] is None and "origin" in st["last_error"]


@pytest.mark.process
def test_periodic_sync_pushes_without_a_command_and_only_admins_may_sync(tmp_path, stop_after):
    from wiki_memory.errors import Forbidden

    hub = bare(tmp_path / "hub.git")
    m = make_memory(
        tmp_path / "d", files={"projects/p/index.md": "# p\n"}, sync_interval_seconds=0.3
    )
    stop_after(m)
    rp.add_remote(m.wiki_dir, "origin", str(hub))
    _write(m, "projects/p/notes/auto.md", "# auto\nPERIODICMARK\n")
    # the push lands a moment before the state records the success
    wait_for(
        lambda: b"PERIODICMARK" in all_objects(hub) and m.sync.status()["last_success"],
        timeout=30,
    )
    with pytest.raises(Forbidden):
        m.sync.sync(who=as_user(m, "mallory"))


@pytest.mark.process
def test_a_save_not_yet_committed_wins_and_the_incoming_version_is_kept_beside(
    tmp_path, stop_after
):
    hub = bare(tmp_path / "hub.git")
    a = make_memory(tmp_path / "a", files={"projects/p/index.md": "# p\n"})
    stop_after(a)
    b = make_memory(tmp_path / "b", owner="ben")
    stop_after(b)
    for m in (a, b):
        rp.add_remote(m.wiki_dir, "origin", str(hub))
    page = "projects/p/notes/plan.md"
    _write(a, page, "# plan\nv1\n")
    a.sync.sync()
    b.sync.sync()
    a.sync.sync()
    _write(b, page, "# plan\nv2 FROMBEN\n")
    b.sync.sync()
    # a person on A saves the page; the watcher has not committed it yet
    (a.wiki_dir / page).write_text("# plan\nv2 FROMANA unsaved\n")
    rep = a.sync.sync()
    assert (a.wiki_dir / page).read_text() == "# plan\nv2 FROMANA unsaved\n"
    copy = rep[0].conflicts[page]
    assert "FROMBEN" in (a.wiki_dir / copy).read_text()
    a.commit_hand_edits([page, copy]).result(timeout=120)
    a.sync.sync()
    b.sync.sync()
    for m in (a, b):
        together = b"".join(shared_files(m.wiki_dir).values())
        assert b"FROMANA" in together and b"FROMBEN" in together
    assert copy in a.sync.status()["conflicts"]


@pytest.mark.process
def test_purge_then_sync_after_purge_through_the_cli_of_two_running_servers(tmp_path, monkeypatch):
    monkeypatch.setenv("WIKI_MEMORY_SYNC_PURGE_SECRET", PURGE_KEY)
    hub = bare(tmp_path / "hub.git")
    servers = []
    for name in ("a", "b"):
        data = tmp_path / name
        (data / "wiki" / "projects" / "p").mkdir(parents=True)
        (data / "wiki" / "projects" / "p" / "index.md").write_text("# p\n")
        servers.append(ServerProcess(data))
    start_together(servers)
    a, b = servers
    try:
        for srv in servers:
            assert run_cli_here(srv.data_dir, "remote", "add", "origin", str(hub)).returncode == 0
        page = a.data_dir / "wiki" / "projects" / "p" / "notes" / "vendor.md"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(f"# vendor\n{SECRET}\n")
        wait_for(lambda: committed_clean(a.data_dir / "wiki"))
        for srv in (a, b, a):
            r = run_cli_here(srv.data_dir, "sync")
            assert r.returncode == 0, r.stdout + r.stderr
        wait_for(lambda: (b.data_dir / "wiki" / "projects/p/notes/vendor.md").is_file())
        r = run_cli_here(a.data_dir, "purge", "projects/p/notes/vendor.md", "--yes")
        assert r.returncode == 0, r.stderr
        assert "sync --after-purge origin" in r.stdout
        refused = run_cli_here(a.data_dir, "sync")
        assert refused.returncode == 3 and "after-purge" in refused.stderr
        assert run_cli(a.data_dir, "sync", "--after-purge").returncode == 2  # needs --yes
        forced = run_cli_here(a.data_dir, "sync", "--after-purge", "--yes")
        assert forced.returncode == 0, forced.stdout + forced.stderr
        assert "origin: forced after purge; old objects on the remote: pruned" in forced.stdout
        followed = run_cli_here(b.data_dir, "sync")
        assert followed.returncode == 0, followed.stdout + followed.stderr
        assert "origin: followed rewrite" in followed.stdout
        wait_for(lambda: not (b.data_dir / "wiki" / "projects/p/notes/vendor.md").exists())
        for repo in (a.data_dir / "wiki", b.data_dir / "wiki", hub):
            objects = all_objects(repo)
            for needle in NEEDLES:
                assert needle not in objects, f"{needle!r} still in {repo}"
            fsck_clean(repo)
        # B's recall no longer finds it; a plain sync on A works again
        assert not recall_paths(b, "PURGE-7Z1K")
        assert run_cli_here(a.data_dir, "sync").returncode == 0
    finally:
        for srv in servers:
            srv.stop()
