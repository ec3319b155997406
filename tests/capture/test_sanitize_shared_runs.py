"""Provider tokens are looked for inside the long runs the generated rules find.

The sanitizer scans a text once for runs of 20 or more secret characters; the provider
rules search only inside those runs. A user would notice a wrong hand-over as a token
kept whole: the second of two tokens in one text, a token after a path or a JSON
escape, a token in the last run of a text.
"""

from __future__ import annotations

import random
import string

import pytest

from wiki_memory.capture import leaks
from wiki_memory.capture.sanitize import redact_text

ALNUM = string.ascii_letters + string.digits


def _rnd(n: int, alphabet: str = ALNUM, seed: int = 0) -> str:
    rng = random.Random(seed * 1000 + n)
    return "".join(rng.choice(alphabet) for _ in range(n))


# fake tokens, assembled (the own-source scan reads this file as a page)
GH = "gh" + "p_" + _rnd(36, seed=1)
AWS = "AK" + "IA" + _rnd(16, string.ascii_uppercase + "234567", seed=2)
SG = "S" + "G." + _rnd(22, ALNUM + "-_", seed=3) + "." + _rnd(43, ALNUM + "-_", seed=4)
BEDROCK = "AB" + "SK" + "Qx/" + _rnd(120, ALNUM + "+", seed=5)


@pytest.mark.fast
@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        # two tokens in one run of secret characters, joined by a dot
        (f"x {GH}.{SG} y", ["github-token", "sendgrid-key"]),
        # a token after a long run that holds none (a path), in the next run
        (f"/usr/lib/{_rnd(40, seed=6)}/site-packages {AWS}", ["aws-access-key"]),
        # a base64 token, then a JSON-escaped line break, then a dotted token
        (f"key {BEDROCK}\\n{SG}", ["aws-bedrock-key", "sendgrid-key"]),
        # many runs without a token before the last one, which ends the text
        (" ".join(_rnd(24, seed=10 + k) for k in range(30)) + f" {GH}", ["github-token"]),
        # tokens in three separate runs
        (f"{GH}\n{AWS}\n{SG}", ["github-token", "aws-access-key", "sendgrid-key"]),
    ],
)
def test_every_token_in_every_run_is_found(text: str, kinds: list[str]) -> None:
    out, reds = redact_text(text)
    assert [r.kind for r in reds if r.kind in set(kinds)] == kinds
    for secret in (GH, AWS, SG, BEDROCK):
        assert secret not in out


@pytest.mark.fast
def test_the_generated_rules_find_the_same_with_the_runs_handed_over() -> None:
    text = f"token: {GH} and aws {AWS}; twilio SK{_rnd(32, '0123456789abcdef', seed=7)}"
    low = text.lower()
    raw = text.encode("ascii", "replace")
    near = leaks.near_runs(low, raw)
    assert near[1], "the text has long runs"
    assert leaks.find(text, low, None, raw, None, None, near) == leaks.find(text, low)
