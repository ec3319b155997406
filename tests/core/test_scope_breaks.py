"""Regression tests for leaks and breaks the "one door" change left open.

Each test attacks a real server (``tests/scopeworld.py``) as ``bob``, a second user with
his own token, and states what the rule (DESIGN "Identity and scope", invariants 9 and
12; docs/api.md "Who sees what: hidden means missing" and the error table) requires:
what bob may not see answers exactly like what does not exist, and never changes what
he gets.

The world is the one ``tests/core/test_scope_faces.py`` uses; every test here adds its own
pages with names no other test uses, so the tests do not depend on their order.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import scopeworld as sw

pytestmark = pytest.mark.process

BOB, ALICE, OWNER = "bob", "alice", sw.OWNER


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Any:
    w = sw.build(tmp_path_factory.mktemp("breaks"))
    yield w
    w.server.stop()


def put(world: Any, user: str, path: str, text: str, if_match: str | None = None) -> httpx.Response:
    headers = {"Content-Type": "text/markdown"}
    if if_match is not None:
        headers["If-Match"] = f'"{if_match}"'
    with world.client(user) as c:
        return c.put("/v1/pages/" + path, content=text.encode(), headers=headers)


def wait_for(cond: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def web_client(world: Any, user: str) -> httpx.Client:
    """An httpx client signed in to the web view through the real sign-in form."""
    c = httpx.Client(base_url=world.url, timeout=60, follow_redirects=False)
    r = c.get("/login")
    csrf = re.search(r'name="csrf"[^>]*value="([^"]+)"', r.text) or re.search(
        r'value="([^"]+)"[^>]*name="csrf"', r.text
    )
    assert csrf, r.text
    r = c.post("/login", data={"token": world.tokens[user], "csrf": csrf.group(1), "next": "/"})
    assert r.status_code == 303, r.text
    return c


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --------------------------------------------------------------------------------------
# 1. A hidden page must not change how bob's links resolve (invariant 9)
# --------------------------------------------------------------------------------------


def test_hidden_page_does_not_shadow_a_link_bob_can_follow(world: Any) -> None:
    """``[[Deploy]]`` on a shared page resolves to the shared page whose alias is
    ``Deploy``. When alice adds ``people/alice/deploy.md`` (its file name outranks an
    alias), bob's ``links`` must still resolve to the shared page and its ``backlinks``
    must still name the linking page: a hidden page may not turn bob's link into
    ``unresolved`` (that tells him a page named ``deploy`` exists that he may not see).
    Today the link reads ``unresolved`` for bob and the backlink disappears, while the web
    view renders the same link as leading to the shared page."""
    r = put(
        world,
        BOB,
        "projects/p/brk1/guide.md",
        "---\ntitle: Guide\naliases: [Shipit]\n---\n# Guide\n\nhow\n",
    )
    assert r.status_code == 201, r.text
    r = put(
        world,
        BOB,
        "projects/p/brk1/index.md",
        "---\ntitle: Index\n---\n# Index\n\nSee [[Shipit]].\n",
    )
    assert r.status_code == 201, r.text
    with world.client(BOB) as c:
        before = c.get("/v1/pages/projects/p/brk1/index.md").json()
        before_bl = c.get("/v1/pages/projects/p/brk1/guide.md").json()["backlinks"]
    assert before["links"][0]["status"] == "resolved", before["links"]
    assert before["links"][0]["path"] == "projects/p/brk1/guide.md"
    assert [b["path"] for b in before_bl] == ["projects/p/brk1/index.md"]

    r = put(world, ALICE, "people/alice/shipit.md", "---\ntitle: zqx shipit\n---\n# zqx\n")
    assert r.status_code == 201, r.text
    with world.client(BOB) as c:
        after = c.get("/v1/pages/projects/p/brk1/index.md").json()
        after_bl = c.get("/v1/pages/projects/p/brk1/guide.md").json()["backlinks"]
    assert after["links"] == before["links"], (
        "alice's hidden people/alice/shipit.md changed how bob's [[Shipit]] resolves: "
        f"{before['links']} -> {after['links']}"
    )
    assert after["diagnostics"] == before["diagnostics"], after["diagnostics"]
    assert after_bl == before_bl, f"backlinks changed: {before_bl} -> {after_bl}"


# --------------------------------------------------------------------------------------
# 2. The web history must not show a version bob could not see
# --------------------------------------------------------------------------------------


def test_web_history_hides_versions_that_were_personal(world: Any) -> None:
    """Alice drafts ``projects/p/brk2/draft.md`` as ``visibility: personal`` and later
    publishes it. Bob may read the published page, but the personal revision was alice's
    alone: ``/page/<path>/history?rev=<sha>`` (the diff) and ``&view=version`` must not
    show its text (the scope rule applies to the bytes really shown, here the old blob).
    Today both show ``zqxdraftsecret``."""
    path = "projects/p/brk2/draft.md"
    r = put(
        world,
        ALICE,
        path,
        "---\ntitle: Draft\nvisibility: personal\nuser: alice\n---\n# Draft\n\nzqxdraftsecret\n",
    )
    assert r.status_code == 201, r.text
    alice_web = web_client(world, ALICE)

    def revs() -> list[str]:
        page = alice_web.get(f"/page/{path}/history")
        return sorted(set(re.findall(r"rev=([0-9a-f]{7,40})", page.text)))

    wait_for(lambda: len(revs()) >= 1, "the personal draft's commit")
    r = put(
        world,
        ALICE,
        path,
        "---\ntitle: Draft\n---\n# Draft\n\npublic text\n",
        if_match=r.json()["hash"],
    )
    assert r.status_code == 200, r.text
    wait_for(lambda: len(revs()) >= 2, "the publishing commit")

    bob_web = web_client(world, BOB)
    page = bob_web.get(f"/page/{path}/history")
    assert page.status_code == 200
    shas = sorted(set(re.findall(r"rev=([0-9a-f]{7,40})", page.text)))
    assert shas
    for sha in shas:
        for extra in ("", "&view=version"):
            got = bob_web.get(f"/page/{path}/history?rev={sha}{extra}")
            assert sw.MARK not in got.text, (
                f"bob sees alice's personal revision in /page/{path}/history?rev={sha}{extra}"
            )


# --------------------------------------------------------------------------------------
# 3. as_of recall must not serve a file the live rule refuses
# --------------------------------------------------------------------------------------


def test_as_of_recall_does_not_serve_hard_linked_personal_text(world: Any) -> None:
    """``projects/p/hard.md`` is a hard link to ``people/alice/secret.md``: refused on every
    face. The data directory's first commit ("Initialize wiki") took it into git anyway, so
    a recall ``as_of`` now (answered from git history) gives bob alice's folder text under
    the shared path. It must answer as the live index does: nothing of alice's."""
    with world.client(BOB) as c:
        live = c.post("/v1/recall", json={"query": sw.WORD, "budget_tokens": 4000})
        assert live.status_code == 200 and sw.MARK not in live.text, live.text
        r = c.post("/v1/recall", json={"query": sw.WORD, "budget_tokens": 4000, "as_of": now_iso()})
    assert r.status_code == 200, r.text
    paths = [i["path"] for i in r.json()["items"]]
    assert sw.HARDLINK not in paths and sw.MARK not in r.text, (
        f"as_of recall served the hard-linked file to bob: {paths}"
    )


