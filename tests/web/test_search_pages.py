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


def _signed_in(srv: AppServer) -> object:
    c = srv.client
    r = c.get(srv.url + "/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', r.text)
    assert csrf is not None, r.text[:500]
    r = c.post(
        srv.url + "/login",
        data={"csrf": csrf[1], "token": srv.token, "next": "/"},
        headers={"Origin": srv.url},
    )
    assert r.status_code in (200, 303), r.text
    return c


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
        c = _signed_in(srv)
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
        # previous goes back to the page before
        prev = re.search(r'<a href="([^"]+)" rel="prev">', c.get(pages[-1]).text)  # type: ignore[attr-defined]
        assert prev is not None
        back = c.get(srv.url + prev[1].replace("&amp;", "&"))  # type: ignore[attr-defined]
        assert re.findall(r'data-path="([^"]+)"', back.text) == re.findall(
            r'data-path="([^"]+)"',
            c.get(pages[-2]).text,  # type: ignore[attr-defined]
        )


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
        c = _signed_in(srv)
        page = c.get(srv.url + "/page/" + ses).text  # type: ignore[attr-defined]
        assert 'id="^t1"' in page
        assert ">^t1</a>" not in page, "the raw block id is shown as text"
        css = c.get(srv.url + "/static/web.css").text  # type: ignore[attr-defined]
        assert 'id="summary"' in page
        assert re.search(r"h2#summary \+ ul code \{[^}]*font-family: inherit", css)
        hist = c.get(srv.url + "/page/" + ses + "/history").text  # type: ignore[attr-defined]
        crumb = re.search(r'<p class="crumbs">(.*?)</p>', hist, re.S)
        assert crumb is not None and not crumb[1].rstrip().endswith("/"), crumb
