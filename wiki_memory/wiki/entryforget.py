"""One forgotten timeline entry of a session page (docs/knowledge.md, "Forget one
timeline entry").

A forgotten entry keeps its place and its block id, so a link to ``page#^tN`` still
lands on it, but its text becomes one stub line::

    **14:03** · forgotten entry `3f9a0c1d2b4e5f60`

    ^t7

The code is the first 16 hex digits of the sha256 of what the entry held (its text
without the block id line, as :mod:`wiki_memory.wiki.sessionmerge` keys entries), so
the stub names which entry it replaced without holding any of it: the compiler renders
the stub again for every later compile of the session (the block ids are recorded in the
session's spool state, ``forgotten_entries``), and a merge with another replica's
version of the page replaces that replica's copy of the entry by the stub.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from wiki_memory.errors import NotFound
from wiki_memory.wiki.frontmatter import FrontmatterError, set_keys
from wiki_memory.wiki.page import parse_metadata
from wiki_memory.wiki.timelinemarks import ENTRY_ID_RE, ENTRY_LINE_RE, TIMELINE_HEADING

__all__ = [
    "entry_hash",
    "is_stub",
    "parse_anchor",
    "scrub_head",
    "stub_entry",
    "stub_hashes",
    "stub_text",
]

_STUB = re.compile(r"^\S.* · forgotten entry `([0-9a-f]{16})`$")


def parse_anchor(path: str) -> tuple[str, str | None]:
    """``"sessions/x.md#^t7"`` → ``("sessions/x.md", "t7")``; a path without ``#``
    → ``(path, None)``. Raises NotFound for an anchor that names no timeline entry
    (``#Heading``, ``#^abc``): only a session's entries are forgotten one by one."""
    if "#" not in path:
        return path, None
    rel, _, frag = path.partition("#")
    block = frag.removeprefix("^")
    if not frag.startswith("^") or not ENTRY_ID_RE.fullmatch(block):
        raise NotFound(f"no timeline entry {frag!r} on {rel}: name one as {rel}#^tN")
    return rel, block


def entry_hash(key: str) -> str:
    """The code a stub carries for an entry whose text (without its block id line,
    surrounding blank lines stripped) is ``key``: 16 hex digits of its sha256."""
    return hashlib.sha256(key.strip().encode("utf-8", "surrogateescape")).hexdigest()[:16]


def stub_text(first_line: str, code: str) -> str:
    """The stub of an entry whose first line is ``first_line`` (its clock is kept, so
    the timeline keeps its order) and whose :func:`entry_hash` is ``code``."""
    clock = first_line.split(" · ", 1)[0].strip() or "**?**"
    return f"{clock} · forgotten entry `{code}`"


def is_stub(key: str) -> str | None:
    """The code of a stub entry's text ``key``; None when ``key`` is not a stub."""
    m = _STUB.match(key.strip())
    return m.group(1) if m else None


def stub_hashes(keys: Iterable[str]) -> set[str]:
    """The codes of the stubs among entry texts ``keys``."""
    return {c for c in (is_stub(k) for k in keys) if c is not None}


def _entries(lines: list[str]) -> tuple[int, list[tuple[int, int, str]]]:
    """Where the timeline starts, and each entry as ``(first line, block id line, id)``
    (the first line is the one after the previous entry's block id line)."""
    at = next((i for i, x in enumerate(lines) if x.rstrip() == TIMELINE_HEADING), None)
    if at is None:
        return len(lines), []
    out: list[tuple[int, int, str]] = []
    start = at + 1
    for i in range(at + 1, len(lines)):
        m = ENTRY_LINE_RE.match(lines[i].rstrip("\r\n"))
        if m:
            out.append((start, i, m.group(1)))
            start = i + 1
    return at, out


def stub_entry(text: str, block: str) -> tuple[str, str, str]:
    """``text`` (a session page) with entry ``block`` replaced by its stub.

    Returns ``(new text, code, the entry's old text)``; the text itself, unchanged, when
    the entry is a stub already. Raises NotFound when the page has no entry ``block``."""
    lines = text.splitlines(keepends=True)
    _, entries = _entries(lines)
    for first, last, bid in entries:
        if bid != block:
            continue
        key = "".join(lines[first:last]).strip()
        if is_stub(key) is not None:
            return text, is_stub(key) or "", ""
        code = entry_hash(key)
        eol = "\r\n" if lines[last].endswith("\r\n") else "\n"
        head = key.splitlines()[0] if key else ""
        stub = [eol, stub_text(head, code) + eol, eol]
        return "".join(lines[:first] + stub + lines[last:]), code, key
    raise NotFound(f"no timeline entry ^{block} on this page")


def _words(s: str) -> str:
    return " ".join(s.split())


def _probe(old: str) -> str:
    """The first 40 characters of an entry's verbatim lines (inside its fences), joined
    into one line: what a summary line or a title quoting the entry holds."""
    body = [x for x in old.splitlines() if x and not x.startswith(("```", "~~~", "**"))]
    probe = _words(" ".join(body))[:40]
    return probe if len(probe) >= 8 else ""


def scrub_head(text: str, old: str) -> str:
    """``text`` without the head lines (the ``# title`` and the summary's list items)
    that quote the forgotten entry's text ``old`` (:func:`_probe`), and with a
    frontmatter ``title`` that quotes it replaced by ``Session <session_id>``. Used when
    no spool can compile the page again (the compile extracts a summary without it)."""
    probe = _probe(old)
    if not probe:
        return text
    text = _scrub_title(text, probe)
    lines = text.splitlines(keepends=True)
    at, _ = _entries(lines)
    kept = [
        x
        for i, x in enumerate(lines)
        if i >= at or not x.startswith(("# ", "- **")) or probe not in _words(x)
    ]
    return "".join(kept)


def _scrub_title(text: str, probe: str) -> str:
    raw = text.encode("utf-8", "surrogateescape")
    meta = parse_metadata(raw)
    if probe not in _words(str(meta.get("title") or "")):
        return text
    title = f"Session {str(meta.get('session_id') or '')[:24]}".strip()
    try:
        raw = set_keys(raw, {"title": title})
    except FrontmatterError:
        return text
    return raw.decode("utf-8", "surrogateescape")
