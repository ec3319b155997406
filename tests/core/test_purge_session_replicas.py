"""A purge of a session page across two replicas and a hub (docs/operations.md,
"Purge" and "After a purge"; docs/sessions.md for the file names): a value in a
session's first prompt (its body and title) and in the file name an earlier release gave
the page (``<date>-<slug>-<short id>.md``), linked from another page, synced to a second
replica through a bare hub; then ``purge --text`` and ``sync --after-purge`` on the
server that captured it, the other replica following the announced rewrite. A byte
search over every file of both data directories and of the hub (git objects unpacked,
the files listed, not a fixed set of places) finds the value nowhere; the link follows
the page's new name on both replicas. The session goes on after the purge; then the
other session's page is purged whole and its link reads ``[purged]`` everywhere."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from appkit import AppServer
from clikit import run_cli_here
from gitkit import all_objects, holding
from serverproc import ServerProcess
from support import make_memory, wait_for

from wiki_memory.wiki import replicate as rp
from wiki_memory.wiki.page import parse_metadata
from wiki_memory.wiki.verbatim import slugify

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(shutil.which("git") is None, reason="needs stock git"),
]

#: the purge announcements' key, the same on every server of the hub
PURGE_KEY = "team-purge-key"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def clean(wiki: Path) -> bool:
    return (
        subprocess.run(
            ["git", "-C", str(wiki), "status", "--porcelain"], capture_output=True, text=True
        ).stdout.strip()
        == ""
    )


def capture(
    srv: ServerProcess | AppServer, session: str, events: list[tuple[str, dict[str, str]]]
) -> None:
    for event, payload in events:
        r = srv.post(
            "/v1/observations",
            {
                "harness": "codex",
                "event": event,
                "session_id": session,
                "project": "p",
                "event_id": f"{session}-{event}-{json.dumps(payload)}",
                "payload": payload,
            },
        )
        assert r.status_code == 202, r.text


def session_pages(wiki: Path) -> dict[str, str]:
    """session_id -> the page's wiki-relative path."""
    out = {}
    for f in sorted((wiki / "projects/p/sessions").glob("*.md")):
        out[str(parse_metadata(f.read_bytes())["session_id"])] = f.relative_to(wiki).as_posix()
    return out


