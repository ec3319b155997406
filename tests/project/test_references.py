"""What code and tests cite resolves inside the repository: no issue numbers (they point
into a tracker a reader of the code does not have), every case id a test or module names
is listed in ``tests/CASES.md``, and every invariant number cited is one of the numbered
invariants in ``docs/architecture.md``."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the folders whose Python files are read
CODE = ("wiki_memory", "hooks", "tests", "bench")
ISSUE = re.compile(r"\bissues? #?\d+", re.IGNORECASE)
CASE = re.compile(r"\bC\d{2}\b")
INVARIANT = re.compile(r"\binvariants? (\d+(?:(?:, | and )\d+)*)", re.IGNORECASE)


def _sources() -> list[Path]:
    return sorted(p for d in CODE for p in (ROOT / d).rglob("*.py") if "__pycache__" not in p.parts)


def test_no_issue_numbers_in_code_or_tests() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{n}: {ln.strip()[:100]}"
        for p in _sources()
        for n, ln in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if ISSUE.search(ln)
    ]
    assert not found, "say what the work is, not its issue number:\n" + "\n".join(found)


def test_every_cited_case_is_listed() -> None:
    listed = set(re.findall(r"^\| (C\d{2}) \|", (ROOT / "tests" / "CASES.md").read_text(), re.M))
    assert len(listed) > 30  # the table was read
    missing = {
        f"{c} ({p.relative_to(ROOT)})"
        for p in _sources()
        for c in CASE.findall(p.read_text(encoding="utf-8"))
        if c not in listed
    }
    assert not missing, "add a line to tests/CASES.md for: " + ", ".join(sorted(missing))


def test_every_cited_invariant_is_in_the_architecture_page() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text()
    section = doc.split("## The invariants the code cites", 1)[1].split("\n## ", 1)[0]
    numbered = {int(n) for n in re.findall(r"^(\d+)\. \*\*", section, re.M)}
    assert numbered == set(range(1, len(numbered) + 1)) and len(numbered) >= 15
    cited: dict[int, str] = {}
    for p in _sources():
        for m in INVARIANT.finditer(p.read_text(encoding="utf-8")):
            for n in re.findall(r"\d+", m.group(1)):
                cited.setdefault(int(n), str(p.relative_to(ROOT)))
    assert cited, "no citation found: the pattern no longer matches how code cites"
    unknown = {n: where for n, where in cited.items() if n not in numbered}
    assert not unknown, f"cited invariants missing from docs/architecture.md: {unknown}"


def test_no_private_name_is_imported_across_modules() -> None:
    """A name that starts with one underscore belongs to its module: another module (or
    a test) that needs it gets a public name, so a reader can tell a module's API from its
    insides."""
    import ast

    found = []
    for p in _sources():
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("wiki_memory"):
                found += [
                    f"{p.relative_to(ROOT)}:{node.lineno}: {a.name} from {node.module}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert not found, "\n".join(found)
