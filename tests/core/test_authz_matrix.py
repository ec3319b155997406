"""The authorization matrix of a team server, generated from the faces' own tables.

Every HTTP route (the app's route table), MCP tool (``tools/list``), web page and
server-side CLI command (the parser) × every kind of caller (the owner, an admin, a member
with a write grant, a member with a read grant, a member without a grant, a reader, a
revoked token, no token) × every kind of target (the caller's own personal page, another
user's personal page, a page of the granted project, a page of a project without a grant)
→ the answer ``docs/team-server.md`` documents: ``ok``, ``401``, ``403`` or ``404``.

The expected answers come from one function of the role and the target (:func:`expect`);
the table in ``docs/team-server.md`` is rendered from the same function and must appear
there verbatim (:func:`test_the_documented_table_is_the_tested_one`). Each route, tool and
command has a row in :data:`ROWS` saying which kind of operation it is and how it is
probed (or why it is exempt); one without a row fails :func:`test_every_face_has_a_row`.

Reads that list or search answer ``404`` when the target is absent from what comes back
(hidden exactly like a missing page); ``—`` in the table means the operation takes no
such target.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faces
import httpx
import pytest
from clikit import run_cli_here, run_in_process
from serverproc import ServerProcess
from support import REPO, wait_for
from teamkit import NETWORK, McpRaw, make_token, status_word

pytestmark = pytest.mark.process

OWNER = "olivia"
#: viewer -> (user name, role, grant on project g); ``None`` user: no token at all
VIEWERS: dict[str, tuple[str | None, str, str | None]] = {
    "owner": (OWNER, "owner", "write"),
    "admin": ("ada", "admin", "write"),
    "member (write)": ("wes", "member", "write"),
    "member (read)": ("rob", "member", "read"),
    "member (no grant)": ("nia", "member", None),
    "reader": ("rex", "reader", "read"),
    "revoked token": ("rev", "member", "write"),
    "no token": (None, "none", None),
}
TARGETS = ("own personal", "other's personal", "granted project", "ungranted project")
GRANTED, UNGRANTED = "g", "u"
ALL = TARGETS
PROJECTS_ONLY = ("granted project", "ungranted project")
HANDOFF_TARGETS = ("other's personal", "granted project", "ungranted project")
NONE = ("any",)  # an operation with no target

# --------------------------------------------------------------------------------------
# What each kind of operation answers (the documented rule)
# --------------------------------------------------------------------------------------

KINDS = {
    "read": "read a page, list, search, recall, expand, brief, handoff list/show",
    "write": "write a page (PUT, page_write, remember), capture, handoff create/claim/"
    "complete/release",
    "cancel": "cancel a handoff (its creator — here the owner — or the wiki's owner)",
    "pin": "pin or unpin a page",
    "admin": "reindex, the audit log",
    "any token": "pages that show no page data (home, a path with no route)",
}


def readable(viewer: str, target: str) -> bool:
    _user, role, grant = VIEWERS[viewer]
    if target == "own personal":
        return True
    if target == "other's personal":
        return False
    if role in ("owner", "admin"):
        return True
    return target == "granted project" and grant is not None


def writable(viewer: str, target: str) -> bool:
    _user, role, grant = VIEWERS[viewer]
    if not readable(viewer, target) or role == "reader":
        return False
    if target == "own personal" or role in ("owner", "admin"):
        return True
    return target == "granted project" and grant == "write"


def expect(kind: str, viewer: str, target: str) -> str:
    """The documented answer of an operation of ``kind`` for ``viewer`` on ``target``."""
    if viewer in ("revoked token", "no token"):
        return "401"
    role = VIEWERS[viewer][1]
    if kind == "any token":
        return "ok" if target == "any" else "404"
    if kind == "admin":
        return "ok" if role in ("owner", "admin") else "403"
    if not readable(viewer, target):
        return "404"
    if kind == "read":
        return "ok"
    if kind == "pin":
        return "ok" if role in ("owner", "admin") else "403"
    if not writable(viewer, target):
        return "403"
    if kind == "cancel":
        return "ok" if role == "owner" else "403"
    return "ok"


def documented_table() -> str:
    """The markdown table docs/team-server.md must hold: one row per kind and caller."""
    lines = ["| operation | caller | " + " | ".join(TARGETS) + " |"]
    lines.append("| --- | --- |" + " --- |" * len(TARGETS))
    for kind in KINDS:
        for viewer in VIEWERS:
            if kind in ("admin", "any token"):
                cells = [expect(kind, viewer, "any")] + ["—"] * (len(TARGETS) - 1)
            else:
                cells = [expect(kind, viewer, t) for t in TARGETS]
            lines.append(f"| {kind} | {viewer} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def test_the_documented_table_is_the_tested_one() -> None:
    text = (REPO / "docs" / "team-server.md").read_text(encoding="utf-8")
    assert documented_table() in text, (
        "docs/team-server.md must hold this table (rendered from expect()):\n" + documented_table()
    )


# --------------------------------------------------------------------------------------
# The world: one server, the users above, pages in each kind of target
# --------------------------------------------------------------------------------------


@dataclass
class World:
    data: Path
    server: ServerProcess
    tokens: dict[str, str | None]  # viewer -> token
    handoffs: dict[tuple[str, str, str], str]  # (viewer, project, purpose) -> id
    personal_handoffs: dict[str, str]  # user -> id of their personal handoff in g
    empty: Path  # a data directory with no token: the CLI of someone without one
    mcp: dict[str, McpRaw]
    counter: list[int]

    @property
    def url(self) -> str:
        return self.server.url

    def headers(self, viewer: str) -> dict[str, str]:
        tok = self.tokens[viewer]
        return {"Authorization": f"Bearer {tok}"} if tok else {}

    def fresh(self) -> int:
        self.counter[0] += 1
        return self.counter[0]


def user_of(viewer: str) -> str:
    return VIEWERS[viewer][0] or "nobody"


def other_of(viewer: str) -> str:
    return "rob" if user_of(viewer) == "wes" else "wes"


def page_of(viewer: str, target: str) -> str:
    return {
        "own personal": f"people/{user_of(viewer)}/own.md",
        "other's personal": f"people/{other_of(viewer)}/own.md",
        "granted project": f"projects/{GRANTED}/notes/page.md",
        "ungranted project": f"projects/{UNGRANTED}/notes/page.md",
    }[target]


def folder_of(viewer: str, target: str) -> str:
    return page_of(viewer, target).rsplit("/", 1)[0]


def marker_of(viewer: str, target: str) -> str:
    return {
        "own personal": f"pmark{user_of(viewer)}",
        "other's personal": f"pmark{other_of(viewer)}",
        "granted project": "gmarkword",
        "ungranted project": "umarkword",
    }[target]


def project_of(target: str) -> str:
    return GRANTED if target == "granted project" else UNGRANTED


USERS = ("olivia", "ada", "wes", "rob", "nia", "rex", "rev")


def _page(title: str, body: str, extra: str = "") -> str:
    return f"---\ntitle: {title}\n{extra}---\n# {title}\n\n{body}\n"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("authz")
    data = root / "data"
    env = {"USER": OWNER, "LOGNAME": OWNER}
    assert run_cli_here(data, "token", env=env).returncode == 0
    wiki = data / "wiki"
    for u in USERS:
        p = wiki / "people" / u / "own.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(_page(f"Own {u}", f"pmark{u} zebra notes of {u}", "tags: [zebratag]\n"))
    for proj in (GRANTED, UNGRANTED):
        d = wiki / "projects" / proj / "notes"
        d.mkdir(parents=True, exist_ok=True)
        (d / "page.md").write_text(
            _page(f"Page {proj}", f"{proj}markword zebra plan", "tags: [zebratag]\n")
        )
        (d / "pinned.md").write_text(
            _page(f"Rules {proj}", f"{proj}pinword always", "pinned: true\n")
        )
    tokens: dict[str, str | None] = {"owner": None, "no token": None}
    for viewer, (user, role, grant) in VIEWERS.items():
        if user is None or role == "owner":
            continue
        projects = [GRANTED] if grant else []
        args = [*projects]
        tok = make_token(data, user, role, *args, here=True)
        if grant == "read" and role == "member":
            assert (
                run_cli_here(
                    data, "token", "grant", "--user", user, "--project", GRANTED, "--read-only"
                ).returncode
                == 0
            )
        tokens[viewer] = tok
    server = ServerProcess(data, env=env).start()
    tokens["owner"] = server.token
    assert run_cli_here(data, "token", "revoke", "--user", "rev").returncode == 0
    own = {"Authorization": f"Bearer {server.token}"}
    handoffs: dict[tuple[str, str, str], str] = {}
    with httpx.Client(base_url=server.url, headers=own, timeout=60) as c:
        for viewer in VIEWERS:
            for proj in (GRANTED, UNGRANTED):
                for purpose in ("http", "claim", "complete", "release", "cancel", "cli"):
                    # addressed to the viewer who acts on it: another user's session-start
                    # brief (memory_brief over MCP) must not lease it away first, which
                    # would turn the viewer's claim into "offered" by the order of cells
                    to = VIEWERS[viewer][0] or "any"
                    r = c.post(
                        "/v1/handoffs",
                        json={
                            "project": proj,
                            "title": f"hmark{proj} {viewer} {purpose}",
                            "to": to,
                        },
                    )
                    assert r.status_code == 201, r.text
                    handoffs[(viewer, proj, purpose)] = r.json()["handoff"]["id"]
        # a session page in each project (for /session/{sid})
        for proj in (GRANTED, UNGRANTED):
            for ev in ("UserPromptSubmit", "SessionEnd"):
                r = c.post(
                    "/v1/observations",
                    json={
                        "harness": "claude-code",
                        "event": ev,
                        "session_id": f"sess-{proj}",
                        "project": proj,
                        "cwd": f"/w/{proj}",
                        "payload": {"prompt": f"work on {proj}smark"},
                    },
                )
                assert r.status_code == 202, r.text
    personal: dict[str, str] = {}
    for viewer in ("admin", "member (write)"):
        with httpx.Client(
            base_url=server.url,
            headers={"Authorization": f"Bearer {tokens[viewer]}"},
            timeout=60,
        ) as c:
            r = c.post(
                "/v1/handoffs",
                json={
                    "project": GRANTED,
                    "title": f"personal hpmark{user_of(viewer)}",
                    "visibility": "personal",
                },
            )
            assert r.status_code == 201, r.text
            personal[user_of(viewer)] = r.json()["handoff"]["id"]
    wait_for(
        lambda: all(
            list((wiki / "projects" / p / "sessions").glob("*.md")) for p in (GRANTED, UNGRANTED)
        ),
        30,
    )
    empty = root / "nobody"
    w = World(data, server, tokens, handoffs, personal, empty, {}, [0])
    for viewer in VIEWERS:
        w.mcp[viewer] = McpRaw(server.url, tokens[viewer])
    yield w
    server.stop()


# --------------------------------------------------------------------------------------
# Probes: one per route, tool, web page and CLI command
# --------------------------------------------------------------------------------------

Probe = Callable[[World, str, str], str]


def http(w: World, viewer: str, method: str, path: str, **kw: Any) -> httpx.Response:
    return NETWORK.request(
        method, w.url + path, headers=w.headers(viewer), timeout=60, follow_redirects=False, **kw
    )


def web_answer(r: httpx.Response) -> str:
    if r.status_code in (302, 303) and "/login" in r.headers.get("location", ""):
        return "401"  # a browser without a sign-in is sent to the sign-in form
    return status_word(r.status_code)


def seen(r: httpx.Response, needle: str) -> str:
    if r.status_code >= 300:
        return web_answer(r)
    return "ok" if needle in r.text else "404"


def personal_of_other(w: World, viewer: str) -> str:
    """Whose personal handoff stands for "another user's personal page" (never the
    viewer's own)."""
    other = other_of(viewer)
    return other if other in w.personal_handoffs else "ada"


def handoff_for(w: World, viewer: str, target: str, purpose: str) -> str:
    if target == "other's personal":
        return w.personal_handoffs[personal_of_other(w, viewer)]
    return w.handoffs[(viewer, project_of(target), purpose)]


def p_http_capture(w: World, v: str, t: str) -> str:
    n = w.fresh()
    r = http(
        w,
        v,
        "POST",
        "/v1/observations",
        json={
            "harness": "codex",
            "event": "UserPromptSubmit",
            "session_id": f"m-{n}",
            "project": project_of(t),
            "cwd": f"/w/{project_of(t)}",
            "payload": {"prompt": "hello"},
        },
    )
    return status_word(r.status_code)


def p_http_recall(w: World, v: str, t: str) -> str:
    r = http(w, v, "POST", "/v1/recall", json={"query": marker_of(v, t), "budget_tokens": 4000})
    if r.status_code != 200:
        return status_word(r.status_code)
    return "ok" if page_of(v, t) in {i["path"] for i in r.json()["items"]} else "404"


def p_http_expand(w: World, v: str, t: str) -> str:
    r = http(w, v, "POST", "/v1/expand", json={"ids": [page_of(v, t)], "budget_tokens": 4000})
    return seen(r, marker_of(v, t))


def p_http_list(w: World, v: str, t: str) -> str:
    r = http(w, v, "GET", "/v1/pages", params={"limit": 1000})
    if r.status_code != 200:
        return status_word(r.status_code)
    return "ok" if page_of(v, t) in {p["path"] for p in r.json()["pages"]} else "404"


def p_http_read(w: World, v: str, t: str) -> str:
    return status_word(http(w, v, "GET", f"/v1/pages/{page_of(v, t)}").status_code)


def p_http_put(w: World, v: str, t: str) -> str:
    path = f"{folder_of(v, t)}/new-{w.fresh()}.md"
    r = http(w, v, "PUT", f"/v1/pages/{path}", content=_page("New", "written"))
    return status_word(r.status_code)


def p_http_remember(w: World, v: str, t: str) -> str:
    r = http(
        w, v, "POST", "/v1/remember", json={"text": f"fact {w.fresh()}", "project": project_of(t)}
    )
    return status_word(r.status_code)


def p_http_reindex(w: World, v: str, t: str) -> str:
    return status_word(http(w, v, "POST", "/v1/admin/reindex").status_code)


def p_http_pin(w: World, v: str, t: str) -> str:
    r = http(w, v, "POST", "/v1/admin/pin", json={"path": page_of(v, t), "pinned": True})
    return status_word(r.status_code)


def p_http_audit(w: World, v: str, t: str) -> str:
    return status_word(http(w, v, "GET", "/v1/audit").status_code)


def p_http_handoff_create(w: World, v: str, t: str) -> str:
    r = http(w, v, "POST", "/v1/handoffs", json={"project": project_of(t), "title": "new"})
    return status_word(r.status_code)


def p_http_handoff_list(w: World, v: str, t: str) -> str:
    if t == "other's personal":
        r = http(w, v, "GET", "/v1/handoffs", params={"project": GRANTED})
        return seen(r, f"hpmark{personal_of_other(w, v)}")
    r = http(w, v, "GET", "/v1/handoffs", params={"project": project_of(t)})
    return seen(r, f"hmark{project_of(t)}")


def p_http_handoff_show(w: World, v: str, t: str) -> str:
    hid = handoff_for(w, v, t, "http")
    return status_word(http(w, v, "GET", f"/v1/handoffs/{hid}").status_code)


def p_http_handoff_verb(w: World, v: str, t: str) -> str:
    hid = handoff_for(w, v, t, "http")
    return status_word(http(w, v, "POST", f"/v1/handoffs/{hid}/claim", json={}).status_code)


def p_http_brief(w: World, v: str, t: str) -> str:
    r = http(w, v, "POST", "/v1/brief", json={"project": project_of(t), "budget_tokens": 4000})
    return seen(r, f"{project_of(t)}pinword")


def p_web_home(w: World, v: str, t: str) -> str:
    """Any token sees the home page; it names no project the caller may not read."""
    r = http(w, v, "GET", "/")
    if r.status_code == 200 and not readable(v, "ungranted project") and "/p/u" in r.text:
        return "names the ungranted project"
    if r.status_code == 200 and not readable(v, "granted project") and "/p/g" in r.text:
        return "names the granted project"
    return web_answer(r)


def p_web_project(w: World, v: str, t: str) -> str:
    return web_answer(http(w, v, "GET", f"/p/{project_of(t)}"))


def p_web_pages(w: World, v: str, t: str) -> str:
    """Every page of the listing (50 a page, ``?offset=`` links) searched for the target."""
    url = "/pages"
    for _ in range(100):
        r = http(w, v, "GET", url)
        if r.status_code != 200:
            return web_answer(r)
        if f">{page_of(v, t)}<" in r.text or f"/page/{page_of(v, t)}" in r.text:
            return "ok"
        nxt = re.search(r'href="(\?offset=\d+)"', r.text)
        if nxt is None:
            return "404"
        url = "/pages" + nxt.group(1)
    return "404"


def p_web_page(w: World, v: str, t: str) -> str:
    return web_answer(http(w, v, "GET", f"/page/{page_of(v, t)}"))


def p_web_search(w: World, v: str, t: str) -> str:
    return seen(http(w, v, "GET", "/search", params={"q": marker_of(v, t)}), page_of(v, t))


def p_web_handoffs(w: World, v: str, t: str) -> str:
    return seen(http(w, v, "GET", "/handoffs"), f"hmark{project_of(t)}")


def p_web_session(w: World, v: str, t: str) -> str:
    return web_answer(http(w, v, "GET", f"/session/sess-{project_of(t)}"))


def p_web_folders(w: World, v: str, t: str) -> str:
    """The top of the folder tree: any token; it names no folder of another user."""
    r = http(w, v, "GET", "/f")
    if r.status_code == 200 and f"people/{other_of(v)}" in r.text:
        return "names another user's folder"
    return web_answer(r)


def p_web_folder(w: World, v: str, t: str) -> str:
    """The target's folder lists the target page (hidden: missing, or not listed)."""
    return seen(http(w, v, "GET", f"/f/{folder_of(v, t)}"), page_of(v, t))


def p_web_tag(w: World, v: str, t: str) -> str:
    """Every target page carries ``zebratag``: its tag page lists the target or not."""
    return seen(http(w, v, "GET", "/tag/zebratag"), page_of(v, t))


def p_web_no_route(w: World, v: str, t: str) -> str:
    return web_answer(http(w, v, "GET", "/no/such/route"))


# -- MCP --------------------------------------------------------------------------------


def mcp(w: World, v: str, tool: str, args: dict[str, Any], needle: str | None = None) -> str:
    s = w.mcp[v]
    if s.opened != "ok":
        return s.opened
    answer, text = s.call(tool, args)
    if answer != "ok" or needle is None:
        return answer
    return "ok" if needle in text else "404"


def mcp_steps(w: World, v: str, steps: list[tuple[str, dict[str, Any]]]) -> str:
    for tool, args in steps:
        answer = mcp(w, v, tool, args)
        if answer != "ok":
            return answer
    return "ok"


def mcp_probe(tool: str) -> Probe:
    def probe(w: World, v: str, t: str) -> str:
        path, mark, proj = page_of(v, t), marker_of(v, t), project_of(t)
        if tool == "memory_recall":
            return mcp(w, v, tool, {"query": mark, "budget_tokens": 4000}, path)
        if tool == "memory_expand":
            return mcp(w, v, tool, {"ids": [path], "budget_tokens": 4000}, mark)
        if tool == "memory_brief":
            return mcp(w, v, tool, {"project": proj, "budget_tokens": 4000}, f"{proj}pinword")
        if tool == "memory_remember":
            return mcp(w, v, tool, {"text": f"fact {w.fresh()}", "project": proj})
        if tool == "page_read":
            return mcp(w, v, tool, {"path": path})
        if tool == "page_list":
            return mcp(w, v, tool, {"limit": 1000}, path)
        if tool == "page_write":
            new = f"{folder_of(v, t)}/mcp-{w.fresh()}.md"
            return mcp(w, v, tool, {"path": new, "text": _page("New", "by mcp")})
        if tool == "handoff_create":
            return mcp(w, v, tool, {"project": proj, "title": "new by mcp"})
        if tool == "handoff_list":
            if t == "other's personal":
                return mcp(w, v, tool, {"project": GRANTED}, f"hpmark{personal_of_other(w, v)}")
            return mcp(w, v, tool, {"project": proj}, f"hmark{proj}")
        if tool == "handoff_claim":
            return mcp(w, v, tool, {"id": handoff_for(w, v, t, "claim")})
        # handoff_update: complete what the caller claimed (release and cancel take the
        # same door; their HTTP rows cover their own rules)
        hid = handoff_for(w, v, t, "complete")
        update = {"id": hid, "action": "complete"}
        return mcp_steps(w, v, [("handoff_claim", {"id": hid}), (tool, update)])

    return probe


# -- the CLI of a person on another machine: their token and the server's URL -----------


def cli(w: World, v: str, *args: str) -> tuple[str, str]:
    env = {k: val for k, val in os.environ.items() if not k.startswith("WIKI_MEMORY_")}
    env["WIKI_MEMORY_HOME"] = str(w.empty)
    env["WIKI_MEMORY_URL"] = w.url
    if w.tokens[v]:
        env["WIKI_MEMORY_TOKEN"] = str(w.tokens[v])
    # in this process: the command's parsing, request and messages, without a second of
    # interpreter start-up per cell (the process itself is tested in tests/base and
    # tests/harness)
    r = run_in_process(["--data-dir", str(w.empty), *args], env)
    if r.returncode == 0:
        return "ok", r.stdout
    for code in ("401", "403", "404"):
        if f"server said {code}" in r.stderr:
            return code, r.stderr
    if "no token" in r.stderr:
        return "401", r.stderr
    return f"exit {r.returncode}: {r.stderr.strip()[:200]}", r.stderr


def p_cli_recall(w: World, v: str, t: str) -> str:
    answer, out = cli(w, v, "recall", marker_of(v, t), "--json", "--budget", "4000")
    if answer != "ok":
        return answer
    return "ok" if page_of(v, t) in {i["path"] for i in json.loads(out)["items"]} else "404"


def p_cli_brief(w: World, v: str, t: str) -> str:
    answer, out = cli(w, v, "brief", "--project", project_of(t), "--json", "--budget", "4000")
    if answer != "ok":
        return answer
    return "ok" if f"{project_of(t)}pinword" in out else "404"


def p_cli_handoff(w: World, v: str, t: str) -> str:
    return cli(w, v, "handoff", "claim", handoff_for(w, v, t, "cli"), "--json")[0]


def p_cli_pin(w: World, v: str, t: str) -> str:
    return cli(w, v, "pin", page_of(v, t))[0]


def p_cli_unpin(w: World, v: str, t: str) -> str:
    return cli(w, v, "unpin", page_of(v, t))[0]


def p_cli_reindex(w: World, v: str, t: str) -> str:
    return cli(w, v, "reindex", "--quiet", "--url", w.url)[0]


def p_cli_audit(w: World, v: str, t: str) -> str:
    return cli(w, v, "audit", "--url", w.url)[0]


# --------------------------------------------------------------------------------------
# The rows: every route, tool and command -> (kind, targets, probe) or "exempt: why"
# --------------------------------------------------------------------------------------

Row = tuple[str, tuple[str, ...], Probe] | str

ROWS: dict[str, Row] = {
    # HTTP /v1
    "GET /v1/health": "exempt: open route, returns only {ok, version, commits}",
    "GET /health": "exempt: the same open route as GET /v1/health",
    "POST /v1/observations": ("write", PROJECTS_ONLY, p_http_capture),
    "POST /v1/recall": ("read", ALL, p_http_recall),
    "POST /v1/expand": ("read", ALL, p_http_expand),
    "GET /v1/pages": ("read", ALL, p_http_list),
    "GET /v1/pages/{path:path}": ("read", ALL, p_http_read),
    "PUT /v1/pages/{path:path}": ("write", ALL, p_http_put),
    "POST /v1/remember": ("write", PROJECTS_ONLY, p_http_remember),
    "POST /v1/admin/reindex": ("admin", NONE, p_http_reindex),
    "POST /v1/admin/pin": ("pin", ALL, p_http_pin),
    "GET /v1/audit": ("admin", NONE, p_http_audit),
    "POST /v1/admin/purge": "exempt: rewrites the shared world's history "
    "(tests/core/test_purge.py checks 403 for a member and ok for an admin)",
    "POST /v1/admin/sync": "exempt: admin only (may_admin before any remote is touched; "
    "tests/core/test_sync.py checks Forbidden for a non-admin); reads no page for a caller",
    "GET /v1/admin/unrendered": "exempt: admin only (may_admin before anything is read; "
    "tests/server/test_admin_only_routes.py checks a member's refusal)",
    "POST /v1/admin/unrendered/discard": "exempt: admin only, as GET /v1/admin/unrendered",
    "POST /v1/admin/condense": "exempt: admin only (may_admin before any page is read; "
    "tests/core/test_condense.py checks a member's refusal); writes as the server through "
    "the one door",
    "POST /v1/admin/uncondense": "exempt: admin only, as POST /v1/admin/condense",
    "GET /v1/sync-conflicts": "exempt: lists only the copies the one door lets the caller "
    "see (tests/core/test_conflict_copies.py checks a reader's and a stranger's view)",
    "POST /v1/sync-conflicts/resolve": "exempt: the one door's write check on the copy and "
    "the page (tests/core/test_conflict_copies.py checks 403 for a reader)",
    "GET /v1/contradictions": "exempt: flags only of pages the caller may read both of, "
    "read through the one door (tests/core/test_contradictions.py checks a member who may "
    "not read one side, and 404 for a project the caller may not read)",
    "cli contradictions": "exempt: as GET /v1/contradictions, which it calls",
    "POST /v1/feedback": "exempt: records only the caller's own verdict on a page the one "
    "door lets it read (tests/core/test_strength.py checks 404 for a hidden page, and that "
    "nothing is recorded)",
    "cli feedback": "exempt: as POST /v1/feedback, which it calls",
    "tool memory_feedback": "exempt: as POST /v1/feedback (the same core operation)",
    "GET /v1/use": "exempt: the caller's own use rows, only of pages the one door lets the "
    "caller see (tests/server/test_walks_and_use.py checks another user's rows stay hidden)",
    "POST /v1/edit": "exempt: a write through the one door with the caller "
    "(tests/mcp/test_page_edit_server.py checks ok, 403 and 404)",
    "POST /v1/agent-files": "exempt: writes through the one door with the caller, into the "
    "project or the caller's own folder (tests/harness/test_agent_files.py checks 403 for a "
    "reader and a member's own pages hidden from the owner)",
    "POST /v1/forget": "exempt: would hide the shared pages every read probe reads "
    "(tests/core/test_forget.py checks ok, 403 and 404)",
    "POST /v1/handoffs": ("write", PROJECTS_ONLY, p_http_handoff_create),
    "GET /v1/handoffs": ("read", HANDOFF_TARGETS, p_http_handoff_list),
    "GET /v1/handoffs/{hid}": ("read", HANDOFF_TARGETS, p_http_handoff_show),
    "POST /v1/handoffs/{hid}/{verb}": ("write", HANDOFF_TARGETS, p_http_handoff_verb),
    "POST /v1/brief": ("read", PROJECTS_ONLY, p_http_brief),
    # MCP over HTTP: the transport's routes; the tools have rows of their own
    "GET /mcp": "exempt: MCP transport (every tool has its row below)",
    "POST /mcp": "exempt: MCP transport (every tool has its row below)",
    "DELETE /mcp": "exempt: MCP transport",
    "GET /mcp/": "exempt: MCP transport",
    "POST /mcp/": "exempt: MCP transport",
    "DELETE /mcp/": "exempt: MCP transport",
    # web
    "GET /": ("any token", NONE, p_web_home),
    "GET /login": "exempt: the sign-in form (no page data)",
    "POST /login": "exempt: sign-in",
    "GET /logout": "exempt: sign-out, no page data",
    "POST /logout": "exempt: sign-out, no page data",
    "GET /static/{name}": "exempt: the stylesheet and icon",
    "GET /p/{project}": ("read", PROJECTS_ONLY, p_web_project),
    "GET /pages": ("read", ALL, p_web_pages),
    "GET /page/{path:path}": ("read", ALL, p_web_page),
    "GET /search": ("read", ALL, p_web_search),
    "GET /f": ("any token", NONE, p_web_folders),
    "GET /f/{folder:path}": ("read", ALL, p_web_folder),
    "GET /tag/{tag:path}": ("read", ALL, p_web_tag),
    "GET /handoffs": ("read", PROJECTS_ONLY, p_web_handoffs),
    "GET /session/{sid}": ("read", PROJECTS_ONLY, p_web_session),
    "GET /{rest:path}": ("any token", ("a path with no route",), p_web_no_route),
    # MCP tools
    "tool memory_recall": ("read", ALL, mcp_probe("memory_recall")),
    "tool memory_expand": ("read", ALL, mcp_probe("memory_expand")),
    "tool memory_brief": ("read", PROJECTS_ONLY, mcp_probe("memory_brief")),
    "tool memory_remember": ("write", PROJECTS_ONLY, mcp_probe("memory_remember")),
    "tool page_read": ("read", ALL, mcp_probe("page_read")),
    "tool page_list": ("read", ALL, mcp_probe("page_list")),
    "tool page_write": ("write", ALL, mcp_probe("page_write")),
    "tool page_forget": "exempt: as POST /v1/forget (tests/core/test_forget.py)",
    "tool page_edit": "exempt: as POST /v1/edit (tests/mcp/test_page_edit_server.py)",
    "tool handoff_create": ("write", PROJECTS_ONLY, mcp_probe("handoff_create")),
    "tool handoff_list": ("read", HANDOFF_TARGETS, mcp_probe("handoff_list")),
    "tool handoff_claim": ("write", HANDOFF_TARGETS, mcp_probe("handoff_claim")),
    "tool handoff_update": ("write", HANDOFF_TARGETS, mcp_probe("handoff_update")),
    # server-side CLI commands (a person's token and the server's URL)
    "cli recall": ("read", ALL, p_cli_recall),
    "cli brief": ("read", PROJECTS_ONLY, p_cli_brief),
    "cli handoff": ("write", HANDOFF_TARGETS, p_cli_handoff),
    "cli pin": ("pin", ALL, p_cli_pin),
    "cli unpin": ("pin", ALL, p_cli_unpin),
    "cli reindex": ("admin", NONE, p_cli_reindex),
    "cli audit": ("admin", NONE, p_cli_audit),
    "cli purge": "exempt: as POST /v1/admin/purge (tests/core/test_purge.py)",
    "cli forget": "exempt: as POST /v1/forget, which it calls (tests/core/test_forget.py)",
    "cli edit": "exempt: as POST /v1/edit, which it calls (tests/mcp/test_page_edit_server.py)",
    "cli import-agent-files": "exempt: as POST /v1/agent-files, which it calls "
    "(tests/harness/test_agent_files.py)",
    "cli unrendered": "exempt: as GET /v1/admin/unrendered, which it calls",
    "cli condense": "exempt: as POST /v1/admin/condense, which it calls",
    "cli uncondense": "exempt: as POST /v1/admin/uncondense, which it calls",
    "cli sync-conflicts": "exempt: as GET /v1/sync-conflicts, which it calls when a server "
    "runs; else the data directory's owner",
    "cli remember": "exempt: as POST /v1/remember, which it calls when a server runs; else "
    "the data directory's owner",
    "cli sync": "exempt: as POST /v1/admin/sync, which it calls when a server runs",
    "cli remote": "exempt: the data directory's owner, on its git config",
    "cli mcp": "exempt: a byte-for-byte bridge to /mcp (the tool rows)",
    "cli serve": "exempt: runs the server",
    "cli token": "exempt: the data directory's owner, on its files (tests/base/test_auth.py)",
    "cli doctor": "exempt: the data directory's owner, on its files",
    "cli import": "exempt: the data directory's owner, on its files",
    "cli backup": "exempt: the data directory's owner, on its files",
    "cli restore": "exempt: the data directory's owner, on its files",
    "cli export": "exempt: the data directory's owner, on its files",
    "cli recover": "exempt: the data directory's owner, on its files",
    "cli install-hooks": "exempt: installer",
    "cli uninstall-hooks": "exempt: installer",
    "cli install-mcp": "exempt: installer",
    "cli uninstall-mcp": "exempt: installer",
    "cli setup": "exempt: installer; its self-check sends as the owner",
    "cli uninstall": "exempt: installer",
    "cli status": "exempt: the data directory's owner, on its files and GET /v1/health",
}


def test_every_face_has_a_row(tmp_path: Path) -> None:
    routes = faces.app_routes(tmp_path / "r")
    tools = [f"tool {t}" for t in faces.mcp_tool_names(tmp_path / "t")]
    commands = [f"cli {c[0]}" for c in faces.cli_commands() if len(c) == 1]
    have = set(routes) | set(tools) | set(commands)
    missing = sorted(have - set(ROWS))
    assert not missing, f"faces with no row in ROWS (add their kind and a probe): {missing}"
    stale = sorted(set(ROWS) - have)
    assert not stale, f"rows for faces that no longer exist: {stale}"


def _cells() -> list[tuple[str, str, str]]:
    out = []
    for key, row in ROWS.items():
        if isinstance(row, str):
            continue
        _kind, targets, _probe = row
        for viewer in VIEWERS:
            for target in targets:
                out.append((key, viewer, target))
    return out


def _check(world: World, key: str, viewer: str, target: str) -> str | None:
    row = ROWS[key]
    assert not isinstance(row, str)
    kind, _targets, probe = row
    if target == "a path with no route":
        want = "401" if viewer in ("revoked token", "no token") else "404"
    else:
        want = expect(kind, viewer, target)
    got = probe(world, viewer, target)
    return None if got == want else f"{key} | {viewer} | {target}: got {got}, documented {want}"


def face_of_row(key: str) -> str:
    """``http``, ``mcp`` (the tools), ``web``, ``cli`` or ``cli-admin`` (the CLI's cells
    split in two so that each test stays short)."""
    if key.startswith("cli "):
        return "cli-admin" if key in ("cli pin", "cli unpin", "cli reindex", "cli audit") else "cli"
    if key.startswith("tool "):
        return "mcp"
    return "http" if " /v1" in key else "web"


#: the HTTP face has the most cells: they run as this many tests, so that each stays well
#: inside the per-test timeout on a loaded machine (a hang guard, not a speed bound)
HTTP_SHARDS = 3


@pytest.mark.parametrize(
    "face", [*(f"http-{i}" for i in range(HTTP_SHARDS)), "web", "mcp", "cli", "cli-admin"]
)
def test_the_matrix(world: World, face: str) -> None:
    """Every cell of one face answers as documented; the failures are listed together.
    The CLI's cells run in this process (``clikit.run_in_process``), one at a time;
    the HTTP face's cells are dealt round-robin into :data:`HTTP_SHARDS` tests."""
    from concurrent.futures import ThreadPoolExecutor

    started = time.monotonic()
    base, _, shard = face.partition("-") if face.startswith("http-") else (face, "", "")
    cells = [c for c in _cells() if face_of_row(c[0]) == base]
    if shard:
        cells = cells[int(shard) :: HTTP_SHARDS]
    assert cells
    if face.startswith("cli"):
        # the CLI runs in this process, one command at a time in the main thread
        wrong = [w for c in cells for w in [_check(world, *c)] if w]
    else:
        with ThreadPoolExecutor(1) as pool:
            futures = [pool.submit(_check, world, *c) for c in cells]
            wrong = [w for f in futures for w in [f.result()] if w]
    print(f"{face}: {len(cells)} cells in {time.monotonic() - started:.0f} s")
    assert not wrong, f"{len(wrong)} cells differ:\n" + "\n".join(wrong)
