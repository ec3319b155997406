"""Samples of gitleaks' rules for the tests: values generated inside each rule's regex
that gitleaks itself would flag (keyword present, entropy reached, no allowlist), and each
rule's own false-positive examples read from its Go source (``rules/*.go``)."""

from __future__ import annotations

import json
import os
import random
import re
import warnings
from pathlib import Path

from background import SHARED_ENV
from filelock import FileLock
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample, Unsatisfiable

from wiki_memory.capture import leaks


def flagged(rule: leaks.Rule, text: str) -> list[tuple[int, int]]:
    """What gitleaks' rule flags in ``text`` (path rules given a matching path)."""
    low = text.lower()
    if rule.keywords and not any(k in low for k in rule.keywords):
        return []
    return [(s, e) for s, e, _ in leaks._run(rule, text, low, _path_for(rule))]


def _path_for(rule: leaks.Rule) -> str | None:
    return PATHS.get(rule.id)


#: a file path each path rule applies to
PATHS = dict(
    (
        ("freemius-secret-key", "src/freemius.php"),
        ("hashicorp-tf-password", "infra/main.tf"),
        ("kubernetes-secret-yaml", "deploy/secret.yaml"),
        ("nuget-config-password", "nuget.config"),
    )
)


def strategy(rule: leaks.Rule) -> st.SearchStrategy[str]:
    return st.from_regex(re.compile(rule.source, re.ASCII), fullmatch=False)


#: samples already searched in this process, by (rule id, its regex, seed): the search
#: is seeded, so the same key always finds the same text, and five test files ask for
#: every rule's sample (searching them all took about a minute of CPU each time)
_FOUND: dict[tuple[str, str, int], str | None] = {}


#: the folder the test processes of one run share (background.SHARED_ENV, set by
#: tests/run.py): the first process to need a sample of seed 0 searches every rule's and
#: writes them there, the others wait for it and read them, so a run on two workers
#: searches them once, not twice


def sample(rule: leaks.Rule, seed: int = 0) -> str | None:
    """One text flagged by ``rule`` (None when none was found within a bounded search)."""
    key = (rule.id, rule.source, seed)
    if key not in _FOUND and seed == 0 and os.environ.get(SHARED_ENV):
        _FOUND.update(shared_samples(Path(os.environ[SHARED_ENV])))
    if key not in _FOUND:
        _FOUND[key] = _search(rule, seed)
    return _FOUND[key]


def shared_samples(folder: Path) -> dict[tuple[str, str, int], str | None]:
    """Every rule's sample of seed 0, searched by the first process of the run to ask
    (under a lock on ``folder/seed0-samples.json``) and read from there by the others; the
    search is seeded, so each process would have found the same texts. In a whole-suite
    run the background run asks first (``background.py``, job ``seed0``), so the workers
    find them searched, or wait on the lock while it searches."""
    path = folder / "seed0-samples.json"  # background.py's jobs write <job>.json beside it
    with FileLock(str(path) + ".lock"):
        if not path.exists():
            rows = [[r.id, r.source, _search(r, 0)] for r in leaks.RULES]
            part = path.with_suffix(".part")
            part.write_text(json.dumps(rows), encoding="utf-8")
            part.replace(path)
        rows = json.loads(path.read_text(encoding="utf-8"))
    return {(rid, source, 0): text for rid, source, text in rows}


def _search(rule: leaks.Rule, seed: int) -> str | None:
    rnd = random.Random(f"{rule.id}-{seed}")

    def ok(text: str) -> bool:
        # flagged, with a secret that reads as random (entropy of 3 bits a character or
        # its rule's threshold): the first text from_regex finds is often all zeros, which
        # a rule without an entropy threshold flags but no provider issues
        spans = flagged(rule, text)
        if not spans:
            return False
        s, e = max(spans, key=lambda sp: sp[1] - sp[0])
        return leaks.entropy(text[s:e]) >= min(3.0, max(rule.entropy, 2.5))

    s = settings(
        database=None,
        max_examples=300,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        deadline=None,
    )
    # the value alone, then (for a rule whose keyword is not part of its match, such as
    # Airtable's "pat..." tokens under an "airtable" name) after its first keyword
    strategies = [strategy(rule)]
    if rule.keywords:
        kw = rule.keywords[0]
        full = st.from_regex(re.compile(rule.source, re.ASCII), fullmatch=True)
        strategies.append(full.map(lambda x: f"{kw} {x}"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for strat in strategies:
            try:
                return find(strat, ok, settings=s, random=rnd)
            except (NoSuchExample, Unsatisfiable):
                continue
    return None


def _go_strings(expr: str) -> list[str]:
    """The string literals of a Go slice body that are whole elements (no ``+``, no call)."""
    out = []
    for m in re.finditer(r'`([^`]*)`|"((?:[^"\\\n]|\\.)*)"', expr):
        before = expr[: m.start()].rstrip()
        after = expr[m.end() :].lstrip()
        if before.endswith("+") or after.startswith("+") or before.endswith("("):
            continue
        if m.group(1) is not None:
            out.append(m.group(1))
        else:
            try:
                out.append(bytes(m.group(2), "utf-8").decode("unicode_escape"))
            except UnicodeDecodeError:
                continue
    return out


def false_positives(rules_dir: Path) -> dict[str, list[str]]:
    """Rule id -> its false-positive examples (``fps := []string{...}``) in rules/*.go."""
    out: dict[str, list[str]] = {}
    for f in sorted(rules_dir.glob("*.go")):
        src = f.read_text(encoding="utf-8")
        for m in re.finditer(r"fps\s*:?=\s*\[\]string\{", src):
            ids = re.findall(r'RuleID:\s*"([^"]+)"', src[: m.start()])
            if not ids:
                continue
            depth, i = 1, m.end()
            while i < len(src) and depth:
                if src[i] == "`":
                    i = src.index("`", i + 1)
                elif src[i] == '"':
                    j = i + 1
                    while src[j] != '"':
                        j += 2 if src[j] == "\\" else 1
                    i = j
                elif src[i] == "{":
                    depth += 1
                elif src[i] == "}":
                    depth -= 1
                i += 1
            body = re.sub(r"^\s*//.*$", "", src[m.end() : i - 1], flags=re.M)
            out.setdefault(ids[-1], []).extend(_go_strings(body))
    return out
