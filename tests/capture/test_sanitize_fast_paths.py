"""The sanitizer's fast paths find exactly what the plain ones find.

The server finds the generated rules' keywords in one Aho-Corasick pass (``keyscan``,
with ``ahocorasick_rs``); the hook (``python -S``) looks for each with ``in``. A rule
whose matches all start with a fixed text is tried only where that text occurs, and a
format rule only at its cue, instead of ``finditer`` over the text. A user would notice
any difference as a secret that reaches git through one door and not the other.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys

import pytest
from gitleaks_samples import sample
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import REPO, shared_path

from wiki_memory.capture import formats, gitleaks_rules, keyscan, leaks, sanitize


def _texts() -> list[str]:
    """Real texts: the shared vaults' pages, gitleaks' rule sources (full of examples of
    secrets) and this repository's sanitizer tests (fake secrets of every kind)."""
    out = [
        p.read_text(errors="replace") for p in sorted(shared_path("data", "vaults").rglob("*.md"))
    ]
    out += [
        p.read_text(errors="replace") for p in sorted(shared_path("data", "gitleaks").rglob("*.go"))
    ]
    out += [
        p.read_text(errors="replace") for p in sorted((REPO / "tests" / "capture").glob("*.py"))
    ]
    return out


def _plain(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in the hook: no ahocorasick_rs, every keyword looked for with ``in``."""
    monkeypatch.setattr(keyscan, "_AC_MODULE", False)
    for ks in (sanitize._WORDS, leaks._NEAR_SET):
        if ks is not None:
            monkeypatch.setattr(ks, "_ac", False)
            monkeypatch.setattr(ks, "_bac", False)


@pytest.mark.fast
def test_the_server_and_the_hook_redact_real_texts_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ahocorasick_rs")
    texts = _texts()
    sanitize._gitleaks()
    fast = [sanitize.redact_text(t) for t in texts]
    assert sanitize._WORDS.available("x" * keyscan.AC_MIN)  # the fast path was taken
    _plain(monkeypatch)
    plain = [sanitize.redact_text(t) for t in texts]
    assert fast == plain
    assert sum(len(r) for _, r in fast) > 300  # the texts hold many secrets to find


@pytest.mark.slow  # one Hypothesis search per rule for its sample
def test_every_generated_rules_sample_is_found_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """One sample per rule, padded past the one-pass threshold with ordinary text."""
    pytest.importorskip("ahocorasick_rs")
    pad = "ordinary words of a tool output, nothing secret here.\n" * 60
    texts = [pad + s + "\n" + pad for r in leaks.RULES if (s := sample(r)) is not None]
    fast = [sanitize.redact_text(t) for t in texts]
    _plain(monkeypatch)
    assert fast == [sanitize.redact_text(t) for t in texts]


@pytest.mark.fast
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.sampled_from([*leaks.KEYWORDS, *formats.CUES, "x", " ", "\n", ".", "_", "A1"]),
        max_size=400,
    )
)
def test_one_pass_keyword_set_equals_in_scans(parts: list[str]) -> None:
    pytest.importorskip("ahocorasick_rs")
    low = "".join(parts).lower()
    low = low + " " * max(0, keyscan.AC_MIN - len(low))  # long enough for the one pass
    for ks in (keyscan.KeySet(leaks.KEYWORDS), keyscan.KeySet(formats.CUES)):
        assert ks.present(low) == ks.present(low, fast=False)


_HEADS = sorted({h for heads in gitleaks_rules.STARTS.values() for h in heads})


@pytest.mark.fast
@pytest.mark.parametrize("rid", sorted(gitleaks_rules.STARTS))
def test_rules_tried_at_their_start_texts_match_as_finditer(rid: str) -> None:
    """Each rule with fixed start texts, over texts made of its heads (any case), run
    characters, separators and a sample of the rule: the same matches as finditer."""
    rule = leaks.BY_ID[rid]
    heads = gitleaks_rules.STARTS[rid]
    pieces = [*heads, *(h.upper() for h in heads), "a1B2c3D4e5F6g7H8", "=", " ", "\n"]
    pieces += ["\\n", ".", "_", "-", "A3-", "s.", "ey", "sk", "pat", "0" * 24]
    rnd = random.Random(rid)
    rx = rule.rx
    for _ in range(40):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randrange(1, 60)))
        got = [m.span() for m in leaks._cued(rx, text, text.lower(), heads)]
        assert got == [m.span() for m in rx.finditer(text)], text


@pytest.mark.fast
@pytest.mark.parametrize(
    ("rx", "cues", "back"),
    [
        (formats._NETRC_RE, ("password", "account"), 0),
        (formats._NPMRC_RE, ("_auth", "_password"), 1),
        (formats._B64_PIPE_RE, ("echo", "printf"), 0),
        (formats._B64_HERE_RE, ("base64",), 0),
        (formats._MAILGUN_RE, ("key-",), 0),
    ],
)
def test_format_rules_tried_at_their_cues_match_as_finditer(
    rx: formats._Lazy, cues: tuple[str, ...], back: int
) -> None:
    # written reversed, so that this file holds no fake secret for the own-source scan
    planted = [
        "654321wp drowssap drowssap\nzyx-tnu0cca tnuocca 55aP-t3rc3s drowssap u nigol h enihcam",
        "dcba=htua_:=Qmcvd3czFGc=drowssap_:x \n654321cba_mpn=nekoThtua_:/r//\nzNXYwpjclNXd=htua_",
        "ohce edoced-- 46esab | dcba s% ftnirp ;d- 46esab | '==AZy92dzNXYwpjclNXd' ohce",
        "dcba<<< edoced-- 46esab '==AZy92dzNXYwpjclNXd' <<< d- 46esab",
        "-yek fedcba9876543210fedcba9876543210-yek- fedcba9876543210fedcba9876543210-yek",
    ]
    texts = [t[::-1] for t in planted] + _texts()[:50]
    for text in texts:
        got = [m.span() for m in formats._cued(rx, text, cues, back)]
        assert got == [m.span() for m in rx.get().finditer(text)], text[:80]


@pytest.mark.fast
def test_kind_secret_test_finds_the_same_manifests() -> None:
    """The Kubernetes kind test without its optional leading quote answers as before."""
    old = re.compile(r"""["']?kind["']?[ \t]*:[ \t]*["']?Secret\b""")
    for text in [
        "kind: Secret",
        '"kind": "Secret"',
        "'kind':'Secret'",
        "kind:Secrets",
        "Kind: Secret",
        "x",
    ]:
        assert (formats._K8S_KIND_RE.search(text) is None) == (old.search(text) is None)


@pytest.mark.process
def test_the_hooks_python_dash_s_redacts_without_the_library_and_alike() -> None:
    """A hook process (``python -S``, the repository on its path, no site-packages):
    ahocorasick_rs is not imported, and a long text comes out as in the server."""
    text = "".join(_texts()[-20:])
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); "
        "from wiki_memory.capture import sanitize; "
        "out, reds = sanitize.redact_text(sys.stdin.read()); "
        "print(json.dumps([out, len(reds), 'ahocorasick_rs' in sys.modules]))"
    )
    res = subprocess.run(
        [sys.executable, "-S", "-c", code, str(REPO)],
        input=text, capture_output=True, text=True, check=True,
    )  # fmt: skip
    out, count, imported = json.loads(res.stdout)
    assert imported is False
    assert len(text) >= keyscan.AC_MIN
    assert (out, count) == (lambda r: (r[0], len(r[1])))(sanitize.redact_text(text))
    assert count > 0
