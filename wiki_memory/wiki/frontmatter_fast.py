"""A frontmatter YAML reads without the YAML library when it is a flat list of simple
keys (docs/pages.md, "Frontmatter"): what the compiler writes on topic and many note
pages (``type: topic``, ``title: "Fri"``, ``tags: [topic]``). A reindex reads the
frontmatter of every page; for these the library's constructor was most of a page's
parse time.

:func:`simple_mapping` answers only where the YAML reading is certain and the same as
:func:`wiki_memory.wiki.frontmatter_read.load_yaml`'s: every line ``key: value`` at
column 0, each key once, a value a plain text starting with a letter that YAML reads as
text (never a bool or null word), a quoted text without escapes, a flow list of such
words, or nothing (null). Anything else (numbers, dates, blocks, comments, anchors,
escapes) returns None and the YAML library reads it, and so does any text holding a
character that is not printable (controls, DEL, C1 controls, NEL, non-breaking and other
spaces than the ASCII one, surrogates, non-characters: YAML refuses or folds some of them)
or a key longer than :data:`MAX_KEY` characters (YAML's limit for a simple key is 1024).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["simple_mapping"]

_KEY = r"[A-Za-z_][A-Za-z0-9_-]*"
_PLAIN = r"[A-Za-z][A-Za-z0-9_ ./()+&-]*"
_LINE = re.compile(
    rf"({_KEY}):(?:[ \t]+(?:\"([^\"\\\n]*)\"|'([^'\n]*)'|\[([A-Za-z0-9_ ,.-]*)\]|({_PLAIN})))?[ \t]*"
)
MAX_KEY = 128
"""Longest key read here; longer ones go to the library."""
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")
#: plain words YAML 1.1 (PyYAML's resolver) reads as a bool or null, not as text
_NOT_TEXT = frozenset(
    "y Y yes Yes YES n N no No NO true True TRUE false False FALSE on On ON off Off OFF "
    "null Null NULL".split()
)


def simple_mapping(text: str) -> dict[str, Any] | None:
    """The mapping the YAML ``text`` holds when it is of the simple form the module
    describes (a dict of str to str, None or list of str), else None."""
    if not text.replace("\n", "").replace("\t", " ").isprintable():
        return None
    out: dict[str, Any] = {}
    for line in text.split("\n"):
        if not line or line.isspace():
            continue
        m = _LINE.fullmatch(line)
        if m is None:
            return None
        key = m.group(1)
        if key in out or key in _NOT_TEXT or len(key) > MAX_KEY:
            return None
        dq, sq, flow, plain = m.group(2, 3, 4, 5)
        if dq is not None:
            out[key] = dq
        elif sq is not None:
            out[key] = sq
        elif flow is not None:
            items = [w.strip() for w in flow.split(",")]
            if items == [""]:
                out[key] = []
                continue
            if any(not _WORD.fullmatch(w) or w in _NOT_TEXT for w in items):
                return None
            out[key] = items
        elif plain is not None:
            value = plain.rstrip()
            if value in _NOT_TEXT:
                return None
            out[key] = value
        else:
            out[key] = None
    return out or None
