"""Reading results on the web: the search pages through every result (next and
previous links), has one search box, and pages show no raw ``^tN`` ids as text, session
summaries as text and a history breadcrumb without a trailing slash."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from appkit import AppServer

pytestmark = pytest.mark.fast

N = 150  # notes: more than one page of results


def test_search_pages_through_all_results_with_one_search_box(tmp_path: Path) -> None:
    with AppServer(tmp_path / "data") as srv:
        assert srv.memory is not None
        for n in range(N):
            body = " ".join(f"w{n}x{i}" for i in range(120))  # distinct notes
            srv.memory.write_page(
                f"projects/p/notes/n{n:03d}.md",
                f"# Note {n}\n\nzqxpaging {body}\n".encode(),
                user="alice",
                message="w",
            )
        c = srv.sign_in()
        seen: set[str] = set()
        url = srv.url + "/search?q=zqxpaging"
        pages = []
        for _ in range(30):
            r = c.get(url)  # type: ignore[attr-defined]
            assert r.status_code == 200
            assert r.text.count('role="search"') == 1, "two search boxes"
            seen |= set(re.findall(r'data-path="([^"]+)"', r.text))
            pages.append(url)
            nxt = re.search(r'<a href="([^"]+)" rel="next">', r.text)
            if nxt is None:
                break
            url = srv.url + nxt[1].replace("&amp;", "&")
        assert len(pages) > 1, "everything fit on one page: the test proves nothing"
        assert len(seen) == N
        assert len(pages) >= 3, "previous must be walked back over more than one page"

        def shown(u: str) -> list[str]:
            return re.findall(r'data-path="([^"]+)"', c.get(u).text)  # type: ignore[attr-defined]

        # previous goes back to the page before, all the way to the first (a walk's
        # cursors are encoded, not increasing: the way back is the list of them)
        url = pages[-1]
        for i in range(len(pages) - 2, -1, -1):
            page = c.get(url).text  # type: ignore[attr-defined]
            prev = re.search(r'<a href="([^"]+)" rel="prev">', page)
            assert prev is not None, f"no previous link on page {i + 2}"
            url = srv.url + prev[1].replace("&amp;", "&")
            assert shown(url) == shown(pages[i]), f"previous of page {i + 2} is not page {i + 1}"
        assert re.search(r'rel="prev"', c.get(url).text) is None  # type: ignore[attr-defined]


def test_pages_show_no_raw_ids_summaries_as_text_and_a_clean_breadcrumb(tmp_path: Path) -> None:
    ses = "projects/p/sessions/2026-11-30-fix-abcdef01.md"
    text = (
        "---\ntype: session\ntitle: Fix\nproject: p\n---\n\n# Fix\n\n## Summary\n\n"
        "- **Goal:** `fix the refund timeout`\n\n## Timeline\n\n**10:00:01** · prompt\n\n"
        "~~~~text\nhello\n~~~~\n\n^t1\n"
    )
    with AppServer(tmp_path / "data") as srv:
        assert srv.memory is not None
        srv.memory.write_page(ses, text.encode(), user="alice", message="w")
        c = srv.sign_in()
        page = c.get(srv.url + "/page/" + ses).text  # type: ignore[attr-defined]
        assert 'id="^t1"' in page
        assert ">^t1</a>" not in page, "the raw block id is shown as text"
        css = c.get(srv.url + "/static/web.css").text  # type: ignore[attr-defined]
        assert 'id="summary"' in page
        assert re.search(r"h2#summary \+ ul code \{[^}]*font-family: inherit", css)
        hist = c.get(srv.url + "/page/" + ses + "/history").text  # type: ignore[attr-defined]
        crumb = re.search(r'<p class="crumbs">(.*?)</p>', hist, re.S)
        assert crumb is not None and not crumb[1].rstrip().endswith("/"), crumb
