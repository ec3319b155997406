"""The web view in a real browser: headless Chromium (Debian's ``chromium`` package)
driven by Playwright, against a real server process.

One walk through the main pages (sign in, a project, a wikilink and a backlink back, a
session landing on ``#^t12``, search to an anchor, history and a diff, sign out) and the
XSS page, with no dialog and no script run. Each step saves a screenshot in
``$WIKI_MEMORY_SCREENSHOTS`` (default: the test's temp folder); with
``WIKI_MEMORY_DOCS_SCREENSHOTS=1`` the ones docs/web.md shows are written to docs/img/.

Skipped, with the reason, when /usr/bin/chromium or Playwright is missing (``.ci/run``
installs both).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from urllib.parse import unquote

import pytest
import webdata
from webdata import DEPLOY, OWNER, RUNBOOK, XSS, XSS_MARK

pytestmark = pytest.mark.process

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
#: step name -> file name in docs/img
FOR_DOCS = {
    "02-home": "web-home.png",
    "03-project": "web-project.png",
    "04-page": "web-page.png",
    "07-session-t12": "web-session.png",
    "10-diff": "web-history.png",
}

if not Path(CHROMIUM).exists():
    pytest.skip(
        f"browser tests need Debian's chromium at {CHROMIUM} (apt-get install chromium)",
        allow_module_level=True,
    )
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="browser tests need Playwright (pip install playwright)"
)


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    data = tmp_path_factory.mktemp("webb") / "data"
    w = webdata.start(data)
    webdata.hand_edit(
        w, RUNBOOK, "2. Revert the release tag.", "2. Revert the release tag.\n3. Post in #ops."
    )
    yield w
    w.srv.stop()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    d = Path(os.environ.get("WIKI_MEMORY_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    d.mkdir(parents=True, exist_ok=True)
    return d


class Walk:
    """A page with the checks every step shares: no dialog, no console error from a
    blocked script, and a screenshot."""

    def __init__(self, browser, ws, shots: Path, color_scheme: str = "light") -> None:
        self.ctx = browser.new_context(
            viewport={"width": 1100, "height": 760}, color_scheme=color_scheme
        )
        self.page = self.ctx.new_page()
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.page.on("dialog", self._dialog)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.ws = ws
        self.shots = shots

    def _dialog(self, d) -> None:
        self.dialogs.append(d.message)
        d.dismiss()

    def go(self, path: str) -> None:
        self.page.goto(self.ws.url + path)

    def shot(self, name: str) -> Path:
        path = self.shots / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=False)
        if os.environ.get("WIKI_MEMORY_DOCS_SCREENSHOTS") == "1" and name in FOR_DOCS:
            DOCS_IMG.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, DOCS_IMG / FOR_DOCS[name])
        return path

    def path(self) -> str:
        return unquote(self.page.url.removeprefix(self.ws.url).split("#")[0])

    def hash(self) -> str:
        return unquote(self.page.evaluate("location.hash"))

    def close(self) -> None:
        self.ctx.close()


def test_walk_through_the_view(browser, ws, shots):
    w = Walk(browser, ws, shots)
    page = w.page
    try:
        # not signed in: sent to the sign-in page, then back where we were going
        w.go("/p/demo")
        assert w.path().startswith("/login")
        w.shot("01-login")
        page.fill("#token", ws.tokens[OWNER])
        page.click("#sign-in")
        page.wait_for_url("**/p/demo")
        cookie = next(c for c in w.ctx.cookies() if c["name"] == "wm_session")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert page.evaluate("document.cookie") == ""  # HttpOnly: no script can read it
        w.go("/")
        assert page.locator("h1").inner_text() == "Home"
        w.shot("02-home")

        # open a project
        page.click("section.project h3 a:text('demo')")
        page.wait_for_url("**/p/demo")
        assert page.locator("#sessions li.row").count() == 1
        assert page.locator("#handoffs li.row").count() == 3  # bob's personal one is hidden
        w.shot("03-project")

        # a note, then a wikilink to another page and the backlink back
        page.click("#notes a:text('Deploy Guide')")
        page.wait_for_url(f"**/page/{DEPLOY}")
        # properties are folded away until asked for
        assert not page.locator("table.props").is_visible()
        page.click("details.props summary")
        assert page.locator("table.props").is_visible()
        assert page.locator(".callout-warning").is_visible()
        assert page.locator(".wikilink.unresolved").first.inner_text() == "Release calendar"
        w.shot("04-page")
        page.click("a.wikilink:text('runbook')")
        page.wait_for_url(f"**/page/{RUNBOOK}")
        assert page.locator("h1").first.inner_text() == "Runbook"
        w.shot("05-wikilink-followed")
        page.click("#backlinks a:text('Deploy Guide')")
        page.wait_for_url(f"**/page/{DEPLOY}")
        w.shot("06-backlink-followed")

        # a session, landing on its timeline entry ^t12
        w.go(f"/session/{webdata.SESSION_ID}#^t12")
        target = page.locator(":target")
        assert target.count() == 1
        assert target.get_attribute("id") == "^t12"
        # a tool call: its output is folded under the entry's head
        assert webdata.T12_WORD in target.text_content()
        assert target.is_visible()
        box = target.bounding_box()
        assert box is not None and 0 <= box["y"] < 300, box  # scrolled to the entry
        w.shot("07-session-t12")

        # search, then follow the result to its anchor
        page.fill("header form.search input[name=q]", webdata.T12_WORD)
        page.press("header form.search input[name=q]", "Enter")
        page.wait_for_url("**/search?q=*")
        first = page.locator("ol.results li.result li.hit a.anchor").first
        assert first.is_visible()
        w.shot("08-search")
        first.click()
        page.wait_for_load_state()
        assert w.path() == "/page/" + ws.session_path
        assert w.hash() == "#^t12"
        assert page.locator(":target").get_attribute("id") == "^t12"
        w.shot("09-search-result-anchor")

        # a page's history and one diff
        w.go(f"/page/{RUNBOOK}")
        page.click("#history-link")
        page.wait_for_url(f"**/page/{RUNBOOK}/history")
        assert page.locator("table.history tbody tr").count() == 2
        page.locator("a.diff-link").first.click()
        page.wait_for_url("**rev=*")
        assert page.locator("pre.diff .d-add").first.inner_text() == "+3. Post in #ops."
        w.shot("10-diff")
        page.locator("a.version-link").nth(1).click()
        page.wait_for_url("**view=version*")
        assert "Revert the release tag" in page.locator("#version").inner_text()
        assert "Post in #ops" not in page.locator("#version").inner_text()
        w.shot("11-old-version")

        # sign out: sent to the sign-in page, and the view is closed again
        page.click("#sign-out")
        page.wait_for_url("**/login")
        assert not [c for c in w.ctx.cookies() if c["name"] == "wm_session"]
        w.shot("12-signed-out")
        w.go("/p/demo")
        assert w.path().startswith("/login")
        assert w.dialogs == [] and w.errors == []
    finally:
        w.close()


def test_xss_page_is_inert_in_the_browser(browser, ws, shots):
    w = Walk(browser, ws, shots)
    page = w.page
    try:
        w.go("/login")
        page.fill("#token", ws.tokens[OWNER])
        page.click("#sign-in")
        page.wait_for_url("**/")
        w.go(f"/page/{XSS}")
        page.wait_for_load_state("load")
        # hover and click everything that could carry a handler
        for loc in page.locator("main a, main span, main td").all():
            if loc.is_visible():
                loc.hover()
        w.shot("13-xss")
        assert page.evaluate(f"window.{XSS_MARK} === undefined")
        assert w.dialogs == [], w.dialogs
        assert w.errors == [], w.errors
        assert page.locator("main script, main img, main iframe, main svg").count() == 0
        hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
        assert not [h for h in hrefs if h.lower().startswith(("javascript:", "data:"))]
        handlers = page.evaluate(
            "[...document.querySelectorAll('*')].flatMap(e => [...e.attributes]"
            ".filter(a => a.name.startsWith('on')).map(a => a.name))"
        )
        assert handlers == []
        text = page.locator("main").inner_text()
        assert "<script>window.__xss_ran=4" in text and "<img src=x onerror=" in text
        assert "<script>window.__xss_ran=1</script>XSS probe" in page.title()
        # the link with a javascript: URL is left as text; clicking it does nothing
        page.get_by_text("[click me](javascript:", exact=False).click()
        assert w.path() == f"/page/{XSS}"
        assert page.evaluate(f"window.{XSS_MARK} === undefined")
    finally:
        w.close()


def test_dark_scheme_and_phone_width(browser, ws, shots):
    ctx = browser.new_context(
        viewport={"width": 390, "height": 800}, color_scheme="dark", is_mobile=True
    )
    page = ctx.new_page()
    try:
        page.goto(ws.url + "/login")
        page.fill("#token", ws.tokens[OWNER])
        page.click("#sign-in")
        page.wait_for_url("**/")
        page.goto(ws.url + f"/page/{DEPLOY}")
        bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert bg == "rgb(15, 18, 22)", bg
        # nothing wider than the phone's screen but the scrollable table and code
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, width
        page.screenshot(path=str(shots / "14-phone-dark.png"))
        if os.environ.get("WIKI_MEMORY_DOCS_SCREENSHOTS") == "1":
            shutil.copyfile(shots / "14-phone-dark.png", DOCS_IMG / "web-phone-dark.png")
    finally:
        ctx.close()


def test_a_session_across_a_dst_change_shows_each_entrys_local_time(browser, ws, shots):
    """Berlin's clocks jump at 01:00Z on 29 March 2026: the entry before shows +01:00,
    the one after +02:00, each beside its UTC clock, as the browser draws them."""
    from support import wait_for

    for n, (ts, text) in enumerate(
        [
            ("2026-03-29T01:30:00+01:00", "DSTWALK before the change"),
            ("2026-03-29T03:30:00+02:00", "DSTWALK after the change"),
        ]
    ):
        r = ws.srv.post(
            "/v1/observations",
            {
                "harness": "claude-code",
                "event": "UserPromptSubmit",
                "session_id": "dst-walk",
                "project": "demo",
                "ts": ts,
                "event_id": f"dst-{n}",
                "payload": {"prompt": text},
            },  # fmt: skip
        )
        assert r.status_code == 202, r.text
    stop = {"harness": "claude-code", "event": "Stop", "session_id": "dst-walk",
            "project": "demo", "ts": "2026-03-29T03:31:00+02:00", "payload": {}}  # fmt: skip
    assert ws.srv.post("/v1/observations", stop).status_code == 202

    def page_path() -> str | None:
        pages = ws.srv.get("/v1/pages", params={"project": "demo", "kind": "session"})
        for p in pages.json()["pages"]:
            full = ws.srv.get(f"/v1/pages/{p['path']}").json()
            if "after the change" in full["content"]:
                return str(p["path"])
        return None

    path = wait_for(page_path, 60, "the DST session's page")
    w = Walk(browser, ws, shots)
    try:
        w.go("/login")
        w.page.fill("#token", ws.tokens[OWNER])
        w.page.click("#sign-in")
        w.page.wait_for_url("**/")
        w.go(f"/page/{path}")
        shown = [t.strip() for t in w.page.locator(".turn-head .when").all_inner_texts()]
        assert shown[:2] == ["01:30 +01:00 (00:30:00 UTC)", "03:30 +02:00 (01:30:00 UTC)"], shown
        w.shot("12-session-dst")
        assert not w.dialogs and not w.errors
    finally:
        w.close()
