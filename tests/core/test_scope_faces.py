"""One access rule, every face: a black-box test of who may see and write which page.

The rule (DESIGN "Identity and scope", invariants 9 and 12): ``people/<user>/`` pages and
pages with ``visibility: personal`` (owned by frontmatter ``user``) belong to their user
alone, the local owner included, for reading and writing, on every face. What a caller
may not see answers exactly like a page that does not exist (same status, same body once
the path is substituted), is never confirmed by a 403/412/428 or a hash, and is never
counted. Scope is decided on the file actually read or written, whatever the spelling:
symbolic links and hard links included.

One real server (``tests/scopeworld.py``) over a small wiki: the owner ``olivia``, and
``alice`` and ``bob`` with tokens made by ``wiki-memory token create``. Every string only
a hidden page holds contains ``zqx``; no body bob gets back may contain it.

Coverage is generated: the HTTP and web routes come from the app's route table, the MCP
tools from ``tools/list`` over the real client, the CLI commands from the parser. Each
must have a row in :data:`ROUTES`, :data:`TOOLS` or :data:`CLI_COMMANDS` naming the test
that probes it (or why it is not a face of the rule); a route, tool or command without a
row fails :func:`test_every_route_has_a_row` and its siblings.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import re
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import faces
import httpx
import pytest
import scopeworld as sw

pytestmark = pytest.mark.process

BOB, ALICE, OWNER = "bob", "alice", sw.OWNER
# alice's personal handoff: a random P-<8 hex> (personal handoffs take no shared
# number); the world fixture sets it once the server made it
PERSONAL_HID = "P-00000000"
SHARED_HID = "H-0001"
ABSENT_HID = "P-99999999"

# --------------------------------------------------------------------------------------
# The coverage tables. A value names the test(s) below that probe the route, tool or
# command, or starts with "exempt:" and says why it cannot show or change a page.
# --------------------------------------------------------------------------------------

ROUTES: dict[str, str] = {
    "GET /v1/health": "exempt: open route, returns only {ok, version}",
    "GET /health": "exempt: the same open route as GET /v1/health",
    "POST /v1/observations": "test_http_observations_cannot_write_into_people",
    "POST /v1/recall": "test_http_recall_filters_before_counting",
    "POST /v1/expand": "test_http_expand_hidden_like_missing",
    "GET /v1/pages": "test_http_list_pages_is_exactly_what_viewer_may_see",
    "GET /v1/pages/{path:path}": "test_http_read_hidden_like_missing, test_http_links_and_backlinks",
    "PUT /v1/pages/{path:path}": "test_http_write_into_other_folder_is_404, "
    "test_http_write_personal_page_refused_without_confirming, test_http_pins_refused",
    "POST /v1/admin/reindex": "test_http_admin_reindex_needs_admin",
    "POST /v1/admin/pin": "test_http_pins_refused",
    "GET /v1/audit": "test_http_admin_reindex_needs_admin",
    "POST /v1/forget": "exempt: a write through Memory.update_page with the caller (the one "
    "door); its 404, 403 and ok are probed in the forget tests of tests/core",
    "POST /v1/agent-files": "exempt: writes through Memory.update_page with the caller (the "
    "one door); its 403 and a member's hidden own pages are probed in "
    "tests/harness/test_agent_files.py",
    "POST /v1/edit": "exempt: a write through Memory.update_page with the caller (the one "
    "door); its 403 and 404 are probed in tests/mcp/test_page_edit_server.py",
    "POST /v1/admin/purge": "exempt: admin only (may_admin before anything is read); probed "
    "in the purge tests of tests/core",
    "GET /v1/admin/unrendered": "exempt: admin only (may_admin before anything is read); "
    "probed in tests/server/test_admin_only_routes.py",
    "POST /v1/admin/unrendered/discard": "exempt: admin only, as GET /v1/admin/unrendered",
    "POST /v1/admin/condense": "exempt: admin only (may_admin before any page is read); "
    "probed in tests/core/test_condense.py",
    "POST /v1/admin/uncondense": "exempt: admin only, as POST /v1/admin/condense",
    "GET /v1/contradictions": "exempt: index groups filtered by visible_sql, each page read "
    "with scope.read; probed in tests/core/test_contradictions.py",
    "POST /v1/feedback": "exempt: scope.read with the caller before anything is recorded; "
    "probed in tests/core/test_strength.py",
    "GET /v1/use": "exempt: the caller's own rows of pages visible() lets it see; probed in "
    "tests/server/test_walks_and_use.py",
    "GET /v1/sync-conflicts": "exempt: lists only copies scope.check_target lets the caller "
    "see; probed in tests/core/test_conflict_copies.py",
    "POST /v1/sync-conflicts/resolve": "exempt: scope.check_write on the copy and the page; "
    "probed in tests/core/test_conflict_copies.py and tests/core/test_sync_conflicts.py",
    "POST /v1/admin/sync": "exempt: admin only (may_admin before any remote is touched); "
    "personal pages never leave through it: tests/core/test_sync.py",
    "POST /v1/handoffs": "test_http_handoffs_personal_invisible",
    "GET /v1/handoffs": "test_http_handoffs_personal_invisible",
    "GET /v1/handoffs/{hid}": "test_http_handoffs_personal_invisible",
    "POST /v1/handoffs/{hid}/{verb}": "test_http_handoffs_personal_invisible",
    "POST /v1/brief": "test_http_brief_shows_nothing_hidden, test_http_pins_refused",
    "POST /v1/remember": "test_http_remember_cannot_write_into_people",
    "GET /mcp": "test_mcp_* (see TOOLS)",
    "POST /mcp": "test_mcp_* (see TOOLS)",
    "DELETE /mcp": "test_mcp_* (see TOOLS)",
    "GET /mcp/": "test_mcp_* (see TOOLS)",
    "POST /mcp/": "test_mcp_* (see TOOLS)",
    "DELETE /mcp/": "test_mcp_* (see TOOLS)",
    "GET /": "test_web_lists_show_nothing_hidden",
    "GET /login": "exempt: the sign-in form (no page data); used by the web fixture",
    "POST /login": "exempt: sign-in; used by the web fixture",
    "GET /logout": "exempt: sign-out, no page data",
    "POST /logout": "exempt: sign-out, no page data",
    "GET /static/{name}": "exempt: the stylesheet and icon",
    "GET /p/{project}": "test_web_lists_show_nothing_hidden",
    "GET /pages": "test_web_lists_show_nothing_hidden",
    "GET /page/{path:path}": "test_web_page_hidden_like_missing, test_web_shared_page_links",
    "GET /search": "test_web_lists_show_nothing_hidden",
    "GET /f": "test_web_lists_show_nothing_hidden",
    "GET /f/{folder:path}": "test_web_lists_show_nothing_hidden",
    "GET /tag/{tag:path}": "test_web_lists_show_nothing_hidden",
    "GET /handoffs": "test_web_lists_show_nothing_hidden",
    "GET /session/{sid}": "test_web_session_hidden_like_missing",
    "GET /{rest:path}": "test_web_no_route_same_for_hidden_and_missing",
}

TOOLS: dict[str, str] = {
    "memory_recall": "test_mcp_recall_filters_before_counting",
    "memory_expand": "test_mcp_read_and_expand_hidden_like_missing",
    "memory_brief": "test_mcp_brief_and_handoffs",
    "memory_remember": "test_mcp_remember_cannot_write_into_people",
    "page_read": "test_mcp_read_and_expand_hidden_like_missing, test_mcp_links_and_backlinks",
    "page_list": "test_mcp_lists_are_exactly_what_viewer_may_see",
    "page_write": "test_mcp_write_into_other_folder_like_missing, test_mcp_pins_refused",
    "page_forget": "exempt: as POST /v1/forget (the same core operation)",
    "memory_feedback": "exempt: as POST /v1/feedback (the same core operation)",
    "page_edit": "exempt: as POST /v1/edit (the same core operation)",
    "handoff_create": "test_mcp_brief_and_handoffs",
    "handoff_list": "test_mcp_brief_and_handoffs",
    "handoff_claim": "test_mcp_brief_and_handoffs",
    "handoff_update": "test_mcp_brief_and_handoffs",
}

CLI_COMMANDS: dict[str, str] = {
    "recall": "test_cli_recall_brief_and_handoffs",
    "brief": "test_cli_recall_brief_and_handoffs",
    "handoff": "test_cli_recall_brief_and_handoffs",
    "mcp": "exempt: a byte-for-byte bridge to /mcp (probed through TOOLS)",
    "serve": "exempt: runs the server",
    "reindex": "exempt: owner command (calls /v1/admin/reindex, probed there)",
    "token": "exempt: owner command on files (DESIGN invariant 12)",
    "doctor": "exempt: owner command on files (DESIGN invariant 12)",
    "import": "exempt: owner command on files (DESIGN invariant 12)",
    "recover": "exempt: owner command on files",
    "forget": "exempt: calls /v1/forget when a server runs, else the core as the owner",
    "edit": "exempt: calls /v1/edit when a server runs, else the core as the owner",
    "feedback": "exempt: calls /v1/feedback; probed in tests/core/test_strength.py",
    "contradictions": "exempt: calls /v1/contradictions; probed in "
    "tests/core/test_contradictions.py",
    "import-agent-files": "exempt: calls /v1/agent-files (a server must run)",
    "unrendered": "exempt: calls /v1/admin/unrendered (admin only) when a server runs",
    "condense": "exempt: calls /v1/admin/condense (admin only)",
    "uncondense": "exempt: calls /v1/admin/uncondense (admin only)",
    "sync-conflicts": "exempt: calls /v1/sync-conflicts when a server runs, else the core as "
    "the owner",
    "remember": "exempt: calls /v1/remember when a server runs, else the core as the owner",
    "purge": "exempt: calls /v1/admin/purge when a server runs, else the core as the owner",
    "sync": "exempt: calls /v1/admin/sync when a server runs, else the core as the owner",
    "remote": "exempt: owner command on the git config (DESIGN invariant 12)",
    "backup": "exempt: owner command on files (DESIGN invariant 12)",
    "restore": "exempt: owner command on files (DESIGN invariant 12)",
    "export": "exempt: owner command on files (DESIGN invariant 12)",
    "pin": "exempt: calls /v1/admin/pin when a server runs (probed there), else the owner's "
    "hand edit of the file",
    "unpin": "exempt: as pin",
    "audit": "exempt: calls /v1/audit when a server runs (probed there), else the owner's file",
    "install-hooks": "exempt: installer (DESIGN invariant 12)",
    "uninstall-hooks": "exempt: installer",
    "install-mcp": "exempt: installer (DESIGN invariant 12)",
    "uninstall-mcp": "exempt: installer",
    "setup": "exempt: installer (DESIGN invariant 12); its self-check sends as the owner",
    "uninstall": "exempt: installer",
    "status": "exempt: owner command on files and GET /v1/health (no page read)",
}


def _named_tests(value: str) -> list[str]:
    return re.findall(r"\btest_[a-z0-9_]+\b", value)


# --------------------------------------------------------------------------------------
# Fixtures and helpers
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Any:
    global PERSONAL_HID
    w = sw.build(tmp_path_factory.mktemp("scope"))
    PERSONAL_HID = w.handoffs["personal"]["id"]
    assert re.fullmatch(r"P-[0-9a-f]{8}", PERSONAL_HID), w.handoffs
    assert w.handoffs["personal"]["path"] == f"people/alice/handoffs/{PERSONAL_HID}.md"
    HIDDEN_TARGETS["alice_handoff"] = _alice_handoff_target()
    assert w.handoffs["shared"]["id"] == SHARED_HID, w.handoffs
    yield w
    w.server.stop()


def diff(a: str, b: str) -> str:
    """The first differing lines of two bodies (for assertion messages)."""
    import difflib

    lines = difflib.unified_diff(
        a.splitlines(), b.splitlines(), "hidden", "absent", lineterm="", n=0
    )
    return "\n".join(list(lines)[:16])


def forbidden_in(viewer: str, text: str) -> list[str]:
    low = text.lower()
    return [m for m in sw.FORBIDDEN[viewer] if m.lower() in low]


def assert_clean(viewer: str, text: str, what: str) -> None:
    found = forbidden_in(viewer, text)
    assert not found, f"{what}: {viewer} got hidden content {found}: {text[:600]}"


class Raw:
    """Requests sent byte for byte (httpx would remove ``./`` and ``x/../``)."""

    def __init__(self, world: Any, user: str, cookie: str | None = None) -> None:
        self.port = world.server.port
        self.headers = {} if cookie else dict(world.headers(user))
        if cookie:
            self.headers["Cookie"] = cookie
        self.user = user

    def __call__(
        self, method: str, path: str, body: bytes | None = None, **headers: str
    ) -> tuple[int, str]:
        target = quote(path, safe="/%._-~:@!$&'()*+,;=?\\")
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            h = {**self.headers, **{k.replace("_", "-"): v for k, v in headers.items()}}
            conn.request(method, target, body=body, headers=h)
            r = conn.getresponse()
            return r.status, r.read().decode("utf-8", errors="replace")
        finally:
            conn.close()


# A target: (folder, user segment, name) -> spelled with sw.SPELLINGS; absent twins are
# the same with one part replaced by a name that exists nowhere.
Target = tuple[str, str, str]


def _alice_handoff_target() -> tuple[Target, list[Target], tuple[str, ...]]:
    """Alice's personal handoff page and its absent twins (its id is known once made)."""
    return (
        ("people", "alice", f"handoffs/{PERSONAL_HID}.md"),
        [
            ("people", "alice", f"handoffs/{ABSENT_HID}.md"),
            ("people", "zelda", f"handoffs/{PERSONAL_HID}.md"),
        ],
        (BOB, OWNER),
    )


