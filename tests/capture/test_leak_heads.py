"""A name-then-value rule tried only at its names finds what finditer over the window finds.

gitleaks' name-then-value rules open with the provider's names, matched in any case
(``(?i)(?:lob)...``); over a window of text they are tried only where a name occurs. A
difference would be a secret after ``LOB_KEY=`` that one path redacts and the other not.
"""

from __future__ import annotations

import random

import pytest
from gitleaks_samples import sample

from wiki_memory.capture import leak_heads, leaks

_NAMED = sorted(r.id for r in leaks.RULES if r.windowed and r.heads)


@pytest.mark.fast
def test_most_name_then_value_rules_open_with_their_names() -> None:
    """The shortcut covers the rules that cost (Lob's ``test_`` windows cover most code);
    a rule whose names are not plain literals keeps finditer."""
    windowed = [r for r in leaks.RULES if r.windowed]
    assert len(_NAMED) >= 70
    assert leaks.BY_ID["lob-api-key"].heads == ("lob",)
    assert leaks.BY_ID["jfrog-api-key"].heads == ("jfrog", "artifactory", "bintray", "xray")
    assert all(not r.heads for r in leaks.RULES if not r.windowed)
    assert len(_NAMED) < len(windowed)  # e.g. linked[_-]?in: not a plain literal


@pytest.mark.fast
@pytest.mark.parametrize(
    ("source", "heads"),
    [
        (r"(?i)(?:lob)(?:[ \t\w.-]{0,20})=(x)", ("lob",)),
        (r"(?i)(?:a|bc)x", ("a", "bc")),
        (r"(?i)(?:lob)?x", ()),  # optional: a match need not start with it
        (r"(?i)(?:lob)*x", ()),
        (r"(?i)(?:lob)x|y", ()),  # an alternation of the whole
        (r"(?i)(?:lob)[|]x", ("lob",)),  # a | in a class is a literal
        (r"(?i)(?:lob)\|x", ("lob",)),
        (r"(?i)(?:lob)(?:x|y)", ("lob",)),
        (r"(?i)(?:linked[_-]?in)x", ()),
        (r"(?:lob)x", ()),  # case-sensitive: not looked for in the lowercased text
    ],
)
def test_names_are_read_only_where_every_match_starts_with_one(
    source: str, heads: tuple[str, ...]
) -> None:
    assert leak_heads.fast_heads(source) == heads


@pytest.mark.fast
@pytest.mark.parametrize("rid", _NAMED)
def test_rules_tried_at_their_names_match_as_finditer_in_windows(rid: str) -> None:
    """Each such rule over texts made of its names (any case), separators, values and
    its own sample, in random windows: the same matches as finditer with the same end."""
    rule = leaks.BY_ID[rid]
    heads = rule.heads
    rx = rule.rx
    own = sample(rule) or ""
    pieces = [*heads, *(h.upper() for h in heads), *(h.title() for h in heads), own]
    pieces += ["_key", "_secret", " = ", "=", ": ", '"', "'", " ", "\n", "\t", "\\n", "."]
    pieces += ["a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6", "live_", "test_", "0" * 40, "Zz9"]
    rnd = random.Random(rid)
    for _ in range(60):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randrange(1, 40)))
        low = text.lower()
        n = len(text)
        ws = rnd.randrange(0, n + 1)
        we = rnd.randrange(ws, n + 1)
        got = [m.span() for m in leak_heads.finditer_at(rx, text, low, heads, ws, we)]
        assert got == [m.span() for m in rx.finditer(text, ws, we)], (text, ws, we)
