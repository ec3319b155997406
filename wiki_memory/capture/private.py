"""``<private>…</private>``: text a person marks as never to be kept.

Standard library only and cheap to import: the hook program loads this same module
(``hooks/wiki_memory_hooklib.py``) and removes private spans before anything is written
to its outbox; the server removes them again when it accepts an event (it never trusts
a hook to have done it), before redaction and before any truncation.

The rule, on every string of an event (dict keys included):

- ``<private>`` opens a span and ``</private>`` closes it; tags are matched
  case-insensitively, with optional spaces inside the brackets (``< private >``,
  ``</ PRIVATE>``);
- spans nest: the text up to the close tag matching the outermost open tag goes;
- an open tag that is never closed hides everything to the end of that string;
- a close tag with no open tag before it is dropped (it hides nothing);
- each removed span becomes :data:`MARK`, so a reader sees that something was there.
"""

from __future__ import annotations

import re
from typing import Any

#: What replaces each removed span.
MARK = "[private]"

_TAG_RE = re.compile(r"<\s*(/?)\s*private\s*>", re.I)
#: a JSON escape of an ASCII letter (``\u0070`` is ``p``): it could spell ``private``
_ESCAPED_LETTER_RE = re.compile(rb"\\u00[4-7]")


def strip_private(text: str) -> str:
    """``text`` without its private spans (see the module docstring); unchanged when it
    holds no ``private`` tag. Linear in the length of ``text``."""
    if "private" not in text.lower():
        return text
    out: list[str] = []
    depth = 0
    pos = 0
    for m in _TAG_RE.finditer(text):
        closing = m.group(1) == "/"
        if depth == 0:
            out.append(text[pos : m.start()])
            if closing:
                pos = m.end()  # a stray close tag: dropped
                continue
            out.append(MARK)
            depth = 1
        elif closing:
            depth -= 1
        else:
            depth += 1
        pos = m.end()
    if depth == 0:
        out.append(text[pos:])
    return "".join(out)


def may_hold_private(raw: bytes) -> bool:
    """Whether some string of the JSON text ``raw`` may hold a private tag: False only
    when ``raw`` holds neither ``private`` (ASCII, any case) nor a ``\\u`` escape of an
    ASCII letter. Then :func:`strip_private` leaves every string of it unchanged (no
    other character lowercases into those letters; ``İ`` lowercases to ``i`` and a
    combining dot), and a caller may skip :func:`strip_private_obj`. Linear in
    ``len(raw)``, in C."""
    return b"private" in raw.lower() or _ESCAPED_LETTER_RE.search(raw) is not None


def strip_private_obj(obj: Any) -> tuple[Any, int]:
    """A copy of a JSON value with :func:`strip_private` applied to every string (dict
    keys included): ``(copy, number of strings changed)``. Other values are kept."""
    changed = 0

    def walk(o: Any) -> Any:
        nonlocal changed
        if isinstance(o, str):
            s = strip_private(o)
            if s != o:
                changed += 1
            return s
        if isinstance(o, dict):
            return {(walk(k) if isinstance(k, str) else k): walk(v) for k, v in o.items()}
        if isinstance(o, list | tuple):
            return [walk(x) for x in o]
        return o

    return walk(obj), changed


__all__ = ["MARK", "may_hold_private", "strip_private", "strip_private_obj"]