# --------------------------------------------------------------------------------------
# 4. A running session whose page is personal is not bob's to recall or expand
# --------------------------------------------------------------------------------------


def test_spool_of_a_personal_session_is_hidden(world: Any) -> None:
    """Alice's session page becomes ``visibility: personal`` (she marks it so). The
    observations she sends next wait in the spool until the next compile: bob's recall
    must not rank them (nor name the hidden page's path) and ``expand`` of their
    ``spool:<id>`` must say ``missing``, exactly as for an id that does not exist. Today
    recall returns the observation's text with the hidden page's path, and expand returns
    every observation of the session, compiled ones included."""

    def obs(event: str, **payload: Any) -> dict[str, Any]:
        with world.client(ALICE) as c:
            r = c.post(
                "/v1/observations",
                json={
                    "harness": "claude-code",
                    "event": event,
                    "session_id": "brk4session",
                    "project": "p",
                    "cwd": "/home/alice/p",
                    "payload": payload,
                },
            )
        assert r.status_code == 202, r.text
        return r.json()

    first = obs("UserPromptSubmit", prompt="plan the durian launch")
    obs("Stop", last_assistant_message="ok")

    def session_page() -> str | None:
        with world.client(ALICE) as c:
            for p in c.get("/v1/pages", params={"kind": "session", "limit": 1000}).json()["pages"]:
                if "durian" in (p.get("title") or ""):
                    return str(p["path"])
        return None

    path = wait_for(session_page, "alice's session page")
    with world.client(ALICE) as c:
        page = c.get("/v1/pages/" + path).json()
    text = page["content"].replace("---\n", "---\nvisibility: personal\n", 1)
    r = put(world, ALICE, path, text, if_match=page["hash"])
    assert r.status_code == 200, r.text
    with world.client(BOB) as c:
        assert c.get("/v1/pages/" + path).status_code == 404

    later = obs("UserPromptSubmit", prompt="durian zqxspoolsecret rotation")
    with world.client(BOB) as c:
        rec = c.post("/v1/recall", json={"query": "durian"}).json()
        none = c.post("/v1/recall", json={"query": "nosuchfruitword"}).json()
        exp = c.post(
            "/v1/expand",
            json={"ids": [f"spool:{later['id']}", f"spool:{first['id']}"]},
        ).json()
    assert sw.MARK not in str(rec) and path not in str(rec), (
        f"bob's recall shows alice's personal running session: {rec}"
    )
    assert rec["items"] == none["items"] and rec["omitted"] == none["omitted"], rec
    assert exp["items"] == [], f"bob expanded alice's personal session: {exp}"
    assert sorted(exp["missing"]) == sorted([f"spool:{later['id']}", f"spool:{first['id']}"])


