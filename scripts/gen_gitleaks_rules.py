"""Generate wiki_memory/capture/gitleaks_rules.py from gitleaks' default rule set.

Reads ``gitleaks.toml`` (default: ``../shared/data/gitleaks/gitleaks.toml`` beside this
repository, or ``$WIKI_MEMORY_SHARED/data/gitleaks``), translates each rule's regex from
Go RE2 to Python ``re`` and writes the sanitizer's provider table with the rule's
keywords, entropy threshold, secret group, path condition and allowlists, gitleaks' MIT
notice in its header. Rules that cannot be translated are written to ``UNTRANSLATED``
with the reason; rules left out on purpose to ``LEFT_OUT``.

    python scripts/gen_gitleaks_rules.py            # rewrite the module
    python scripts/gen_gitleaks_rules.py --check    # exit 1 if it is not up to date

(tests/capture/test_gitleaks_rules.py checks that the committed module equals the
output.)
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tomllib
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "wiki_memory" / "capture" / "gitleaks_rules.py"

#: rules left out on purpose, with the reason
LEFT_OUT = {
    "generic-api-key": "our keyword rule (generic-secret) covers it, and it would redact"
    " ordinary code in tool output",
}

_POSIX = {
    "alnum": "A-Za-z0-9",
    "alpha": "A-Za-z",
    "digit": "0-9",
    "xdigit": "0-9A-Fa-f",
    "upper": "A-Z",
    "lower": "a-z",
    "space": r"\t\n\v\f\r ",
    "word": r"\w",
    "punct": r"!-/:-@\[-`{-~",
}


class Untranslatable(Exception):
    pass


def default_source() -> Path:
    shared = os.environ.get("WIKI_MEMORY_SHARED")
    if shared:
        return Path(shared) / "data" / "gitleaks"
    for root in (REPO.parent, REPO.parent.parent):  # a checkout, or a worktree under wt/
        if (root / "shared" / "data" / "gitleaks").is_dir():
            return root / "shared" / "data" / "gitleaks"
    return REPO.parent / "shared" / "data" / "gitleaks"


def translate(rx: str) -> str:
    """Go RE2 syntax to Python ``re`` syntax (compiled with ``re.ASCII``, as RE2's
    ``\\w``, ``\\b`` and ``\\s`` are ASCII).

    - an inline flag group ``(?i)`` after the start becomes a scoped ``(?i:...)`` that
      runs to the end of its enclosing group, closed and reopened around each ``|`` of
      that group (RE2 applies it to the rest of the group, every alternative after it);
    - ``\\z`` becomes ``\\Z``; POSIX classes ``[[:alnum:]]`` become explicit ranges;
    - a ``[`` inside a character class is escaped (Python warns of nested sets);
    - an unbounded ``.*``, ``.*?`` or ``.+`` is bounded to 1,024 characters (``.`` stops
      at a newline anyway): RE2 runs them in linear time, Python's backtracking ``re``
      runs ``curl .*? -H`` in time quadratic in a line's length.
    """
    out: list[str] = []
    frames: list[list[str]] = [[]]  # per open group: the scoped flag groups opened in it
    i, n = 0, len(rx)
    while i < n:
        c = rx[i]
        if c == "\\":
            nxt = rx[i + 1 : i + 2]
            if nxt == "z":
                out.append(r"\Z")
            elif nxt in ("Q", "E", "C", "p", "P"):
                raise Untranslatable(f"RE2 escape \\{nxt} has no Python equivalent")
            else:
                out.append(rx[i : i + 2])
            i += 2
            continue
        if c == "[":
            j = i + 1
            cls = ["["]
            if rx[j : j + 1] == "^":
                cls.append("^")
                j += 1
            if rx[j : j + 1] == "]":
                cls.append(r"\]")
                j += 1
            while j < n and rx[j] != "]":
                if rx[j] == "\\":
                    cls.append(rx[j : j + 2])
                    j += 2
                    continue
                if rx[j] == "[":
                    m = re.match(r"\[:(\^?)([a-z]+):\]", rx[j:])
                    if m:
                        if m.group(1) or m.group(2) not in _POSIX:
                            raise Untranslatable(f"POSIX class {m.group(0)}")
                        cls.append(_POSIX[m.group(2)])
                        j += m.end()
                        continue
                    cls.append(r"\[")
                    j += 1
                    continue
                if rx[j] in "&~|-" and cls and cls[-1] == rx[j]:
                    cls.append("\\" + rx[j])
                    j += 1
                    continue
                cls.append(rx[j])
                j += 1
            if j >= n:
                raise Untranslatable("unterminated character class")
            cls.append("]")
            out.append("".join(cls))
            i = j + 1
            continue
        if c == "." and rx[i + 1 : i + 2] in ("*", "+"):
            lazy = "?" if rx[i + 2 : i + 3] == "?" else ""
            out.append(".{0,1024}" if rx[i + 1] == "*" else ".{1,1024}")
            out.append(lazy)
            i += 2 + len(lazy)
            continue
        if c == "(":
            m = re.match(r"\(\?([a-zA-Z-]+)\)", rx[i:])
            if m:
                flags = m.group(1)
                if set(flags) - set("ims-"):
                    raise Untranslatable(f"inline flags {flags!r}")
                if i == 0:
                    out.append(m.group(0))
                else:
                    out.append(f"(?{flags}:")
                    frames[-1].append(flags)
                i += m.end()
                continue
            if rx.startswith("(?P<", i) or rx.startswith("(?<", i):
                m2 = re.match(r"\(\?P?<(\w+)>", rx[i:])
                if m2 is None:
                    raise Untranslatable("bad named group")
                out.append(f"(?P<{m2.group(1)}>")
                frames.append([])
                i += m2.end()
                continue
            frames.append([])
            out.append("(")
            i += 1
            continue
        if c == ")":
            if len(frames) < 2:
                raise Untranslatable("unbalanced parentheses")
            out.append(")" * len(frames.pop()))
            out.append(")")
            i += 1
            continue
        if c == "|":
            opened = frames[-1]
            out.append(")" * len(opened))
            out.append("|")
            out.extend(f"(?{f}:" for f in opened)
            i += 1
            continue
        out.append(c)
        i += 1
    out.append(")" * len(frames.pop()))
    if frames:
        raise Untranslatable("unbalanced parentheses")
    py = "".join(out)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            re.compile(py, re.ASCII)
        except (re.error, FutureWarning, DeprecationWarning) as exc:
            raise Untranslatable(f"Python re rejects it: {exc}") from exc
    return py


def _allow(a: dict[str, object]) -> tuple[object, ...]:
    regexes = []
    for r in a.get("regexes", []):  # type: ignore[attr-defined]
        regexes.append(translate(str(r)))
    paths = [translate(str(p)) for p in a.get("paths", [])]  # type: ignore[attr-defined]
    return (
        str(a.get("regexTarget", "secret")),
        str(a.get("condition", "OR")),
        tuple(regexes),
        tuple(str(s).lower() for s in a.get("stopwords", [])),  # type: ignore[attr-defined]
        tuple(paths),
    )


def build(source: Path) -> str:
    conf = tomllib.loads((source / "gitleaks.toml").read_text(encoding="utf-8"))
    licence = (source / "LICENSE").read_text(encoding="utf-8").strip()
    rules: list[tuple[object, ...]] = []
    untranslated: list[tuple[str, str]] = []
    path_only: list[str] = []
    for r in conf["rules"]:
        rid = r["id"]
        if rid in LEFT_OUT:
            continue
        if "regex" not in r:
            untranslated.append((rid, f"no regex: only a path condition ({r.get('path')})"))
            continue
        try:
            py = translate(r["regex"])
            allows = tuple(_allow(a) for a in r.get("allowlists", []))
            path = translate(r["path"]) if "path" in r else None
        except Untranslatable as exc:
            untranslated.append((rid, str(exc)))
            continue
        if path is not None:
            path_only.append(rid)
        rules.append(
            (
                rid,
                py,
                tuple(k.lower() for k in r.get("keywords", [])),
                float(r.get("entropy", 0.0)),
                int(r.get("secretGroup", 0)),
                allows,
                path,
            )
        )
    g = conf.get("allowlist", {})
    glob_regexes = tuple(translate(x) for x in g.get("regexes", []))
    glob_stop = tuple(s.lower() for s in g.get("stopwords", []))

    lines = [
        '"""gitleaks\' default rules, translated to Python ``re``: GENERATED, do not edit.',
        "",
        "Regenerate with ``python scripts/gen_gitleaks_rules.py`` (see docs/sanitizer.md).",
        f"Source: gitleaks.toml, {conf.get('title', '')!s}, minVersion {conf.get('minVersion')}.",
        "",
        "Each rule: (id, regex, keywords, entropy, secret_group, allowlists, path).",
        "``regex`` is compiled with ``re.ASCII``; ``keywords`` are lowercase, one of them",
        "must occur in the lowercased text; ``entropy`` is the least Shannon entropy of the",
        "secret (0: none); ``secret_group`` 0 means the first non-empty group, else the whole",
        "match; an allowlist is (target, condition, regexes, stopwords, paths); ``path``, when",
        "set, is a regex the file path must match (the rule applies nowhere else).",
        "",
        "The rules are from gitleaks (https://github.com/gitleaks/gitleaks), under its",
        "licence:",
        "",
        *licence.splitlines(),
        '"""',
        "",
        "# ruff: noqa: E501",
        "# fmt: off",
        "",
        "RULES = (",
    ]
    for rule in rules:
        lines.append(f"    {rule!r},")
    lines.append(")")
    lines.append("")
    lines.append(f"GLOBAL_ALLOW_REGEXES = {glob_regexes!r}")
    lines.append("")
    lines.append(f"GLOBAL_STOPWORDS = {glob_stop!r}")
    lines.append("")
    lines.append("#: rules with a path condition: applied only to text whose file path matches")
    lines.append(f"PATH_ONLY = {tuple(path_only)!r}")
    lines.append("")
    lines.append("#: rules that could not be translated, with the reason")
    lines.append(f"UNTRANSLATED = {tuple(untranslated)!r}")
    lines.append("")
    lines.append("#: rules left out on purpose, with the reason")
    lines.append(f"LEFT_OUT = {tuple(LEFT_OUT.items())!r}")
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", type=Path, default=None, help="folder holding gitleaks.toml")
    ap.add_argument("--check", action="store_true", help="exit 1 if the module is stale")
    args = ap.parse_args()
    text = build(args.source or default_source())
    if args.check:
        same = OUT.read_text(encoding="utf-8") == text
        print("up to date" if same else f"{OUT} is stale: regenerate it")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
