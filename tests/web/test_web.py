"""The web view, checked over HTTP against the app in this process (``appkit``; the
process is not the point): sign-in, what each user sees, safety of the HTML, and that
reading never changes the wiki (docs/web.md). ``wiki-memory serve --open`` is in
test_serve_open.py.

The browser tests (real headless Chromium) are in test_web_browser.py.
"""

from __future__ import annotations

import base64
import html.parser
import json
import re
import time
import zlib
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urljoin, urlsplit

import pytest
import webdata
from clikit import run_cli_here as cli
from webdata import BOB_ONLY_WORD, DEPLOY, H_BOB, H_BOB_PEOPLE, H_OLIVIA, OWNER, RUNBOOK, XSS

from wiki_memory.web import views as web

# in process; the wiki is built with a hand edit the watcher commits (real time)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    data = tmp_path_factory.mktemp("web") / "data"
    w = webdata.start_in_process(data, with_vault=True)
    webdata.hand_edit(
        w, RUNBOOK, "2. Revert the release tag.", "2. Revert the release tag.\n3. Post in #ops."
    )
    yield w
    w.srv.stop()


def new(ws, **kw: Any) -> Any:
    """A new client of the app with no cookies but ``kw``'s (``Client`` keywords), as
    a fresh browser or a module-level ``get`` is."""
    return ws.srv.new_client(**kw)


def login(ws, user: str, follow: bool = False) -> Any:
    """A client signed in through the form, as a browser would."""
    c = new(ws, follow_redirects=follow)
    r = c.get("/login")
    assert r.status_code == 200
    csrf = re.search(r'name="csrf" value="([^"]+)"', r.text).group(1)
    r = c.post(
        "/login",
        data={"csrf": csrf, "token": ws.tokens[user], "next": "/"},
        headers={"Origin": ws.url},
    )
    assert r.status_code in (200, 303), r.text
    return c


ROUTES = [
    "/",
    "/p/demo",
    "/pages",
    f"/page/{DEPLOY}",
    f"/page/{DEPLOY}/history",
    "/search?q=rollback",
    "/handoffs",
    "/session/web-sess-0001",
    "/no/such/route",
    "/page/../auth/owner.token",
]


