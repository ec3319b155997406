"""Guard rail of the package's layout (docs/architecture.md, "Module size"): no module
of ``wiki_memory`` or ``hooks`` is longer than 600 lines unless its docstring says why within its
first lines, and at most three modules carry such a reason, so that a large module stays
an exception that someone chose, not a file that grew."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the folders whose modules are measured: the package and the hook (stdlib only)
FOLDERS = ("wiki_memory", "hooks")

#: policy (issue "The house"): the most lines a module has without a stated reason
MAX_LINES = 600
#: policy: how many modules may state a reason to be longer
MAX_REASONED = 3
#: the phrase that states the reason, within the first lines of the module
REASON = "Over 600 lines on purpose:"
FIRST_LINES = 8


def sizes() -> dict[str, tuple[int, bool]]:
    """Module path -> (lines, states a reason in its first lines)."""
    out = {}
    for path in sorted(p for d in FOLDERS for p in (ROOT / d).rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        head = " ".join(lines[:FIRST_LINES])
        out[str(path.relative_to(ROOT))] = (len(lines), REASON in head)
    return out


def test_no_module_is_longer_than_600_lines_without_a_reason() -> None:
    long = {p: n for p, (n, why) in sizes().items() if n > MAX_LINES and not why}
    assert long == {}, f"split these, or say why in their first lines: {long}"


def test_at_most_three_modules_give_a_reason_to_be_long() -> None:
    # the hook is one file by design (its reason: one import under ``python -S``)
    reasoned = sorted(p for p, (_, why) in sizes().items() if why and p.startswith("wiki_memory"))
    assert len(reasoned) <= MAX_REASONED, reasoned
