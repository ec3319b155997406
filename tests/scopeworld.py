"""A small wiki with pages two users must not see of each other's, served by a real server,
for ``tests/core/test_scope_faces.py``.

Users: the local owner (``olivia``), ``alice`` and ``bob``; tokens made through the CLI
(``wiki-memory token`` / ``token create --user NAME``). Every string that only a hidden
page holds contains ``zqx`` (:data:`MARK`), so "bob never sees it" is one substring check
on every body bob gets back. Hidden pages also hold the word ``kumquat``; the shared page
holds ``kumquat`` and ``papaya`` (the control word: only the shared page has it), so what
bob gets for ``kumquat`` must look exactly like what he gets for ``papaya``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from serverproc import ServerProcess

MARK = "zqx"  # in every string only a hidden page holds
WORD = "kumquat"  # in hidden pages and in the shared page
CONTROL = "papaya"  # in the shared page only
OWNER = "olivia"
USERS = ("alice", "bob")

SHARED = "projects/p/shared.md"
SHARED_TITLE = "Shared Plan"
ALICE_FOLDER = "people/alice/secret.md"  # under people/alice/
ALICE_PERSONAL = "projects/p/notes/private.md"  # visibility: personal, user: alice
OWNER_FOLDER = f"people/{OWNER}/diary.md"  # the owner's own folder: hidden from bob
BOB_OWN = "people/bob/own.md"  # bob's own folder: bob sees it, the others do not
SYMLINK_DIR = "projects/p/link"  # -> ../../people/alice
HARDLINK = "projects/p/hard.md"  # a hard link to ALICE_FOLDER
PINNED = "projects/p/rules.md"  # pinned: true, put there by a person
PLAIN_HTTP = "projects/p/plain-http.md"  # for bob's ordinary edits over HTTP
PLAIN_MCP = "projects/p/plain-mcp.md"  # ... and over MCP

ALICE_SESSION = "projects/p/sessions/2026-01-02-alice-private-a11ce000.md"
ALICE_SESSION_ID = "ses_a11ce0000000a11c"
ALICE_SESSION_HARNESS_ID = "alicesession1"

PAGES: dict[str, str] = {
    SHARED: f"""---
title: {SHARED_TITLE}
project: p
---
# {SHARED_TITLE}

The {WORD} rollout plan, code name {CONTROL}.

Hidden: [[people/alice/secret]], [[projects/p/notes/private]], [[Alice Musings]].

Absent: [[people/alice/nosuch]], [[projects/p/notes/nosuch]], [[Nobody Musings]].
""",
    ALICE_FOLDER: f"""---
title: Alice Folder zqxatitle1
---
# Alice Folder zqxatitle1

zqxamarkfolder: alice's own {WORD} notes. Back to [[projects/p/shared]] and [[{SHARED_TITLE}]].
""",
    ALICE_PERSONAL: f"""---
title: Alice Private Note zqxatitle2
aliases: [Alice Musings]
visibility: personal
user: alice
project: p
---
# Alice Private Note zqxatitle2

zqxamarkpersonal: what alice thinks of the {WORD} plan. See [[projects/p/shared]].
""",
    ALICE_SESSION: f"""---
type: session
id: {ALICE_SESSION_ID}
title: Alice private session zqxatitle3
project: p
user: alice
harness: claude-code
session: {ALICE_SESSION_HARNESS_ID}
visibility: personal
started: 2026-01-02T10:00:00Z
ended: 2026-01-02T10:30:00Z
---
# Alice private session zqxatitle3

## Timeline

- zqxamarksession: alice asked about {WORD} and [[projects/p/shared]] ^t1
""",
    OWNER_FOLDER: f"""---
title: Owner Diary zqxotitle
---
# Owner Diary zqxotitle

zqxomark: the owner's {WORD} and {CONTROL} diary, linking [[projects/p/shared]].
""",
    BOB_OWN: f"""---
title: Bob Own Page
---
# Bob Own Page

bobownword: bob's {WORD} and {CONTROL} scratch, linking [[projects/p/shared]].
""",
    PINNED: """---
title: Team Rules
pinned: true
project: p
---
# Team Rules