HIDDEN_TARGETS: dict[str, tuple[Target, list[Target], tuple[str, ...]]] = {
    # name: (hidden, absent twins, viewers it is hidden from)
    "alice_folder": (
        ("people", "alice", "secret.md"),
        [("people", "alice", "nosuch.md"), ("people", "zelda", "secret.md")],
        (BOB, OWNER),
    ),
    "owner_folder": (
        ("people", OWNER, "diary.md"),
        [("people", OWNER, "nosuch.md"), ("people", "zelda", "diary.md")],
        (BOB,),
    ),
    "bob_folder": (
        ("people", "bob", "own.md"),
        [("people", "bob", "nosuch.md"), ("people", "zelda", "own.md")],
        (OWNER,),
    ),
    "alice_personal": (
        ("projects/p", "notes", "private.md"),
        [("projects/p", "notes", "nosuch.md")],
        (BOB, OWNER),
    ),
    "alice_session": (
        ("projects/p", "sessions", "2026-01-02-alice-private-a11ce000.md"),
        [("projects/p", "sessions", "2026-01-02-nobod-private-00000000.md")],
        (BOB, OWNER),
    ),
    "alice_handoff": _alice_handoff_target(),
    "symlink_into_alice": (
        ("projects/p", "link", "secret.md"),
        [("projects/p", "link", "nosuch.md")],
        (BOB, OWNER),
    ),
    "hardlink_to_alice": (
        ("projects", "p", "hard.md"),
        [("projects", "p", "nosuch.md")],
        (BOB, OWNER),
    ),
}

READ_CASES = [
    pytest.param(viewer, name, spelling, id=f"{viewer}-{name}-{spelling}")
    for name, (_h, _a, viewers) in HIDDEN_TARGETS.items()
    for viewer in viewers
    for spelling in sw.SPELLINGS
]


def spell(spelling: str, t: Target) -> str:
    return sw.SPELLINGS[spelling](*t)


def _user_forms(u: str) -> list[str]:
    forms = [
        u,
        u.upper(),
        u.capitalize(),
        sw.pct_letters(u),
        sw.fullwidth(u),
        sw.fullwidth(u[:1]) + u[1:],
        u.replace("i", chr(0x2170)),
    ]
    return forms + [quote(f, safe="") for f in forms] + [quote(f) for f in forms]


