"""Finding, browsing and reading in the web view, on two real servers:

- an agent wiki: :mod:`webdata`'s pages, a Claude Code session captured from the shared
  hook payloads, and :mod:`browsedata`'s pages (case C52's four, a note with inline HTML);
- the shared ``obsidian-tasks-docs`` vault served as it is with ``serve --wiki``.

Over HTTP (C52, parsed with ``html.parser``): results grouped per page, the counts,
plain snippets, ``<mark>`` the only element in a snippet, escaping before marking. In
headless Chromium (Playwright, Debian's ``/usr/bin/chromium``, skipped when missing): a
search with its highlighted entries (one a stemmed match), folder pages reaching every
page of the vault, ``<br>`` in a table while script attempts stay inert, a session read
as a conversation with its properties folded, no sideways scrolling at 390 px, and
axe-core (``axe-playwright-python``) finding no serious or critical violation on home,
a folder, search, a page and a history. Screenshots go to ``$WIKI_MEMORY_SCREENSHOTS``
(default: a temp folder); ``WIKI_MEMORY_DOCS_SCREENSHOTS=1`` also writes the ones
docs/web.md shows into docs/img/.
"""

from __future__ import annotations

import html.parser
import os
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote

import browsedata
import httpx
import pytest
import webdata
from browsedata import INLINE, MARKUP, OTHER, RETRY, SESSION, XSS_MARK
from serverproc import ServerProcess
from support import shared_path
from webdata import OWNER

pytestmark = pytest.mark.process

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--no-first-run"]
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
VAULT = "obsidian-tasks-docs"


# --------------------------------------------------------------------------- servers


@pytest.fixture(scope="module")
def aw(tmp_path_factory):
    """The agent wiki's server (webdata + browsedata pages, a captured session)."""
    data = tmp_path_factory.mktemp("browse") / "data"
    browsedata.write(data / "wiki")
    w = webdata.start(data)
    yield w
    w.srv.stop()


