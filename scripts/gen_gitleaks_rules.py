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


#: the characters of a secret-like run (``leaks.RUN_CHARS``): letters, digits, ``_-.+/=~``
RUN_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.+/=~")


def _set_bytes(items: list[tuple[object, object]]) -> set[int] | None:
    """The bytes an ``IN`` item matches, or None when it is not a plain set."""
    from re import _constants as C  # type: ignore[attr-defined]

    out: set[int] = set()
    for op, a in items:
        if op is C.LITERAL:
            out.add(a)  # type: ignore[arg-type]
        elif op is C.RANGE:
            lo, hi = a  # type: ignore[misc]
            out.update(range(lo, hi + 1))
        elif op is C.CATEGORY and a is C.CATEGORY_DIGIT:
            out.update(b"0123456789")
        elif op is C.CATEGORY and a is C.CATEGORY_WORD:
            out.update(RUN_CHARS - set(b"-.+/=~"))
        else:
            return None
    return out


def _in_run(chars: set[int], icase: bool) -> bool:
    if not chars <= RUN_CHARS:
        return False
    return not icase or all(ord(chr(c).swapcase()) in RUN_CHARS for c in chars if c < 128)


def _item(op: object, av: object, icase: bool) -> tuple[bool, int, int]:
    """(matches only run characters, least width, least run it surely holds)."""
    from re import _constants as C  # type: ignore[attr-defined]

    if op is C.LITERAL:
        ok = _in_run({av}, icase)  # type: ignore[arg-type]
        return ok, 1, int(ok)
    if op is C.IN:
        chars = _set_bytes(av)  # type: ignore[arg-type]
        ok = chars is not None and _in_run(chars, icase)
        return ok, 1, int(ok)
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
        lo, _hi, sub = av  # type: ignore[misc]
        ok, w, g = _seq(list(sub), icase)
        if ok:
            return True, lo * w, lo * w
        return False, 0, g if lo >= 1 else 0
    if op is C.SUBPATTERN:
        _gid, add, dele, sub = av  # type: ignore[misc]
        ic = (icase or bool(add & re.I)) and not dele & re.I
        return _seq(list(sub), ic)
    if op is C.BRANCH:
        res = [_seq(list(b), icase) for b in av[1]]  # type: ignore[index]
        if all(r[0] for r in res):
            w = min(r[1] for r in res)
            return True, w, w
        return False, 0, min(r[2] for r in res)
    if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
        return True, 0, 0  # zero width
    return False, 0, 0


def _seq(items: list[tuple[object, object]], icase: bool) -> tuple[bool, int, int]:
    all_run, run, best, width = True, 0, 0, 0
    for op, av in items:
        ok, w, g = _item(op, av, icase)
        best = max(best, g)
        if ok:
            run += w
            width += w
        else:
            all_run = False
            best = max(best, run)
            run = 0
    return all_run, width, max(best, run)


def _lead_item(op: object, av: object, icase: bool) -> int:
    """The least number of run characters every match of one item starts with."""
    from re import _constants as C  # type: ignore[attr-defined]

    ok, w, _ = _item(op, av, icase)
    if ok:
        return w
    if op is C.SUBPATTERN:
        _gid, add, dele, sub = av  # type: ignore[misc]
        ic = (icase or bool(add & re.I)) and not dele & re.I
        return _lead_seq(list(sub), ic)
    if op is C.BRANCH:
        return min(_lead_seq(list(b), icase) for b in av[1])  # type: ignore[index]
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT) and av[0] >= 1:  # type: ignore[index]
        return _lead_seq(list(av[2]), icase)  # type: ignore[index]
    return 0


def _lead_seq(items: list[tuple[object, object]], icase: bool) -> int:
    lead = 0
    for op, av in items:
        ok, w, _ = _item(op, av, icase)
        if not ok:
            return lead + _lead_item(op, av, icase)
        lead += w
    return lead


def _expand(op: object, av: object, icase: bool) -> set[str] | None:
    """Every string a fixed-text item can match (lowercased), or None when it is not one
    of few fixed strings."""
    from re import _constants as C  # type: ignore[attr-defined]

    if op is C.LITERAL:
        return {chr(av).lower()}  # type: ignore[arg-type]
    if op is C.IN:
        chars = _set_bytes(av)  # type: ignore[arg-type]
        if chars is None or len({chr(c).lower() for c in chars}) > 8:
            return None
        return {chr(c).lower() for c in chars}
    if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
        return {""}
    if op is C.SUBPATTERN:
        return _expand_seq(list(av[3]))  # type: ignore[index]
    if op is C.BRANCH:
        out: set[str] = set()
        for alt in av[1]:  # type: ignore[index]
            sub = _expand_seq(list(alt))
            if sub is None:
                return None
            out |= sub
        return out if len(out) <= 256 else None
    if op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[0] == 0 and av[1] == 1:  # type: ignore[index]
        sub = _expand_seq(list(av[2]))  # type: ignore[index]
        return None if sub is None else {""} | sub
    if op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[0] == av[1] and av[0] <= 4:  # type: ignore[index]
        sub = _expand_seq(list(av[2]))  # type: ignore[index]
        if sub is None:
            return None
        res = {""}
        for _ in range(av[0]):  # type: ignore[index]
            res = {a + b for a in res for b in sub}
        return res if len(res) <= 256 else None
    return None


