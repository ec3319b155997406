"""Markdown → HTML for the web view (wiki_memory/web/render.py and its helpers links.py, htmlallow.py, conversation.py), without a server."""

from __future__ import annotations

import html.parser

import pytest

from wiki_memory.identity import Identity
from wiki_memory.index.store import Index
from wiki_memory.web.links import Resolver, Target, fragment_for, heading_id, link_key, page_url
from wiki_memory.web.render import RenderCache, render_markdown, render_value
from wiki_memory.web.views import make_session_cookie, read_session_cookie

T = {
    link_key("Deploy Guide"): Target("notes/Deploy Guide.md"),
    link_key("Twin"): Target(None, ("a/Twin.md", "b/Twin.md")),
}


def render(src: str, targets=T) -> str:
    return render_markdown(src, "notes/here.md", targets).html


class Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def tags(html_text: str) -> list[tuple[str, dict[str, str | None]]]:
    p = Tags()
    p.feed(html_text)
    return p.tags


def test_wikilinks_resolve_to_links():
    out = render(
        "[[Deploy Guide]] [[deploy guide|the guide]] [[Deploy Guide#Roll back plan]] "
        "[[Deploy Guide#^warn-1]] [[#Escalation]] [[^step-1]] [[Nowhere]] [[Twin]]"
    )
    assert '<a class="wikilink" href="/page/notes/Deploy%20Guide.md">Deploy Guide</a>' in out
    assert ">the guide</a>" in out
    assert 'href="/page/notes/Deploy%20Guide.md#roll-back-plan"' in out
    assert 'href="/page/notes/Deploy%20Guide.md#^warn-1"' in out
    assert '<a class="wikilink" href="#escalation">Escalation</a>' in out
    assert '<a class="wikilink" href="#^step-1">^step-1</a>' in out
    assert '<span class="wikilink unresolved" title="no page named this yet">Nowhere</span>' in out
    assert 'class="wikilink ambiguous" title="ambiguous: a/Twin.md, b/Twin.md"' in out


def test_wikilinks_in_tables_code_and_embeds():
    out = render(
        "| a | b |\n|---|---|\n| [[Deploy Guide\\|dg]] | x |\n\n"
        "`[[Deploy Guide]]` and\n\n```\n[[Deploy Guide]]\n```\n\n"
        "![[Deploy Guide]] ![[diagram.png|400]]"
    )
    assert '<td><a class="wikilink" href="/page/notes/Deploy%20Guide.md">dg</a></td>' in out
    assert "<code>[[Deploy Guide]]</code>" in out
    assert "<pre><code>[[Deploy Guide]]\n</code></pre>" in out
    assert 'class="wikilink embed" href="/page/notes/Deploy%20Guide.md">⧉ Deploy Guide</a>' in out
    assert '<span class="embed attachment" title="attachment">diagram.png</span>' in out


def test_block_ids_are_targets():
    src = (
        "## Timeline\n\n**10:00:01** · prompt\n\n~~~~text\nhello\n~~~~\n\n^t1\n\n"
        "**10:00:02** · reply\n\n^t2\n\nA paragraph with an id. ^para\n\n- item one ^li-1\n- two\n"
    )
    out = render(src)
    assert '<div class="block" id="^t1">\n<p><strong>10:00:01</strong> · prompt</p>' in out
    assert '<pre><code class="language-text">hello\n</code></pre>' in out.split('id="^t2"')[0]
    assert out.count('<div class="block"') == 2
    assert '<p id="^para">A paragraph with an id. <a class="block-ref"' in out
    assert '<li id="^li-1">item one <a class="block-ref"' in out
    assert "^t1\n" not in out.replace('href="#^t1">^t1</a>', "")
    # the entry holds only its own blocks, not the heading or the previous entry
    first = out.split('<div class="block" id="^t1">', 1)[1].split("</div>", 1)[0]
    assert "Timeline" not in first and "reply" not in first


def test_comment_paragraphs_are_hidden():
    out = render(
        "a\n\n<!-- hidden\nnote -->\n\n%% also hidden %%\n\nb <!-- inline --> c\n\n```\n<!-- code -->\n```\n"
    )
    assert "hidden" not in out and "<p>a</p>" in out
    assert "b &lt;!-- inline --&gt; c" in out  # inside text: shown as text, never as HTML
    assert "&lt;!-- code --&gt;" in out