def cli(data: Path, *args: str) -> str:
    """``wiki-memory ARGS`` over ``data`` in this process (against the server running
    over it, if any); its standard output. Fails the test on a non-zero exit."""
    r = run_cli_here(data, *args)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_a_session_purged_by_text_then_another_whole_leaves_nothing_on_replicas_or_hub(
    tmp_path: Path, stop_after
) -> None:
    value = "-".join(["tamarind", "wharf", "6083"])
    whole = "-".join(["lichen", "ferry", "3917"])
    hub = tmp_path / "hub.git"
    subprocess.run(["git", "init", "-q", "--bare", str(hub)], check=True)
    a_dir = tmp_path / "a"
    (a_dir / "wiki/projects/p").mkdir(parents=True)
    (a_dir / "wiki/projects/p/index.md").write_text("# p\n")
    env = {"WIKI_MEMORY_SYNC_PURGE_SECRET": PURGE_KEY}
    # the captures need the app only; the purge and syncs below go to a server process
    first = AppServer(a_dir, env=env).start()
    try:
        cli(a_dir, "remote", "add", "origin", str(hub))
        capture(first, "s-kept", [("UserPromptSubmit", {"prompt": f"where is {value} kept?"}),
                                ("Stop", {"last_assistant_message": "in the shed"}),
                                ("SessionEnd", {"reason": "exit"})])  # fmt: skip
        capture(first, "s-gone", [("UserPromptSubmit", {"prompt": f"ring {whole} at noon"}),
                                ("Stop", {"last_assistant_message": "done"}),
                                ("SessionEnd", {"reason": "exit"})])  # fmt: skip
        wiki = a_dir / "wiki"
        wait_for(lambda: len(session_pages(wiki)) == 2 and clean(wiki), 60, "two session pages")
    finally:
        first.stop()
    pages = session_pages(wiki)
    new_style, gone = pages["s-kept"], pages["s-gone"]
    assert value not in new_style and whole not in gone  # new pages: date and short id
    # the page as an earlier release named it: the title's slug in the file name, the
    # title in the commit message; the spool state points at it
    meta = parse_metadata((wiki / new_style).read_bytes())
    title = str(meta["title"])
    assert value in title
    date, short = Path(new_style).stem.split("-")[:3], Path(new_style).stem.rsplit("-", 1)[1]
    old = f"projects/p/sessions/{'-'.join(date)}-{slugify(title)}-{short}.md"
    assert value in old
    git(wiki, "mv", new_style, old)
    git(wiki, "commit", "-q", "-m", f"Add session {title} (codex)")
    states = [
        s
        for s in (a_dir / "spool").glob("*.state")
        if json.loads(s.read_text())["path"] == new_style
    ]
    assert len(states) == 1
    state = json.loads(states[0].read_text())
    states[0].write_text(json.dumps({**state, "path": old}))
    keys = "projects/p/notes/keys.md"
    (wiki / "projects/p/notes").mkdir(parents=True)
    old_stem, gone_stem = Path(old).stem, Path(gone).stem
    (wiki / keys).write_text(f"# keys\n[[{old_stem}]], [[{old_stem}#^t1|asked]], [[{gone_stem}]]\n")
    git(wiki, "add", keys)
    git(wiki, "commit", "-q", "-m", "keys")

    b = make_memory(tmp_path / "b", owner="ben", sync_purge_secret=PURGE_KEY)
    stop_after(b)
    rp.add_remote(b.wiki_dir, "origin", str(hub))
    srv = ServerProcess(a_dir, env=env).start()
    try:
        cli(a_dir, "sync")
        b.sync.sync()
        assert (b.wiki_dir / old).is_file() and (b.wiki_dir / gone).is_file()
        for needle in (value, whole):
            assert needle.encode() in all_objects(hub)
            assert holding(tmp_path / "b", needle.encode())

        cli(a_dir, "purge", old, "--text", value, "--yes")
        cli(a_dir, "sync", "--after-purge", "--yes")
        assert b.sync.sync()[0].action == "followed rewrite"
        renamed = [p for p in session_pages(wiki).values() if Path(p).name.startswith("purged-")]
        assert len(renamed) == 1, session_pages(wiki)
        new_stem = Path(renamed[0]).stem
        for w in (wiki, b.wiki_dir):
            assert not (w / old).exists() and (w / renamed[0]).is_file()
            text = (w / keys).read_text()
            assert text == f"# keys\n[[{new_stem}]], [[{new_stem}#^t1|asked]], [[{gone_stem}]]\n"
            assert "[purged]" in (w / renamed[0]).read_text()
        # the link resolves on both replicas: the index gives it the renamed page
        assert b.index.resolve_names([new_stem], keys, None)[new_stem] == renamed[0]
        r = srv.get(f"/v1/pages/{keys}")
        assert r.status_code == 200, r.text

        # the session goes on after the purge: its page keeps the new name
        capture(srv, "s-kept", [("UserPromptSubmit", {"prompt": "and the spare key?"}),
                                ("Stop", {"last_assistant_message": "under the mat"}),
                                ("SessionEnd", {"reason": "exit"})])  # fmt: skip
        wait_for(
            lambda: "spare key" in (wiki / renamed[0]).read_text() and clean(wiki),
            60,
            "the session's next turn on its renamed page",
        )
        assert session_pages(wiki)["s-kept"] == renamed[0]

        # the other session's page purged whole
        cli(a_dir, "purge", gone, "--yes")
        cli(a_dir, "sync", "--after-purge", "--yes")
        assert b.sync.sync()[0].action == "followed rewrite"
        for w in (wiki, b.wiki_dir):
            assert not (w / gone).exists()
            text = (w / keys).read_text()
            assert text == f"# keys\n[[{new_stem}]], [[{new_stem}#^t1|asked]], [purged]\n"
    finally:
        srv.stop()
    b.stop()
    for root in (a_dir, tmp_path / "b", hub):
        for needle in (value, whole):
            assert holding(root, needle.encode()) == [], (root, needle)
        fsck = subprocess.run(["git", "-C", str(root / "wiki" if root != hub else root), "fsck"],
                              capture_output=True, text=True)  # fmt: skip
        assert fsck.returncode == 0, fsck.stdout + fsck.stderr
