"""Generate the hook's fallback token prefixes from the sanitizer's own tables.

The hook (``hooks/wiki_memory_hooklib.py``) falls back to a few built-in rules when it
cannot import the sanitizer; its token rule takes the fixed prefixes of the sanitizer's
provider rows (``sanitize.DETECTORS``) and of gitleaks' generated rules
(``capture/gitleaks_rules.py``), so the two tables cannot drift. The block between the
``GENERATED fallback`` markers in the hook library is rewritten; what is left out, and
why, is written beside it (``_FALLBACK_LEFT_OUT``).

    python scripts/gen_hook_fallback.py            # rewrite the block
    python scripts/gen_hook_fallback.py --check    # exit 1 if it is not up to date

``scripts/gen_gitleaks_rules.py`` runs it too, so regenerating stays one command
(tests/capture/test_hook_fallback_table.py checks that the block equals the output).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HOOKLIB = REPO / "hooks" / "wiki_memory_hooklib.py"
BEGIN = "# --- GENERATED fallback prefixes (scripts/gen_hook_fallback.py): do not edit ---"
END = "# --- end of GENERATED fallback prefixes ---"

#: a prefix that starts ordinary identifiers or words: the fallback would redact code
WORDLIKE = frozenset({"secret_", "pat", "dapi", "ext_", "sc_", "hooks"})
#: the characters of a token prefix the fallback takes
TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.~-")
#: the least length of a prefix the fallback takes (shorter ones start ordinary words;
#: the fallback's rule for any random run of 20 or more characters covers their tokens)
MIN_PREFIX = 3


def _prefix_reason(p: str) -> str | None:
    if len(p) < MIN_PREFIX:
        return (
            f"prefix {p!r} is shorter than {MIN_PREFIX} characters (the random-run rule covers it)"
        )
    if not set(p) <= TOKEN_CHARS:
        return f"prefix {p!r} is not a token's start"
    if p.lower() in WORDLIKE:
        return f"prefix {p!r} starts ordinary identifiers (the random-run rule covers it)"
    return None


def build() -> tuple[tuple[str, ...], tuple[str, ...], tuple[tuple[str, str], ...]]:
    """``(case-sensitive prefixes, case-insensitive prefixes, left out)``: the provider
    rows' prefixes as written, gitleaks' rules' fixed prefixes (lowercase, matched in any
    case), and ``(rule, reason)`` for each provider row or gitleaks rule (or one of its
    prefixes) the fallback does not take."""
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "scripts"))
    from gen_gitleaks_rules import fixed_prefixes

    from wiki_memory.capture import gitleaks_rules as G
    from wiki_memory.capture import sanitize

    exact: set[str] = set()
    left: list[tuple[str, str]] = []
    for det in sanitize.DETECTORS:
        for p in det.prefixes:
            why = _prefix_reason(p)
            if why:
                left.append((det.kind, why))
            else:
                exact.add(p)
    lowered = {p.lower() for p in exact}
    anycase: set[str] = set()
    from re import _parser  # type: ignore[attr-defined]

    for rid, source, _kw, _ent, _grp, _allow, path, *_shape in G.RULES:
        if path is not None:
            left.append((rid, "applies only to a file path, which the fallback does not know"))
            continue
        if G.RUN_LENGTH[rid] < 20:
            left.append(
                (
                    rid,
                    "no run of 20 token characters sure in its matches (a command, URL, block or short value)",
                )
            )
            continue
        heads = fixed_prefixes(list(_parser.parse(source, re.ASCII)))
        heads = {h for h in heads or () if h}
        if not heads:
            left.append((rid, "no fixed prefix (a name beside the value, or an infix)"))
            continue
        for h in sorted(heads):
            why = _prefix_reason(h)
            if why:
                left.append((rid, why))
            elif not any(h.startswith(x) for x in lowered):  # else a row's prefix covers it
                anycase.add(h)
    return tuple(sorted(exact)), tuple(sorted(anycase)), tuple(sorted(set(left)))


def block() -> str:
    """The generated block, markers included."""
    exact, anycase, left = build()
    lines = [
        BEGIN,
        "# fmt: off",
        "#: fixed prefixes of the sanitizer's provider rows, as written",
        "_FALLBACK_PREFIXES = (",
        *(f"    {p!r}," for p in exact),
        ")",
        "#: gitleaks' rules' fixed prefixes that the rows lack (lowercase; any case matches)",
        "_FALLBACK_PREFIXES_ANYCASE = (",
        *(f"    {p!r}," for p in anycase),
        ")",
        "#: (rule, why the fallback does not take it): every other rule's prefixes are above",
        "_FALLBACK_LEFT_OUT = (",
        *(f"    {item!r}," for item in left),
        ")",
        "# fmt: on",
        END,
    ]
    return "\n".join(lines)


def render(text: str) -> str:
    """``text`` (the hook library) with its generated block replaced."""
    a = text.index(BEGIN)
    b = text.index(END) + len(END)
    return text[:a] + block() + text[b:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the block is stale")
    args = ap.parse_args()
    text = HOOKLIB.read_text(encoding="utf-8")
    new = render(text)
    if args.check:
        print("up to date" if new == text else f"{HOOKLIB} is stale: regenerate it")
        return 0 if new == text else 1
    HOOKLIB.write_text(new, encoding="utf-8")
    print(f"wrote {HOOKLIB}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
