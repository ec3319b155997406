"""A long session's timeline kept in parts of bounded size (docs/sessions.md, "Parts").

A session page holds the first ``part_events`` arrival numbers' entries (``^t1`` ..
``^t600`` by default); the entries of later events go to part pages beside it, part
``k`` holding the entries whose first event's arrival number ``N`` is in
``((k-1)·part_events, k·part_events]``:

    projects/p/sessions/2026-12-06-3b021981.md           # part 1: summary + ^t1..^t600
    projects/p/sessions/2026-12-06-3b021981.part-002.md  # ^t601..^t1200
    projects/p/sessions/2026-12-06-3b021981.part-003.md  # ^t1201..

So the page of an entry follows from its number alone (:func:`part_of`,
:func:`entry_page`): ``path#^t4523`` names part 8 with no lookup, block ids keep their
numbers, and a part is only rewritten when one of its entries changes (a tool call's
result arriving after its part closed, a forgotten entry, a purge). Within a part,
entries are in event-time order; a late event (an early time, a new arrival number)
is in the part of its number. A session whose numbers stay within ``part_events`` has
no parts: its page is byte for byte what it was before parts existed.

A part is a session page too (``type: session``, the same ``project``, ``harness``,
``session_id`` and ``user``; scope sees it exactly as its session page) with ``part``
(its number, 2 and up) and ``part_of`` (the session page's path), a heading and a line
linking the session page, and a ``## Timeline`` of its entries; the session page's
summary lists its parts (:func:`parts_line`). A file is a part only when it says so
(``type: session``, ``part``, ``part_of`` naming the page its name says) and that page
is a session page (:func:`part_owner`, :func:`session_parts`, :func:`not_part_sql`):
a note that merely is named ``<stem>.part-002.md`` beside a note ``<stem>.md`` is a
page of its own. Consumers that list sessions skip parts; consumers that read entries
read them on any part.
"""

from __future__ import annotations

import glob
import itertools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wiki_memory.capture.observation import iso
from wiki_memory.plainfile import read_plain
from wiki_memory.wiki.entrytime import local_iso
from wiki_memory.wiki.page import parse_metadata
from wiki_memory.wiki.timelinemarks import ENTRY_ID_RE
from wiki_memory.wiki.verbatim import escape_value

__all__ = [
    "DEFAULT_PART_EVENTS",
    "Part",
    "entry_page",
    "entry_pages",
    "is_part",
    "is_part_path",
    "is_session_page",
    "not_part_sql",
    "part_owner",
    "part_paths",
    "session_parts",
    "part_of",
    "part_path",
    "parts_line",
    "render_part",
    "session_of_part",
    "split_entries",
    "split_memo",
]

#: arrival numbers per part (about 200 turns of a Claude Code session, 150-250 kB)
DEFAULT_PART_EVENTS = 600

_PART_RE = re.compile(r"^(?P<stem>.+)\.part-(?P<k>\d{3,})\.md$")


def part_of(n: int, part_events: int = DEFAULT_PART_EVENTS) -> int:
    """The part (1: the session page itself) holding the entry of arrival number ``n``
    (``n`` >= 1; ``part_events`` >= 1, else ValueError)."""
    if part_events < 1:
        raise ValueError("part_events must be at least 1")
    return max(0, n - 1) // part_events + 1


def part_path(session_path: str, part: int) -> str:
    """The path of part ``part`` of the session page ``session_path``: the page itself for
    1, ``<stem>.part-002.md`` beside it for 2 and up (ValueError below 1)."""
    if part < 1:
        raise ValueError("parts are numbered from 1")
    if part == 1:
        return session_path
    stem = session_path.removesuffix(".md")
    return f"{stem}.part-{part:03d}.md"


def session_of_part(path: str) -> tuple[str, int]:
    """``(session page path, part number)`` of a page path: ``(path, 1)`` for a path that
    is no part's (the session page itself, or any other page)."""
    m = _PART_RE.match(path)
    if m is None or int(m["k"]) < 2:
        return path, 1
    return f"{m['stem']}.md", int(m["k"])


