"""A rule with a long gap tried only at heads with its tail in reach finds what finditer finds.

gitleaks' curl rules allow about 6,000 characters between ``curl`` and their ``-H`` or
``-u`` value. Tried at every ``curl``, ``curl=`` repeated cost seconds per MiB; they are
now tried only where a tail follows within that reach. A difference would be a curl
header or password that one path redacts and the other not.
"""

from __future__ import annotations

import random

import pytest
from gitleaks_samples import sample

from wiki_memory.capture import leak_gaps, leaks
from wiki_memory.capture.sanitize import redact_text

_GAPPED = ("curl-auth-header", "curl-auth-user")

#: pieces the random texts are made of: heads, flags, blanks, quotes, values, newlines
#: and long runs, so tails land near, at and past the gap's reach
_PIECES = [
    "curl",
    "CURL",
    "xcurl",
    " ",
    "\t",
    "\n",
    "\r\n",
    "\n\n",
    " -H",
    " --header",
    " -u",
    " --user",
    "=",
    '"',
    "'",
    ":",
    "Authorization: ",
    "Bearer ",
    "Basic ",
    "X-Api-Key: ",
    "token",
    "abcDEF123456",
    "user:hunter2zz",
    "$TOKEN",
    "a" * 700,
    "b" * 1100,
]


def _tried_at(rx, text: str, starts: list[int]) -> list[tuple[int, int]]:
    """finditer's matches when only ``starts`` are tried: after a match, from its end."""
    out, nxt = [], 0
    for p in starts:
        if p < nxt:
            continue
        m = rx.match(text, p)
        if m is not None:
            out.append(m.span())
            nxt = m.end()
    return out


@pytest.mark.fast
def test_the_curl_rules_have_their_gap_read_off_and_no_other_rule_does() -> None:
    gapped = {r.id: leak_gaps.read_gap(r.fast) for r in leaks.RULES}
    assert sorted(rid for rid, g in gapped.items() if g) == sorted(_GAPPED)
    header = gapped["curl-auth-header"]
    assert header is not None
    assert (header.keyword, header.reach, header.flags) == (
        "curl",
        1024 + 5 * 1026,
        ("-H", "--header"),
    )
    user = gapped["curl-auth-user"]
    assert user is not None and user.flags == ("-u", "--user")


@pytest.mark.fast
@pytest.mark.parametrize("rid", _GAPPED)
def test_tried_at_heads_with_a_tail_in_reach_matches_as_finditer(rid: str) -> None:
    """A tail on each of the seven lines after ``curl`` (at, inside and past the gap's
    reach), and 600 random texts of heads, flags, quotes, values, newlines and long runs
    (up to about 10,000 characters), with the rule's own sample in one in four: the same
    matches as ``finditer`` over the whole text."""
    rule = leaks.BY_ID[rid]
    gap = leak_gaps.read_gap(rule.fast)
    assert gap is not None
    rng = random.Random(rid)
    own = sample(rule)
    matched = 0
    flag = gap.flags[0]
    tail = (
        f" {flag} 'Authorization: Bearer abcDEF123456'"
        if rid.endswith("header")
        else f" {flag} 'deploy:hunter2zz'"
    )
    far = [  # the tail after 0 to 6 more lines of curl's, at, inside and past the reach
        "curl" + "." * width + (nl + "." * width) * lines + tail
        for lines in range(7)
        for width in (0, 500, 1023, 1024, 1025)
        for nl in ("\n", "\r\n", "\n\n", "\n\n\n")
    ]
    randoms = []
    for _ in range(600):
        parts = rng.choices(_PIECES, k=rng.randrange(1, 60))
        if own and rng.random() < 0.25:
            parts.insert(rng.randrange(len(parts) + 1), own)
        randoms.append("".join(parts))
    for text in far + randoms:
        want = [m.span() for m in rule.rx.finditer(text)]
        got = _tried_at(rule.rx, text, leak_gaps.gap_starts(gap, text, text.lower()))
        assert got == want, text[:300]
        matched += bool(want)
    assert matched >= 50  # the texts reach the rule's matches, not only its misses


