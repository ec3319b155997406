"""The sanitizer's shortcuts skip only places where nothing can be found.

A rule that starts with 20 secret characters is tried only inside runs of them; the
keywords are found over the ASCII bytes as over the text; Discord's rule looks only into
long runs; the password-flag rule's cue is a flag after a space. A user would notice a
wrong shortcut as a secret kept whole in a captured text.
"""

from __future__ import annotations

import re

import pytest
from gitleaks_samples import sample

from wiki_memory.capture import formats, gitleaks_rules, keyscan, leaks
from wiki_memory.capture.sanitize import redact_text

LEAD = sorted(r for r, n in gitleaks_rules.LEAD_RUN.items() if n >= leaks.RUN_MIN)
_RUN = re.compile(f"[{re.escape(leaks.RUN_CHARS)}]")


@pytest.mark.fast
def test_rules_said_to_start_with_a_run_are_many() -> None:
    assert {"vault-service-token", "twilio-api-key", "jwt"} <= set(LEAD)


@pytest.mark.fast
@pytest.mark.parametrize("rid", LEAD)
def test_every_match_of_a_rule_said_to_start_with_a_run_does(rid: str) -> None:
    """The generator's LEAD_RUN: the first LEAD_RUN characters of each match of the rule
    in its sample are run characters (the rule is tried only there), and the sample in
    prose is redacted."""
    rule = leaks.BY_ID[rid]
    text = sample(rule)
    if text is None:
        pytest.skip(f"no sample found for {rid}")
    n = gitleaks_rules.LEAD_RUN[rid]
    for m in rule.rx.finditer(text):
        assert all(_RUN.fullmatch(c) for c in text[m.start() : m.start() + n]), (rid, text)
    wrapped = f"Notes, nothing secret in them: {text} and then more notes."
    assert leaks.find(wrapped, wrapped.lower()) or not leaks.find(text, text.lower())


@pytest.mark.fast
def test_keywords_over_bytes_are_those_over_the_text() -> None:
    pytest.importorskip("ahocorasick_rs")
    ks = keyscan.KeySet(leaks.KEYWORDS, 16)
    for text in (
        "Authorization: curl -u x; sk_live_ and hooks.slack.com in caf\u00e9 text " * 50,
        "nothing to see here, only prose about a caf\u00e9. " * 60,
        "xoxe.xoxb-\u00e9sk_test" * 40,
    ):
        low = text.lower()
        raw = text.encode("ascii", "replace").lower()
        assert ks.present(raw) == ks.present(low) == ks.present(low, fast=False)
        assert ks.present(raw, fast=False) == ks.present(low, fast=False)


#: a fake Discord bot token, assembled (the own-source scan reads this file as a page)
DISCORD = ".".join(("MTA4NzY1NDMyMTIzNDU2Nzg5MA", "GhX2kq", "Zq8sLmN4vB7xR2tY9uW3eA6cD1fG5hJ0kLpQ"))


@pytest.mark.fast
@pytest.mark.parametrize(
    "text",
    [
        f"bot.run('{DISCORD}')",
        f"token={DISCORD} and another path/to/some_long_file_name_here.py",
        f"caf\u00e9{DISCORD}",  # a non-ASCII letter glued before: not a token
        f"{DISCORD}\u00e9",
        f"x {DISCORD}.{DISCORD}",
        "a" * 80 + "." + "b" * 10 + "." + "c" * 30,
    ],
)
def test_discord_in_the_runs_finds_what_the_whole_text_scan_finds(text: str) -> None:
    low = text.lower()
    raw = text.encode("ascii", "replace")
    runs: list[tuple[int, int]] = []
    leaks.find(text, low, None, raw, None, runs)
    assert formats.find(text, low, None, raw, runs) == formats.find(text, low)


#: a fake password, assembled (the own-source scan reads this file as a page)
PW = "Xk9w" + "q2Lzv"


@pytest.mark.fast
@pytest.mark.parametrize(
    "template",
    [
        "multi-process non-ascii re-use\nsshpass -p {v} ssh deploy@host",
        "pre-auth step; sshpass -p {v} ssh host",
        "mysql --user=admin -p{v} appdb",
        "curl --user=alice:" + "{v} https://example.org",
        "curl\t-u alice:" + "{v} https://example.org",
        "docker login\t-p {v} registry.example.org",
    ],
)
def test_password_flags_after_a_space_are_found(template: str) -> None:
    out, _ = redact_text(template.format(v=PW))
    assert PW not in out


@pytest.mark.fast
@pytest.mark.parametrize(
    "text",
    [
        "sshpass\n-p {v} ssh host",  # the command on another line
        "non-p{v} sshpass-p{v}",  # no flag after a space
        "sshpass ok\nthen -p {v} alone",
    ],
)
def test_password_flags_without_their_command_on_the_line_are_left(text: str) -> None:
    text = text.format(v=PW)
    assert redact_text(text)[0] == text