def _expand_seq(items: list[tuple[object, object]]) -> set[str] | None:
    res = {""}
    for op, av in items:
        sub = _expand(op, av, False)
        if sub is None:
            return None
        res = {a + b for a in res for b in sub}
        if len(res) > 256:
            return None
    return res


def _prefixes(op: object, av: object) -> set[str] | None:
    """Fixed texts one of which every match of the item starts with (lowercased), or None."""
    from re import _constants as C  # type: ignore[attr-defined]

    full = _expand(op, av, False)
    if full is not None:
        return full
    if op is C.SUBPATTERN:
        return fixed_prefixes(list(av[3]))  # type: ignore[index]
    if op is C.BRANCH:
        out: set[str] = set()
        for alt in av[1]:  # type: ignore[index]
            sub = fixed_prefixes(list(alt))
            if sub is None:
                return None
            out |= sub
        return out if len(out) <= 256 else None
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT) and av[0] >= 1:  # type: ignore[index]
        return fixed_prefixes(list(av[2]))  # type: ignore[index]
    return None


def fixed_prefixes(items: list[tuple[object, object]]) -> set[str] | None:
    """Fixed texts (lowercased) one of which every match of the parsed sequence ``items``
    starts with ({""} when none is known), or None when there would be over 256."""
    res = {""}
    for op, av in items:
        sub = _expand(op, av, False)
        if sub is None:
            heads = _prefixes(op, av)
            if heads is None:
                return res
            res = {a + b for a in res for b in heads}
            return res if len(res) <= 256 else None
        res = {a + b for a in res for b in sub}
        if len(res) > 256:
            return None
    return res


def _holds_keyword(items: list[tuple[object, object]], kws: tuple[str, ...]) -> bool:
    """True when every match of the sequence ``items`` holds one of ``kws``: a stretch of
    fixed-text items every expansion of which holds a keyword, or an item that must match
    (a group, every branch of an alternation, a repeat of at least one) that does."""
    from re import _constants as C  # type: ignore[attr-defined]

    def good(strings: set[str]) -> bool:
        return bool(strings) and all(any(k in s for k in kws) for s in strings)

    cur: set[str] | None = {""}
    for op, av in items:
        sub = _expand(op, av, False)
        if sub is not None and cur is not None:
            cur = {a + b for a in cur for b in sub}
            if len(cur) > 256:
                cur = None
            elif good(cur):
                return True
            continue
        if sub is None and cur is not None:
            # the fixed text so far, then each way the item can start
            heads = _prefixes(op, av)
            if heads is not None and good({a + b for a in cur for b in heads}):
                return True
        cur = {""} if sub is None else sub
        if op is C.SUBPATTERN and _holds_keyword(list(av[3]), kws):  # type: ignore[index]
            return True
        if op is C.BRANCH and all(_holds_keyword(list(b), kws) for b in av[1]):  # type: ignore[index]
            return True
        if (
            op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT)
            and av[0] >= 1  # type: ignore[index]
            and _holds_keyword(list(av[2]), kws)  # type: ignore[index]
        ):
            return True
    return cur is not None and good(cur)


def keyword_in_match(py: str, keywords: tuple[str, ...]) -> bool:
    """True when every match of the Python regex ``py`` holds one of ``keywords``
    (lowercase; from the parsed pattern, False when it cannot tell)."""
    from re import _parser  # type: ignore[attr-defined]

    return bool(keywords) and _holds_keyword(list(_parser.parse(py, re.ASCII)), keywords)


def max_width(py: str) -> int:
    """The most characters a match of the Python regex ``py`` can span; 0 when unbounded
    or over 4,096."""
    from re import _parser  # type: ignore[attr-defined]

    hi = int(_parser.parse(py, re.ASCII).getwidth()[1])
    return hi if hi <= 4096 else 0


def starts(py: str) -> tuple[str, ...]:
    """The fixed texts (lowercased, sorted) one of which every match of the Python regex
    ``py`` starts with, at most 16 of them and none empty; ``()`` when not known."""
    from re import _parser  # type: ignore[attr-defined]

    heads = fixed_prefixes(list(_parser.parse(py, re.ASCII)))
    if heads is None or "" in heads or len(heads) > 16:
        return ()
    return tuple(sorted(heads))


