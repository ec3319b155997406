"""A topic page in a real browser (headless Chromium through Playwright, a real server
process): two sessions of the project ran the same test file, so its topic page exists;
it opens, and its first entry link lands on that timeline entry.

Skipped, with the reason, when /usr/bin/chromium or Playwright is missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import pytest
import webdata
from support import wait_for
from webdata import OWNER, PROJECT

pytestmark = pytest.mark.process

CHROMIUM = "/usr/bin/chromium"
if not Path(CHROMIUM).exists():
    pytest.skip(
        f"browser tests need Debian's chromium at {CHROMIUM} (apt-get install chromium)",
        allow_module_level=True,
    )
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="browser tests need Playwright (pip install playwright)"
)


def second_session(ws: Any) -> None:
    """A later session of the project that runs the same test file again."""
    sid = "web-sess-0002"
    events: list[dict[str, Any]] = [
        {
            "harness": "locomo",
            "event": "UserPromptSubmit",
            "session_id": sid,
            "project": PROJECT,
            "event_id": f"{sid}-1",
            "ts": "2026-12-01T09:00:00Z",
            "payload": {"prompt": "tests/test_login.py still fails on CI, look again"},
        },
        {
            "harness": "locomo",
            "event": "SessionEnd",
            "session_id": sid,
            "project": PROJECT,
            "event_id": f"{sid}-2",
            "ts": "2026-12-01T09:00:05Z",
            "payload": {"reason": "other"},
        },
    ]
    for ev in events:
        r = ws.srv.post("/v1/observations", ev)
        assert r.status_code == 202, r.text


def test_a_topic_page_opens_and_its_entry_link_lands_on_the_timeline_entry(
    tmp_path: Path,
) -> None:
    ws = webdata.start(tmp_path / "data", env={"WIKI_MEMORY_TOPIC_PAGES": "true"})
    try:
        second_session(ws)

        def topic() -> str | None:
            r = ws.srv.get("/v1/pages", params={"project": PROJECT, "kind": "topic"})
            found = [p["path"] for p in r.json()["pages"] if "test_login.py" in p["path"]]
            return found[0] if found else None

        path = wait_for(topic)
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                page = browser.new_page()
                page.goto(f"{ws.url}/login")
                page.fill("#token", ws.tokens[OWNER])
                page.click("#sign-in")
                page.wait_for_load_state()
                page.goto(f"{ws.url}/page/{quote(path)}")
                assert "tests/test_login.py" in page.locator("h1").first.inner_text()
                page.screenshot(path=str(tmp_path / "topic.png"))
                first = page.locator("a.wikilink.embed").first
                href = unquote(first.get_attribute("href") or "")
                assert ws.session_path in href and "#^t" in href, href
                first.click()
                page.wait_for_load_state()
                anchor = unquote(page.evaluate("location.hash"))
                target = page.locator(":target")
                assert target.count() == 1
                assert target.get_attribute("id") == anchor.removeprefix("#")
                assert "test_login.py" in (target.text_content() or "")
                page.screenshot(path=str(tmp_path / "entry.png"))
            finally:
                browser.close()
    finally:
        ws.srv.stop()