def entry_page(path: str, block: str, part_events: int = DEFAULT_PART_EVENTS) -> str:
    """The page that holds entry ``block`` (``t4523``, ``t12r``, with or without ``^``)
    of the session whose page or part is ``path``; ``path`` itself when ``block`` is no
    timeline block id."""
    m = ENTRY_ID_RE.fullmatch(block.removeprefix("^"))
    if m is None:
        return path
    session, _ = session_of_part(path)
    return part_path(session, part_of(int(m[1]), part_events))


def is_part_path(path: str) -> bool:
    """Whether ``path`` names a session part (``<stem>.part-002.md``)."""
    return session_of_part(path)[1] > 1


def part_paths(wiki_dir: Path, session_path: str) -> list[str]:
    """The part pages of the session page ``session_path`` on disk under ``wiki_dir``,
    by part number (``[]`` for a session with none, or a path that is no page's)."""
    stem = session_path.removesuffix(".md")
    folder = (wiki_dir / stem).parent
    name = stem.rsplit("/", 1)[-1]
    found = []
    try:
        for f in folder.glob(f"{glob.escape(name)}.part-*.md"):
            rel = f"{stem}.part-{f.name[len(name) + 6 :]}"
            sess, k = session_of_part(rel)
            if k > 1 and sess == session_path:
                found.append((k, rel))
    except OSError:
        return []
    return [rel for _, rel in sorted(found)]


def _meta(wiki_dir: Path, rel: str) -> dict[str, Any] | None:
    try:
        raw = read_plain(wiki_dir / rel)
    except (OSError, ValueError):
        return None
    return None if raw is None else parse_metadata(raw)


def is_session_page(metadata: Mapping[str, Any]) -> bool:
    """Whether a page's frontmatter is a session page's own (``type: session`` and no
    part number of 2 and up): the only kind of page that has parts."""
    part = metadata.get("part")
    return metadata.get("type") == "session" and not (isinstance(part, int) and part >= 2)


def session_parts(wiki_dir: Path, session_path: str) -> list[str]:
    """The parts of the session page ``session_path`` on disk under ``wiki_dir``, by
    part number: the files named ``<stem>.part-NNN.md`` beside it that say they are its
    part (:func:`is_part` with their path), and only when ``session_path`` is a session
    page (:func:`is_session_page`). ``[]`` for any other page, a missing one, or a
    session with no parts. The one rule purge, forget, rename, expand and condense use."""
    if not part_paths(wiki_dir, session_path):
        return []
    head = _meta(wiki_dir, session_path)
    if head is None or not is_session_page(head):
        return []
    out = []
    for rel in part_paths(wiki_dir, session_path):
        meta = _meta(wiki_dir, rel)
        if meta is not None and is_part(meta, rel):
            out.append(rel)
    return out


def part_owner(wiki_dir: Path, path: str) -> tuple[str, int]:
    """``(session page path, part number)`` of the page ``path`` on disk under
    ``wiki_dir``: its session page and number when it is a part by the rule of
    :func:`session_parts` (it says it is that page's part, and that page is a session
    page); ``(path, 1)`` for any other page or a missing one."""
    session, k = session_of_part(path)
    if k < 2:
        return path, 1
    meta = _meta(wiki_dir, path)
    if meta is None or not is_part(meta, path):
        return path, 1
    head = _meta(wiki_dir, session)
    if head is None or not is_session_page(head):
        return path, 1
    return session, k


def entry_pages(wiki_dir: Path, path: str, block: str, part_events: int) -> Iterator[str]:
    """Where entry ``block`` of the session whose page or part is ``path`` may be, most
    likely first, each once: ``path`` itself, the page its number names
    (:func:`entry_page`), then the session page and its other parts on disk (parts
    split by an earlier ``part_events``; looked for only when asked for). Only ``path``
    when ``block`` is no timeline block id."""
    yield path
    if ENTRY_ID_RE.fullmatch(block.removeprefix("^")) is None:
        return
    seen = {path}
    session, _ = part_owner(wiki_dir, path)
    parts = session_parts(wiki_dir, session)
    if not parts:
        return
    first = [entry_page(session, block, part_events)] if part_events > 0 else []
    for where in itertools.chain(first, [session], parts):
        if where not in seen and (where == session or where in parts):
            seen.add(where)
            yield where


