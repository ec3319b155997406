"""The hook's fallback token rule comes from the same source as the sanitizer.

The hook library's block of fallback prefixes is generated (``scripts/gen_hook_fallback.py``)
from the sanitizer's provider rows and gitleaks' generated rules; these tests check that
the committed block equals the generator's output, name every rule the fallback leaves
out and why, and run one sample of each rule it keeps through the fallback.
"""

from __future__ import annotations

import re
import sys
from re import _parser  # type: ignore[attr-defined]

import pytest
from gitleaks_samples import sample
from support import REPO

from wiki_memory.capture import gitleaks_rules, leaks, sanitize
from wiki_memory.harness.outbox import load_hooklib

sys.path.insert(0, str(REPO / "scripts"))
import gen_hook_fallback  # noqa: E402
from gen_gitleaks_rules import fixed_prefixes  # noqa: E402

HOOKS = load_hooklib()
LEFT_OUT: dict[str, list[str]] = {}
for _rid, _why in HOOKS._FALLBACK_LEFT_OUT:
    LEFT_OUT.setdefault(_rid, []).append(_why)

#: why a rule may be left out: each reason the generator gives, by its start
REASONS = (
    "no fixed prefix",
    "no run of 20 token characters",
    "applies only to a file path",
    "prefix ",
)


@pytest.mark.fast
def test_the_fallback_block_equals_the_generators_output() -> None:
    text = gen_hook_fallback.HOOKLIB.read_text(encoding="utf-8")
    assert gen_hook_fallback.render(text) == text, (
        "hooks/wiki_memory_hooklib.py's fallback block is stale: run "
        "python scripts/gen_gitleaks_rules.py"
    )


@pytest.mark.fast
def test_every_rule_is_in_the_fallback_or_left_out_with_a_reason() -> None:
    """Each gitleaks rule and each provider row: its fixed prefixes start with one of the
    fallback's, or it is named in ``_FALLBACK_LEFT_OUT`` with why (printed)."""
    exact = set(HOOKS._FALLBACK_PREFIXES)
    anycase = {p.lower() for p in (*HOOKS._FALLBACK_PREFIXES, *HOOKS._FALLBACK_PREFIXES_ANYCASE)}
    missing = []
    for rid, source, *_ in gitleaks_rules.RULES:
        heads = {h for h in fixed_prefixes(list(_parser.parse(source, re.ASCII))) or () if h}
        if rid in LEFT_OUT or (heads and all(h.startswith(tuple(anycase)) for h in heads)):
            continue
        missing.append(rid)
    for det in sanitize.DETECTORS:
        if det.prefixes and det.kind not in LEFT_OUT and not set(det.prefixes) <= exact:
            missing.append(det.kind)
    for rid, whys in sorted(LEFT_OUT.items()):
        for why in whys:
            print(f"left out of the hook's fallback: {rid}: {why}")
            assert why.startswith(REASONS), (rid, why)
    assert not missing, f"neither in the fallback nor left out with a reason: {missing}"


KEPT = [
    r.id
    for r in leaks.RULES
    if r.id not in LEFT_OUT and r.path is None and not r.windowed and r.keywords
]


@pytest.mark.fast
@pytest.mark.parametrize("rule_id", KEPT)
def test_the_fallback_redacts_a_sample_of_each_rule_it_keeps(rule_id: str) -> None:
    """A text gitleaks' rule flags (generated inside its regex) loses its secret in the
    hook's fallback too, as it does in the sanitizer."""
    rule = leaks.BY_ID[rule_id]
    text = sample(rule)
    if text is None:
        pytest.skip(f"{rule_id}: no sample found within the bounded search")
    secret_spans = [(s, e) for s, e, _ in leaks._run(rule, text, text.lower())]
    out, hits = HOOKS.fallback_redact_text(text)
    assert hits, text
    for s, e in secret_spans:
        assert text[s:e] not in out, (text, out)