def test_every_route_needs_sign_in(ws):
    for path in ROUTES:
        r = new(ws).get(ws.url + path)
        assert r.status_code == 303, (path, r.status_code)
        loc = r.headers["location"]
        assert loc.startswith("/login"), loc
        assert "csp" not in loc
        assert r.headers["content-security-policy"].startswith("default-src 'none'")
        # a wrong or forged cookie is no better
        forged = base64.urlsafe_b64encode(
            json.dumps({"u": OWNER, "t": "00000000", "e": 2**40, "n": "x"}).encode()
        ).decode()
        for cookie in ("garbage", f"{forged}.AAAA", "a.b.c"):
            r2 = new(ws, cookies={"wm_session": cookie}).get(ws.url + path)
            assert r2.status_code == 303, (path, cookie)
        r3 = new(ws).post(ws.url + path, data={"x": "1"})
        assert r3.status_code in (401, 405), (path, r3.status_code)
        assert r3.status_code != 200
    r = new(ws).get(ws.url + "/")
    assert r.headers["location"] == "/login"
    r = new(ws).get(ws.url + "/p/demo?x=1")
    assert r.headers["location"] == "/login?next=%2Fp%2Fdemo%3Fx%3D1"
    # the sign-in page and the static files are open
    assert new(ws).get(ws.url + "/login").status_code == 200
    css = new(ws).get(ws.url + "/static/web.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert "prefers-color-scheme: dark" in css.text
    assert new(ws).get(ws.url + "/static/nope.css").status_code == 404
    assert new(ws).get(ws.url + "/static/../auth/owner.token").status_code in (303, 404)
    # the API still wants its bearer token, never a cookie
    c = login(ws, OWNER)
    assert c.get("/v1/pages").status_code == 401
    assert c.get("/").status_code == 200


def test_bearer_token_also_opens_the_view(ws):
    r = new(ws).get(ws.url + "/p/demo", headers={"Authorization": f"Bearer {ws.tokens['bob']}"})
    assert r.status_code == 200 and "Deploy Guide" in r.text


def test_sign_in_form_and_cookie(ws):
    c = new(ws)
    r = c.get("/login?next=/p/demo")
    csrf = re.search(r'name="csrf" value="([^"]+)"', r.text).group(1)
    set_csrf = r.headers["set-cookie"]
    assert "wm_csrf=" in set_csrf and "HttpOnly" in set_csrf and "SameSite=strict" in set_csrf
    assert 'name="next" value="/p/demo"' in r.text
    # a cross-site post (another origin, or the browser says so) is refused
    for headers in ({"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
        r = c.post(
            "/login", data={"csrf": csrf, "token": ws.tokens[OWNER], "next": "/"}, headers=headers
        )
        assert r.status_code == 403 and "wm_session" not in r.headers.get("set-cookie", "")
    # a post without the form's token (the cookie alone, or the field alone) is refused
    csrf = re.search(r'name="csrf" value="([^"]+)"', r.text).group(1)
    r = c.post("/login", data={"token": ws.tokens[OWNER]})
    assert r.status_code == 403
    fresh = new(ws).post(ws.url + "/login", data={"csrf": csrf, "token": ws.tokens[OWNER]})
    assert fresh.status_code == 403
    # a wrong token
    r = c.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', r.text).group(1)
    r = c.post("/login", data={"csrf": csrf, "token": "wm_wrong", "next": "/"})
    assert r.status_code == 401 and "not valid" in r.text
    # the right one: a signed, HttpOnly, SameSite=Strict, expiring cookie; back to next
    csrf = re.search(r'name="csrf" value="([^"]+)"', r.text).group(1)
    r = c.post("/login", data={"csrf": csrf, "token": ws.tokens[OWNER], "next": "/p/demo"})
    assert r.status_code == 303 and r.headers["location"] == "/p/demo"
    cookie = next(v for k, v in r.headers.multi_items() if k == "set-cookie" and "wm_session=" in v)
    for attr in ("HttpOnly", "SameSite=strict", "Path=/", f"Max-Age={web.SESSION_SECONDS}"):
        assert attr in cookie, cookie
    assert ws.tokens[OWNER] not in cookie
    assert c.get("/p/demo").status_code == 200
    # never an open redirect
    for bad in ("//evil.example/x", "https://evil.example", "/\\evil.example", "javascript:x"):
        r = c.get("/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', r.text).group(1)
        r = c.post("/login", data={"csrf": csrf, "token": ws.tokens[OWNER], "next": bad})
        assert r.headers["location"] == "/", bad


def test_session_cookie_signature_and_expiry(ws):
    key = (ws.srv.data_dir / "auth" / web.KEY_FILE).read_bytes()
    assert oct((ws.srv.data_dir / "auth" / web.KEY_FILE).stat().st_mode & 0o777) == "0o600"
    rec = next(r for r in _token_records(ws) if r["user"] == OWNER)
    good = web.make_session_cookie(key, OWNER, rec["id"])
    assert new(ws, cookies={"wm_session": good}).get(ws.url + "/").status_code == 200
    expired = web.make_session_cookie(
        key, OWNER, rec["id"], now=time.time() - web.SESSION_SECONDS - 5
    )
    assert new(ws, cookies={"wm_session": expired}).get(ws.url + "/").status_code == 303
    other_key = web.make_session_cookie(b"k" * 32, OWNER, rec["id"])
    assert new(ws, cookies={"wm_session": other_key}).get(ws.url + "/").status_code == 303
    # the same token id for another user name is refused
    wrong_user = web.make_session_cookie(key, "bob", rec["id"])
    assert new(ws, cookies={"wm_session": wrong_user}).get(ws.url + "/").status_code == 303
    # tampering with the payload breaks the signature
    payload, sig = good.split(".")
    data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    data["u"] = "bob"
    forged = base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")
    assert new(ws, cookies={"wm_session": f"{forged}.{sig}"}).get(ws.url + "/").status_code == 303


def _token_records(ws):
    import hashlib

    data = json.loads((ws.srv.data_dir / "auth" / "tokens.json").read_text())
    return [{"id": t["hash"][:8], "user": t["user"]} for t in data["tokens"]] + [
        {"id": hashlib.sha256(tok.encode()).hexdigest()[:8], "user": u}
        for u, tok in ws.tokens.items()
    ]


def test_revoking_the_token_ends_the_session(ws):
    c = login(ws, "carol")
    assert c.get("/").status_code == 200
    r = cli(ws.srv.data_dir, "token", "revoke", "--user", "carol")
    assert r.returncode == 0, r.stderr
    r = c.get("/")
    assert r.status_code == 303 and r.headers["location"] == "/login"
    # a new token for carol does not bring the old session back
    ws.tokens["carol"] = cli(
        ws.srv.data_dir, "token", "create", "--user", "carol", "--project", "demo"
    ).stdout.strip()
    assert c.get("/").status_code == 303
    assert login(ws, "carol").get("/").status_code == 200


def test_sign_out(ws):
    c = login(ws, "bob")
    page = c.get("/")
    assert page.status_code == 200 and 'id="sign-out"' in page.text
    token = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
    old = c.cookies["wm_session"]
    # without the page's token (a cross-site post) nothing happens
    r = c.post("/logout", data={"csrf": "nope"})
    assert r.status_code == 403 and c.get("/").status_code == 200
    r = c.post("/logout", data={"csrf": token})
    assert r.status_code == 303 and r.headers["location"] == "/login"
    assert 'wm_session=""' in r.headers["set-cookie"] or "Max-Age=0" in r.headers["set-cookie"]
    # the old cookie, replayed, is refused too
    assert new(ws, cookies={"wm_session": old}).get(ws.url + "/").status_code == 303


def test_security_headers_on_every_response(ws):
    c = login(ws, OWNER)
    for path in ROUTES[:9] + ["/login", "/static/web.css"]:
        r = c.get(path)
        csp = r.headers["content-security-policy"]
        assert "script-src" not in csp and "default-src 'none'" in csp, path
        assert "unsafe-inline" not in csp
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["x-frame-options"] == "DENY"


def test_paths_stay_inside_the_wiki(ws):
    c = login(ws, OWNER)
    for bad in (
        "/page/../auth/owner.token",
        "/page/%2e%2e/auth/owner.token",
        "/page/projects/%2E%2E/%2E%2E/auth/owner.token",
        "/page/.git/config",
        "/page/.git/HEAD",
        "/page/projects/demo/../../../etc/passwd",
        "/page/%00",
        "/page/projects\\demo",
        "/page/.gitignore",
        "/page/projects/demo/notes/runbook.md/../../../../auth/owner.token",
        f"/page/{DEPLOY}/history?rev=HEAD~1",
        f"/page/{DEPLOY}/history?rev=../../x",
    ):
        r = c.get(bad)
        assert r.status_code in (400, 404), (bad, r.status_code)
        assert ws.tokens[OWNER] not in r.text
        assert "[core]" not in r.text and "root:" not in r.text


def test_pages_render(ws):
    c = login(ws, OWNER)
    r = c.get(f"/page/{DEPLOY}")
    assert r.status_code == 200
    t = r.text
    # wikilinks resolved (alias, heading), unresolved shown as such
    assert '<a class="wikilink" href="/page/projects/demo/notes/runbook.md">runbook</a>' in t
    assert 'href="/page/projects/demo/notes/runbook.md#rollback"' in t
    assert 'class="wikilink unresolved"' in t and "Release calendar" in t
    # callout, table with alignment as classes, code, block id, property table
    assert '<blockquote class="callout callout-warning">' in t
    assert 'class="align-right"' in t and "style=" not in t
    assert '<code class="language-bash">' in t
    assert 'id="^warn-1"' in t
    assert '<th scope="row">aliases</th><td>deploying</td>' in t
    assert 'id="history-link"' in t
    # backlinks: the runbook and the open handoff link here
    back = t.split('id="backlinks"', 1)[1]
    assert "Runbook" in back and "Finish the flaky login test" in back
    # the session page: timeline entries are targets
    r = c.get(f"/session/{webdata.SESSION_ID}")
    assert r.status_code == 200 and 'id="^t12"' in r.text and webdata.T12_WORD in r.text
    assert c.get(f"/session/{ws.session_page_id}").text.count('id="^t12"') == 1
    short = ws.session_path.rsplit("-", 1)[-1].removesuffix(".md")
    assert 'id="^t12"' in c.get(f"/session/{short}").text
    assert c.get("/session/no-such-session").status_code == 404
    # the source view
    src = c.get(f"/page/{DEPLOY}?view=source")
    assert "[[Runbook|runbook]]" in src.text


def test_history_and_diff(ws):
    c = login(ws, OWNER)
    r = c.get(f"/page/{RUNBOOK}/history")
    assert r.status_code == 200
    shas = re.findall(r"\?rev=([0-9a-f]{40})#diff", r.text)
    assert len(shas) == 2, r.text
    assert OWNER in r.text and "UTC" in r.text
    d = c.get(f"/page/{RUNBOOK}/history?rev={shas[0]}")
    assert d.status_code == 200
    assert '<span class="d-add">+3. Post in #ops.</span>' in d.text
    v = c.get(f"/page/{RUNBOOK}/history?rev={shas[1]}&view=version")
    assert v.status_code == 200 and "Revert the release tag" in v.text
    assert "Post in #ops" not in v.text.split('id="version"', 1)[1]
    assert c.get(f"/page/{RUNBOOK}/history?rev={'0' * 40}").status_code == 404


def test_search_links_to_anchors(ws):
    c = login(ws, OWNER)
    r = c.get("/search", params={"q": webdata.T12_WORD})
    assert r.status_code == 200
    href = "/page/" + ws.session_path.replace(" ", "%20") + "#^t12"
    assert f'href="{href}"' in r.text, r.text
    r = c.get("/search", params={"q": "make rollback channel"})
    assert 'href="/page/projects/demo/notes/deploy-guide.md#rollback"' in r.text
    # query text with FTS syntax is harmless, and shown escaped
    r = c.get("/search", params={"q": '"<script>alert(1)</script> OR NEAR('})
    assert r.status_code == 200 and "<script>alert(1)" not in r.text


def test_personal_handoffs_are_shown_to_their_owner_only(ws):
    bob = login(ws, "bob")
    olivia = login(ws, OWNER)
    assert "Bob&#39;s private reminder" in bob.get("/handoffs").text
    assert "Bob&#39;s folder reminder" in bob.get("/handoffs").text
    assert bob.get(f"/page/{H_BOB_PEOPLE}").status_code == 200
    assert olivia.get(f"/page/{H_BOB_PEOPLE}").status_code == 404
    assert "Bob&#39;s folder reminder" not in olivia.get(f"/page/{DEPLOY}").text  # backlinks
    assert "Bob&#39;s folder reminder" in bob.get(f"/page/{DEPLOY}").text
    assert bob.get(f"/page/{H_BOB}").status_code == 200
    assert bob.get(f"/page/{H_OLIVIA}").status_code == 404
    for path in ("/", "/p/demo", "/handoffs", "/pages", f"/page/{RUNBOOK}"):
        t = olivia.get(path).text
        assert "Bob&#39;s private reminder" not in t and "h-bob-personal" not in t, path
        assert BOB_ONLY_WORD not in t
        assert "Olivia&#39;s private reminder" in t or path in ("/", f"/page/{RUNBOOK}"), path
    assert olivia.get(f"/page/{H_BOB}").status_code == 404
    assert olivia.get(f"/page/{H_BOB}/history").status_code == 404
    found = olivia.get("/search", params={"q": BOB_ONLY_WORD}).text
    assert "h-bob-personal" not in found and "Nothing found" in found
    assert "h-bob-personal" in bob.get("/search", params={"q": BOB_ONLY_WORD}).text
    # the handoffs page groups by state and says who holds which
    t = olivia.get("/handoffs").text
    assert 'id="state-open"' in t and 'id="state-claimed"' in t
    assert "held by bob (codex)" in t


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.scripts = 0
        self.bad_attrs: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "iframe", "object", "embed", "svg", "img"):
            self.scripts += 1
        for k, v in attrs:
            v = (v or "").strip().lower()
            if k.startswith("on") or k == "style" or v.startswith(("javascript:", "data:")):
                self.bad_attrs.append((tag, k, v))
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.links.append(href)


def test_xss_page_is_inert_html(ws):
    c = login(ws, OWNER)
    r = c.get(f"/page/{XSS}")
    assert r.status_code == 200
    p = _Links()
    p.feed(r.text)
    assert p.scripts == 0, "a script, iframe, svg or img element was rendered"
    assert p.bad_attrs == []
    t = r.text
    assert "&lt;script&gt;window.__xss_ran=4" in t
    assert "&lt;img src=x onerror=" in t
    assert "javascript:" not in "".join(p.links) and "data:" not in "".join(p.links)
    assert "<b " not in t and "&lt;b onmouseover=alert(12)&gt;guide&lt;/b&gt;" in t
    # the frontmatter value with HTML and the page title are text too
    assert "<title>&lt;script&gt;window.__xss_ran=1&lt;/script&gt;XSS probe" in t


#: the shared vault's pages are all in the import commit: their history views (the list,
#: a diff, a version) are the same three routes over one commit, ~0.1 s each, page after
#: page; the crawl opens them for one vault page in this many (every other page, and the
#: vault pages themselves, in full)
VAULT_HISTORY_ONE_IN = 5
#: the search view's filter links combine (a kind within a folder since a day, each with
#: its cursors): about 230 of the crawl's 420 searches hold two filters or more, the same
#: route and code over other values, ~25 ms each; the crawl opens one in this many of
#: them (every search with one filter or none in full)
COMBINED_FILTERS_ONE_IN = 3
FILTERS = ("kind", "within", "since", "project", "cursor", "back")


def _skipped(rel: str) -> bool:
    """A history view of a vault page (:data:`VAULT_HISTORY_ONE_IN`) or a search with two
    filters or more (:data:`COMBINED_FILTERS_ONE_IN`) left out of the crawl."""
    path, _, query = rel.partition("?")
    if path == "/search":
        given = {k for k, _ in parse_qsl(query, keep_blank_values=True)}
        if len(given & set(FILTERS)) < 2:
            return False
        return zlib.crc32(unquote(rel).encode()) % COMBINED_FILTERS_ONE_IN != 0
    if not (path.startswith("/page/vaults/") and path.endswith("/history")):
        return False
    return zlib.crc32(unquote(path).encode()) % VAULT_HISTORY_ONE_IN != 0


def _crawl(client: Any, start: str, limit: int = 5000) -> dict[str, int]:
    seen: dict[str, int] = {}
    todo = [start]
    base = str(client.base_url)
    while todo and len(seen) < limit:
        url = todo.pop()
        if url in seen or _skipped(url):
            continue
        r = client.get(url)
        seen[url] = r.status_code
        if "text/html" not in r.headers.get("content-type", ""):
            continue
        p = _Links()
        p.feed(r.text)
        for href in p.links:
            full = urljoin(base.rstrip("/") + urlsplit(url).path, href)
            parts = urlsplit(full)
            if parts.netloc != urlsplit(base).netloc:
                continue
            rel = parts.path + ("?" + parts.query if parts.query else "")
            if rel not in seen:
                todo.append(rel)
    return seen


@pytest.mark.timeout(1200)  # two crawls of every page: over 300 s at a load of 20
def test_no_route_changes_anything(ws):
    before = webdata.snapshot(ws.wiki)
    c = login(ws, OWNER)
    seen = _crawl(c, "/")
    bob = login(ws, "bob")
    seen_bob = _crawl(bob, "/")
    assert len(seen) > 30 and len(seen_bob) > 30
    vault_histories = {u.partition("?")[0] for u in seen if u.startswith("/page/vaults/")} & {
        u for u in seen if u.endswith("/history")
    }
    assert len(vault_histories) >= 10, sorted(vault_histories)
    bad = {u: s for u, s in {**seen, **seen_bob}.items() if s >= 500}
    assert not bad, bad
    assert all(s in (200, 404) for s in seen.values()), {
        u: s for u, s in seen.items() if s not in (200, 404)
    }
    time.sleep(1.5)  # anything the crawl set off (watcher, writer) has had time to land
    after = webdata.snapshot(ws.wiki)
    assert after[0] == before[0], "HEAD moved"
    assert after[1] == before[1], sorted(set(after[1].items()) ^ set(before[1].items()))[:5]


def test_templates_ship_with_the_package():
    root = Path(web.__file__).resolve().parents[2]
    tdir = web.template_dir()
    for name in ("base.html", "page.html", "login.html", "static/web.css"):
        assert (tdir / name).is_file(), name
    # the checkout's templates/ is the source the package's copy is made from
    assert (root / "templates" / "base.html").read_bytes() == (tdir / "base.html").read_bytes()
