"""The secret-ish words found in the keyword automaton's one pass are the regex scans' words.

Where ``ahocorasick_rs`` is importable (the server), the words the keyword rule and a
few context rules start from (token, key, secret, credential, pass, pwd, private) come
from the same Aho-Corasick pass as the generated rules' keywords; the hook (``python
-S``) finds them with three regex scans. A difference would be a value redacted through
one door and not through the other.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wiki_memory.capture import keyscan, sanitize

#: the words, words that hold or overlap them, and what stands between
_PARTS = [
    "token", "key", "secret", "credential", "pass", "pwd", "private", "passwd", "password",
    "tokey", "secredential", "ppass", "pprivate", "keykey", "tok", "cre", "secre", "ke", "p",
    "k", "_", "-", ".", " ", "\n", "\t", "=", ": ", '"', "A1b2C3d4E5f6", "value", "é", "-p",
    "-P", "-a", "-u", "--", "--user", "ser", "sshpass", "mysql", "redis-cli",
]  # fmt: skip


def _words() -> None:
    pytest.importorskip("ahocorasick_rs")
    sanitize._gitleaks()
    if not sanitize._WORDS.automaton():
        pytest.skip("the keyword automaton did not build")


@pytest.mark.fast
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_PARTS), max_size=80))
def test_word_starts_and_flags_from_the_one_pass_equal_the_regex_scans(parts: list[str]) -> None:
    _words()
    text = "".join(parts)
    text = text + " " * max(0, keyscan.AC_MIN - len(text))
    low = text.lower()
    low_ascii = text.encode("ascii", "replace").lower()
    hits, flags, present = sanitize._scan_words(low, low_ascii)
    plain_hits, plain_flags, plain_present = sanitize._scan_words(low, None)
    assert sorted(hits) == sorted(plain_hits)
    assert len(hits) == len(set(hits))  # each start once, as the scans give it
    assert flags & 7 == plain_flags & 7
    # the password flags' cue: the scans always look; the one pass lets them look whenever
    # a cue occurs, in any case
    assert plain_flags & 8
    assert bool(flags & 8) == any(
        c in low for c in (" -p", " -a", " -u", "\t-p", "\t-a", "\t-u", "--user")
    )
    assert plain_present is None
    assert present == sanitize._WORDS.present(low, fast=False)


@pytest.mark.fast
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(_PARTS), max_size=40),
    st.sampled_from(["=", ": ", " = ", '": "', " "]),
)
def test_assignments_redact_alike_with_and_without_the_automaton(parts: list[str], op: str) -> None:
    """Assignments to secret-ish names, padded past the one-pass threshold: the same
    redactions whether the words come from the automaton or from the scans."""
    _words()
    name = "".join(parts[:6]) or "token"
    text = f"config:\n  {name}{op}Zq8vX2mN4pL7rT1w\n" + "".join(parts) + " ordinary words." * 4
    fast = sanitize.redact_text(text)
    with pytest.MonkeyPatch.context() as m:
        # the same keywords, the automaton never taken (as for a text under its threshold)
        m.setattr(sanitize, "_WORDS", keyscan.KeySet(sanitize._WORDS.keywords, 1 << 30))
        sanitize._CLEAN.clear()
        plain = sanitize.redact_text(text)
    assert fast == plain


@pytest.mark.fast
@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("sshpass -p '{v}' ssh deploy@host", "cli-password"),
        ("\tmysql -u root -p{v} db", "cli-password"),
        ("redis-cli -a {v} ping", "cli-password"),
        ("curl --user admin:" + "{v} https://example.invalid/", "auth-header"),
        ("curl -u admin:" + "{v} https://example.invalid/", "auth-header"),
    ],
)
def test_password_flags_in_a_long_text_are_redacted_through_the_one_pass(
    line: str, kind: str
) -> None:
    """A text long enough for the automaton: its cue lets the flag rule run (the fake
    value is made here, so that this file holds no secret-shaped literal)."""
    _words()
    value = "FAKE" + "pw0000x" + "Q7"
    text = "Ran the deploy steps below on the staging host.\n" * 3 + line.format(v=value) + "\n"
    assert len(text) >= keyscan.AC_MIN
    out, red = sanitize.redact_text(text)
    assert "FAKE" not in out
    assert kind in {r.kind for r in red}