def is_part(metadata: Mapping[str, Any], path: str) -> bool:
    """Whether the page at ``path`` with frontmatter ``metadata`` says it is a session
    part: ``type: session``, ``part`` N (2 and up) and ``part_of`` the session page
    whose part N is named ``path`` (``<stem>.part-00N.md`` beside ``<stem>.md``). Only
    the file's own word: :func:`part_owner` also asks its session page."""
    part = metadata.get("part")
    if metadata.get("type") != "session" or not isinstance(part, int) or part < 2:
        return False
    session = metadata.get("part_of")
    return isinstance(session, str) and session_of_part(path) == (session, part)


def not_part_sql(alias: str) -> str:
    """The SQL condition keeping the ``pages`` rows ``alias`` that are no session part
    (the rule of :func:`part_owner` read from the stored frontmatter, ``alias.meta``, a
    JSON object: the row says it is part N of a page named as its path says, and that
    page is a session page): page listings show a long session once, by its page, whose
    summary links its parts. No arguments."""
    meta = f"{alias}.meta"
    of = f"json_extract({meta}, '$.part_of')"
    return (
        f"NOT coalesce(json_extract({meta}, '$.type') = 'session' "
        f"AND json_type({meta}, '$.part') = 'integer' "
        f"AND json_extract({meta}, '$.part') >= 2 "
        f"AND {of} LIKE '%.md' "
        f"AND {alias}.path = substr({of}, 1, length({of}) - 3) "
        f"|| printf('.part-%03d.md', json_extract({meta}, '$.part')) "
        f"AND EXISTS (SELECT 1 FROM pages AS sp_{alias} WHERE sp_{alias}.path = {of} "
        f"AND json_extract(sp_{alias}.meta, '$.type') = 'session' "
        f"AND coalesce(json_extract(sp_{alias}.meta, '$.part'), 1) < 2), 0)"
    )


def split_entries(
    entries: Iterable[tuple[int, str]], part_events: int = DEFAULT_PART_EVENTS
) -> dict[int, list[str]]:
    """Entries (``(arrival number, rendered text)`` in page order) by part: part number →
    its entries' texts, in the order given. Part 1 is always present (maybe empty)."""
    out: dict[int, list[str]] = {1: []}
    for n, text in entries:
        out.setdefault(part_of(n, part_events), []).append(text)
    return out


@dataclass(frozen=True)
class Part:
    """A rendered part page: its path, number, frontmatter and body."""

    path: str
    part: int
    metadata: dict[str, Any]
    body: str


def render_part(
    session: Mapping[str, Any],
    session_path: str,
    part: int,
    heading: str,
    timeline: str,
    *,
    started: str,
    ended: str | None,
    part_events: int = DEFAULT_PART_EVENTS,
) -> Part:
    """Part ``part`` (>= 2) of a session page whose frontmatter is ``session`` (its
    ``id``, ``title``, ``project``, ``harness``, ``session_id``, ``user``, ``tags``).

    ``heading``: the session page's H1 text (escaped already); ``timeline``: the part's
    entries joined (escaped already); ``started``/``ended``: the times of the part's
    first and last entries (``ended`` None while it is the session's open part). The
    part's text depends on nothing else, so a closed part renders to the same bytes
    until one of its entries changes. ValueError for ``part`` < 2."""
    if part < 2:
        raise ValueError("part 1 is the session page itself")
    first = (part - 1) * part_events + 1
    last = part * part_events
    link = session_path.removesuffix(".md")
    tags = [t for t in session.get("tags") or [] if isinstance(t, str)]
    md: dict[str, Any] = {
        "type": "session",
        "id": f"{session.get('id')}-p{part:03d}",
        "title": f"{session.get('title')} (part {part})",
        "part": part,
        "part_of": session_path,
        "project": session.get("project"),
        "harness": session.get("harness"),
        "session_id": session.get("session_id"),
        "user": session.get("user"),
        "started": started,
        "ended": ended,
        "tags": [*tags, "session-part"] if "session-part" not in tags else tags,
    }
    body = (
        f"# {heading} · part {part}\n\n"
        f"Part {part} of [[{link}]]: the entries of events {first} to {last}.\n\n"
        f"## Timeline\n\n{timeline}\n"
    )
    return Part(part_path(session_path, part), part, md, body)


