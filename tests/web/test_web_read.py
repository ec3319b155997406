"""Reading and searching helpers of the web view without a server: Obsidian's inline HTML
through the allowlist, session timelines as conversations, tags, and the search page's
plain, marked snippets (case C52: escaping before marking, ``<mark>`` the only element)."""

from __future__ import annotations

import html.parser
import re

import pytest

from wiki_memory.recall.terms import match_forms
from wiki_memory.web.render import render_markdown
from wiki_memory.web.search import group, mark, mark_html, plain


class Elements(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag


def elements(text: str) -> list[tuple[str, dict[str, str | None]]]:
    p = Elements()
    p.feed(text)
    return p.found


def render(src: str, session=None) -> str:
    return render_markdown(src, "notes/here.md", {}, session=session).html


def test_obsidian_inline_html_is_rendered_without_attributes():
    out = render(
        "| a | b |\n| --- | --- |\n| one<br>two | <kbd>Ctrl</kbd> |\n\n"
        "H<sub>2</sub>O x<sup>2</sup>\n\n<details open>\n<summary>More</summary>\nFolded\n</details>\n"
    )
    assert "<td>one<br>two</td>" in out and "<kbd>Ctrl</kbd>" in out
    assert "<sub>2</sub>" in out and "<sup>2</sup>" in out
    assert (
        "<details open>" in out or '<details open="">' in out
    ) and "<summary>More</summary>" in out


@pytest.mark.parametrize(
    "src",
    [
        "<details ontoggle=alert(1) open><summary>x</summary>y</details>",
        "a <br onmouseover=alert(1)> b",
        "<kbd><script>alert(1)</script></kbd>",
        "<kbd onclick=alert(1) class=x>K</kbd>",
        "<sub style='x'>s</sub><sup id=y>t</sup>",
        "<summary onclick=alert(1)>s</summary>",
        "<br/><br />",
        "</kbd onclick=alert(1)>",
    ],
)
def test_allowed_tags_keep_no_attribute_but_open(src):
    out = render(src)
    for tag, attrs in elements(out):
        assert tag not in ("script", "img", "iframe", "style"), out
        if tag in ("br", "kbd", "sub", "sup", "details", "summary"):
            assert set(attrs) <= ({"open"} if tag == "details" else set()), out
    assert "onclick" not in out.replace("onclick=alert(1)", "") or "&lt;" in out


def test_other_tags_stay_text_and_layout_tags_are_unwrapped():
    out = render("<img src=x onerror=alert(1)> <b>bold</b>\n\n<span class='related'>#css</span>")
    assert "&lt;img src=x onerror=alert(1)&gt;" in out and "&lt;b&gt;bold&lt;/b&gt;" in out
    assert '<a class="tag" href="/tag/css">#css</a>' in out and "span" not in out


def test_tags_link_to_their_pages():
    out = render("Filed under #ops/deploy and #release, not #123 or a#b.")
    assert '<a class="tag" href="/tag/ops/deploy">#ops/deploy</a>' in out
    assert '<a class="tag" href="/tag/release">#release</a>' in out
    assert "/tag/123" not in out and "/tag/b" not in out


SESSION = """# Fix login

## Timeline

**10:01:02** · prompt

~~~~text
Why does the <login> test fail?
~~~~

^t1

**10:01:05** · tool **Bash** · failed

input:

~~~~text
make test
~~~~

error:

~~~~text
1 failed
~~~~

^t2

**10:01:09** · reply

~~~~text
It was the clock.
~~~~

^t3
"""


def test_session_timeline_reads_as_a_conversation():
    out = render(SESSION, session={"speaker": "olivia", "agent": "claude-code"})
    first = out.split('id="^t1"', 1)[1].split('id="^t2"', 1)[0]
    assert '<strong class="who">olivia</strong>' in first
    assert '<div class="said">Why does the &lt;login&gt; test fail?</div>' in first
    assert "<pre>" not in first
    tool = out.split('id="^t2"', 1)[1].split('id="^t3"', 1)[0]
    assert "turn-failed" in out.split('id="^t2"', 1)[0].rsplit("<div", 1)[1]
    assert '<span class="badge failed">failed</span>' in tool
    assert '<details class="tool-io"><summary>' in tool and "make test" in tool
    reply = out.split('id="^t3"', 1)[1]
    assert '<strong class="who">claude-code</strong>' in reply
    # without the session flag the same text renders as before
    plain_out = render(SESSION)
    assert "turn" not in plain_out and "<pre><code" in plain_out


def test_snippets_are_plain_text():
    text = plain(
        "## Rule 1 A retry is **bold retry** and [[Deploy Guide|deploy]] or [[Runbook]] "
        "with `retry --max` > quoted - item ^t3 ~~~~text ---"
    )
    for bad in ("**", "[[", "##", "`", "^t3", "~~~~", "---"):
        assert bad not in text, text
    assert "bold retry" in text and "deploy" in text and "Runbook" in text


def test_marking_escapes_first_and_writes_only_mark():
    forms = match_forms("retry <img")
    out = str(mark("Retry <img src=q onerror=alert(7)> and retrying", forms))
    # the page's "<img" is text; its word "img" is a query word, marked inside the text
    assert "&lt;<mark>img</mark> src=q onerror=alert(7)&gt;" in out
    assert [t for t, _ in elements(out)] == ["mark", "mark", "mark"]
    assert "<mark>Retry</mark>" in out and "<mark>retrying</mark>" in out  # a stemmed form


def test_marks_follow_the_stems_recall_matched_with():
    # "retrying" is in no text below: the words sharing its stem are marked, as recall
    # found them; "retrieve" starts like the stem but recall does not match it
    text = "We retry, it retried and retries; retrieve the budgets"
    out = str(mark(text, match_forms("retrying budget")))
    assert re.findall(r"<mark>(\w+)</mark>", out) == ["retry", "retried", "retries", "budgets"]
    assert "retrieve" in out and "<mark>retrieve" not in out


def test_results_are_grouped_per_page_in_rank_order():
    items = [
        {"path": "a.md", "anchor": "a.md#^t3", "title": "A", "kind": "session", "snippet": "x"},
        {"path": "b.md", "anchor": "b.md#Rule", "title": "B", "kind": "note", "snippet": "y"},
        *[
            {"path": "a.md", "anchor": f"a.md#^t{n}", "title": "A", "kind": "session"}
            for n in (4, 5, 6)
        ],
    ]
    groups = group(items, match_forms("x"))
    assert [g.path for g in groups] == ["a.md", "b.md"]
    assert len(groups[0].anchors) == 3 and groups[0].more == 1
    assert groups[0].anchors[0]["url"] == "/page/a.md#^t3"
    assert groups[1].anchors[0]["url"] == "/page/b.md#rule"


def test_page_marks_leave_tags_entities_links_and_code_alone():
    out = mark_html(
        '<p>Retry &lt;retry&gt; <a href="/retry">retry</a> <code>retry</code> retrying</p>',
        match_forms("retry lt"),
    )
    assert out == (
        '<p><mark>Retry</mark> &lt;<mark>retry</mark>&gt; <a href="/retry">retry</a> '
        "<code>retry</code> <mark>retrying</mark></p>"
    )