@pytest.mark.fast
def test_curl_secrets_are_still_redacted_and_a_far_flag_is_not_a_match() -> None:
    near = "curl https://api.example.com -H 'Authorization: Bearer zq81LmW0pX4vTt7Ya'\n"
    lines = "curl https://api.example.com \\\n" + "  --data @body.json \\\n" * 3
    user = lines + '  -u "deploy:Qx7!mZ20vK"\n'
    for rid, text, secret in (
        ("curl-auth-header", near, "zq81LmW0pX4vTt7Ya"),
        ("curl-auth-user", user, "Qx7!mZ20vK"),
    ):
        found = [text[s:e] for s, e in leaks.BY_ID[rid].spans(text)]
        assert len(found) == 1 and secret in found[0], (rid, found)
        clean, _ = redact_text(text)
        assert secret not in clean and "[REDACTED" in clean, clean
    assert "deploy:" in redact_text(user)[0]  # the user stays readable
    # a flag beyond the gap's reach (seven lines on) is not curl's: nothing is redacted
    far = (
        "curl https://example.com\n" + "x\n" * 7 + "-H 'Authorization: Bearer zq81LmW0pX4vTt7Ya'\n"
    )
    assert leaks.BY_ID["curl-auth-header"].rx.search(far) is None
    assert list(leaks.BY_ID["curl-auth-header"].spans(far)) == []


@pytest.mark.fast
def test_a_text_of_heads_with_no_tail_is_read_in_one_pass() -> None:
    """``curl=`` repeated to 256 KiB: no ``-H`` or ``-u`` follows any ``curl``, so the
    rules' regexes run nowhere (they used to walk the gap at each of 52,000 heads)."""
    text = ("curl=" * (256 * 1024 // 5))[: 256 * 1024]
    low = text.lower()
    for rid in _GAPPED:
        gap = leak_gaps.read_gap(leaks.BY_ID[rid].fast)
        assert gap is not None
        assert leak_gaps.gap_starts(gap, text, low) == []
        assert list(leaks.BY_ID[rid].spans(text)) == []


@pytest.mark.fast
@pytest.mark.parametrize("rid", _GAPPED)
def test_lone_carriage_returns_in_reach_cost_no_search_of_every_line_break(rid: str) -> None:
    """In ``re`` a lone ``\r`` is both a character of a line and a line break, so 40 of
    them in a curl's reach took seconds and 60 about a minute, wherever they were: before
    a tail out of reach, after the tail, inside its quoted value. Past
    :data:`leak_gaps.LONE_CR_MAX` of them each tail in reach is the rule's match, lines
    unchecked: these texts end under the test's time-out, with their secrets redacted (a
    tail seven lines on too: more than ``re`` would, never less)."""
    rule = leaks.BY_ID[rid]
    user = rid.endswith("user")
    tail = " -u 'deploy:hunter2zz'" if user else " -H 'Authorization: Bearer abcDEF123456'"
    secret = "hunter2zz" if user else "abcDEF123456"
    texts = []
    for n in (40, 60, 1000, 2000):
        texts += ["curl" + "\r" * n + "\n" + "x\n" * lines + tail + "\n" for lines in (3, 6)]
        texts += ["curl\n" + tail + "\r" * n, "curl\n" + tail + " " + "y\r" * n]
    for text in texts:
        found = [text[s:e] for s, e in rule.spans(text)]
        assert len(found) == 1 and secret in found[0], (repr(text[:60]), found)
        assert secret not in redact_text(text)[0]
    if user:  # lone \r inside a quoted value
        quoted = 'curl\n -u "' + "\r" * 80 + 'alice:x7Qz9Lm2Pq8Rt" '
        g = leak_gaps.read_gap(rule.fast)
        assert g is not None
        got = [m.span() for m in leak_gaps.gap_matches(rule.rx, g, quoted, quoted.lower())]
        assert got == [(5, len(quoted))]  # the tail, its value's \r and all
    # up to the bound they are left to re, which gives finditer's matches
    gap = leak_gaps.read_gap(rule.fast)
    assert gap is not None
    rng = random.Random(rid + "-cr")
    compared = 0
    for _ in range(400):
        parts = rng.choices([*_PIECES, "\r", "\r\r"], k=rng.randrange(1, 40))
        text = "".join(parts)
        lone = sum(1 for i, c in enumerate(text) if c == "\r" and text[i + 1 : i + 2] != "\n")
        if lone > leak_gaps.LONE_CR_MAX:
            continue
        want = [m.span() for m in rule.rx.finditer(text)]
        got = [m.span() for m in leak_gaps.gap_matches(rule.rx, gap, text, text.lower())]
        assert got == want, repr(text[:300])
        compared += 1
    assert compared >= 100