def parts_line(session_path: str, parts: Iterable[int]) -> str | None:
    """The session page's summary line listing its parts (None: it has none):
    ``- **Timeline continues in:** [[….part-002]], [[….part-003]]``."""
    links = [f"[[{part_path(session_path, k).removesuffix('.md')}]]" for k in parts if k >= 2]
    if not links:
        return None
    return "- **Timeline continues in:** " + ", ".join(links)


class _Split:
    """What :func:`split_memo` keeps on a memo: each entry's part and place in it (by its
    place on the page), each part's texts and times, and each part's last rendering."""

    def __init__(self, part_events: int) -> None:
        self.part_events = part_events
        self.where: list[tuple[int, int]] = []
        self.texts: dict[int, list[str]] = {1: []}
        self.times: dict[int, list[float]] = {1: []}
        self.dirty: set[int] = set()
        self.kept: dict[int, tuple[Any, Part]] = {}

    def take(self, memo: Any) -> None:
        """Place the memo's entries added since the last call, and its entries rendered
        again (``memo.retouched``)."""
        for i in memo.retouched:
            if i < len(self.where):
                k, pos = self.where[i]
                self.texts[k][pos] = memo.rendered[i]
                self.dirty.add(k)
        memo.retouched.clear()
        for i in range(len(self.where), len(memo.rendered)):
            e = memo.entries[i]
            k = (e.n - 1) // self.part_events + 1 if e.n > 0 else 1
            if k not in self.texts:
                self.texts[k], self.times[k] = [], []
            self.where.append((k, len(self.texts[k])))
            self.texts[k].append(memo.rendered[i])
            self.times[k].append(e.ts)
            self.dirty.add(k)


def split_memo(
    memo: Any,
    session: Mapping[str, Any],
    session_path: str,
    heading: str,
    part_events: int,
    ended: float | None,
) -> tuple[str, list[Part]]:
    """A compile's timeline in parts: ``(the session page's timeline text, its later
    parts)``. ``memo``: the compile's :class:`~wiki_memory.wiki.timelinememo.TimelineMemo`
    (its ``entries``, each with ``n`` and ``ts``, their ``rendered`` texts in page
    order, ``retouched``, and ``parts``, where this keeps what it split and rendered
    last, so a compile places only the new entries and renders only the parts whose
    entries or header changed); ``session``: the session page's frontmatter; ``ended``:
    the session's end (epoch seconds; None while active), the ``ended`` of its last part.
    A closed part's ``ended`` is its last entry's time. ValueError for ``part_events``
    below 1."""
    if part_events < 1:
        raise ValueError("part_events must be at least 1")
    split = memo.parts
    if not isinstance(split, _Split) or split.part_events != part_events:
        split = memo.parts = _Split(part_events)
        memo.retouched.clear()
    split.take(memo)
    first = "\n\n".join(split.texts[1]) or "(no events yet)"
    last = max(split.texts)
    md = {k: escape_value(v) for k, v in session.items() if k in _PART_KEYS}
    header = tuple(md.items())
    parts = []
    for k in sorted(split.texts):
        if k == 1:
            continue
        ts = split.times[k]
        end = max(ts) if k < last else ended
        # the part's first time at the session's offset, as the session's ``started``
        start = local_iso(min(ts), memo.start_offset)
        head = (header, start, iso(end) if end is not None else None)
        had = split.kept.get(k)
        if had is not None and had[0] == head and k not in split.dirty:
            parts.append(had[1])
            continue
        part = render_part(
            md,
            session_path,
            k,
            heading,
            "\n\n".join(split.texts[k]),
            started=head[1],
            ended=head[2],
            part_events=part_events,
        )
        split.kept[k] = (head, part)
        parts.append(part)
    split.dirty.clear()
    return first, parts


#: the session page's keys a part's header is made of
_PART_KEYS = ("id", "title", "project", "harness", "session_id", "user", "tags")
