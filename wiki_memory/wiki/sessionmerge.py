"""Three-way merge of a session page, entry by entry (docs/git.md, "Merging").

A session page (``type: session``, ``wiki/compiler.py``) is a head (title and
``## Summary``) and a ``## Timeline`` of entries, each ending with its block id line
``^tN`` (``^tNr``: the reply carried by the same event as prompt ``N``). When one session
was captured on two replicas, both sides add entries, rewrite the extractive summary and
the owned frontmatter keys (``updated``, ``status``, ``ended``, ...). Merged line by line
that is a true overlap; here it is not:

* **Entries** are matched by what they record: the entry's text without its block id (the
  clock, the kind, the verbatim blocks the compiler wrote for the event). The page carries
  no event id of its own: ``N`` is the arrival number in *one* replica's spool, so two
  replicas give the same number to different events, and only the rendered event says
  which event it is. The merged timeline is the hub's entries in the hub's order, with
  their numbers; this side's entries the hub lacks follow the entry they follow here.
  Those not in the common ancestor (not pushed yet) are numbered after the last number of
  the merged page, or after ``floor`` when that is higher: a long session's parts
  (:mod:`wiki_memory.wiki.sessionparts`) share one numbering, so the tree merge passes the
  session's highest number over all its parts and pages, and a new number is unique
  across the whole session (it may then name another part than the one holding it; expand
  and forget look on every part). An ancestor's entry the hub dropped keeps its number
  when it is free.
  Links to a renumbered entry inside this page (``[[<page>#^tN]]``, ``[[#^tN]]``, a bare
  ``#^tN``) follow; ``moved`` (old -> new) lets the tree merge make this side's other
  pages follow too. Entries are a union: an entry deleted on one side only stays.
* **The head** merges line by line; where both sides rewrote the same summary lines, the
  side whose ``updated`` is later (the hub on a tie) gives the whole head: the summary is
  the server's extract, and the next compile writes it again.
* **Owned frontmatter keys** that both sides set differently (``status``, ``ended``,
  ``title``...) take the later side's value in the same way; lists (``files``, ``tools``,
  ``tags``) merge as sets and times take the later, as on every page.

:func:`merge_session` returns None where this does not apply (not a session page, no
timeline, a version not UTF-8) or a true overlap is left (a hand-written tail changed on
both sides); the caller then merges the page as any other.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wiki_memory.wiki.entryforget import entry_hash, is_stub, stub_hashes, stub_text
from wiki_memory.wiki.frontmatter import FrontmatterError, set_keys
from wiki_memory.wiki.page import parse_metadata
from wiki_memory.wiki.timelinemarks import TIMELINE_HEADING

__all__ = ["merge_session"]

_HEADING = TIMELINE_HEADING.encode()
_BLOCK = re.compile(rb"^\^t(\d+)(r?)[ \t]*(\r?\n)?$")
#: the frontmatter keys the compiler owns that hold one value (lists merge as sets)
_OWNED = (
    "type",
    "id",
    "title",
    "created",
    "updated",
    "project",
    "harness",
    "session_id",
    "user",
    "started",
    "ended",
    "status",
    "continues",
)

Merger = Callable[[bytes, bytes, bytes], "bytes | None"]


@dataclass
class _Entry:
    n: int
    suffix: bytes
    lines: list[bytes]  # from the blank line before it to its block id line

    @property
    def key(self) -> bytes:
        return b"".join(self.lines[:-1]).strip()


@dataclass
class _Page:
    front: bytes
    head: list[bytes]  # up to and including the ``## Timeline`` line
    entries: list[_Entry]
    tail: list[bytes]  # after the last entry


def _parse(raw: bytes, split: Callable[[bytes], tuple[bytes, bytes]]) -> _Page | None:
    front, body = split(raw)
    lines = body.splitlines(keepends=True)
    at = next((i for i, x in enumerate(lines) if x.rstrip() == _HEADING), None)
    if at is None:
        return None
    entries: list[_Entry] = []
    cur: list[bytes] = []
    for line in lines[at + 1 :]:
        cur.append(line)
        m = _BLOCK.match(line)
        if m:
            entries.append(_Entry(int(m.group(1)), m.group(2), cur))
            cur = []
    return _Page(front, lines[: at + 1], entries, cur)


_EMPTY = b"(no events yet)\n"


def _tail(lines: list[bytes]) -> bytes:
    """What follows the last entry, without the line a page with no entry yet holds
    (entries replace it) and without blank lines alone."""
    kept = [x for x in lines if x.rstrip(b"\r\n") != _EMPTY.rstrip(b"\n")]
    return b"".join(kept) if any(x.strip() for x in kept) else b""


def _is_session(front: bytes) -> bool:
    return bool(front) and parse_metadata(front + b"\n").get("type") == "session"


def _updated(front: bytes) -> str:
    v = parse_metadata(front + b"\n").get("updated") if front else None
    return "" if v is None else str(v)


def _links(stem: bytes) -> re.Pattern[bytes]:
    """Links to an entry of the page named ``stem``: ``[[stem#^tN]]`` (with a folder or
    ``.md``), ``[[#^tN]]``, or a bare ``#^tN`` after a space or a line start."""
    name = rb"(?:[^\]|#\n]*/)?" + re.escape(stem) + rb"(?:\.md)?"
    return re.compile(rb"((?:\[\[(?:" + name + rb")?|(?<![^\s(])))#\^t(\d+)")


def _follow(lines: list[bytes], moved: dict[int, int], link: re.Pattern[bytes]) -> list[bytes]:
    def sub(m: re.Match[bytes]) -> bytes:
        n = int(m.group(2))
        return m.group(1) + b"#^t%d" % moved.get(n, n)

    return [link.sub(sub, x) for x in lines]


def _timeline(
    base: _Page | None,
    ours: _Page,
    theirs: _Page,
    moved: dict[int, int],
    stem: bytes,
    floor: int = 0,
) -> list[_Entry]:
    """The merged entries (see the module); ``moved`` filled with this side's renumbering."""
    base_keys = {e.key for e in base.entries} if base else set()
    their_keys = {e.key for e in theirs.entries}
    merged = list(theirs.entries)
    used = {e.n for e in merged} | ({e.n for e in base.entries} if base else set())
    last = max(used | {floor, 0})
    theirs_n = {e.key: e.n for e in theirs.entries}
    mine = [e for e in ours.entries if e.key not in their_keys]
    for e in ours.entries:  # one entry both hold, numbered differently: links follow
        if e.key in theirs_n and theirs_n[e.key] != e.n and not e.suffix:
            moved[e.n] = theirs_n[e.key]
    # numbers first (an entry's reply, ``^tNr``, goes with its prompt's number)
    for e in mine:
        if e.n in moved:
            continue
        if e.key in base_keys and e.n not in {x.n for x in merged}:
            moved[e.n] = e.n
        else:
            last += 1
            moved[e.n] = last
    link = _links(stem)
    placed: dict[bytes, int] = {e.key: i for i, e in enumerate(merged)}
    # this side's entry goes before the next entry it has that the merge holds (after
    # what the hub added at the same place), or at the end
    before = len(merged)
    out: list[list[_Entry]] = [[] for _ in range(len(merged) + 1)]
    for e in reversed(ours.entries):
        if e.key in placed:
            before = placed[e.key]
            continue
        lines = _follow(e.lines, moved, link)
        n = b"^t%d" % e.n
        lines[-1] = b"^t%d" % moved[e.n] + lines[-1][len(n) :]
        out[before].insert(0, _Entry(moved[e.n], e.suffix, lines))
    result: list[_Entry] = []
    for i, e in enumerate(merged):
        result.extend(out[i])
        result.append(e)
    result.extend(out[len(merged)])
    for e in result:  # a last entry without a newline would glue to what follows it
        if not e.lines[-1].endswith(b"\n"):
            e.lines = [*e.lines[:-1], e.lines[-1] + b"\n"]
    return result


def _keep_forgotten(pages: list[_Page], ours: _Page, theirs: _Page) -> None:
    """An entry forgotten on one side (a stub, :mod:`wiki_memory.wiki.entryforget`) is
    a stub on every side: the other side's copy of its text, found by the stub's code,
    is replaced by the same stub, so the merge matches the two and keeps no text."""
    codes = stub_hashes(e.key.decode("utf-8") for p in (ours, theirs) for e in p.entries)
    if not codes:
        return
    for p in pages:
        for e in p.entries:
            key = e.key.decode("utf-8")
            if is_stub(key) is None and (code := entry_hash(key)) in codes:
                first = key.splitlines()[0] if key else ""
                stub = stub_text(first, code).encode("utf-8")
                e.lines = [b"\n", stub + b"\n", b"\n", e.lines[-1]]


def _owned_from(winner: bytes, loser: bytes) -> bytes | None:
    """``loser``'s frontmatter block with the owned keys set to ``winner``'s values."""
    mw, ml = parse_metadata(winner + b"\n"), parse_metadata(loser + b"\n")
    updates: dict[str, Any] = {}
    remove = []
    for k in _OWNED:
        if k in mw and ml.get(k, object()) != mw[k]:
            updates[k] = mw[k]
        elif k not in mw and k in ml:
            remove.append(k)
    try:
        return set_keys(loser, updates, remove=remove) if updates or remove else loser
    except FrontmatterError:
        return None


def merge_session(
    base: bytes | None,
    ours: bytes,
    theirs: bytes,
    moved: dict[int, int],
    *,
    stem: bytes,
    split: Callable[[bytes], tuple[bytes, bytes]],
    merge_front: Merger,
    merge_lines: Merger,
    floor: int = 0,
) -> bytes | None:
    """Merge two versions of one session page from ``base`` (None: added on both sides),
    ``theirs`` the hub's, entry by entry (see the module). ``moved`` is filled with this
    side's renumbered entries (old -> new); ``stem`` is the page's file name without
    ``.md``; ``split``, ``merge_front`` and ``merge_lines`` are the page merge's own
    frontmatter split and merges (:mod:`wiki_memory.wiki.pagemerge`); ``floor`` (>= 0)
    the number new entries are numbered after at least (the session's highest number
    over all its parts). Returns the merged
    bytes, or None where this does not apply or a true overlap remains."""
    try:
        for x in (base or b"", ours, theirs):
            x.decode("utf-8")
    except UnicodeDecodeError:
        return None
    po, pt = _parse(ours, split), _parse(theirs, split)
    if po is None or pt is None or not (_is_session(po.front) and _is_session(pt.front)):
        return None
    pb = _parse(base, split) if base is not None else None
    _keep_forgotten([p for p in (pb, po, pt) if p is not None], po, pt)
    later_theirs = _updated(pt.front) >= _updated(po.front)
    fb = pb.front if pb else b""
    front = merge_front(fb, po.front, pt.front)
    if front is None:
        loser = po.front if later_theirs else pt.front
        winner = pt.front if later_theirs else po.front
        fixed = _owned_from(winner, loser)
        if fixed is None:
            return None
        front = (
            merge_front(fb, fixed, pt.front) if later_theirs else merge_front(fb, po.front, fixed)
        )
        if front is None:
            return None
    hb = b"".join(pb.head) if pb else b""
    head = merge_lines(hb, b"".join(po.head), b"".join(pt.head))
    if head is None:
        head = b"".join(pt.head if later_theirs else po.head)
    tb, to, tt = (_tail(p.tail) if p else b"" for p in (pb, po, pt))
    tail = merge_lines(tb, to, tt) if pb is not None else (tt if to == tt else None)
    if tail is None:
        return None
    entries = _timeline(pb, po, pt, moved, stem, floor)
    if not entries and not tail:
        tail = b"\n" + _EMPTY
    return front + head + b"".join(b"".join(e.lines) for e in entries) + tail