def run_length(py: str) -> int:
    """The length of the longest run of :data:`RUN_CHARS` that every match of the Python
    regex ``py`` holds (a lower bound, from the parsed pattern: 0 when unknown)."""
    from re import _parser  # type: ignore[attr-defined]

    tree = _parser.parse(py, re.ASCII)
    return _seq(list(tree), bool(tree.state.flags & re.I))[2]


def lead_run(py: str) -> int:
    """The least number of :data:`RUN_CHARS` every match of the Python regex ``py``
    starts with, one after the other (a lower bound from the parsed pattern: 0 when
    unknown). A rule whose lead is at least ``leaks.RUN_MIN`` starts inside a run."""
    from re import _parser  # type: ignore[attr-defined]

    tree = _parser.parse(py, re.ASCII)
    return _lead_seq(list(tree), bool(tree.state.flags & re.I))


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


def _with_shape(rule: tuple[object, ...]) -> tuple[object, ...]:
    """``rule`` with the numbers read from its parsed regex appended: the longest run of
    run characters every match holds, the run characters every match starts with, the
    most characters a match can span, whether every match holds a keyword, and the fixed
    texts one of which every match starts with."""
    source = str(rule[1])
    return (
        *rule,
        run_length(source),
        lead_run(source),
        max_width(source),
        keyword_in_match(source, rule[2]),  # type: ignore[arg-type]
        starts(source),
    )


#: the tables made from the rows at import, by a loop over them
_DERIVED = [
    "#: rule id -> the longest run of letters, digits and _-.+/=~ every match holds",
    "RUN_LENGTH = {r[0]: r[7] for r in RULES}",
    "#: rule id -> the run characters every match starts with, one after the other"
    " (rules with none left out)",
    "LEAD_RUN = {r[0]: r[8] for r in RULES if r[8]}",
    "#: rule id -> the most characters a match can span (0: unbounded or over 4,096)",
    "MAX_WIDTH = {r[0]: r[9] for r in RULES}",
    "#: rules every match of which holds one of their keywords (from each parsed regex)",
    "KEYWORD_IN_MATCH = tuple(r[0] for r in RULES if r[10])",
    "#: rule id -> the fixed texts (lowercased) one of which every match starts with",
    "STARTS = {r[0]: r[11] for r in RULES if r[11]}",
    "#: rules with a path condition: applied only to text whose file path matches",
    "PATH_ONLY = tuple(r[0] for r in RULES if r[6] is not None)",
]


def build(source: Path) -> str:
    conf = tomllib.loads((source / "gitleaks.toml").read_text(encoding="utf-8"))
    licence = (source / "LICENSE").read_text(encoding="utf-8").strip()
    rules: list[tuple[object, ...]] = []
    untranslated: list[tuple[str, str]] = []
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
        rule = (
            rid,
            py,
            tuple(k.lower() for k in r.get("keywords", [])),
            float(r.get("entropy", 0.0)),
            int(r.get("secretGroup", 0)),
            allows,
            path,
        )
        rules.append(_with_shape(rule))
    g = conf.get("allowlist", {})
    glob_regexes = tuple(translate(x) for x in g.get("regexes", []))
    glob_stop = tuple(s.lower() for s in g.get("stopwords", []))

    lines = [
        '"""gitleaks\' default rules, translated to Python ``re``: GENERATED, do not edit.',
        "",
        "Regenerate with ``python scripts/gen_gitleaks_rules.py`` (see docs/sanitizer.md).",
        f"Source: gitleaks.toml, {conf.get('title', '')!s}, minVersion {conf.get('minVersion')}.",
        "",
        "Each rule: (id, regex, keywords, entropy, secret_group, allowlists, path, then the",
        "numbers read from its parsed regex: run_length, lead_run, max_width,",
        "keyword_in_match, starts); the tables below ``RULES`` are made from them.",
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
    lines.extend(_DERIVED)
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
        return (0 if same else 1) | _fallback(check=True)
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")
    return _fallback(check=False)


def _fallback(check: bool) -> int:
    """The hook's fallback prefixes, generated from the module just written (one command
    regenerates both): see scripts/gen_hook_fallback.py."""
    sys.path.insert(0, str(REPO / "scripts"))
    import gen_hook_fallback

    old = gen_hook_fallback.HOOKLIB.read_text(encoding="utf-8")
    new = gen_hook_fallback.render(old)
    if check:
        print("up to date" if new == old else f"{gen_hook_fallback.HOOKLIB} is stale")
        return 0 if new == old else 1
    gen_hook_fallback.HOOKLIB.write_text(new, encoding="utf-8")
    print(f"wrote {gen_hook_fallback.HOOKLIB}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
