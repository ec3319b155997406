"""What a session page's compile keeps between two compiles of one session, so that a
compile renders only the events that arrived since the last one.

:class:`TimelineMemo` holds the timeline's entries (built, sorted, and each rendered to
its escaped text), the lists the summary is made of (files, tools, commands, failures,
the last reply), the first prompt, the earliest time and the offset of the first event
that sent one. :meth:`TimelineMemo.extend` feeds it the session's observations in
arrival order; it takes the new ones only when the result is the same as a compile of
all of them (:func:`wiki_memory.wiki.compiler.compile_session` renders from a fresh memo
otherwise):

- the observations it has seen are the same objects, in the same places (the spool's
  :class:`~wiki_memory.capture.spoolcache.ObservationCache` hands out the objects it read
  before; a spool changed in place is read again, as new objects);
- no new event is earlier than the latest it has (a late event is placed by its time,
  which may move entries already rendered);
- the first offset, the fork's repeated prompts it has seen and the rendering settings
  (excerpt size, the page a ``clear`` continues) are unchanged;
- it holds no placeholder (an event that could not be rendered is tried again by each
  compile, docs/sessions.md).

A tool call whose ``PreToolUse`` came in an earlier compile and its ``PostToolUse`` now
changes an entry already rendered: that entry alone is rendered again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from wiki_memory.capture.observation import Observation
from wiki_memory.wiki.entryforget import entry_hash, stub_text
from wiki_memory.wiki.entrytime import clock, entry_local
from wiki_memory.wiki.verbatim import escape_controls

TOOL_KINDS = ("tool_pre", "tool_post", "tool_failure")


@dataclass(frozen=True)
class Rules:
    """The compiler's own rules the memo applies to each new event
    (:mod:`wiki_memory.wiki.compiler` gives them; entries are its ``Entry``):
    ``add_entry(entries, tool_entries, n, o, excerpt_bytes, last_reply) -> last_reply``,
    ``placeholder(n, o, exc) -> entry``, ``repeated(n, o, link) -> entry``,
    ``prompt_text(o) -> str``, ``summarize_into(o, files, tools, commands, failures) ->
    reply text``."""

    add_entry: Callable[..., str | None]
    placeholder: Callable[[int, Observation, BaseException], Any]
    repeated: Callable[[int, Observation, str], Any]
    prompt_text: Callable[[Observation], str]
    summarize_into: Callable[..., str]


@dataclass
class TimelineMemo:
    """The incremental state of one session page's compile (see the module's text).

    ``key``: the session key; ``excerpt_bytes``: the tool output excerpt size;
    ``previous``: the page a ``clear`` continues (None); ``repeats``: arrival number →
    the ``page#^tN`` a fork's repeated prompt links to."""

    key: str
    excerpt_bytes: int
    previous: str | None
    rules: Rules
    repeats: dict[int, str] = field(default_factory=dict)
    #: block ids of forgotten entries: rendered as stubs, their events in no summary
    #: line or title (:mod:`wiki_memory.wiki.entryforget`)
    forgotten: frozenset[str] = frozenset()
    #: observations taken, and the last of them (the same object next time)
    n: int = 0
    last: Observation | None = None
    max_ts: float = float("-inf")
    min_ts: float = float("inf")
    start_offset: int | None = None
    first_prompt: str = ""
    files: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)
    #: the summary's last reply (by event time) and the timeline's (by arrival)
    last_reply: str = ""
    build_reply: str | None = None
    entries: list[Any] = field(default_factory=list)
    #: each entry's text on the page (escaped), in the order of ``entries``
    rendered: list[str] = field(default_factory=list)
    #: tool_use_id (or ``#N``) → its entry, for the Pre/Post merge
    tool_entries: dict[str, Any] = field(default_factory=dict)
    #: spool records of the placeholder entries
    unrendered: list[str] = field(default_factory=list)
    #: an entry (its ``id``) → its place in ``entries`` (places never change: entries
    #: are only added at the end)
    places: dict[int, int] = field(default_factory=dict)
    #: a long session's parts as last rendered (:func:`.sessionparts.split_memo`)
    parts: Any = None
    #: places in ``rendered`` rendered again since the last split into parts
    retouched: list[int] = field(default_factory=list)

    def fits(
        self,
        key: str,
        excerpt_bytes: int,
        previous: str | None,
        repeats: dict[int, str],
        forgotten: frozenset[str] = frozenset(),
    ) -> bool:
        """Whether this memo was made with the same settings (and the same repeated
        prompts among the observations it took), and holds no placeholder: an event that
        could not be rendered is tried again by every compile until it renders. A session
        with a forgotten entry is compiled whole each time (rare; its summary leaves the
        entry's events out, which needs every entry built first)."""
        if self.unrendered or forgotten or self.forgotten:
            return False
        if (key, excerpt_bytes, previous) != (self.key, self.excerpt_bytes, self.previous):
            return False
        return {k: v for k, v in repeats.items() if k <= self.n} == self.repeats

    def extend(self, observations: list[Observation], repeats: dict[int, str]) -> bool:
        """Take the observations after the ``n`` taken so far (``observations``: all of
        the session's, in arrival order). False, with nothing changed, when they cannot
        be added to what is kept (see the module's text): render from a new memo then."""
        if len(observations) < self.n or (self.n and observations[self.n - 1] is not self.last):
            return False
        new = observations[self.n :]
        if not new:
            return True
        if self.n and min(o.ts for o in new) < self.max_ts:
            return False
        offset = self.start_offset
        if offset is None:
            offset = next((o.offset for o in new if o.offset is not None), None)
            if offset is not None and self.entries:
                return False  # every entry's local-time mark would change
        self.start_offset = offset
        first = self.n + 1
        self._build(observations, new, first, repeats)
        self._summarize(new, first, repeats, self._gone())
        self.n = len(observations)
        self.last = observations[-1]
        self.max_ts = max(self.max_ts, max(o.ts for o in new))
        self.min_ts = min(self.min_ts, min(o.ts for o in new))
        self.repeats = {k: v for k, v in repeats.items() if k <= self.n}
        return True

    def timeline(self) -> str:
        """The ``## Timeline`` section's text (escaped)."""
        return "\n\n".join(self.rendered) if self.rendered else "(no events yet)"

    def _gone(self) -> set[int]:
        """The arrival numbers of the events of forgotten entries."""
        if not self.forgotten:
            return set()
        return {n for e in self.entries if e.block_id in self.forgotten for n in (e.n, *e.events)}

    def _summarize(
        self, new: list[Observation], first: int, repeats: dict[int, str], gone: set[int]
    ) -> None:
        if not self.first_prompt:
            for n, o in enumerate(new, start=first):
                if n in repeats or n in gone:
                    continue
                try:
                    text = self.rules.prompt_text(o)
                except Exception:  # noqa: BLE001 - its placeholder entry says why
                    continue
                if text:
                    self.first_prompt = text
                    break
        kept = [o for n, o in enumerate(new, start=first) if n not in gone]
        for o in sorted(kept, key=lambda o: o.ts):
            try:
                reply = self.rules.summarize_into(
                    o, self.files, self.tools, self.commands, self.failures
                )
            except Exception:  # noqa: BLE001 - its placeholder entry says why
                continue
            self.last_reply = reply or self.last_reply

    def _build(
        self,
        observations: list[Observation],
        new: list[Observation],
        first: int,
        repeats: dict[int, str],
    ) -> None:
        start = len(self.entries)
        touched: list[Any] = []
        for n, o in enumerate(new, start=first):
            try:
                if n in repeats:
                    self.entries.append(self.rules.repeated(n, o, repeats[n]))
                    continue
                if o.kind in TOOL_KINDS and o.payload.get("tool_name"):
                    tuid = o.payload.get("tool_use_id")
                    had = self.tool_entries.get(str(tuid) if tuid else f"#{n}")
                    if had is not None:
                        touched.append(had)
                self.build_reply = self.rules.add_entry(
                    self.entries, self.tool_entries, n, o, self.excerpt_bytes, self.build_reply
                )
            except Exception as exc:  # noqa: BLE001 - one event never hides the others
                self.entries.append(self.rules.placeholder(n, o, exc))
        tail = sorted(self.entries[start:], key=lambda e: (e.ts, e.n))
        self.entries[start:] = tail
        for e in tail:
            self.places[id(e)] = len(self.rendered)
            if e.kind == "unrendered":
                self.unrendered.append(observations[e.n - 1].obs_id or f"#{e.n}")
            self.rendered.append(self._render(e, observations))
        for e in touched:
            i = self.places.get(id(e))
            if i is not None and i < start:
                self.rendered[i] = self._render(e, observations)
                self.retouched.append(i)

    def _render(self, e: Any, observations: list[Observation]) -> str:
        blocks = e.blocks
        if e.kind == "start" and self.previous and e.head.endswith("· clear"):
            blocks = [f"continues [[{self.previous.removesuffix('.md')}]]", *blocks]
        own = observations[e.n - 1].offset if 0 < e.n <= len(observations) else None
        mark = entry_local(e.ts, own, self.start_offset)
        parts = [f"**{clock(e.ts)}**{mark} · {e.head}", *blocks, f"^{e.block_id}"]
        if e.block_id in self.forgotten:  # its text hashed, never written
            code = entry_hash(escape_controls("\n\n".join(parts[:-1])))
            parts = [stub_text(parts[0], code), parts[-1]]
        return escape_controls("\n\n".join(parts))


class MemoStore:
    """The memos of the sessions compiled last (at most ``size``; the least recently
    compiled go first). Used on the writer thread only."""

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self._memos: OrderedDict[str, TimelineMemo] = OrderedDict()

    def get(self, key: str) -> TimelineMemo | None:
        """Session ``key``'s memo, or None."""
        return self._memos.get(key)

    def put(self, key: str, memo: TimelineMemo | None) -> None:
        """Keep ``memo`` as session ``key``'s (None: forget it)."""
        self._memos.pop(key, None)
        if memo is not None:
            self._memos[key] = memo
            while len(self._memos) > self.size:
                self._memos.popitem(last=False)
