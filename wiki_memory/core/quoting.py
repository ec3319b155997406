"""Quoting that stored text cannot forge: the one rule for every face that shows memory
as text (the brief, MCP's text parts, the CLI's tables, the web's titles and snippets).

Whatever the wiki holds is data. Where it is shown inside a frame (a ``> `` quote in the
brief, a backtick fence in MCP, a column of a table), nothing in it may end that frame
or pass for the frame's own words:

- :func:`show` writes every invisible or layout character as a visible ``<U+XXXX>``:
  control characters (C0, C1, DEL; tab and newline only where a block keeps its lines),
  format characters (bidi overrides and isolates such as U+202E, zero-width spaces and
  joiners, the BOM, soft hyphen, tag characters), the line and paragraph separators
  U+2028/U+2029, private-use and surrogate code points, and the Hangul fillers that draw
  as blanks. A lone CR or a U+2028 therefore cannot start a new line.
- :func:`inline` is one value on one line (a title, a tag, a user name, a path, an
  anchor): :func:`show` with newlines and tabs escaped too. :func:`qt` quotes such a value
  as a JSON string (``"..."``, with ``\\"`` and ``\\\\`` inside) so a title cannot close its
  quotes and add words that look like the line's own (``" · SUPERSEDED by ...``).
- :func:`quote_lines` splits a body into lines (CRLF and LF only; every other break shows
  escaped) and escapes a line that would read as a heading, a fence, a setext underline
  or a block quote marker of the frame: a backslash goes before its first mark
  (``\\# Rules``, ``\\```python``), which markdown shows as the mark itself.

HTTP's JSON replies carry the stored text unchanged: a JSON string cannot end its own
quotes, and a client may need the exact bytes (``docs/api.md``).
"""

from __future__ import annotations

import json
import re
import unicodedata

__all__ = ["inline", "qt", "quote_lines", "show"]

#: categories shown escaped: control, format, line/paragraph separator, private use, surrogate
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs"})
#: letters that draw as nothing (Hangul fillers)
_BLANK_LETTERS = frozenset({"\u115f", "\u1160", "\u3164", "\uffa0"})
#: a line that markdown reads as a heading, fence, setext underline, thematic break or quote
_FRAME_LINE = re.compile(r"^([ \t]*)(#|`{3,}|~{3,}|>|=+[ \t]*$|-{3,}[ \t]*$|\*{3,}[ \t]*$)")


def _escape(ch: str) -> str:
    return f"<U+{ord(ch):04X}>"


def show(text: str, keep: str = "") -> str:
    """``text`` with every invisible or layout character (see the module) written as
    ``<U+XXXX>``, except the characters of ``keep`` (e.g. ``"\\t"``). Printable text,
    spaces of every script (U+3000 included) and emoji are unchanged."""
    if text.isprintable() and not _BLANK_LETTERS.intersection(text):
        return text
    out = []
    for ch in text:
        if ch in keep or ch == " ":
            out.append(ch)
        elif ch in _BLANK_LETTERS or unicodedata.category(ch) in _HIDDEN:
            out.append(_escape(ch))
        else:
            out.append(ch)
    return "".join(out)


def inline(value: object) -> str:
    """One value on one line: ``str(value)`` with every line break, tab and invisible
    character shown escaped (``None`` gives ``""``)."""
    return "" if value is None else show(str(value))


def qt(value: object) -> str:
    """``value`` as a quoted one-line string: ``"..."`` with :func:`inline`'s escapes and
    ``"`` and ``\\`` escaped as in JSON (``None`` gives ``""`` quoted)."""
    return json.dumps(inline(value), ensure_ascii=False)


def quote_lines(text: str) -> list[str]:
    """``text`` as the lines a frame may show: split at LF (a CRLF counts as one), each
    line through :func:`show` (tabs kept), and a backslash before the first mark of a line
    markdown would read as a heading, fence, setext underline, thematic break or block
    quote. An empty text gives ``[""]``."""
    out = []
    for line in text.replace("\r\n", "\n").split("\n"):
        line = show(line, keep="\t")
        m = _FRAME_LINE.match(line)
        if m:
            line = m.group(1) + "\\" + line[len(m.group(1)) :]
        out.append(line)
    return out