@pytest.fixture(scope="module")
def vw(tmp_path_factory):
    """The shared docs vault, copied and served as it is (``serve --wiki``)."""
    root = tmp_path_factory.mktemp("vault")
    vault = root / "vault"
    shutil.copytree(shared_path("data", "vaults", VAULT, "vault"), vault)
    subprocess.run(["git", "init", "-q", str(vault)], check=True)
    subprocess.run(
        ["git", "-C", str(vault), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
        + ["commit", "-q", "--allow-empty", "-m", "empty"],
        check=True,
    )
    subprocess.run(["git", "-C", str(vault), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(vault), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
        + ["commit", "-q", "-m", "the docs vault"],
        check=True,
    )
    srv = ServerProcess(root / "data", env={"USER": OWNER}, args=["--wiki", str(vault)])
    srv.start(timeout=180)
    srv.vault = vault  # type: ignore[attr-defined]
    yield srv
    srv.stop()


def client(url: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60)


# --------------------------------------------------------------------------- HTML


class Doc(html.parser.HTMLParser):
    """Results of the search page: per result its path, and per snippet the elements in
    it and its text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.results: list[dict] = []
        self.stack: list[str] = []
        self.in_snippet = 0
        self.in_title = False
        self.counts = ""
        self.in_counts = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "li" and a.get("class") == "result":
            self.results.append({"path": a.get("data-path"), "snippets": [], "title": []})
        if self.in_snippet:
            self.results[-1]["snippets"][-1]["tags"].append(tag)
            self.in_snippet += 1
        elif tag == "span" and a.get("class") == "snippet":
            self.in_snippet = 1
            self.results[-1]["snippets"].append({"tags": [], "text": "", "marked": []})
        if tag == "a" and a.get("class") == "title" and self.results:
            self.in_title = True
        if tag == "p" and a.get("id") == "counts":
            self.in_counts = True
        self.stack.append(tag)

    def handle_endtag(self, tag):
        if self.stack:
            self.stack.pop()
        if self.in_snippet:
            self.in_snippet -= 1
        if tag == "a":
            self.in_title = False
        if tag == "p":
            self.in_counts = False

    def handle_data(self, data):
        if self.in_snippet:
            snip = self.results[-1]["snippets"][-1]
            snip["text"] += data
            if self.stack and self.stack[-1] == "mark":
                snip["marked"].append(data)
        if self.in_title:
            self.results[-1]["title"].append((data, self.stack[-1] == "mark"))
        if self.in_counts:
            self.counts += data


def search(c: httpx.Client, **params) -> Doc:
    r = c.get("/search", params=params)
    assert r.status_code == 200, r.text
    d = Doc()
    d.feed(r.text)
    d.raw = r.text  # type: ignore[attr-defined]
    return d


# --------------------------------------------------------------------------- C52 over HTTP


def test_c52_results_are_grouped_marked_and_safe(aw):
    c = client(aw.url, aw.tokens[OWNER])
    d = search(c, q="retry")
    paths = [r["path"] for r in d.results]
    assert len(paths) == len(set(paths)), paths  # each page once
    assert RETRY in paths and SESSION in paths
    ses = next(r for r in d.results if r["path"] == SESSION)
    assert len(ses["snippets"]) == 3  # its entries ^t3, ^t9, ^t14 under it
    row = d.raw.split(f'data-path="{SESSION}"', 1)[1].split('<li class="result"', 1)[0]
    assert {f"#^t{n}" for n in (3, 9, 14)} <= set(re.findall(r'href="[^"#]*(#\^t\d+)"', row))
    assert re.fullmatch(r"\d+ pages?, \d+ match(es)?.*", d.counts.strip()), d.counts
    for r in d.results:
        for s in r["snippets"]:
            assert set(s["tags"]) <= {"mark"}, s  # <mark> is the only element in a snippet
            text = s["text"]
            for bad in ("**", "[[", "---", "tags:"):
                assert bad not in text, text
            assert not text.lstrip().startswith("#"), text
            # every occurrence of the query word is marked
            words = re.findall(r"[^\W_]+", text)
            assert [w for w in words if w.lower() == "retry"] == [
                m for m in s["marked"] if m.lower() == "retry"
            ], s
    # the title is marked too
    retry = next(r for r in d.results if r["path"] == RETRY)
    assert ("Retry", True) in retry["title"]
    # "+N more in this page" opens the page with its hits marked
    more = re.search(r'href="(/page/[^"]*retry-policy\.md\?hl=retry)">\+(\d+) more', d.raw)
    assert more, d.raw
    shown = c.get(more.group(1).replace("&amp;", "&")).text
    body = shown.split('class="body markdown">', 1)[1]
    assert body.count("<mark>") >= 20 and "<mark>**" not in body

    # both words of a two-word query are marked, in any case
    for q in ("retry budget", '"retry budget"', "RETRY BUDGET"):
        d = search(c, q=q)
        marked = {m.lower() for r in d.results for s in r["snippets"] for m in s["marked"]}
        assert {"retry", "budget"} <= marked, (q, marked)
        assert OTHER in [r["path"] for r in d.results]

    # page text never becomes an element: P3's HTML shows as text
    d = search(c, q="retry budget")
    p3 = next(r for r in d.results if r["path"] == MARKUP)
    assert "<img src=q onerror=alert(7)>" in p3["snippets"][0]["text"]
    assert "<script>alert(8)</script>" in p3["snippets"][0]["text"]
    assert "&lt;img src=q onerror=alert(7)&gt;" in d.raw
    # the query itself is shown escaped, and finds P3
    d = search(c, q="<img")
    assert MARKUP in [r["path"] for r in d.results]
    assert 'value="&lt;img"' in d.raw and "<img" not in d.raw.split("<main", 1)[1]
    # an empty query is an empty page, no error
    d = search(c, q="")
    assert d.results == []
    # a project filter keeps the same grouping
    d = search(c, q="retry", project=browsedata.PROJECT)
    assert {RETRY, SESSION} <= {r["path"] for r in d.results}
    assert all(r["path"].startswith("projects/atlas/") for r in d.results)


def test_search_filters_are_links_without_internal_labels(aw):
    c = client(aw.url, aw.tokens[OWNER])
    r = c.get("/search", params={"q": "retry"})
    assert 'href="/search?q=retry&amp;project=atlas"' in r.text
    assert 'href="/search?q=retry&amp;kind=session"' in r.text
    assert 'href="/search?q=retry&amp;within=week"' in r.text
    for label in ("all-words", '"why"', 'class="why"'):
        assert label not in r.text
    d = search(c, q="retry", kind="session")
    assert [x["path"] for x in d.results] == [SESSION]
    d = search(c, q="retry", within="day")  # written just now: all still there
    assert RETRY in [x["path"] for x in d.results]


def test_folders_tags_and_project_pages(aw):
    c = client(aw.url, aw.tokens[OWNER])
    r = c.get("/f/projects/atlas")
    assert r.status_code == 200
    assert 'href="/f/projects/atlas/notes"' in r.text and 'href="/f/projects"' in r.text
    r = c.get("/f/projects/atlas/notes")
    for p in (RETRY, MARKUP, OTHER, INLINE):
        assert f'href="/page/{p}"' in r.text
    assert c.get("/f/no/such/folder").status_code == 404
    assert c.get("/f/../etc").status_code in (400, 404)
    # bob's personal pages are not named in a folder listing or on a tag page
    assert 'href="/f/people/bob"' not in c.get("/f/people").text
    assert c.get("/f/people/bob").status_code == 404
    bob = client(aw.url, aw.tokens["bob"])
    assert 'href="/f/people/bob"' in bob.get("/f/people").text
    assert "h-bob-folder.md" in bob.get("/f/people/bob/handoffs").text
    r = c.get("/tag/retry")
    assert f'href="/page/{RETRY}"' in r.text
    page = c.get(f"/page/{RETRY}").text
    assert 'href="/tag/retry"' in page and 'href="/tag/ops"' in page
    assert '<a href="/f/projects/atlas/notes">notes</a>' in page  # linked breadcrumbs
    proj = c.get("/p/atlas").text
    assert 'id="linked"' not in proj or "Most linked" in proj
    demo = c.get("/p/demo").text
    assert "Most linked" in demo and "Runbook" in demo.split('id="linked"', 1)[1]
    home = c.get("/").text
    assert "<title>Home · wiki-memory</title>" in home
    assert "Handoffs waiting for you" in home and "Finish the flaky login test" in home


# --------------------------------------------------------------------------- the browser


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"browser tests need Debian's chromium at {CHROMIUM}")
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs Playwright")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    d = Path(os.environ.get("WIKI_MEMORY_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def shot(page, shots: Path, name: str, docs_name: str | None = None) -> None:
    path = shots / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    if docs_name and os.environ.get("WIKI_MEMORY_DOCS_SCREENSHOTS") == "1":
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOCS_IMG / docs_name)


def signed_in(browser, url: str, token: str, width: int = 1200, mobile: bool = False):
    ctx = browser.new_context(
        viewport={"width": width, "height": 800}, is_mobile=mobile, has_touch=mobile
    )
    page = ctx.new_page()
    page.dialogs = []  # type: ignore[attr-defined]
    page.errors = []  # type: ignore[attr-defined]
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto(url + "/login")
    page.fill("#token", token)
    page.click("#sign-in")
    page.wait_for_url("**/")
    return ctx, page


def test_search_in_the_browser_marks_each_page_once(browser, aw, shots):
    ctx, page = signed_in(browser, aw.url, aw.tokens[OWNER])
    try:
        # "retrying" is not in any page: "retry" matches through its stem
        page.goto(aw.url + "/search?q=retrying+budget")
        results = page.locator("ol.results > li.result")
        paths = [results.nth(i).get_attribute("data-path") for i in range(results.count())]
        assert len(paths) == len(set(paths)) and SESSION in paths and RETRY in paths
        ses = page.locator(f"li.result[data-path='{SESSION}']")
        assert ses.locator("li.hit").count() == 3
        marked = {m.lower() for m in page.locator("span.snippet mark").all_inner_texts()}
        assert "retry" in marked and "budget" in marked  # "retry": a stemmed match
        assert page.locator("span.snippet *:not(mark)").count() == 0
        shot(page, shots, "b01-search", "web-search.png")
        ses.locator("li.hit a.anchor").first.click()
        page.wait_for_load_state()
        assert page.locator(":target").get_attribute("id", timeout=5000).startswith("^t")
        assert page.dialogs == [] and page.errors == []
    finally:
        ctx.close()


def test_folder_pages_reach_every_page_of_the_vault(browser, vw, shots):
    ctx, page = signed_in(browser, vw.url, vw.token)
    try:
        page.goto(vw.url + "/")
        assert "No projects yet" not in page.content()
        assert page.locator("#folders a.folder").count() >= 3
        shot(page, shots, "b02-vault-home", "web-vault-home.png")
        wanted = {
            p.relative_to(vw.vault).as_posix()
            for p in vw.vault.rglob("*.md")
            if ".git" not in p.parts and ".obsidian" not in p.parts
        }
        seen_pages: set[str] = set()
        todo = ["/f"]
        done: set[str] = set()
        while todo:
            url = todo.pop()
            if url in done:
                continue
            done.add(url)
            page.goto(vw.url + url)
            links = page.eval_on_selector_all(
                "a[href]", "els => els.map(e => e.getAttribute('href'))"
            )
            assert len(links) <= 500, (url, len(links))
            for h in page.eval_on_selector_all(
                "#subfolders a, .pager a", "els => els.map(e => e.getAttribute('href'))"
            ):
                todo.append(h if h.startswith("/") else url.split("?")[0] + h)
            for h in page.eval_on_selector_all(
                "#folder-pages a.title", "els => els.map(e => e.getAttribute('href'))"
            ):
                seen_pages.add(unquote(h.removeprefix("/page/")))
        assert seen_pages == wanted, (wanted - seen_pages, seen_pages - wanted)
        page.goto(vw.url + "/f/Queries")
        assert page.locator("nav.crumbs a").first.inner_text() == "wiki"
        assert page.locator("nav.tree a[aria-current='page']").inner_text() == "Queries"
        shot(page, shots, "b03-vault-folder", "web-folder.png")
        # a page's breadcrumbs lead back to its folder
        page.goto(vw.url + "/page/Getting%20Started/Statuses/Core%20Statuses.md")
        page.locator("nav.crumbs a:text('Statuses')").click()
        page.wait_for_url("**/f/Getting%20Started/Statuses")
        # a table with <br> renders a line break
        page.goto(vw.url + "/page/Getting%20Started/Tags.md")
        assert page.locator("table td br").count() > 0
        shot(page, shots, "b04-vault-page", "web-vault-page.png")
    finally:
        ctx.close()


def test_inline_html_renders_and_the_rest_stays_inert(browser, aw, shots):
    ctx, page = signed_in(browser, aw.url, aw.tokens[OWNER])
    try:
        page.goto(aw.url + f"/page/{INLINE}")
        body = page.locator("div.body")
        assert body.locator("table td br").count() == 1
        assert body.locator("kbd").count() >= 2 and body.locator("sub").count() == 1
        assert body.locator("details[open] summary").first.inner_text() == "More"
        for loc in body.locator("a, kbd, br, details, summary, td").all():
            if loc.is_visible():
                loc.hover()
        for loc in body.locator("details summary").all():
            loc.click()
        page.get_by_text("[click](", exact=False).click()
        assert page.title() != XSS_MARK and XSS_MARK not in page.title()
        assert body.locator("script, img, iframe").count() == 0
        handlers = page.evaluate(
            "[...document.querySelectorAll('*')].flatMap(e => [...e.attributes]"
            ".filter(a => a.name.startsWith('on')).map(a => a.name))"
        )
        assert handlers == []
        hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
        assert not [h for h in hrefs if h.lower().startswith("javascript:")]
        attrs = page.evaluate(
            "[...document.querySelectorAll('div.body kbd, div.body br, div.body details')]"
            ".flatMap(e => [...e.attributes].map(a => a.name))"
        )
        assert set(attrs) <= {"open"}, attrs
        text = body.inner_text()
        assert "<script>" in text  # shown as text
        assert page.locator("a.tag:text('#field-notes')").count() == 1
        assert page.dialogs == [] and page.errors == []
        shot(page, shots, "b05-inline-html")
    finally:
        ctx.close()


def test_session_reads_as_a_conversation(browser, aw, shots):
    ctx, page = signed_in(browser, aw.url, aw.tokens[OWNER])
    try:
        page.goto(aw.url + f"/session/{webdata.SESSION_ID}")
        assert page.locator("details.props").get_attribute("open") is None
        assert not page.locator("table.props").is_visible()
        prompts = page.locator("div.turn-prompt")
        assert prompts.count() >= 4
        assert prompts.first.locator(".who").inner_text() == OWNER  # who said it
        assert prompts.first.locator("div.said").is_visible()  # as text, not code
        assert prompts.first.locator("pre").count() == 0
        assert page.locator("div.turn-reply .who").first.inner_text() == "claude-code"
        tools = page.locator("div.turn-tool")
        assert tools.count() >= 4
        first_tool = tools.first
        assert first_tool.locator("details.tool-io").get_attribute("open") is None
        assert not first_tool.locator("pre").first.is_visible()  # collapsed with its result
        first_tool.locator("details.tool-io summary").click()
        assert first_tool.locator("pre").first.is_visible()
        shot(page, shots, "b06-session", "web-conversation.png")
        # the file itself is unchanged: the source view still shows the fences
        src = client(aw.url, aw.tokens[OWNER]).get(
            "/page/" + aw.session_path, params={"view": "source"}
        )
        assert "~~~~text" in src.text and "**" in src.text
    finally:
        ctx.close()


def test_a_failed_tool_call_is_marked(browser, aw):
    ctx, page = signed_in(browser, aw.url, aw.tokens[OWNER])
    try:
        page.goto(aw.url + f"/page/{SESSION}")
        failed = page.locator("div.turn-failed")
        assert failed.count() == 1
        assert failed.locator(".tool-name").inner_text() == "Bash"
        assert failed.locator(".badge.failed").inner_text() == "failed"
        ok = page.locator("div.turn-tool:not(.turn-failed)")
        assert ok.count() == 1 and ok.locator(".badge.failed").count() == 0
    finally:
        ctx.close()


PHONE_PATHS = [
    "/",
    "/f",
    "/f/projects/demo/notes",
    "/search?q=retry+budget",
    "/p/demo",
    "/handoffs",
]


def test_no_page_scrolls_sideways_on_a_phone(browser, aw, vw, shots):
    for srv, token, extra in (
        (aw, aw.tokens[OWNER], [f"/page/{RETRY}", f"/page/{INLINE}", "/page/" + aw.session_path]),
        (
            vw,
            vw.token,
            ["/", "/f/Queries", "/page/Queries/Filters.md", "/page/Getting%20Started/Tags.md"],
        ),
    ):
        url = srv.url
        ctx, page = signed_in(browser, url, token, width=390, mobile=True)
        try:
            for path in (PHONE_PATHS if srv is aw else []) + extra:
                page.goto(url + path)
                width = page.evaluate("document.documentElement.scrollWidth")
                assert width <= 390, (path, width)
            if srv is aw:
                page.goto(url + "/page/" + aw.session_path)
                shot(page, shots, "b07-phone-session", "web-phone-session.png")
                page.goto(url + "/search?q=retry+budget")
                shot(page, shots, "b08-phone-search", "web-phone-search.png")
        finally:
            ctx.close()


def test_accessibility_has_no_serious_violations(browser, aw, vw):
    axe_mod = pytest.importorskip("axe_playwright_python.sync_playwright", reason="needs axe")
    axe = axe_mod.Axe()
    pages = [
        (aw, aw.tokens[OWNER], "/"),
        (aw, aw.tokens[OWNER], "/f/projects/atlas/notes"),
        (aw, aw.tokens[OWNER], "/search?q=retry+budget"),
        (aw, aw.tokens[OWNER], f"/page/{INLINE}"),
        (aw, aw.tokens[OWNER], "/page/" + aw.session_path),
        (aw, aw.tokens[OWNER], f"/page/{webdata.RUNBOOK}/history"),
        (vw, vw.token, "/"),
        (vw, vw.token, "/f/Queries"),
        (vw, vw.token, "/page/Getting%20Started/Tags.md"),
    ]
    problems = []
    # one sign-in per server (~0.8 s each): every page and scheme is opened afresh in it
    for srv, token in ((aw, aw.tokens[OWNER]), (vw, vw.token)):
        ctx, page = signed_in(browser, srv.url, token)
        try:
            for path in [p for s, _, p in pages if s is srv]:
                for scheme in ("light", "dark"):
                    page.emulate_media(color_scheme=scheme)
                    page.goto(srv.url + path)
                    res = axe.run(page)
                    for v in res.response["violations"]:
                        if v.get("impact") in ("serious", "critical"):
                            problems.append(
                                (path, scheme, v["id"], [n["target"] for n in v["nodes"][:3]])
                            )
        finally:
            ctx.close()
    assert problems == [], "\n".join(map(str, problems))