def test_duplicate_ids_are_not_repeated():
    out = render("# Same\n\n## Same\n\na ^x\n\nb ^x\n")
    assert 'id="same"' in out and 'id="same-2"' in out
    assert out.count('id="^x"') == 1


def test_callouts_tables_code():
    out = render(
        "> [!warning]- Careful <b>now</b>\n> Body text\n\n> [!NOTE]\n> plain\n\n> just a quote\n\n"
        "| l | c | r |\n|:--|:-:|--:|\n| 1 | 2 | 3 |\n\n```python\nprint('<x>')\n```\n"
    )
    assert '<blockquote class="callout callout-warning">' in out
    assert '<p class="callout-title">Careful &lt;b&gt;now&lt;/b&gt;</p>\n<p>Body text</p>' in out
    assert '<blockquote class="callout callout-note">\n<p class="callout-title">Note</p>' in out
    assert "<blockquote>\n<p>just a quote</p>" in out
    assert 'class="align-left"' in out and 'class="align-center"' in out
    assert "style=" not in out
    assert '<code class="language-python">print(&#x27;&lt;x&gt;&#x27;)' in out or (
        "print('&lt;x&gt;')" in out
    )


@pytest.mark.parametrize(
    "src",
    [
        "<script>alert(1)</script>",
        '<img src=x onerror="alert(1)">',
        "[x](javascript:alert(1))",
        "[x](JAVASCRIPT:alert(1))",
        "[x]( javascript:alert(1))",
        "[x](java\tscript:alert(1))",
        "[x](vbscript:msgbox)",
        "[x](data:text/html;base64,PHNjcmlwdD4=)",
        "![x](data:image/png;base64,AAAA)",
        "![x](javascript:alert(1))",
        "<javascript:alert(1)>",
        "[x][r]\n\n[r]: javascript:alert(1)",
        '![[x" onerror="alert(1)<img src=x onerror=alert(1)>]]',
        "[[<script>alert(1)</script>]]",
        "[[Deploy Guide|<img src=x onerror=alert(1)>]]",
        '> [!x" onclick="alert(1)] title',
        '```js" onload="alert(1)\nx\n```',
        "<a href='javascript:alert(1)'>a</a>",
        "[x](&#106;avascript:alert(1))",
        "<iframe src=javascript:alert(1)></iframe>",
    ],
)
def test_nothing_active_gets_through(src):
    out = render(src)
    for tag, attrs in tags(out):
        assert tag not in ("script", "img", "iframe", "svg", "object", "embed", "style"), out
        for k, v in attrs.items():
            assert not k.startswith("on"), out
            assert k != "style", out
            value = (v or "").replace("\t", "").strip().lower()
            assert not value.startswith(("javascript:", "vbscript:", "data:")), out


def test_links_kept_and_rewritten():
    out = render("[a](https://example.com/x?y=1) [b](mailto:a@b.c) [c](other.md#Some Part)")
    assert '<a href="https://example.com/x?y=1" rel="noopener noreferrer nofollow">a</a>' in out
    assert 'href="mailto:a@b.c"' in out
    out = render(
        "[c](other.md#part) [d](../up.md) [e](../../../etc/passwd.md) ![i](https://x/y.png)"
    )
    assert 'href="/page/notes/other.md#part"' in out
    assert 'href="/page/up.md"' in out
    assert "/page/../" not in out and "etc/passwd" in out  # left as it was: outside the wiki
    assert '<a class="image-link" href="https://x/y.png"' in out


def test_frontmatter_values():
    v = render_value(["[[Deploy Guide]] <b>", {"k": "<i>"}, None, True, 3], "notes/x.md", T)
    assert (
        '<a class="wikilink" href="/page/notes/Deploy%20Guide.md">Deploy Guide</a> &lt;b&gt;' in v
    )
    assert "<code>{&quot;k&quot;: &quot;&lt;i&gt;&quot;}</code>" in v
    assert "true" in v and "3" in v and "—" in v


def test_heading_ids_and_urls():
    assert heading_id("Rollback plan (v2)") == "rollback-plan-v2"
    assert heading_id("Using `make` — fast") == "using-make-fast"
    assert heading_id("会议记录 第三周") == "会议记录-第三周"
    assert heading_id("!!!") == "section"
    assert fragment_for("^t12") == "^t12"
    assert fragment_for("Timeline") == "timeline"
    assert page_url("projects/p/notes/Café résumé.md", "^t1") == (
        "/page/projects/p/notes/Caf%C3%A9%20r%C3%A9sum%C3%A9.md#^t1"
    )