def substitute(text: str, hidden: Target, absent: Target) -> str:
    """``text`` as it would read with the hidden target's parts replaced by the absent's."""
    pairs: list[tuple[str, str]] = []
    if hidden[2] != absent[2]:
        pairs.append((hidden[2], absent[2]))
        hs, as_ = hidden[2].removesuffix(".md"), absent[2].removesuffix(".md")
        pairs += [(hs, as_), (quote(hs), quote(as_))]
    if hidden[1] != absent[1]:
        pairs += list(zip(_user_forms(hidden[1]), _user_forms(absent[1]), strict=True))
    for x, y in sorted(set(pairs), key=lambda p: -len(p[0])):
        if x != y:
            text = text.replace(x, y)
    return text


def compare_hidden_to_absent(
    viewer: str,
    name: str,
    spelling: str,
    fetch: Callable[[str], Any],
    face: str,
) -> None:
    """fetch(hidden spelling) must equal fetch(absent spelling), once the parts are swapped,
    and hold nothing hidden; it may not be a 403/412/428 or carry a hash."""
    hidden, absents, _ = HIDDEN_TARGETS[name]
    got = fetch(spell(spelling, hidden))
    text = json.dumps(got, ensure_ascii=False, sort_keys=True) if not isinstance(got, str) else got
    assert_clean(viewer, text, f"{face} {spell(spelling, hidden)!r}")
    for absent in absents:
        want = fetch(spell(spelling, absent))
        want_text = (
            json.dumps(want, ensure_ascii=False, sort_keys=True)
            if not isinstance(want, str)
            else want
        )
        assert substitute(text, hidden, absent) == want_text, (
            f"{face}: {viewer} can tell {spell(spelling, hidden)!r} (hidden) from "
            f"{spell(spelling, absent)!r} (absent):\n"
            + diff(substitute(text, hidden, absent), want_text)
        )


def hidden_paths(viewer: str, world: Any) -> set[str]:
    """Every path that names a page ``viewer`` may not see (real ones and the link ones)."""
    out = {rel for rel in sw.snapshot(world.wiki) if rel.endswith(".md")}
    out -= sw.visible_pages(viewer, world.wiki)
    out |= {"projects/p/link/secret.md", sw.HARDLINK}
    return {p for p in out if not p.startswith(".git")}


def assert_names_nothing_hidden(viewer: str, world: Any, text: str, what: str) -> None:
    """No hidden content, and no hidden page's path (the shared page's own wikilink text,
    ``[[people/alice/secret]]``, is bob's to read and is left out of the path check)."""
    assert_clean(viewer, text, what)
    text = re.sub(r"\[\[[^\]]*\]\]", "", text)
    for p in hidden_paths(viewer, world):
        stem = p.removesuffix(".md")
        assert stem not in text, f"{what}: {viewer} is shown the hidden path {p}: {text[:600]}"


# --------------------------------------------------------------------------------------
# Generated coverage
# --------------------------------------------------------------------------------------


def app_routes(tmp: Path) -> list[str]:
    """``METHOD path`` for every route of the app ``create_app`` builds (HEAD left out)."""
    return faces.app_routes(tmp, owner=OWNER)


def test_every_route_has_a_row(tmp_path: Path) -> None:
    routes = app_routes(tmp_path)
    assert routes, "no routes found"
    missing = [r for r in routes if r not in ROUTES]
    assert not missing, f"routes with no row in ROUTES (add how they are probed): {missing}"
    stale = [r for r in ROUTES if r not in routes]
    assert not stale, f"rows in ROUTES for routes the app no longer has: {stale}"


def test_every_cli_command_has_a_row() -> None:
    from wiki_memory.cli.main import build_parser

    parser = build_parser()
    cmds = set()
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            cmds |= set(a.choices)
    missing = sorted(cmds - set(CLI_COMMANDS))
    assert not missing, f"CLI commands with no row in CLI_COMMANDS: {missing}"
    assert not sorted(set(CLI_COMMANDS) - cmds), "stale CLI rows"


def test_every_table_row_names_a_real_test() -> None:
    here = sys.modules[__name__].__dict__
    for table in (ROUTES, TOOLS, CLI_COMMANDS):
        for key, value in table.items():
            if value.startswith("exempt:") or value.startswith("test_mcp_* "):
                continue
            names = _named_tests(value)
            assert names, f"{key}: {value!r} names no test"
            for n in names:
                assert callable(here.get(n)), f"{key}: {n} is not a test in this module"


# --------------------------------------------------------------------------------------
# HTTP /v1
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("viewer", "name", "spelling"), READ_CASES)
def test_http_read_hidden_like_missing(world: Any, viewer: str, name: str, spelling: str) -> None:
    raw = Raw(world, viewer)

    def fetch(path: str) -> str:
        status, body = raw("GET", "/v1/pages/" + path)
        assert status not in (403, 412, 428), (path, status, body)
        return f"{status} {body}"

    compare_hidden_to_absent(viewer, name, spelling, fetch, "GET /v1/pages")


def test_http_shared_page_works_for_everyone(world: Any) -> None:
    for viewer in (BOB, OWNER, ALICE):
        with world.client(viewer) as c:
            r = c.get(f"/v1/pages/{sw.SHARED}")
            assert r.status_code == 200, r.text
            assert sw.CONTROL in r.json()["content"]
    # and the owners themselves do see their pages (so nothing passes by refusing all)
    for viewer, path in (
        (ALICE, sw.ALICE_PERSONAL),
        (BOB, sw.BOB_OWN),
        (OWNER, sw.OWNER_FOLDER),
        (ALICE, f"people/alice/handoffs/{PERSONAL_HID}.md"),
    ):
        with world.client(viewer) as c:
            r = c.get(f"/v1/pages/{path}")
            assert r.status_code == 200, (viewer, path, r.text)


def resolved_graph(page: dict[str, Any]) -> dict[str, Any]:
    """What the server resolved about a page's links (not the link text the page holds)."""
    return {
        "links": [
            {k: lk.get(k) for k in ("status", "path", "candidates", "fragment_found")}
            for lk in page.get("links") or []
        ],
        "backlinks": page.get("backlinks"),
    }


def test_http_links_and_backlinks(world: Any) -> None:
    for viewer in (BOB, OWNER):
        with world.client(viewer) as c:
            page = c.get(f"/v1/pages/{sw.SHARED}").json()
        links = {lk["target"]: lk for lk in page["links"]}
        diags = {d["key"]: d for d in page["diagnostics"] if d.get("key")}
        for hidden, absent in (
            ("people/alice/secret", "people/alice/nosuch"),
            ("projects/p/notes/private", "projects/p/notes/nosuch"),
            ("Alice Musings", "Nobody Musings"),
        ):
            h, a = dict(links[hidden]), dict(links[absent])
            h.pop("line"), a.pop("line")
            h["target"] = a["target"]
            assert h == a, (
                f"{viewer}: the link to hidden {hidden!r} differs from a missing one: {links[hidden]}"
            )
            assert (hidden in diags) == (absent in diags), (viewer, hidden, page["diagnostics"])
            if hidden in diags:
                dh, da = dict(diags[hidden]), dict(diags[absent])
                dh.pop("line"), da.pop("line")
                assert json.dumps(dh).replace(hidden, absent) == json.dumps(da), (dh, da)
        text = json.dumps(resolved_graph(page), ensure_ascii=False)
        assert_names_nothing_hidden(viewer, world, text, "links/backlinks of the shared page")
        back = {b["path"] for b in page["backlinks"]}
        assert not back & hidden_paths(viewer, world), (viewer, back)
    # bob sees his own page's backlink, alice's own view names hers: the graph works
    with world.client(BOB) as c:
        assert sw.BOB_OWN in {
            b["path"] for b in c.get(f"/v1/pages/{sw.SHARED}").json()["backlinks"]
        }
    with world.client(ALICE) as c:
        back = {b["path"] for b in c.get(f"/v1/pages/{sw.SHARED}").json()["backlinks"]}
        assert sw.ALICE_PERSONAL in back, back


