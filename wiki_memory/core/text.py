"""Pure markdown text helpers the core shares (no I/O, no state).

Owns :func:`replace_section`: the splice of one level-2 section's body, used by the
session pages (a recompile rewrites the server's own sections) and by handoffs
(``complete`` with a note writes ``## Outcome``). Imports nothing of the package, so any
core module may use it without an import cycle.
"""

from __future__ import annotations


def replace_section(text: str, heading: str, content: str) -> str:
    """Replace the body of the level-2 section ``## heading`` (up to the next level-1/2
    heading) with ``content``; append the section when it is missing."""
    lines = text.split("\n")
    start = None
    for i, ln in enumerate(lines):
        if ln.rstrip("\r") == f"## {heading}":
            start = i
            break
    if start is None:
        return text.rstrip("\n") + f"\n\n## {heading}\n\n{content}\n"
    end = len(lines)
    fence_char = ""
    fence_len = 0
    for j in range(start + 1, len(lines)):
        s = lines[j]
        stripped = s.lstrip()
        run = len(stripped) - len(stripped.lstrip(stripped[:1])) if stripped[:1] in "`~" else 0
        if run >= 3:
            if not fence_char:
                fence_char, fence_len = stripped[0], run
            elif stripped[0] == fence_char and run >= fence_len and not stripped[run:].strip():
                fence_char = ""
            continue
        if not fence_char and (s.startswith("# ") or s.startswith("## ")):
            end = j
            break
    new = lines[: start + 1] + ["", *content.split("\n"), ""] + lines[end:]
    return "\n".join(new)
