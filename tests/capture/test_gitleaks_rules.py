"""gitleaks' rules in the sanitizer (issue "Secrets from a well-kept rule set"): the
generated table equals the generator's output, every rule's generated samples are
redacted, its own false-positive examples are not flagged, and each rule runs in linear
time on adversarial input."""

from __future__ import annotations

import re
import sys

import background
import linear_timing
import pytest
from gitleaks_samples import PATHS, false_positives, flagged, strategy
from hypothesis import HealthCheck, given, settings
from support import REPO, shared_path

from wiki_memory.capture import gitleaks_rules, leaks
from wiki_memory.capture.sanitize import redact_text

sys.path.insert(0, str(REPO / "scripts"))
import gen_gitleaks_rules  # noqa: E402

RULE_IDS = [r.id for r in leaks.RULES]


@pytest.mark.fast
def test_generated_module_equals_the_generators_output() -> None:
    source = shared_path("data", "gitleaks")
    text = gen_gitleaks_rules.build(source)
    committed = (REPO / "wiki_memory" / "capture" / "gitleaks_rules.py").read_text("utf-8")
    assert committed == text, "regenerate: python scripts/gen_gitleaks_rules.py"


@pytest.mark.fast
def test_every_rule_is_translated_or_listed_with_a_reason() -> None:
    import tomllib

    conf = tomllib.loads(shared_path("data", "gitleaks", "gitleaks.toml").read_text("utf-8"))
    ids = {r["id"] for r in conf["rules"]}
    listed = {r[0] for r in gitleaks_rules.UNTRANSLATED} | {r[0] for r in gitleaks_rules.LEFT_OUT}
    assert ids == set(RULE_IDS) | listed
    assert all(reason for _, reason in gitleaks_rules.UNTRANSLATED + gitleaks_rules.LEFT_OUT)
    assert "generic-api-key" not in RULE_IDS
    for r in leaks.RULES:
        re.compile(r.source, re.ASCII)


@pytest.mark.fast
@pytest.mark.parametrize(
    ("go", "py", "text", "hit"),
    [
        (r"\b(p8e-(?i)[a-z0-9]{4})", r"\b(p8e-(?i:[a-z0-9]{4}))", "p8e-AbC1", True),
        (r"a(?i)b|c", r"a(?i:b)|(?i:c)", "C", True),
        (r"(x(?i)y)z", r"(x(?i:y))z", "xYZ", False),
        (r"[[:alnum:]]{3}\z", r"[A-Za-z0-9]{3}\Z", "ab1", True),
    ],
)
def test_re2_translation(go: str, py: str, text: str, hit: bool) -> None:
    assert gen_gitleaks_rules.translate(go) == py
    assert (re.fullmatch(py, text, re.ASCII) is not None) == hit


@pytest.mark.fast
def test_generated_module_is_importable_under_python_dash_s_without_typing() -> None:
    # plain literals only: nothing to import (checked on the source; the hook imports it)
    src = (REPO / "wiki_memory" / "capture" / "gitleaks_rules.py").read_text("utf-8")
    assert "\nimport " not in src and "\nfrom " not in src
    assert "MIT License" in src and "Permission is hereby granted" in src


@pytest.mark.fast
@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_each_rules_generated_samples_are_redacted(rule_id: str) -> None:
    """Hypothesis's ``from_regex`` writes texts inside the rule's pattern; each that gitleaks
    itself would flag (keyword, entropy, allowlists) is redacted by the sanitizer, whole."""
    rule = leaks.BY_ID[rule_id]

    @settings(
        max_examples=8,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy(rule))
    def check(text: str) -> None:
        found = flagged(rule, text)
        if not found:
            return  # outside what gitleaks flags (low entropy, allowlisted, no keyword)
        _, reds = redact_text(text, path=PATHS.get(rule_id))
        for s, e in found:
            assert any(r.start <= s and e <= r.end for r in reds), (text, text[s:e])

    check()


#: text around a sample, longer than the window the run prefilter keeps before a run
_PROSE = "Notes from the meeting, nothing secret in them: we moved the deploy to Friday. " * 4


@pytest.mark.fast
@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_the_run_prefilter_runs_every_rule_where_gitleaks_would(rule_id: str) -> None:
    """``leaks.find`` looks for most rules' keywords only in and just before long runs of
    secret characters; in a sample set in prose, it finds every span the rule flags when
    its keywords are looked for in the whole text, as gitleaks does."""
    rule = leaks.BY_ID[rule_id]
    path = PATHS.get(rule_id)

    @settings(
        max_examples=8,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy(rule))
    def check(text: str) -> None:
        wrapped = _PROSE + text + "\n" + _PROSE
        want = flagged(rule, wrapped)
        got = {(s, e) for s, e, _ in leaks.find(wrapped, wrapped.lower(), path)}
        assert set(want) <= got, (text, want)

    check()


FPS: dict[str, list[str]] = {}


def _fps() -> dict[str, list[str]]:
    if not FPS:
        FPS.update(false_positives(shared_path("data", "gitleaks", "rules")))
    return FPS


@pytest.mark.fast
def test_false_positive_examples_are_read() -> None:
    fps = _fps()
    assert sum(len(v) for v in fps.values()) > 200, len(fps)


@pytest.mark.fast
@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_each_rules_own_false_positive_examples_are_not_flagged(rule_id: str) -> None:
    rule = leaks.BY_ID[rule_id]
    bad = [x for x in _fps().get(rule_id, []) if list(rule.spans(x))]
    assert bad == []


# -- linear time, per rule ------------------------------------------------------------


# not serial: it compares CPU time with CPU time in one process, which a busy neighbour
# costs neither side of (linear_timing.py), so it runs beside the other tests; in a
# whole-suite run measures it in the background at the lowest priority (background.py)
# and this test, handed out last (``late``), reads the result
@pytest.mark.process  # measures in worker processes, one per core (linear_timing.py)
@pytest.mark.late
@pytest.mark.timeout(1800)
def test_each_rule_runs_in_linear_time() -> None:
    slow = {
        rid: (round(ratio), round(secs, 2), unit)
        for rid, (ratio, secs, unit) in background.result("linear", background.linear).items()
        if ratio >= linear_timing.LINEAR_RATIO
    }
    assert slow == {}
