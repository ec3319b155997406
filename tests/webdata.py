"""A small wiki for the web-view tests, served by a real server process.

:func:`build` writes pages into ``<data_dir>/wiki/`` before the server starts (notes that
link to each other, handoffs in every state, personal handoffs of two users, a page full
of XSS attempts) and issues tokens for ``bob`` and ``carol``; :func:`capture_session`
posts a real Claude Code hook sequence to ``/v1/observations`` so that a session page
with timeline entries ``^t1`` … ``^t14`` exists; :func:`hand_edit` changes a note on disk
and waits for the server's commit, so that the note has two versions and a diff.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dulwich.repo import Repo
from serverproc import ServerProcess
from support import shared_path, wait_for

from wiki_memory.auth import TokenStore

OWNER = "olivia"
PROJECT = "demo"
SESSION_ID = "web-sess-0001"
#: a word that appears only in the output of the tool call that is timeline entry ^t12
T12_WORD = "zebraquartz"
XSS_MARK = "__xss_ran"

DEPLOY = "projects/demo/notes/deploy-guide.md"
RUNBOOK = "projects/demo/notes/runbook.md"
XSS = "projects/demo/notes/xss.md"
H_OPEN = "projects/demo/handoffs/h-open.md"
H_CLAIMED = "projects/demo/handoffs/h-claimed.md"
H_BOB = "projects/demo/handoffs/h-bob-personal.md"
H_OLIVIA = "projects/demo/handoffs/h-olivia-personal.md"
#: a personal handoff where the handoffs module keeps them: the owner's people/ folder
H_BOB_PEOPLE = "people/bob/handoffs/h-bob-folder.md"
BOB_ONLY_WORD = "walrusbanjo"  # only in bob's personal handoff

PAGES: dict[str, str] = {
    DEPLOY: """---
type: note
title: Deploy Guide
aliases: [deploying]
tags: [ops, release]
related: "[[Runbook]]"
---
# Deploy Guide