def test_http_list_pages_is_exactly_what_viewer_may_see(world: Any) -> None:
    for viewer in (BOB, OWNER, ALICE):
        with world.client(viewer) as c:
            r = c.get("/v1/pages", params={"limit": 1000})
            assert r.status_code == 200, r.text
            got = {p["path"] for p in r.json()["pages"]}
            assert_clean(viewer, r.text, "GET /v1/pages")
            expected = sw.visible_pages(viewer, world.wiki)
            assert got == expected, (
                f"{viewer}: listed but hidden {sorted(got - expected)}; "
                f"visible but not listed {sorted(expected - got)}"
            )
            for project in ("p",):
                r = c.get("/v1/pages", params={"limit": 1000, "project": project})
                assert_names_nothing_hidden(viewer, world, r.text, "GET /v1/pages?project=p")


def _recall_view(res: dict[str, Any]) -> Any:
    return sorted(
        (i["path"], i["anchor"].split("#")[0], i["kind"], i["title"]) for i in res["items"]
    )


def test_http_recall_filters_before_counting(world: Any) -> None:
    for viewer in (BOB, OWNER):
        with world.client(viewer) as c:
            res = {}
            for word in (sw.WORD, sw.CONTROL):
                for budget in (4000, 0, 40):
                    r = c.post("/v1/recall", json={"query": word, "budget_tokens": budget})
                    assert r.status_code == 200, r.text
                    assert_names_nothing_hidden(viewer, world, r.text, f"recall {word}")
                    res[word, budget] = r.json()
            assert res[sw.CONTROL, 4000]["items"], "the shared page must be found"
            for budget in (4000, 0, 40):
                k, p = res[sw.WORD, budget], res[sw.CONTROL, budget]
                assert _recall_view(k) == _recall_view(p), (viewer, budget, k, p)
                assert k["omitted"] == p["omitted"], (
                    f"{viewer}: omitted counts hidden matches at budget {budget}: "
                    f"{k['omitted']} vs {p['omitted']}"
                )
            r = c.post("/v1/recall", json={"query": "zqxamarkfolder zqxamarkpersonal"})
            assert r.json()["items"] == [] and r.json()["omitted"] == 0, r.text


def test_http_expand_hidden_like_missing(world: Any) -> None:
    for viewer in (BOB, OWNER):
        with world.client(viewer) as c:
            for name, (_hidden, _absents, viewers) in HIDDEN_TARGETS.items():
                if viewer not in viewers:
                    continue
                for spelling in sw.SPELLINGS:
                    for anchor in ("", "#^t1", "#Notes"):

                        def fetch(path: str, anchor: str = anchor) -> str:
                            r = c.post(
                                "/v1/expand", json={"ids": [path + anchor], "budget_tokens": 4000}
                            )
                            return f"{r.status_code} {r.text}"

                        compare_hidden_to_absent(viewer, name, spelling, fetch, "POST /v1/expand")
            r = c.post("/v1/expand", json={"ids": [sw.SHARED]})
            assert r.status_code == 200 and sw.CONTROL in r.text, r.text


def test_http_handoffs_personal_invisible(world: Any) -> None:
    with world.client(BOB) as c:
        r = c.get("/v1/handoffs", params={"project": "p"})
        assert r.status_code == 200, r.text
        ids = {h["id"] for h in r.json()["handoffs"]}
        assert SHARED_HID in ids and PERSONAL_HID not in ids, ids
        assert_names_nothing_hidden(BOB, world, r.text, "GET /v1/handoffs")
        for st in ("open", "offered", "claimed", "done", "cancelled", "expired"):
            r = c.get("/v1/handoffs", params={"status": st})
            assert_names_nothing_hidden(BOB, world, r.text, f"GET /v1/handoffs?status={st}")
        r = c.get("/v1/handoffs")
        assert PERSONAL_HID not in {h["id"] for h in r.json()["handoffs"]}
        assert c.get(f"/v1/handoffs/{SHARED_HID}").status_code == 200
    raw = Raw(world, BOB)
    for spelling in ("as_is", "lower", "pct", "trailing_slash"):

        def form(hid: str, spelling: str = spelling) -> str:
            return {
                "as_is": hid,
                "lower": hid.lower(),
                "pct": sw.pct_letters(hid),
                "trailing_slash": hid + "/",
            }[spelling]

        calls: list[tuple[str, str, bytes | None]] = [("GET", "/v1/handoffs/{}", None)]
        for verb in ("claim", "complete", "cancel", "release"):
            calls.append(
                (
                    "POST",
                    "/v1/handoffs/{}/" + verb,
                    json.dumps(
                        {"harness": "codex", "session_id": "bobs", "note": "n", "reason": "r"}
                    ).encode(),
                )
            )
        for method, tmpl, body in calls:
            sh, bh = raw(
                method, tmpl.format(form(PERSONAL_HID)), body, Content_Type="application/json"
            )
            sa, ba = raw(
                method, tmpl.format(form(ABSENT_HID)), body, Content_Type="application/json"
            )
            assert_clean(BOB, bh, f"{method} {tmpl}")
            assert sh not in (403, 409), (tmpl, spelling, sh, bh)
            assert (
                sh,
                bh.replace(PERSONAL_HID, ABSENT_HID).replace(
                    PERSONAL_HID.lower(), ABSENT_HID.lower()
                ),
            ) == (sa, ba), f"{method} {tmpl} {spelling}: personal {sh} {bh} vs missing {sa} {ba}"
    # creating one as bob works and never lands in alice's folder
    before = sw.snapshot(world.wiki / "people" / "alice")
    with world.client(BOB) as c:
        r = c.post(
            "/v1/handoffs",
            json={"project": "p", "title": "bob's own", "visibility": "personal", "to": "alice"},
        )
        assert r.status_code in (201, 400), r.text
        if r.status_code == 201:
            assert r.json()["handoff"]["path"].startswith("people/bob/"), r.text
    assert sw.snapshot(world.wiki / "people" / "alice") == before
    # alice still sees hers
    with world.client(ALICE) as c:
        assert c.get(f"/v1/handoffs/{PERSONAL_HID}").status_code == 200


def test_http_brief_shows_nothing_hidden(world: Any) -> None:
    for viewer in (BOB, OWNER):
        with world.client(viewer) as c:
            for body in (
                {"project": "p", "budget_tokens": 6000},
                {
                    "project": "p",
                    "budget_tokens": 6000,
                    "harness": "codex",
                    "session_id": f"{viewer}-brief",
                    "max_offers": 10,
                },
            ):
                r = c.post("/v1/brief", json=body)
                assert r.status_code == 200, r.text
                assert_names_nothing_hidden(viewer, world, r.text, "POST /v1/brief")
                ids = {p.get("id") for p in r.json()["parts"]} | {
                    o["id"] for o in r.json()["offers"]
                }
                assert PERSONAL_HID not in ids, ids
                assert not any(PERSONAL_HID in json.dumps(o) for o in r.json()["omitted"])


# --------------------------------------------------------------------------------------
# Web view
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def web(world: Any) -> dict[str, Raw]:
    """A signed-in cookie per viewer, through the real sign-in form."""
    out = {}
    for viewer in (BOB, OWNER):
        with httpx.Client(base_url=world.url, timeout=60, follow_redirects=False) as c:
            r = c.get("/login")
            assert r.status_code == 200, r.text
            csrf = re.search(r'name="csrf"[^>]*value="([^"]+)"', r.text) or re.search(
                r'value="([^"]+)"[^>]*name="csrf"', r.text
            )
            assert csrf, r.text
            r = c.post(
                "/login", data={"token": world.tokens[viewer], "csrf": csrf.group(1), "next": "/"}
            )
            assert r.status_code == 303, r.text
            cookie = c.cookies.get("wm_session")
            assert cookie
        out[viewer] = Raw(world, viewer, cookie=f"wm_session={cookie}")
    return out