# --------------------------------------------------------------------------------------
# 5. Handoff ids must not count hidden handoffs
# --------------------------------------------------------------------------------------


def test_handoff_ids_do_not_count_hidden_handoffs(world: Any) -> None:
    """Ids are ``H-0001``, ``H-0002``, … across the whole wiki, so the id bob's next
    handoff gets tells him how many handoffs he cannot see were made since his last one
    (invariant 9: a hidden record is not named in counts). Two handoffs bob creates with
    only a personal handoff of alice's in between must get the ids they would get had it
    not been made. Today alice's personal handoff takes a number out of bob's sequence."""

    def create(user: str, **extra: Any) -> str:
        with world.client(user) as c:
            r = c.post(
                "/v1/handoffs",
                json={"project": "p", "title": f"brk5 {user}", "where_we_left_off": "x", **extra},
            )
        assert r.status_code == 201, r.text
        return str(r.json()["handoff"]["id"])

    a = create(BOB)
    b = create(BOB)
    step = int(b.split("-")[1]) - int(a.split("-")[1])  # nothing hidden in between
    c1 = create(BOB)
    create(ALICE, visibility="personal")
    c2 = create(BOB)
    assert int(c2.split("-")[1]) - int(c1.split("-")[1]) == step, (
        f"bob's ids {c1} -> {c2} count alice's personal handoff ({a} -> {b} with nothing between)"
    )


# --------------------------------------------------------------------------------------
# 6. The error table: a wrong method under /v1 is 405, an MCP error starts with its code
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "route", ["/v1/recall", "/v1/expand", "/v1/observations", "/v1/brief", "/v1/admin/reindex"]
)
def test_v1_get_on_post_route_is_405(world: Any, route: str) -> None:
    """docs/api.md: under /v1 a wrong method is ``405 method_not_allowed`` with ``Allow``.
    A GET on a POST-only route is caught by the web view's catch-all GET route and
    answers ``404 not_found`` ("no such route") instead; PUT on the same route is a 405."""
    with world.client(BOB) as c:
        r = c.get(route)
    assert r.headers["content-type"].startswith("application/json"), r.headers
    assert r.status_code == 405, f"GET {route}: {r.status_code} {r.text}"
    assert r.json()["error"] == "method_not_allowed"
    assert "POST" in r.headers.get("allow", ""), r.headers


def test_mcp_tool_error_text_starts_with_its_code(world: Any) -> None:
    """docs/mcp.md: "A tool's error text starts with the error's code from the one table
    (``not_found: no such page: …``)". Over the real MCP client the text is
    ``Error executing tool page_read: not_found: …`` (the SDK's prefix), so a client that
    matches the code at the start of the text does not find it."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.types import Implementation

    async def main() -> Any:
        async with httpx2.AsyncClient(headers=world.headers(BOB), timeout=120) as hc:
            t = streamable_http_client(world.url + "/mcp", http_client=hc)
            async with Client(t, client_info=Implementation(name="codex", version="1")) as c:
                return (
                    await c.call_tool("page_read", {"path": "people/alice/secret.md"}),
                    await c.call_tool("page_read", {"path": "projects/p/nosuch.md"}),
                )

    hidden, absent = asyncio.run(main())
    for res, path in ((hidden, "people/alice/secret.md"), (absent, "projects/p/nosuch.md")):
        text = "\n".join(c.text for c in res.content if c.type == "text")
        assert res.is_error, text
        assert text.startswith(f"not_found: no such page: {path}"), text


# --------------------------------------------------------------------------------------
# 7. `wiki-memory pin` must not go through a link or leave a hard link's other name behind
# --------------------------------------------------------------------------------------


def test_cli_pin_refuses_links(world: Any) -> None:
    """``wiki-memory pin`` is a person's hand edit, but it still may not follow a symbolic
    link (``projects/p/link`` -> ``people/alice``) or rewrite a file with more than one
    hard link: either writes alice's folder, and replacing the hard-linked file leaves its
    other name, ``projects/p/hard.md``, a single-link shared page holding alice's text
    that bob can then read. It must fail like a missing page (exit 4) and change nothing.
    Today both succeed, and afterwards bob reads alice's folder text at hard.md."""
    before = (world.wiki / sw.ALICE_FOLDER).read_bytes()
    via_link = sw.cli(world.data_dir, "pin", f"{sw.SYMLINK_DIR}/secret.md")
    hard = sw.cli(world.data_dir, "pin", sw.HARDLINK)
    assert via_link.returncode == 4, (via_link.returncode, via_link.stdout, via_link.stderr)
    assert hard.returncode == 4, (hard.returncode, hard.stdout, hard.stderr)
    assert (world.wiki / sw.ALICE_FOLDER).read_bytes() == before
    with world.client(BOB) as c:
        r = c.get("/v1/pages/" + sw.HARDLINK)
    assert r.status_code == 404 and sw.MARK not in r.text, r.text