def test_large_body_is_text():
    from wiki_memory.web import render as web_render

    big = "<b>x</b> [[Deploy Guide]]\n" * (web_render.MAX_MARKDOWN_BYTES // 20)
    out = render(big)
    assert out.startswith('<p class="note">') and "&lt;b&gt;" in out and "<a " not in out


def test_render_cache_is_bounded():
    c = RenderCache(max_chars=100)
    c.put("a", "x" * 20)
    c.put("b", "y" * 20)
    assert c.get("a") == "x" * 20
    for i in range(10):
        c.put(i, "z" * 20)
    assert c.get("a") is None and c._size <= 100
    c.put("huge", "h" * 60)  # over a quarter of the cache: not kept
    assert c.get("huge") is None


def test_resolver_uses_the_index(tmp_path):
    idx = Index(tmp_path / "index.db")
    pages = {
        "notes/Deploy Guide.md": "---\naliases: [shipping]\n---\n# Deploy Guide\n",
        "vault/a/Twin.md": "# Twin\n",
        "vault/b/Twin.md": "# Twin\n",
        "vault/a/Queries/Filters.md": "# Filters\n",
        "projects/p/handoffs/h.md": "---\ntype: handoff\nvisibility: personal\nuser: bob\n---\n# Secret plan\n",
        "people/bob/profile.md": "# Bob profile\n",
    }
    for p, text in pages.items():
        idx.upsert_page(p, text.encode())
    alice = Resolver(idx, Identity("alice"))
    got = alice.resolve_many(
        "vault/a/x.md",
        ["deploy guide", "Shipping", "Twin", "Queries/Filters", "Secret plan", "profile", "nope"],
    )
    assert got[link_key("deploy guide")].path == "notes/Deploy Guide.md"
    assert got[link_key("Shipping")].path == "notes/Deploy Guide.md"
    assert got[link_key("Twin")].path == "vault/a/Twin.md"  # the one in the linking folder
    assert got[link_key("Queries/Filters")].path == "vault/a/Queries/Filters.md"
    assert got[link_key("Secret plan")].path is None  # bob's personal handoff
    assert got[link_key("profile")].path is None  # bob's people/ folder
    assert got[link_key("nope")].path is None and not got[link_key("nope")].ambiguous
    far = alice.resolve_many("elsewhere/x.md", ["Twin"])[link_key("Twin")]
    assert far.path is None and far.ambiguous
    bob = Resolver(idx, Identity("bob"))
    assert bob.resolve_many("x.md", ["Secret plan"])[link_key("Secret plan")].path == (
        "projects/p/handoffs/h.md"
    )
    idx.close()


def test_session_cookie_round_trip():
    key = b"k" * 32
    v = make_session_cookie(key, "alice", "abcd1234", now=1000.0)
    assert read_session_cookie(key, v, now=1001.0)["u"] == "alice"
    assert read_session_cookie(key, v, now=10**10) is None
    assert read_session_cookie(b"j" * 32, v, now=1001.0) is None
    assert read_session_cookie(key, v[:-2] + "AA", now=1001.0) is None
    assert read_session_cookie(key, "not-a-cookie") is None
    assert read_session_cookie(key, "x" * 5000) is None


def test_wikilinks_past_the_budget_show_their_text():
    src = "[[Deploy Guide]] " * 5 + "\n"
    done = render_markdown(src, "notes/here.md", T, max_links=3)
    assert done.html.count("<a ") == 3 and done.truncated
    assert done.html.count("Deploy Guide") == 5 and "more than 3 wikilinks" in done.html
    assert not render_markdown(src, "notes/here.md", T, max_links=5).truncated


def test_a_long_page_is_cut_at_a_line_with_a_notice():
    # a megabyte of links answered 7.2 MB of HTML before the cap
    src = "[[Deploy Guide]] [[Deploy Guide]]\n" * 30_000
    done = render_markdown(src, "notes/here.md", T, max_links=1000, max_bytes=200_000)
    assert done.truncated and len(done.html) <= 200_000 + 1000
    assert done.html.count("<a ") == 1000
    assert "the first " in done.html and f"of its {len(src):,} bytes" in done.html
    plain = "word " * 100_000
    done = render_markdown(plain, "notes/here.md", T, max_bytes=100_000)
    assert done.truncated and len(done.html) <= 101_000
    short = render_markdown("one [[Deploy Guide]]", "notes/here.md", T, max_bytes=100_000)
    assert not short.truncated and "truncated" not in short.html
