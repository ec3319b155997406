"""Captured text as a session page holds it: control characters shown, never raw; long
output cut to its head and tail; verbatim text in tilde fences; titles cut at a word;
ASCII slugs. Used by the session compiler (:mod:`wiki_memory.wiki.compiler`)."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

_SLUG_RE = re.compile(r"[^a-z0-9]+")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape_controls(text: str) -> str:
    """``text`` with every control character but tab and newline written visibly as
    ``\\xNN`` (NUL → ``\\x00``; a CR of a CRLF pair is dropped), so a page built from
    captured text is never binary for git or an editor."""
    if not _CONTROL.search(text):
        return text
    text = text.replace("\r\n", "\n")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def escape_value(value: Any) -> Any:
    if isinstance(value, str):
        return escape_controls(value)
    if isinstance(value, list):
        return [escape_value(v) for v in value]
    return value


def slugify(text: str, max_len: int = 40) -> str:
    """ASCII slug of ``text`` for file names (``"Fix the login"`` → ``"fix-the-login"``)."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    slug = _SLUG_RE.sub("-", folded).strip("-")
    if len(slug) > max_len:
        slug = slug[:max_len].rsplit("-", 1)[0] or slug[:max_len]
    return slug or "session"


def cut_words(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a word boundary, with ``…`` when
    cut (a single word longer than ``limit`` is cut inside it)."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    at = cut.rfind(" ")
    if at > limit // 3:
        cut = cut[:at]
    return cut.rstrip(" ,;:.-") + "…"


def clip_bytes(text: str, limit: int) -> str:
    """At most about ``limit`` UTF-8 bytes of ``text``: its head (two fifths) and its tail
    (three fifths, where build and test errors are), each cut at a line break when one
    is near and never inside a character, joined by a marker line that says how many
    bytes were left out: ``[… 168,214 bytes cut …]``."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    head_n = limit * 2 // 5
    tail_n = limit - head_n
    head = data[:head_n]
    nl = head.rfind(b"\n")
    if nl > head_n // 2:
        head = head[: nl + 1]
    tail = data[len(data) - tail_n :]
    nl = tail.find(b"\n")
    if 0 <= nl < tail_n // 2:
        tail = tail[nl + 1 :]
    cut = len(data) - len(head) - len(tail)
    h = head.decode("utf-8", errors="ignore").rstrip("\n")
    t = tail.decode("utf-8", errors="ignore")
    # the hook's own cut marker inside what is cut here: say the whole, not just our part
    hook = _HOOK_CUT.search(data, len(head), len(data) - len(tail))
    if hook is not None:
        left, total = int(hook[1]), int(hook[2])
        return (
            f"{h}\n[… {cut:,} bytes cut here and {left:,} characters by the hook:"
            f" the output was {total:,} characters …]\n{t}"
        )
    return f"{h}\n[… {cut:,} bytes cut …]\n{t}"


#: the hook's marker (hooks/wiki_memory_hooklib.py ``TRUNCATION_MARK``)
_HOOK_CUT = re.compile(
    rb"\[\.\.\. truncated by wiki-memory hook: (\d+) of (\d+) characters left out"
)


def fence(text: str, info: str = "text") -> str:
    """``text`` in a tilde fence longer than any tilde run it contains."""
    longest = max((len(m) for m in re.findall(r"~{3,}", text)), default=2)
    f = "~" * max(4, longest + 1)
    return f"{f}{info}\n{text.rstrip()}\n{f}"