@pytest.mark.parametrize(("viewer", "name", "spelling"), READ_CASES)
def test_web_page_hidden_like_missing(
    world: Any, web: dict[str, Raw], viewer: str, name: str, spelling: str
) -> None:
    raw = web[viewer]
    for suffix in ("", "?view=source", "/history"):

        def fetch(path: str, suffix: str = suffix) -> str:
            status, body = raw("GET", "/page/" + path + suffix)
            assert status not in (403, 412, 428), (path, status)
            return f"{status} {body}"

        compare_hidden_to_absent(viewer, name, spelling, fetch, f"GET /page/...{suffix}")


def test_web_shared_page_links(world: Any, web: dict[str, Raw]) -> None:
    for viewer in (BOB, OWNER):
        status, body = web[viewer]("GET", "/page/" + sw.SHARED)
        assert status == 200 and sw.CONTROL in body, body[:400]
        assert_clean(viewer, body, "web shared page")
        hrefs = " ".join(re.findall(r'href="([^"]*)"', body))
        assert_names_nothing_hidden(viewer, world, hrefs, "web shared page links")
        # a link to a hidden page looks like a link to a missing one (red, not a link)
        for hidden in ("people/alice/secret.md", "projects/p/notes/private.md"):
            assert f'href="/page/{hidden}' not in body, f"{viewer}: web links {hidden}"
    status, body = web[BOB]("GET", "/page/" + sw.SHARED)
    assert sw.BOB_OWN in body, "bob's own backlink is shown"


def test_web_lists_show_nothing_hidden(world: Any, web: dict[str, Raw]) -> None:
    for viewer in (BOB, OWNER):
        for url in (
            "/",
            "/pages",
            "/pages?offset=0",
            "/p/p",
            "/p/p?notes=0&sessions=0&handoffs=0",
            f"/search?q={sw.WORD}",
            f"/search?q={sw.WORD}&project=p",
            "/handoffs",
            "/handoffs?project=p",
            "/f",
            "/f/projects",
            "/f/projects/p",
        ):
            status, body = web[viewer]("GET", url)
            assert status == 200, (url, status, body[:300])
            assert_names_nothing_hidden(viewer, world, body, f"web {url}")
            assert f">{PERSONAL_HID}<" not in body and f"/{PERSONAL_HID}" not in body, (url, viewer)
        status, body = web[viewer]("GET", "/pages")
        assert sw.SHARED in body
        # a folder holding only pages the viewer may not see answers like a missing one
        hidden, _ = web[viewer]("GET", "/f/projects/p/notes")
        missing, _ = web[viewer]("GET", "/f/projects/p/no-such-folder")
        assert hidden == missing == 404, (viewer, hidden, missing)


def test_web_session_hidden_like_missing(world: Any, web: dict[str, Raw]) -> None:
    for viewer in (BOB, OWNER):
        for hidden, absent in (
            (sw.ALICE_SESSION_ID, "ses_0000000000000000"),
            ("a11ce000", "00000000"),
            (sw.ALICE_SESSION_HARNESS_ID, "nobodysession"),
        ):
            sh, bh = web[viewer]("GET", f"/session/{hidden}")
            sa, ba = web[viewer]("GET", f"/session/{absent}")
            assert_clean(viewer, bh, f"/session/{hidden}")
            assert (sh, bh.replace(hidden, absent)) == (sa, ba), (
                f"{viewer} /session/{hidden}: {sh} vs {sa}\n" + diff(bh.replace(hidden, absent), ba)
            )


def test_web_no_route_same_for_hidden_and_missing(world: Any, web: dict[str, Raw]) -> None:
    for viewer in (BOB, OWNER):
        sh, bh = web[viewer]("GET", "/people/alice/secret.md")
        sa, ba = web[viewer]("GET", "/people/zelda/secret.md")
        assert (sh, bh.replace("alice", "zelda")) == (sa, ba)
        assert_clean(viewer, bh, "no route")


# --------------------------------------------------------------------------------------
# MCP over streamable HTTP, with the SDK's real client
# --------------------------------------------------------------------------------------


@asynccontextmanager
async def mcp_client(world: Any, user: str) -> AsyncIterator[Any]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.types import Implementation

    async with httpx2.AsyncClient(headers=world.headers(user), timeout=120) as hc:
        t = streamable_http_client(world.url + "/mcp", http_client=hc)
        async with Client(t, client_info=Implementation(name="codex", version="1")) as c:
            yield c


def result_json(res: Any) -> dict[str, Any]:
    text = "\n".join(c.text for c in res.content if c.type == "text")
    return {"is_error": bool(res.is_error), "text": text, "structured": res.structured_content}


def mcp_run(world: Any, user: str, fn: Callable[[Any], Any]) -> Any:
    async def main() -> Any:
        async with mcp_client(world, user) as c:
            return await fn(c)

    return asyncio.run(main())


def test_mcp_every_tool_has_a_row(world: Any) -> None:
    async def names(c: Any) -> list[str]:
        return [t.name for t in (await c.list_tools()).tools]

    tools = mcp_run(world, BOB, names)
    assert tools
    missing = [t for t in tools if t not in TOOLS]
    assert not missing, f"MCP tools with no row in TOOLS (add how they are probed): {missing}"
    stale = [t for t in TOOLS if t not in tools]
    assert not stale, f"rows in TOOLS for tools the server no longer has: {stale}"


