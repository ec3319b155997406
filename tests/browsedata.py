"""Pages for the browse/search/read tests of the web view (case C52).

Written into an agent wiki (project ``atlas``) next to :mod:`webdata`'s pages before its
server starts: case C52's four pages (a note that says "retry" 30 times under six
headings, a session page whose entries ^t3, ^t9 and ^t14 mention "retry budget", a note
whose body holds HTML, a note that says "budget" only) and a note with the inline HTML
Obsidian notes use, next to attempts to make it active.
"""

from __future__ import annotations

from pathlib import Path

PROJECT = "atlas"
RETRY = f"projects/{PROJECT}/notes/retry-policy.md"
SESSION = f"projects/{PROJECT}/sessions/2026-11-20-retry-budget-sess0520.md"
MARKUP = f"projects/{PROJECT}/notes/markup.md"
OTHER = f"projects/{PROJECT}/notes/other.md"
INLINE = f"projects/{PROJECT}/notes/inline-html.md"
#: the mark a script would leave if one ran
XSS_MARK = "__browse_xss_ran"


def _retry_policy() -> str:
    parts = [
        "---\ntype: note\ntitle: Retry policy\ntags: [ops, retry]\n---\n# Retry policy\n",
    ]
    for h in range(6):
        parts.append(
            f"\n## Rule {h + 1}\n\nA retry is **bold retry** number {h}: retry, then "
            "see [[Deploy Guide|deploy]] before the next retry, with `retry --max 3` "
            "and one more retry.\n"
        )
    return "".join(parts)


def _session() -> str:
    entries = []
    for n in range(1, 16):
        if n in (3, 9, 14):
            body = f"~~~~text\nraise the retry budget for job {n}\n~~~~"
            head = "prompt"
        elif n in (5, 6):
            status = "failed" if n == 5 else "ok"
            body = "input:\n\n~~~~text\nmake test\n~~~~\n\noutput:\n\n~~~~text\n1 failed\n~~~~"
            head = f"tool **Bash** · {status}"
        else:
            body = f"~~~~text\nunrelated step {n}\n~~~~"
            head = "reply"
        entries.append(f"**10:{n:02d}:00** · {head}\n\n{body}\n\n^t{n}\n")
    return (
        "---\ntype: session\nid: ses_0520052005200520\ntitle: Tune the retry budget\n"
        f"project: {PROJECT}\nharness: claude-code\nuser: olivia\nstatus: ended\n---\n"
        "# Tune the retry budget\n\n## Summary\n\nGoal: tune the jobs.\n\n## Timeline\n\n"
        + "\n".join(entries)
    )


PAGES: dict[str, str] = {
    RETRY: _retry_policy(),
    SESSION: _session(),
    MARKUP: (
        "---\ntype: note\ntitle: Markup\n---\n# Markup\n\n"
        "Retry <img src=q onerror=alert(7)> budget <script>alert(8)</script> & **bold retry**\n"
    ),
    OTHER: "---\ntype: note\ntitle: Other\n---\n# Other\n\nThe budget only.\n",
    INLINE: (
        "---\ntype: note\ntitle: Inline HTML\ntags: [obsidian]\n---\n# Inline HTML\n\n"
        "| key | meaning |\n| --- | --- |\n| <kbd>Ctrl</kbd>+<kbd>K</kbd> | first line<br>second line |\n\n"
        "H<sub>2</sub>O and x<sup>2</sup>\n\n"
        "<details open>\n<summary>More</summary>\nFolded text.\n</details>\n\n"
        f"<script>document.title='{XSS_MARK}'</script>\n\n"
        f"<details ontoggle=\"document.title='{XSS_MARK}'\" open>\n<summary>t</summary>\nx\n</details>\n\n"
        f"a <br onmouseover=\"document.title='{XSS_MARK}'\"> b\n\n"
        f"<kbd><script>document.title='{XSS_MARK}'</script></kbd>\n\n"
        f"[click](&#106;avascript:document.title='{XSS_MARK}')\n\n"
        f"<a href=\"&#106;avascript:document.title='{XSS_MARK}'\">raw</a>\n\n"
        "Tagged #field-notes inline.\n"
    ),
}


def write(wiki: Path) -> None:
    """Write :data:`PAGES` under ``wiki`` (before the server starts)."""
    for rel, text in PAGES.items():
        p = wiki / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
