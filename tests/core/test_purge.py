"""Purge, the one real delete (docs/operations.md), against a real server: a fake secret
the sanitizer does not know, committed in five versions of a page, is afterwards absent
from every git object (``git cat-file --batch-all-objects``), the index files, the spool
and the access and server logs, while the rest of that page's history and every other
page's history stay, and the audit log says what "deleted" means. Only the owner and
admins may purge; an admin may purge another user's personal page, whole."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest
from dulwich import porcelain
from dulwich.repo import Repo
from gitkit import all_objects
from serverproc import ServerProcess
from support import access_lines, all_text_under, run_cli, wait_for
from teamkit import make_token

pytestmark = pytest.mark.process

# not secret-shaped (the sanitizer lets it through, which is why purge exists); built at
# run time so this file does not hold it whole
SECRET = "-".join(["vault", "passphrase", "mauve", "otter", "4417"])
PAGE = "projects/p/notes/setup.md"
OTHER = "projects/p/notes/other.md"
DIARY = "people/wes/diary.md"
REMOTE = "https://git.example.org/team/wiki.git"


def versions(wiki: Path, path: str) -> list[tuple[str, bytes]]:
    """``(commit message, the page's bytes)`` for every commit of HEAD's history that
    changed ``path``, newest first."""
    repo = Repo(str(wiki))
    try:
        out = []
        for entry in repo.get_walker(paths=[path.encode()]):
            tree = repo[entry.commit.tree]
            try:
                _m, sha = tree.lookup_path(repo.object_store.__getitem__, path.encode())
            except KeyError:
                out.append((entry.commit.message.decode(), b""))
                continue
            out.append((entry.commit.message.decode(), repo[sha].data))
        return out
    finally:
        repo.close()


def build_history(wiki: Path) -> None:
    """Seven versions of PAGE (five with the secret), OTHER edited alongside, a personal
    page of wes: one commit each."""
    wiki.mkdir(parents=True)
    porcelain.init(str(wiki))
    (wiki / "projects/p/notes").mkdir(parents=True)
    (wiki / "people/wes").mkdir(parents=True)

    def commit(msg: str, **files: str) -> None:
        for rel, text in files.items():
            (wiki / rel).write_text(text, encoding="utf-8")
            porcelain.add(str(wiki), [str(wiki / rel)])
        porcelain.commit(str(wiki), msg.encode(), author=b"t <t@example.org>",
                         committer=b"t <t@example.org>")  # fmt: skip

    commit("first", **{PAGE: "# Setup\n\nInstall the tools.\n", OTHER: "# Other\n\nv0\n"})
    for i in range(1, 6):
        commit(
            f"version {i}",
            **{
                PAGE: f"# Setup\n\nInstall the tools.\nStep {i}: unlock with {SECRET} then go.\n",
                OTHER: f"# Other\n\nv{i}\n",
            },
        )
    commit("secret removed", **{PAGE: "# Setup\n\nInstall the tools, step 6.\n"})
    commit("diary", **{DIARY: "# Diary\n\nwes private otterdiary entry\n"})
    subprocess.run(["git", "-C", str(wiki), "remote", "add", "origin", REMOTE], check=True)


def post(srv: ServerProcess, token: str, path: str, body: object) -> httpx.Response:
    return httpx.post(
        srv.url + path, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=600
    )


def test_purge_a_secret_from_five_versions(tmp_path: Path) -> None:
    data = tmp_path / "data"
    wiki = data / "wiki"
    build_history(wiki)
    srv = ServerProcess(data)
    srv.start()
    try:
        owner = srv.token
        wes = make_token(data, "wes", "member", "p", here=True)
        ada = make_token(data, "ada", "admin", here=True)
        before_page = versions(wiki, PAGE)
        before_other = versions(wiki, OTHER)
        commits_before = len(list(Repo(str(wiki)).get_walker()))
        assert sum(SECRET.encode() in v for _m, v in before_page) == 5
        # the secret also sits in an open session's spool and in the access log
        ev = {
            "harness": "codex",
            "event": "UserPromptSubmit",
            "session_id": "purge-1",
            "cwd": "/x/p",
            "payload": {"prompt": f"the passphrase is {SECRET}"},
        }
        assert post(srv, owner, "/v1/observations", ev).status_code == 202
        httpx.get(srv.url + f"/v1/pages/projects/p/notes/{SECRET}.md", headers=srv.headers)
        assert SECRET.encode() in all_text_under(data / "spool")
        assert access_lines(data, SECRET)
        recall = post(srv, owner, "/v1/recall", {"query": "passphrase mauve otter"})
        assert recall.status_code == 200

        # a member, even one who may write the page, may not purge
        r = post(srv, wes, "/v1/admin/purge", {"path": PAGE, "text": SECRET})
        assert r.status_code == 403 and r.json()["grant"] == "admin", r.text

        r = post(srv, ada, "/v1/admin/purge", {"path": PAGE, "text": SECRET})
        assert r.status_code == 200, r.text
        res = r.json()
        assert res["versions"] == 5 and res["commits_rewritten"] >= 5
        assert "clones" in res["deleted_means"] and res["remotes"] == {"origin": REMOTE}

        secret = SECRET.encode()
        assert secret not in all_objects(wiki)
        for f in data.glob("index.db*"):
            assert secret not in f.read_bytes(), f.name
        assert secret not in all_text_under(data / "spool")
        for name in ("access.log", "server.log"):
            assert secret not in (data / "logs" / name).read_bytes(), name
        assert secret not in (wiki / PAGE).read_bytes()
        fsck = subprocess.run(["git", "-C", str(wiki), "fsck"], capture_output=True, text=True)
        assert fsck.returncode == 0, fsck.stderr
        status = subprocess.run(
            ["git", "-C", str(wiki), "status", "--porcelain"], capture_output=True, text=True
        )
        assert status.stdout.strip() == ""

        # the rest of the page's history, and every other page's, stays
        after_page = versions(wiki, PAGE)
        assert [m for m, _v in after_page] == [m for m, _v in before_page]
        for (_m, old), (_m2, new) in zip(before_page, after_page, strict=True):
            assert new == old.replace(secret, b"[purged]")
        assert versions(wiki, OTHER) == before_other
        assert len(list(Repo(str(wiki)).get_walker())) == commits_before
        # the session goes on: its observation is still found, without the secret
        found = post(srv, owner, "/v1/recall", {"query": "passphrase"}).text
        assert "passphrase" in found and SECRET not in found

        lines = [json.loads(x) for x in (data / "logs" / "audit.jsonl").read_text().splitlines()]
        done = [x for x in lines if x.get("op") == "purge" and x.get("result") == "ok"]
        assert done and done[-1]["target"] == PAGE and "backups" in done[-1]["deleted_means"]
        assert [x for x in lines if x.get("op") == "purge" and x.get("result") == "denied"]
        assert not any(SECRET in json.dumps(x) for x in lines)

        # an admin may purge another user's personal page, whole (here via the CLI)
        assert b"otterdiary" in all_objects(wiki)
        out = run_cli(data, "purge", DIARY, "--yes")
        assert out.returncode == 0, out.stderr
        assert "clone" in out.stdout and REMOTE in out.stdout
        assert b"otterdiary" not in all_objects(wiki)
        assert not (wiki / DIARY).exists()
        assert versions(wiki, OTHER) == before_other
        refused = run_cli(data, "purge", DIARY)  # not a terminal and no --yes
        assert refused.returncode == 2 and "--yes" in refused.stderr
        wait_for(lambda: srv.get("/v1/health").status_code == 200, 10)
    finally:
        srv.stop()


# a second value, in a page's title and so in its file name (what remember names a note
# by), in another page's links, commit messages, the use record, the access and audit logs
NAMED = "-".join(["heron", "quartz", "lantern", "9021"])
# a third, the title of a page purged whole
WHOLE = "-".join(["ochre", "minnow", "sextant", "3388"])


def files_holding(data: Path, values: list[str]) -> dict[str, list[str]]:
    """Every file under ``data`` (git's object files replaced by the objects git lists,
    unpacked) that holds one of ``values``, as value -> relative paths: the data
    directory is listed, not a fixed set of places."""
    found: dict[str, list[str]] = {v: [] for v in values}
    wiki_objects = data / "wiki" / ".git" / "objects"
    for f in sorted(data.rglob("*")):
        if not f.is_file() or f.is_symlink() or wiki_objects in f.parents:
            continue
        raw = f.read_bytes()
        for v in values:
            if v.encode() in raw or v.encode() in str(f.relative_to(data)).encode():
                found[v].append(str(f.relative_to(data)))
    objects = all_objects(data / "wiki")
    for v in values:
        if v.encode() in objects:
            found[v].append("wiki/.git/objects (unpacked)")
    return {v: fs for v, fs in found.items() if fs}


def test_purge_removes_every_copy_file_names_messages_and_logs(tmp_path: Path) -> None:
    """A text in a note's title (so its file name, commit messages, another page's links,
    the use record, the audit and access logs and the spool) is found nowhere in the data
    directory after ``purge --text``; the page lives on under a neutral name that the
    links follow. A page purged whole leaves neither its title nor its path, and links to
    it read ``[purged]``. The answer counts the copies per place."""
    data = tmp_path / "data"
    wiki = data / "wiki"
    (wiki / "projects/p").mkdir(parents=True)
    porcelain.init(str(wiki))
    (wiki / "projects/p/index.md").write_text("# p\n", encoding="utf-8")
    porcelain.add(str(wiki), [str(wiki / "projects/p/index.md")])
    porcelain.commit(str(wiki), b"p", author=b"t <t@example.org>", committer=b"t <t@example.org>")
    srv = ServerProcess(data)
    srv.start()
    try:
        owner = srv.token
        # a note whose title holds the value: remember names its file after the title
        note = {"text": f"The vault unlocks with {NAMED}.", "title": f"Unlock {NAMED}"}
        r = post(srv, owner, "/v1/remember", {**note, "project": "p"})
        assert r.status_code in (200, 201), r.text
        path = r.json()["path"]
        assert NAMED in path
        # the same fact again: one more line in the use record, naming the path
        again = post(srv, owner, "/v1/remember", {**note, "project": "p"})
        assert again.status_code in (200, 201), again.text
        gone = post(srv, owner, "/v1/remember", {"text": "minnow facts", "title": WHOLE,
                                                 "project": "p"})  # fmt: skip
        assert gone.status_code in (200, 201), gone.text
        gone_path = gone.json()["path"]
        links = "projects/p/notes/keys.md"
        body = f"# Keys\n\nSee [[Unlock {NAMED}]], [[{path[:-3]}|this]] and [[{WHOLE}]].\n"
        put = httpx.put(srv.url + f"/v1/pages/{links}", json={"text": body},
                        headers=srv.headers, timeout=60)  # fmt: skip
        assert put.status_code in (200, 201), put.text
        ev = {
            "harness": "codex",
            "event": "UserPromptSubmit",
            "session_id": "purge-2",
            "cwd": "/x/p",
            "payload": {"prompt": f"where is {NAMED} kept?"},
        }
        assert post(srv, owner, "/v1/observations", ev).status_code == 202
        assert srv.get(f"/v1/pages/{path}").status_code == 200
        access_lines(data, NAMED.split("-")[0])
        wait_for(lambda: "keys.md" in subprocess.run(
            ["git", "-C", str(data / "wiki"), "log", "--name-only"],
            capture_output=True, text=True).stdout, 30, "the links page committed")  # fmt: skip
        before = files_holding(data, [NAMED, WHOLE])
        assert {"logs/audit.jsonl", "use/repeats.jsonl"} <= set(before[NAMED]), before
        assert any(p.startswith("spool/") for p in before[NAMED]), before

        r = post(srv, owner, "/v1/admin/purge", {"path": path, "text": NAMED})
        assert r.status_code == 200, r.text
        res = r.json()
        new_path = res["path"]
        assert res["renamed"] and NAMED not in new_path and new_path.endswith(".md")
        removed = res["removed"]
        assert removed["page_versions"] >= 1 and removed["file_names"] >= 1
        assert removed["links"] >= 1 and removed["commit_messages"] >= 1
        assert removed["use_record"] >= 1 and removed["audit_lines"] >= 1
        assert removed["spool_files"] >= 1 and removed["logs"].get("access.log", 0) >= 1

        r = post(srv, owner, "/v1/admin/purge", {"path": gone_path})
        assert r.status_code == 200, r.text
        assert WHOLE not in r.text

        left = files_holding(data, [NAMED, WHOLE])
        assert left == {}, left
        # the renamed page is there, and the links page points at it; the removed one's
        # link reads [purged]
        assert (wiki / new_path).is_file()
        text = (wiki / links).read_text()
        stem = new_path.rsplit("/", 1)[1][:-3]
        assert text.count(f"[[{stem}") == 2 and "[purged]" in text, text
        page = srv.get(f"/v1/pages/{links}")
        assert page.status_code == 200
        status = subprocess.run(
            ["git", "-C", str(wiki), "status", "--porcelain"], capture_output=True, text=True
        )
        assert status.stdout.strip() == ""
        fsck = subprocess.run(["git", "-C", str(wiki), "fsck"], capture_output=True, text=True)
        assert fsck.returncode == 0, fsck.stderr
        lines = [json.loads(x) for x in (data / "logs" / "audit.jsonl").read_text().splitlines()]
        done = [x for x in lines if x.get("op") == "purge" and x.get("result") == "ok"]
        assert done[0]["target"] == new_path and done[0]["audit_lines_redacted"] >= 1
    finally:
        srv.stop()