Read the [[Runbook|runbook]] first, then follow [[Runbook#Rollback]] if it goes wrong.
The [[Release calendar]] page does not exist yet.

> [!warning] Freeze
> No deploys on Fridays.

| step | command |
|:-----|--------:|
| build | `make dist` |
| ship | `make deploy` |

```bash
make deploy ENV=prod
```

## Rollback

Run `make rollback` and tell the channel. ^warn-1
""",
    RUNBOOK: """---
type: note
title: Runbook
---
# Runbook

Before anything else, see the [[Deploy Guide]].

## Rollback

1. Stop the rollout.
2. Revert the release tag.
""",
    XSS: """---
type: note
title: "<script>window.__xss_ran=1</script>XSS probe"
note: "<img src=x onerror=\\"window.__xss_ran=2\\">"
link: "[[<img src=x onerror=window.__xss_ran=3>]]"
---
# XSS probe

<script>window.__xss_ran=4;alert(4)</script>

<img src=x onerror="window.__xss_ran=5;alert(5)">

[click me](javascript:window.__xss_ran=6) and [data](data:text/html,<script>alert(7)</script>)
and <a href="javascript:alert(8)">raw anchor</a>.

![[x" onerror="alert(9)<img src=x onerror=alert(10)>]]

![[<svg onload=alert(11)>.png]]

[[Deploy Guide|<b onmouseover=alert(12)>guide</b>]]

<iframe src="javascript:alert(13)"></iframe>

![pic](javascript:alert(14))
""",
    H_OPEN: """---
type: handoff
id: h-open
title: Finish the flaky login test
project: demo
status: open
visibility: project
user: olivia
harness: claude-code
to: any
---
# Finish the flaky login test

## Where we left off

See [[Deploy Guide]].
""",
    H_CLAIMED: """---
type: handoff
id: h-claimed
title: Migrate the session store
project: demo
status: claimed
visibility: project
user: olivia
harness: codex
claimed_by: bob
claimed_harness: codex
---
# Migrate the session store
""",
    H_BOB: f"""---
type: handoff
id: h-bob-personal
title: Bob's private reminder
project: demo
status: open
visibility: personal
user: bob
---
# Bob's private reminder

Remember the {BOB_ONLY_WORD}. Links to [[Runbook]].
""",
    H_BOB_PEOPLE: f"""---
type: handoff
id: h-bob-folder
title: Bob's folder reminder
project: demo
status: open
visibility: personal
user: bob
---
# Bob's folder reminder

The {BOB_ONLY_WORD} again, see [[Deploy Guide]].
""",
    H_OLIVIA: """---
type: handoff
id: h-olivia-personal
title: Olivia's private reminder
project: demo
status: open
visibility: personal
user: olivia
---
# Olivia's private reminder
""",
}


@dataclass
class WebServer:
    """A running server over the test wiki, with the users' tokens."""

    srv: ServerProcess
    tokens: dict[str, str]
    session_path: str = ""
    session_page_id: str = ""

    @property
    def url(self) -> str:
        return self.srv.url

    @property
    def wiki(self) -> Path:
        return self.srv.data_dir / "wiki"


def build(data_dir: Path, with_vault: bool = False) -> dict[str, str]:
    """Write the test pages (and optionally the shared docs vault) and issue tokens for
    ``bob`` and ``carol``. Returns ``{user: token}`` (the owner's is added at start)."""
    wiki = data_dir / "wiki"
    for rel, text in PAGES.items():
        p = wiki / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    if with_vault:
        import shutil

        shutil.copytree(
            shared_path("data", "vaults", "obsidian-tasks-docs", "vault"),
            wiki / "vaults" / "obsidian-tasks-docs",
        )
    (data_dir / "auth").mkdir(mode=0o700, parents=True, exist_ok=True)
    store = TokenStore(data_dir / "auth")
    return {
        "bob": store.create("bob", projects=["demo"]),
        "carol": store.create("carol", projects=["demo"]),
    }


def start(data_dir: Path, with_vault: bool = False, env: dict[str, str] | None = None) -> WebServer:
    """Build the wiki in ``data_dir``, start a server on it, capture the session."""
    tokens = build(data_dir, with_vault)
    srv = ServerProcess(
        data_dir,
        env={"USER": OWNER, "WIKI_MEMORY_COMMIT_DELAY_SECONDS": "0.05", **(env or {})},
    )
    srv.start(timeout=120)
    tokens[OWNER] = srv.token
    ws = WebServer(srv, tokens)
    capture_session(ws)
    return ws


def start_in_process(
    data_dir: Path, with_vault: bool = False, env: dict[str, str] | None = None
) -> WebServer:
    """:func:`start` with the app in this process (``appkit.AppServer``: its routes, the
    watcher and the writer as ``serve`` runs them, no process or socket) for the tests
    that check what the view answers; ``srv.new_client()`` gives a browser's client."""
    from appkit import AppServer

    tokens = build(data_dir, with_vault)
    srv = AppServer(
        data_dir,
        env={"USER": OWNER, "WIKI_MEMORY_COMMIT_DELAY_SECONDS": "0.05", **(env or {})},
    ).start()
    tokens[OWNER] = srv.token
    ws = WebServer(srv, tokens)  # type: ignore[arg-type]  # answers as a ServerProcess
    capture_session(ws)
    return ws


def _payload(name: str) -> dict[str, Any]:
    return json.loads(shared_path("data", "hooks", "claude-code", f"{name}.json").read_text())


def capture_session(ws: WebServer) -> None:
    """Post a 16-event Claude Code session (ended) and wait for its committed page.

    Arrival numbers: 1 SessionStart, then four rounds of prompt (2, 5, 8, 11) and a tool
    call (pre+post: 3-4, 6-7, 9-10, 12-13), 14 Stop, 15 SessionEnd: timeline entry ^t12 is
    the fourth tool call, whose output holds :data:`T12_WORD`.
    """
    events = []
    n = 0

    def add(name: str, **changes: Any) -> None:
        nonlocal n
        n += 1
        payload = _payload(name)
        payload.update(changes)
        payload["session_id"] = SESSION_ID
        events.append(
            {
                "harness": "claude-code",
                "event": name,
                "session_id": SESSION_ID,
                "project": PROJECT,
                "cwd": payload.get("cwd", "/home/user/project"),
                "event_id": f"{SESSION_ID}-{n}",
                "ts": f"2026-11-30T10:00:{n:02d}Z",
                "payload": payload,
            }
        )

    add("SessionStart")
    for round_ in range(1, 5):
        add("UserPromptSubmit", prompt=f"Round {round_}: why does the login test fail on CI?")
        pre = _payload("PreToolUse")
        tool_input = copy.deepcopy(pre["tool_input"])
        tool_input["command"] = f"pytest tests/test_login.py -k round{round_}"
        tid = f"toolu_web_{round_}"
        add("PreToolUse", tool_input=tool_input, tool_use_id=tid, tool_name="Bash")
        word = T12_WORD if round_ == 4 else f"plainoutput{round_}"
        add(
            "PostToolUse",
            tool_name="Bash",
            tool_input=tool_input,
            tool_use_id=tid,
            tool_response={"stdout": f"1 passed ({word})", "stderr": "", "interrupted": False},
        )
    add("Stop")
    add("SessionEnd")
    for ev in events:
        r = ws.srv.post("/v1/observations", ev)
        assert r.status_code == 202, r.text

    def page() -> Any:
        r = ws.srv.get("/v1/pages", params={"project": PROJECT, "kind": "session"})
        pages = r.json()["pages"]
        if not pages:
            return None
        full = ws.srv.get(f"/v1/pages/{pages[0]['path']}").json()
        if full["metadata"].get("status") != "ended" or "^t12" not in full["content"]:
            return None
        return full

    full = wait_for(page)
    ws.session_path = full["path"]
    ws.session_page_id = full["metadata"]["id"]
    wait_for(lambda: committed(ws, ws.session_path))


def committed(ws: WebServer, rel: str) -> bool:
    """True when HEAD's tree holds ``rel`` with the bytes now on disk."""
    repo = Repo(str(ws.wiki))
    try:
        tree = repo[repo[repo.head()].tree]
        try:
            _, sha = tree.lookup_path(repo.object_store.__getitem__, rel.encode())
        except KeyError:
            return False
        return bool(repo[sha].as_raw_string() == (ws.wiki / rel).read_bytes())
    finally:
        repo.close()


def hand_edit(ws: WebServer, rel: str, old: str, new: str) -> None:
    """Edit a page on disk as a person would and wait for the server's commit of it."""
    p = ws.wiki / rel
    p.write_text(p.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    wait_for(lambda: committed(ws, rel), timeout=30)


def snapshot(wiki: Path) -> tuple[str | None, dict[str, str]]:
    """``(HEAD sha, {path: sha256 of bytes})`` of every file under ``wiki`` (``.git``
    included, except files git itself rewrites on reads: none are expected)."""
    import hashlib

    files = {}
    for p in sorted(wiki.rglob("*")):
        if p.is_file() and not p.is_symlink():
            files[p.relative_to(wiki).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    repo = Repo(str(wiki))
    try:
        head = repo.head().decode()
    finally:
        repo.close()
    return head, files