async def _call(c: Any, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return result_json(await c.call_tool(tool, args))


def _mcp_compare(
    viewer: str, world: Any, tool: str, argf: Callable[[str], dict[str, Any]]
) -> list[str]:
    """Hidden vs absent for every target and spelling through one tool; returns failures."""

    async def go(c: Any) -> list[str]:
        failures = []
        for name, (hidden, absents, viewers) in HIDDEN_TARGETS.items():
            if viewer not in viewers:
                continue
            for spelling in sw.SPELLINGS:
                results: dict[str, str] = {}
                for t in [hidden, *absents]:
                    p = spell(spelling, t)
                    results[p] = json.dumps(
                        await _call(c, tool, argf(p)), ensure_ascii=False, sort_keys=True
                    )
                hp = spell(spelling, hidden)
                if forbidden_in(viewer, results[hp]):
                    failures.append(f"{tool} {hp!r}: hidden content {results[hp][:300]}")
                    continue
                for a in absents:
                    if substitute(results[hp], hidden, a) != results[spell(spelling, a)]:
                        failures.append(
                            f"{tool} {name}/{spelling}: {hp!r} -> {results[hp][:250]} | "
                            f"{spell(spelling, a)!r} -> {results[spell(spelling, a)][:250]}"
                        )
        return failures

    return mcp_run(world, viewer, go)


@pytest.mark.parametrize("viewer", [BOB, OWNER])
def test_mcp_read_and_expand_hidden_like_missing(world: Any, viewer: str) -> None:
    failures = _mcp_compare(viewer, world, "page_read", lambda p: {"path": p})
    failures += _mcp_compare(
        viewer, world, "memory_expand", lambda p: {"ids": [p], "budget_tokens": 4000}
    )
    failures += _mcp_compare(
        viewer, world, "memory_expand", lambda p: {"ids": [p + "#^t1"], "budget_tokens": 4000}
    )
    assert not failures, f"{len(failures)} leaks:\n" + "\n".join(failures[:40])

    async def shared(c: Any) -> None:
        r = await _call(c, "page_read", {"path": sw.SHARED})
        assert not r["is_error"] and sw.CONTROL in r["text"], r

    mcp_run(world, viewer, shared)


def test_mcp_links_and_backlinks(world: Any) -> None:
    async def go(c: Any) -> dict[str, Any]:
        return await _call(c, "page_read", {"path": sw.SHARED})

    for viewer in (BOB, OWNER):
        r = mcp_run(world, viewer, go)
        s = r["structured"] or {}
        graph = json.dumps(resolved_graph(s), ensure_ascii=False)
        assert_names_nothing_hidden(viewer, world, graph, "page_read links/backlinks")
        for lk in s.get("links") or []:
            if lk["target"] in ("people/alice/secret", "projects/p/notes/private", "Alice Musings"):
                assert lk["status"] == "unresolved" and lk["path"] is None, (viewer, lk)


@pytest.mark.parametrize("viewer", [BOB, OWNER, ALICE])
def test_mcp_lists_are_exactly_what_viewer_may_see(world: Any, viewer: str) -> None:
    async def go(c: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        listed = await _call(c, "page_list", {"limit": 1000})
        recent = await _call(c, "page_list", {"project": "p", "limit": 100})
        return listed, recent

    listed, recent = mcp_run(world, viewer, go)
    assert not listed["is_error"], listed
    assert_clean(viewer, json.dumps(listed, ensure_ascii=False), "page_list")
    assert_clean(viewer, json.dumps(recent, ensure_ascii=False), "page_list project=p")
    got = {p["path"] for p in listed["structured"]["pages"]}
    expected = sw.visible_pages(viewer, world.wiki)
    assert got == expected, (sorted(got - expected), sorted(expected - got))
    assert not recent["is_error"], recent
    rec = {p["path"] for p in recent["structured"]["pages"]}
    assert rec <= expected, sorted(rec - expected)
    assert sw.SHARED in rec


def test_mcp_recall_filters_before_counting(world: Any) -> None:
    async def go(c: Any) -> dict[Any, Any]:
        out = {}
        for word in (sw.WORD, sw.CONTROL):
            for budget in (4000, 0, 40):
                out[word, budget] = await _call(
                    c, "memory_recall", {"query": word, "budget_tokens": budget}
                )
        return out

    for viewer in (BOB, OWNER):
        res = mcp_run(world, viewer, go)
        for key, r in res.items():
            assert not r["is_error"], (key, r)
            assert_names_nothing_hidden(
                viewer, world, json.dumps(r, ensure_ascii=False), f"memory_recall {key}"
            )
        for budget in (4000, 0, 40):
            k, p = res[sw.WORD, budget]["structured"], res[sw.CONTROL, budget]["structured"]
            assert _recall_view(k) == _recall_view(p), (viewer, budget)
            for f in ("omitted", "total"):
                assert k[f] == p[f], (
                    f"{viewer}: {f} counts hidden matches at budget {budget}: {k[f]} vs {p[f]}"
                )


def test_mcp_brief_and_handoffs(world: Any) -> None:
    async def go(c: Any) -> list[str]:
        failures = []
        lst = await _call(c, "handoff_list", {"project": "p"})
        ids = {h["id"] for h in lst["structured"]["handoffs"]}
        if PERSONAL_HID in ids or SHARED_HID not in ids:
            failures.append(f"handoff_list ids {ids}")
        for st in (None, "open", "offered"):
            r = await _call(c, "handoff_list", {"status": st} if st else {})
            if forbidden_in(BOB, json.dumps(r)) or PERSONAL_HID in json.dumps(r):
                failures.append(f"handoff_list status={st}: {json.dumps(r)[:300]}")
            if r["structured"] and r["structured"].get("omitted"):
                failures.append(
                    f"handoff_list status={st} counts something in omitted: {r['structured']['omitted']}"
                )
        for form in (lambda h: h, str.lower):
            for tool, extra in (
                ("handoff_list", {}),
                ("handoff_claim", {}),
                ("handoff_update", {"action": "complete", "note": "n"}),
                ("handoff_update", {"action": "cancel", "note": "r"}),
                ("handoff_update", {"action": "release"}),
            ):
                rh = await _call(c, tool, {"id": form(PERSONAL_HID), **extra})
                ra = await _call(c, tool, {"id": form(ABSENT_HID), **extra})
                th = json.dumps(rh, ensure_ascii=False, sort_keys=True)
                ta = json.dumps(ra, ensure_ascii=False, sort_keys=True)
                if (
                    forbidden_in(BOB, th)
                    or th.replace(PERSONAL_HID, ABSENT_HID).replace(
                        PERSONAL_HID.lower(), ABSENT_HID.lower()
                    )
                    != ta
                ):
                    failures.append(f"{tool} {form(PERSONAL_HID)}: {th[:250]} | absent: {ta[:250]}")
        for body in (
            {"project": "p", "budget_tokens": 6000},
            {"project": "P", "budget_tokens": 6000},
        ):
            r = await _call(c, "memory_brief", body)
            t = json.dumps(r, ensure_ascii=False)
            if r["is_error"] or forbidden_in(BOB, t) or PERSONAL_HID in t:
                failures.append(f"memory_brief {body}: {t[:300]}")
        # creating works for bob, and never in alice's folder
        r = await _call(
            c,
            "handoff_create",
            {"project": "p", "title": "bob mcp", "visibility": "personal", "to": "alice"},
        )
        if not r["is_error"] and not r["structured"]["handoff"]["path"].startswith("people/bob/"):
            failures.append(
                f"handoff_create put bob's personal handoff at {r['structured']['handoff']['path']}"
            )
        return failures

    before = sw.snapshot(world.wiki / "people" / "alice")
    failures = mcp_run(world, BOB, go)
    assert sw.snapshot(world.wiki / "people" / "alice") == before
    assert not failures, "\n".join(failures)


# --------------------------------------------------------------------------------------
# CLI commands that talk to the server, as bob
# --------------------------------------------------------------------------------------


def test_cli_recall_brief_and_handoffs(world: Any) -> None:
    tok = world.tokens[BOB]

    def run(*args: str) -> tuple[int, str, str]:
        r = sw.cli(world.data_dir, *args, token=tok, url=world.url)
        return r.returncode, r.stdout, r.stderr

    code, out, err = run("recall", sw.WORD, "--json", "--budget", "4000")
    assert code == 0, err
    assert_names_nothing_hidden(BOB, world, out + err, "cli recall")
    assert sw.SHARED in out
    code, out, err = run("recall", sw.WORD)
    assert code == 0 and "Shared Plan" in out, out + err
    assert_names_nothing_hidden(BOB, world, out + err, "cli recall (table)")
    code, out, err = run("brief", "--project", "p", "--json", "--budget", "6000")
    assert code == 0, err
    assert_names_nothing_hidden(BOB, world, out + err, "cli brief")
    assert PERSONAL_HID not in out
    code, out, err = run("handoff", "list", "--json")
    assert code == 0, err
    assert PERSONAL_HID not in out and SHARED_HID in out, out
    assert_names_nothing_hidden(BOB, world, out + err, "cli handoff list")
    for verb in ("show", "claim"):
        hidden = run("handoff", verb, PERSONAL_HID)
        absent = run("handoff", verb, ABSENT_HID)
        assert_clean(BOB, hidden[1] + hidden[2], f"cli handoff {verb}")
        assert (
            hidden[0],
            hidden[1].replace(PERSONAL_HID, ABSENT_HID),
            hidden[2].replace(PERSONAL_HID, ABSENT_HID),
        ) == absent, (verb, hidden, absent)
    code, out, err = run("handoff", "show", SHARED_HID)
    assert code == 0, err


# --------------------------------------------------------------------------------------
# Writes last: if a write leaks through, it should not spoil the read probes above
# --------------------------------------------------------------------------------------


def lands_in_other_folder(world: Any, user: str, spelled: str, decode: bool = True) -> bool:
    """Would a page at ``spelled`` (as the URL layer decodes it, symlinks followed) sit in
    another user's ``people/<user>/`` folder, by the rule's case- and Unicode-folding?"""
    from urllib.parse import unquote

    parts: list[str] = []
    for seg in (unquote(spelled) if decode else spelled).replace("\\", "/").split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if parts:
                parts.pop()
            continue
        parts.append(seg)
    real = (world.wiki / "/".join(parts)).resolve()
    try:
        rel = real.relative_to(world.wiki.resolve()).parts
    except ValueError:
        return False
    return len(rel) >= 2 and sw.fold(rel[0]) == "people" and sw.fold(rel[1]) != sw.fold(user)


def test_http_write_into_other_folder_is_404(world: Any) -> None:
    before = sw.snapshot(world.wiki / "people")
    raw = Raw(world, BOB)
    targets = [
        (("people", "alice", "secret.md"), ("people", "alice", "newbybob.md")),
        (("people", "alice", "secret.md"), ("people", "zelda", "secret.md")),
        (("people", OWNER, "diary.md"), ("people", OWNER, "newbybob.md")),
        (
            ("people", "alice", f"handoffs/{PERSONAL_HID}.md"),
            ("people", "alice", f"handoffs/{ABSENT_HID}.md"),
        ),
        (("projects/p", "link", "secret.md"), ("projects/p", "link", "newbybob.md")),
    ]
    text = "---\ntitle: by bob\n---\n# by bob\n\noverwritten\n"
    preconds: list[dict[str, str]] = [
        {},
        {"If-Match": '"' + "0" * 64 + '"'},
        {"If-None-Match": "*"},
    ]
    for hidden, absent in targets:
        for spelling in sw.SPELLINGS:
            for pre in preconds:
                hs, as_ = spell(spelling, hidden), spell(spelling, absent)
                sh, bh = raw(
                    "PUT", "/v1/pages/" + hs, text.encode(), Content_Type="text/markdown", **pre
                )
                sa, ba = raw(
                    "PUT", "/v1/pages/" + as_, text.encode(), Content_Type="text/markdown", **pre
                )
                assert_clean(BOB, bh, f"PUT {hs}")
                assert (
                    not lands_in_other_folder(world, BOB, hs) or sh == 404 or (sh == sa == 400)
                ), f"PUT {hs!r} {pre} by bob: {sh} {bh} (must be 404: bob owns no such folder)"
                assert sa == sh and substitute(bh, hidden, absent) == ba, (
                    f"PUT {hs!r} {pre}: hidden {sh} {bh} vs absent {as_!r}: {sa} {ba}"
                )
    after = sw.snapshot(world.wiki / "people")
    assert after == before, f"bob changed people/: {sorted(set(after) ^ set(before))}"
    # and nothing got written beside people/ under another spelling of it
    stray = [
        p
        for p in sw.snapshot(world.wiki)
        if sw.fold(p.split("/")[0]) == "people" and not p.startswith("people/")
    ]
    assert not stray, stray


def test_http_write_personal_page_refused_without_confirming(world: Any) -> None:
    """A personal page of alice's in a shared folder, and a hard link to hers: bob's writes
    change nothing and get no 403/412/428 and no hash that would confirm the page."""
    raw = Raw(world, BOB)
    text = "---\ntitle: by bob\n---\n# by bob\n\noverwritten\n"
    for path in (sw.ALICE_PERSONAL, sw.ALICE_SESSION, sw.HARDLINK):
        before = (world.wiki / path).read_bytes()
        for pre in ({}, {"If-Match": '"' + "0" * 64 + '"'}, {"If-None-Match": "*"}):
            status, body = raw(
                "PUT", "/v1/pages/" + path, text.encode(), Content_Type="text/markdown", **pre
            )
            assert_clean(BOB, body, f"PUT {path}")
            assert status not in (200, 201, 403, 412, 428), (path, pre, status, body)
            assert not re.search(r'"hash"\s*:\s*"[0-9a-f]{16,}', body), (path, pre, body)
            if "If-Match" in pre:
                sa, ba = raw(
                    "PUT",
                    "/v1/pages/projects/p/notes/nosuch.md",
                    text.encode(),
                    Content_Type="text/markdown",
                    **pre,
                )
                assert (status, body.replace(path, "projects/p/notes/nosuch.md")) == (sa, ba), (
                    f"PUT {path} If-Match: {status} {body} vs a missing page: {sa} {ba}"
                )
        assert (world.wiki / path).read_bytes() == before, f"bob changed {path}"
    assert (world.wiki / sw.ALICE_FOLDER).read_bytes() == sw.PAGES[sw.ALICE_FOLDER].encode()


def _get_hash(c: httpx.Client, path: str) -> str:
    r = c.get(f"/v1/pages/{path}")
    assert r.status_code == 200, r.text
    return str(r.json()["hash"])


def test_http_pins_refused(world: Any) -> None:
    with world.client(BOB) as c:
        # a new page that pins itself
        new = "projects/p/pin-by-http.md"
        r = c.put(
            f"/v1/pages/{new}",
            content="---\ntitle: Pin me HTTP\npinned: true\nproject: p\n---\n# Pin me\n\nalways\n",
        )
        assert r.status_code >= 400 and r.status_code != 500, (
            f"pinning create accepted: {r.status_code} {r.text}"
        )
        assert (
            not (world.wiki / new).exists() or "pinned: true" not in (world.wiki / new).read_text()
        )
        # an ordinary page turned pinned
        before = (world.wiki / sw.PLAIN_HTTP).read_bytes()
        h = _get_hash(c, sw.PLAIN_HTTP)
        r = c.put(
            f"/v1/pages/{sw.PLAIN_HTTP}",
            headers={"If-Match": f'"{h}"'},
            content="---\ntitle: Plain HTTP\nproject: p\npinned: true\n---\n# Plain HTTP\n\npinned now\n",
        )
        assert r.status_code >= 400 and r.status_code != 500, (
            f"pin change accepted: {r.status_code} {r.text}"
        )
        assert (world.wiki / sw.PLAIN_HTTP).read_bytes() == before
        # unpinning a person's pin is a pin change too
        before = (world.wiki / sw.PINNED).read_bytes()
        h = _get_hash(c, sw.PINNED)
        r = c.put(
            f"/v1/pages/{sw.PINNED}",
            headers={"If-Match": f'"{h}"'},
            content="---\ntitle: Team Rules\npinned: false\nproject: p\n---\n# Team Rules\n\nAlways run the tests.\n",
        )
        assert r.status_code >= 400 and r.status_code != 500, (
            f"unpin accepted: {r.status_code} {r.text}"
        )
        assert (world.wiki / sw.PINNED).read_bytes() == before
        # the brief does not show what was refused
        r = c.post("/v1/brief", json={"project": "p", "budget_tokens": 4000})
        assert r.status_code == 200, r.text
        pinned = [p.get("path") for p in r.json()["parts"] if p.get("kind") == "pinned"]
        assert new not in pinned and sw.PLAIN_HTTP not in pinned, pinned
        assert sw.PINNED in pinned, pinned
        # writes that leave `pinned` as stored are ordinary edits
        h = _get_hash(c, sw.PINNED)
        r = c.put(
            f"/v1/pages/{sw.PINNED}",
            headers={"If-Match": f'"{h}"'},
            content="---\ntitle: Team Rules\npinned: true\nproject: p\n---\n# Team Rules\n\nAlways run the tests twice.\n",
        )
        assert r.status_code == 200, (
            f"an edit keeping pinned: true was refused: {r.status_code} {r.text}"
        )
        h = _get_hash(c, sw.PLAIN_HTTP)
        r = c.put(
            f"/v1/pages/{sw.PLAIN_HTTP}",
            headers={"If-Match": f'"{h}"'},
            content="---\ntitle: Plain HTTP\nproject: p\n---\n# Plain HTTP\n\nedited by bob\n",
        )
        assert r.status_code == 200, r.text
        # the pin route: 403 naming the admin grant on a page bob sees, and the missing
        # page's 404 on one he may not see
        r = c.post("/v1/admin/pin", json={"path": sw.PINNED, "pinned": False})
        assert r.status_code == 403 and r.json()["grant"] == "admin", r.text
        hidden = c.post("/v1/admin/pin", json={"path": sw.ALICE_FOLDER, "pinned": True})
        absent = c.post("/v1/admin/pin", json={"path": "people/alice/nosuch.md", "pinned": True})
        assert hidden.status_code == absent.status_code == 404, (hidden.text, absent.text)
        assert hidden.text.replace("secret", "nosuch") == absent.text
    assert "pinned: true" in (world.wiki / sw.PINNED).read_text()


def test_http_observations_cannot_write_into_people(world: Any) -> None:
    before = sw.snapshot(world.wiki / "people" / "alice")
    with world.client(BOB) as c:
        for project in ("../../people/alice", "../people/alice"):
            r = c.post(
                "/v1/observations",
                json={
                    "harness": "claude-code",
                    "event": "UserPromptSubmit",
                    "session_id": "bob-obs-1",
                    "project": project,
                    "cwd": "/home/bob/people/alice",
                    "event_id": f"e-{project}",
                    "payload": {"prompt": "hello there"},
                },
            )
            assert r.status_code in (202, 400), r.text
            assert_clean(BOB, r.text, "POST /v1/observations")
    assert sw.snapshot(world.wiki / "people" / "alice") == before


def test_http_admin_reindex_needs_admin(world: Any) -> None:
    """Bob is no admin: reindex is refused, and its reply never counts pages bob cannot see."""
    with world.client(BOB) as c:
        r = c.post("/v1/admin/reindex")
        assert r.status_code in (401, 403, 404), f"bob reindexed: {r.status_code} {r.text}"
        r = c.get("/v1/audit")
        assert r.status_code == 403 and "lines" not in r.json(), r.text


def test_mcp_write_into_other_folder_like_missing(world: Any) -> None:
    before = sw.snapshot(world.wiki / "people")
    personal_before = {
        p: (world.wiki / p).read_bytes() for p in (sw.ALICE_PERSONAL, sw.ALICE_SESSION, sw.HARDLINK)
    }
    text = "---\ntitle: by bob\n---\n# by bob\n\noverwritten\n"
    pairs = [
        (("people", "alice", "secret.md"), ("people", "alice", "newbybobmcp.md")),
        (("people", "alice", "secret.md"), ("people", "zelda", "secret.md")),
        (("people", OWNER, "diary.md"), ("people", OWNER, "newbybobmcp.md")),
        (("projects/p", "link", "secret.md"), ("projects/p", "link", "newbybobmcp.md")),
    ]

    async def go(c: Any) -> list[str]:
        failures = []
        for hidden, absent in pairs:
            for spelling in sw.SPELLINGS:
                if not lands_in_other_folder(world, BOB, spell(spelling, hidden), decode=False):
                    continue  # a new page in a shared folder under another name: bob's to write
                for expected in (None, "0" * 64):
                    args_h = {"path": spell(spelling, hidden), "text": text}
                    args_a = {"path": spell(spelling, absent), "text": text}
                    if expected:
                        args_h["expected_hash"] = args_a["expected_hash"] = expected
                    rh, ra = (
                        await _call(c, "page_write", args_h),
                        await _call(c, "page_write", args_a),
                    )
                    th = json.dumps(rh, ensure_ascii=False, sort_keys=True)
                    ta = json.dumps(ra, ensure_ascii=False, sort_keys=True)
                    if (
                        not rh["is_error"]
                        or forbidden_in(BOB, th)
                        or re.search(r"[0-9a-f]{64}", th.replace("0" * 64, ""))
                    ):
                        failures.append(f"page_write {args_h['path']!r}: {th[:300]}")
                    elif substitute(th, hidden, absent) != ta:
                        failures.append(
                            f"page_write {args_h['path']!r} vs {args_a['path']!r}: {th[:250]} | {ta[:250]}"
                        )
        for path in personal_before:
            for expected in (None, "0" * 64):
                args = {
                    "path": path,
                    "text": text,
                    **({"expected_hash": expected} if expected else {}),
                }
                r = await _call(c, "page_write", args)
                t = json.dumps(r, ensure_ascii=False)
                if (
                    not r["is_error"]
                    or forbidden_in(BOB, t)
                    or re.search(r"[0-9a-f]{64}", t.replace("0" * 64, ""))
                ):
                    failures.append(f"page_write {path} {expected and 'with hash'}: {t[:300]}")
        return failures

    failures = mcp_run(world, BOB, go)
    assert sw.snapshot(world.wiki / "people") == before, "bob changed people/ through page_write"
    for p, b in personal_before.items():
        assert (world.wiki / p).read_bytes() == b, f"bob changed {p} through page_write"
    assert not failures, f"{len(failures)} leaks:\n" + "\n".join(failures[:40])


def test_mcp_pins_refused(world: Any) -> None:
    async def go(c: Any) -> dict[str, Any]:
        out = {}
        new = "projects/p/pin-by-mcp.md"
        out["create"] = await _call(
            c,
            "page_write",
            {
                "path": new,
                "text": "---\ntitle: Pin me MCP\npinned: true\nproject: p\n---\n# Pin me\n\nalways\n",
            },
        )
        h = (await _call(c, "page_read", {"path": sw.PLAIN_MCP}))["structured"]["hash"]
        out["pin"] = await _call(
            c,
            "page_write",
            {
                "path": sw.PLAIN_MCP,
                "expected_hash": h,
                "text": "---\ntitle: Plain MCP\nproject: p\npinned: true\n---\n# Plain MCP\n\npinned now\n",
            },
        )
        out["brief"] = await _call(c, "memory_brief", {"project": "p", "budget_tokens": 4000})
        h = (await _call(c, "page_read", {"path": sw.PLAIN_MCP}))["structured"]["hash"]
        out["edit"] = await _call(
            c,
            "page_write",
            {
                "path": sw.PLAIN_MCP,
                "expected_hash": h,
                "text": "---\ntitle: Plain MCP\nproject: p\n---\n# Plain MCP\n\nedited by bob\n",
            },
        )
        return out

    plain_before = (world.wiki / sw.PLAIN_MCP).read_bytes()
    out = mcp_run(world, BOB, go)
    assert out["create"]["is_error"], f"page_write created a pinned page: {out['create']}"
    new = world.wiki / "projects/p/pin-by-mcp.md"
    assert not new.exists() or "pinned: true" not in new.read_text()
    assert out["pin"]["is_error"], f"page_write pinned a page: {out['pin']}"
    pinned = [
        p.get("path") for p in out["brief"]["structured"]["parts"] if p.get("kind") == "pinned"
    ]
    assert "projects/p/pin-by-mcp.md" not in pinned and sw.PLAIN_MCP not in pinned, pinned
    assert not out["edit"]["is_error"], f"an ordinary edit was refused: {out['edit']}"
    assert (world.wiki / sw.PLAIN_MCP).read_bytes() != plain_before


def test_mcp_remember_cannot_write_into_people(world: Any) -> None:
    before = sw.snapshot(world.wiki / "people")

    async def go(c: Any) -> list[dict[str, Any]]:
        out = []
        for project in ("../../people/alice", "../people/alice", "people/alice"):
            out.append(await _call(c, "memory_remember", {"text": "a note", "project": project}))
        out.append(
            await _call(
                c,
                "memory_remember",
                {"text": "a note", "project": "p", "title": "../../../people/alice/x"},
            )
        )
        out.append(
            await _call(
                c,
                "memory_remember",
                {"text": "---\ntitle: pinme\npinned: true\n---\nbody", "project": "p"},
            )
        )
        return out

    out = mcp_run(world, BOB, go)
    for r in out:
        assert_clean(BOB, json.dumps(r, ensure_ascii=False), "memory_remember")
        if not r["is_error"]:
            assert not r["structured"]["path"].startswith("people/"), r
    assert sw.snapshot(world.wiki / "people") == before
    pinned_note = out[-1]
    if not pinned_note["is_error"]:
        assert "pinned: true" not in (world.wiki / pinned_note["structured"]["path"]).read_text()


def test_http_remember_cannot_write_into_people(world: Any) -> None:
    before = sw.snapshot(world.wiki / "people")
    bodies = [
        {"text": "a note", "project": project}
        for project in ("../../people/alice", "../people/alice", "people/alice")
    ]
    bodies.append({"text": "a note", "project": "p", "title": "../../../people/alice/x"})
    bodies.append({"text": "---\ntitle: pinme\npinned: true\n---\npinme body", "project": "p"})
    with world.client(BOB) as c:
        out = [c.post("/v1/remember", json=b) for b in bodies]
    for r in out[:4]:
        assert r.status_code == 400, r.text
    for r in out:
        assert_clean(BOB, r.text, "POST /v1/remember")
    assert sw.snapshot(world.wiki / "people") == before
    note = out[-1]
    assert note.status_code == 201, note.text
    written = (world.wiki / note.json()["path"]).read_text()
    assert "pinned: true" not in written and "user: bob" in written