Always run the tests.
""",
    PLAIN_HTTP: "---\ntitle: Plain HTTP\nproject: p\n---\n# Plain HTTP\n\nnothing yet\n",
    PLAIN_MCP: "---\ntitle: Plain MCP\nproject: p\n---\n# Plain MCP\n\nnothing yet\n",
}

#: strings a viewer must never get back (any body, any face)
FORBIDDEN = {"bob": [MARK], OWNER: ["zqxa", "bobownword"], "alice": ["zqxo", "bobownword"]}


def cli_env(data_dir: Path, token: str | None = None, url: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WIKI_MEMORY_")}
    env["USER"] = OWNER
    env["LOGNAME"] = OWNER
    env["WIKI_MEMORY_HOME"] = str(data_dir)
    if token:
        env["WIKI_MEMORY_TOKEN"] = token
    if url:
        env["WIKI_MEMORY_URL"] = url
    return env


def cli(
    data_dir: Path,
    *args: str,
    token: str | None = None,
    url: str | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wiki_memory.cli.main", "--data-dir", str(data_dir), *args],
        env=cli_env(data_dir, token, url),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@dataclass
class World:
    data_dir: Path
    server: ServerProcess
    tokens: dict[str, str]  # user -> token (OWNER, alice, bob)
    handoffs: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> handoff JSON

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def wiki(self) -> Path:
        return self.data_dir / "wiki"

    def headers(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[user]}"}

    def client(self, user: str) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=self.headers(user), timeout=60)


def build(root: Path) -> World:
    """Make the data directory (tokens through the CLI, pages, links), start the server and
    create the handoffs through the API as alice."""
    data = root / "data"
    owner = cli(data, "token")
    assert owner.returncode == 0, owner.stderr
    tokens = {OWNER: owner.stdout.strip()}
    for u in USERS:
        r = cli(data, "token", "create", "--user", u, "--project", "p")
        assert r.returncode == 0, r.stderr
        tokens[u] = r.stdout.strip().splitlines()[0]
    wiki = data / "wiki"
    for rel, text in PAGES.items():
        p = wiki / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    (wiki / SYMLINK_DIR).symlink_to(Path("../../people/alice"), target_is_directory=True)
    os.link(wiki / ALICE_FOLDER, wiki / HARDLINK)

    server = ServerProcess(data, env={"USER": OWNER, "LOGNAME": OWNER}).start()
    world = World(data, server, tokens)
    with world.client("alice") as c:
        r = c.post(
            "/v1/handoffs",
            json={
                "project": "p",
                "title": f"Personal {WORD} zqxahandoff",
                "where_we_left_off": "zqxahandoffbody",
                "visibility": "personal",
            },
        )
        assert r.status_code == 201, r.text
        world.handoffs["personal"] = r.json()["handoff"]
        r = c.post(
            "/v1/handoffs",
            json={
                "project": "p",
                "title": f"Open {WORD} {CONTROL} work",
                "where_we_left_off": "here",
            },
        )
        assert r.status_code == 201, r.text
        world.handoffs["shared"] = r.json()["handoff"]
    return world


# -- spellings ------------------------------------------------------------------------


def fullwidth(s: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in s)


def pct_letters(s: str) -> str:
    return "".join(f"%{ord(c):02X}" if c.isalpha() else c for c in s)


# Each spelling turns (folder, user, name) into a path; for pages outside people/ the
# "user" is the folder's last segment. Spellings apply to the user segment and keep the
# page's own name (which the rule never normalizes).
SPELLINGS: dict[str, Any] = {
    "as_is": lambda d, u, n: f"{d}/{u}/{n}",
    "double_slash": lambda d, u, n: f"{d}//{u}/{n}",
    "trailing_slash": lambda d, u, n: f"{d}/{u}/{n}/",
    "dot_prefix": lambda d, u, n: f"./{d}/{u}/{n}",
    "dotdot_inside": lambda d, u, n: f"{d}/x/../{u}/{n}",
    "pct_letters": lambda d, u, n: f"{d}/{pct_letters(u)}/{n}",  # decoded by the URL layer
    "upper_user": lambda d, u, n: f"{d.capitalize()}/{u.upper()}/{n}",
    "title_user": lambda d, u, n: f"{d}/{u.capitalize()}/{n}",
    "fullwidth_user": lambda d, u, n: f"{d}/{fullwidth(u)}/{n}",
    "fullwidth_first": lambda d, u, n: f"{d}/{fullwidth(u[:1])}{u[1:]}/{n}",
    "nfkc_user": lambda d, u, n: f"{d}/{u.replace('i', chr(0x2170))}/{n}",  # small roman one
    "fullwidth_folder": lambda d, u, n: f"{fullwidth(d[:1])}{d[1:]}/{u}/{n}",
    "backslash": lambda d, u, n: f"{d}\\{u}\\{n}",
}


def split(path: str) -> tuple[str, str, str]:
    folder, _, rest = path.rpartition("/")
    d, _, u = folder.rpartition("/")
    return d, u, rest


# -- what a viewer may see, computed from the files ------------------------------------

_FW = {chr(c + 0xFEE0): chr(c) for c in range(0x21, 0x7F)}


def fold(segment: str) -> str:
    """A people/<user> segment as the rule compares it: NFKC, then case-folded."""
    import unicodedata

    return unicodedata.normalize("NFKC", segment).casefold()


def _frontmatter(text: str) -> dict[str, str]:
    if not text.startswith("---\n"):
        return {}
    end = text.find("\n---", 4)
    out: dict[str, str] = {}
    for line in text[4:end].splitlines():
        k, sep, v = line.partition(":")
        if sep:
            out[k.strip()] = v.strip()
    return out


def may_see(viewer: str, wiki: Path, rel: str) -> bool:
    """The rule, for a file inside ``wiki`` (no symlinks on the way, one link only)."""
    parts = rel.split("/")
    if len(parts) >= 3 and fold(parts[0]) == "people" and fold(parts[1]) != fold(viewer):
        return False
    p = wiki / rel
    cur = wiki
    for part in parts:
        cur = cur / part
        if cur.is_symlink():
            return False
    try:
        if p.stat().st_nlink > 1:
            return False
        meta = _frontmatter(p.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return False
    if meta.get("visibility") == "personal" and meta.get("user") != viewer:
        return False
    return True


def visible_pages(viewer: str, wiki: Path) -> set[str]:
    """Every ``.md`` page ``viewer`` may see (hidden folders skipped, symlinks not followed)."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(wiki, followlinks=False):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for f in filenames:
            if not f.endswith(".md") or f.startswith("."):
                continue
            rel = str(Path(dirpath, f).relative_to(wiki))
            if may_see(viewer, wiki, rel):
                out.add(rel)
    return out


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (no symlink followed) with its bytes."""
    out = {}
    for dirpath, _dirs, files in os.walk(folder, followlinks=False):
        for f in files:
            p = Path(dirpath, f)
            out[str(p.relative_to(folder))] = p.read_bytes()
    return out
