"""A cold session page's timeline, condensed to its durable facts, and back (zero LLM;
docs/knowledge.md, "Cold sessions condensed").

Pure text functions over a session page as the compiler writes it
(:mod:`wiki_memory.wiki.compiler`): the ``## Timeline`` section is read back into its
entries (each ends with its block id line ``^tN``; verbatim text sits in tilde fences,
so a ``^t5`` line inside a prompt is no entry's end) and rewritten as

- one line per prompt (what was asked, cut to :data:`PROMPT_CHARS` characters), with its
  block id, so ``page#^tN`` of a turn still lands on it;
- a one-line stub, with its block id, of every other entry that some page links to;
- a note saying when and from how many entries it was condensed, then the facts: the
  goal, decisions, files touched, commands that worked, errors met and how they ended,
  open questions and the outcome (the last reply).

Every other part of the page (the frontmatter but two keys, the title, the summary, a
person's own sections) is left byte for byte. Frontmatter gains ``condensed`` (when)
and ``last_entry`` (the highest entry number, so a resumed session numbers after it).
:func:`restore_timeline` puts an earlier version's timeline back, byte for byte.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from wiki_memory.wiki.frontmatter import FrontmatterError, set_keys
from wiki_memory.wiki.page import parse_metadata
from wiki_memory.wiki.timelinemarks import (
    ENTRY_LINE_RE,
    FENCE_RUN_RE,
    SHELL_TOOLS,
    TIMELINE_HEADING,
)

__all__ = [
    "KEEP_RATIO",
    "PROMPT_CHARS",
    "Facts",
    "TimelineEntry",
    "condense_page",
    "entries_of",
    "facts_of",
    "is_cold",
    "restore_timeline",
    "timeline_span",
]

#: a prompt's one line on a condensed page, at most this many characters
PROMPT_CHARS = 300
#: a page is condensed only when that leaves at most this share of its characters
KEEP_RATIO = 0.8
_HEAD = re.compile(r"^\*\*[^*]+\*\*(?: \([^)]*\))? · (.*)$")
_TOOL = re.compile(r"^tool \*\*(.+?)\*\* · (ok|failed|called)$")
#: words that mark a sentence as a decision (a choice made or a rule set)
_DECISION = re.compile(
    r"(?i)\b(?:decid\w*|decision|let'?s (?:use|go|keep|switch|move|stick)|we(?:'ll| will) use"
    r"|going with|went with|chose|choose|switch(?:ed)? to|instead of|from now on"
    r"|settled on|opted|agreed|use \S+ rather|always use|never use|prefer)\b"
)
#: a line that names what went wrong (a count of failed tests says less: the fallback)
_ERRORISH = re.compile(
    r"(?i)\w*(?:error|exception)\b|^FAILED\b|traceback|not found|denied|refused|cannot|can't"
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@dataclass
class TimelineEntry:
    """One timeline entry read back from a page: ``block`` (``t7``, ``t7r``), ``n`` (7),
    ``head`` (its first line, clock included), ``what`` (the head after the clock:
    ``prompt · alice``, ``tool **Bash** · ok``), ``fenced`` (``(label, text)`` of each
    fenced block; label ``input``, ``output``, ``error`` or ``""``) and ``lines`` (its
    text lines, block id line left out)."""

    block: str
    n: int
    head: str
    what: str
    fenced: list[tuple[str, str]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """``prompt``, ``reply``, ``tool``, ``tool-failed`` or ``other``."""
        if self.what.startswith("prompt"):
            return "prompt"
        if self.what.startswith(("reply", "subagent reply")):
            return "reply"
        m = _TOOL.match(self.what)
        if m:
            return "tool-failed" if m.group(2) == "failed" else "tool"
        return "other"

    @property
    def tool(self) -> str:
        """The tool's name ("" for an entry that is no tool call)."""
        m = _TOOL.match(self.what)
        return m.group(1) if m else ""

    def text(self, label: str = "") -> str:
        """The first fenced block with ``label`` ("": a prompt's or reply's text)."""
        return next((t for lab, t in self.fenced if lab == label), "")


@dataclass
class Facts:
    """The durable facts of one session's timeline (each a list of one-line strings)."""

    goal: str = ""
    decisions: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)
    outcome: str = ""


def _fence_after(line: str, fence: str) -> str | None:
    """The open fence after ``line`` when it is a fence line (``""``: none open; the
    open one is ``fence``, and only a run as long of its character closes it), else
    None."""
    m = FENCE_RUN_RE.match(line.lstrip())
    if not m:
        return None
    run = m.group(1)
    if not fence:
        return str(run)
    if run[0] == fence[0] and len(run) >= len(fence) and not line.strip()[len(run) :]:
        return ""
    return fence


def timeline_span(text: str) -> tuple[int, int] | None:
    """Where the ``## Timeline`` section's body is in ``text``: ``(start, end)`` character
    offsets from just after the heading line to the next level-1/2 heading outside a
    fence (or the end). None when the page has no such section."""
    pos = 0
    start = None
    fence = ""
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        if start is None:
            if bare == TIMELINE_HEADING:
                start = pos + len(line)
        else:
            fenced = _fence_after(bare, fence)
            if fenced is not None:
                fence = fenced
            elif not fence and (bare.startswith("# ") or bare.startswith("## ")):
                return start, pos
        pos += len(line)
    return None if start is None else (start, len(text))


def entries_of(section: str) -> list[TimelineEntry]:
    """The entries of a timeline section's body ``section`` (see :class:`TimelineEntry`),
    in page order; text after the last block id belongs to no entry."""
    out: list[TimelineEntry] = []
    cur: list[str] = []
    fence = ""
    for line in section.splitlines():
        fenced = _fence_after(line, fence)
        if fenced is not None:
            fence = fenced
            cur.append(line)
            continue
        b = ENTRY_LINE_RE.match(line) if not fence else None
        if b is None:
            cur.append(line)
            continue
        out.append(_entry(b.group(1), int(b.group(2)), cur))
        cur = []
    return out


def _entry(block: str, n: int, lines: list[str]) -> TimelineEntry:
    body = list(lines)
    while body and not body[0].strip():
        body.pop(0)
    head = body[0] if body else ""
    m = _HEAD.match(head)
    e = TimelineEntry(block, n, head, m.group(1) if m else head, lines=body)
    label = ""
    fence = ""
    buf: list[str] = []
    for line in body[1:]:
        fm = FENCE_RUN_RE.match(line.lstrip())
        if fence:
            if fm and fm.group(1)[0] == fence[0] and len(fm.group(1)) >= len(fence):
                if not line.strip()[len(fm.group(1)) :]:
                    e.fenced.append((label, "\n".join(buf)))
                    fence, buf, label = "", [], ""
                    continue
            buf.append(line)
        elif fm:
            fence = fm.group(1)
        elif line.strip() in ("input:", "output:", "error:"):
            label = line.strip()[:-1]
    return e


def _line(text: str, limit: int) -> str:
    s = " ".join(text.split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _code(text: str) -> str:
    """``text`` as an inline code span (nothing in it becomes a link, tag or block id)."""
    return "`" + text.replace("`", "'") + "`" if text else ""


def _error_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    hits = [ln for ln in lines if _ERRORISH.search(ln)]
    return _line((hits or lines or [""])[-1], 200)


def facts_of(entries: list[TimelineEntry], files: list[str]) -> Facts:
    """The durable facts of ``entries`` (see :class:`Facts`); ``files`` are the page's
    frontmatter ``files``. Deterministic: the same page gives the same facts on every
    replica."""
    f = Facts(files=[str(x) for x in files][:60])
    prompts = [e for e in entries if e.kind == "prompt" and e.text()]
    if prompts:
        f.goal = _line(prompts[0].text(), PROMPT_CHARS)
    seen: set[str] = set()
    for e in entries:
        if e.kind not in ("prompt", "reply"):
            continue
        # a prompt's words kept on its own line are not repeated
        kept = _line(e.text(), PROMPT_CHARS - 1) if e.kind == "prompt" else ""
        for sent in _SENTENCE.split(" ".join(e.text().split())):
            if _DECISION.search(sent) and len(f.decisions) < 10 and sent not in kept:
                s = _line(sent, 240)
                if s.lower() not in seen:
                    seen.add(s.lower())
                    f.decisions.append(f"{_code(s)} ({e.block})")
    tools = [e for e in entries if e.kind in ("tool", "tool-failed")]
    worked: list[str] = []
    for e in tools:
        cmd = _line(e.text("input"), 160)
        if e.kind == "tool" and e.tool.lower() in SHELL_TOOLS and cmd and cmd not in worked:
            worked.append(cmd)
    f.commands = [_code(c) for c in worked[:25]]
    met: set[tuple[str, str]] = set()
    for i, e in enumerate(tools):
        if e.kind != "tool-failed" or len(f.errors) >= 12:
            continue
        err = _error_line(e.text("error") or e.text("output"))
        if (e.tool, err) in met:
            continue
        met.add((e.tool, err))
        cmd = _line(e.text("input"), 120)
        f.errors.append(f"{e.tool} {_code(cmd)} → {_code(err)}; {_ending(e, tools[i + 1 :])}")
    last = next((e for e in reversed(entries) if e.kind == "reply" and e.text()), None)
    if last is not None:
        f.outcome = _line(last.text(), 400)
        asked = [s for s in _SENTENCE.split(" ".join(last.text().split())) if s.endswith("?")]
        f.questions = [_code(_line(q, 240)) for q in asked[:5]]
    if (
        prompts
        and (last is None or prompts[-1].n > last.n)
        and prompts[-1].text().rstrip()[-1:] == "?"
    ):
        f.questions.append(
            _code(_line(prompts[-1].text(), 240)) + f" ({prompts[-1].block}, unanswered)"
        )
    return f


def _ending(failed: TimelineEntry, later: list[TimelineEntry]) -> str:
    """How a failed tool call ended: the same call (or the same command's program) that
    worked later, else unresolved."""
    cmd = failed.text("input")
    word = cmd.split()[0] if cmd.split() else ""
    for e in later:
        if e.kind != "tool" or e.tool != failed.tool:
            continue
        if e.text("input") == cmd:
            return f"the same call worked later ({e.block})"
        if word and e.text("input").split()[:1] == [word] and failed.tool.lower() in SHELL_TOOLS:
            return f"later {_code(_line(e.text('input'), 120))} worked ({e.block})"
    return "not resolved in this session"


def _facts_text(f: Facts, note: str) -> str:
    out = [note, ""]
    if f.goal:
        out.append(f"- **Goal:** {_code(f.goal)}")
    out += [f"- **Decided:** {d}" for d in f.decisions]
    if f.files:
        out.append("- **Files touched:** " + ", ".join(_code(x) for x in f.files))
    if f.commands:
        out.append("- **Commands that worked:** " + ", ".join(f.commands))
    out += [f"- **Error:** {e}" for e in f.errors]
    out += [f"- **Open question:** {q}" for q in f.questions]
    if f.outcome:
        out.append(f"- **Outcome:** {_code(f.outcome)}")
    return "\n".join(out)


def _clock(head: str) -> str:
    return head.split(" · ", 1)[0].strip() or "**?**"


def _kept(e: TimelineEntry, linked: set[str]) -> str | None:
    """The one line an entry keeps (None: it goes): a prompt's text, cut; a linked
    entry's head."""
    if e.kind == "prompt":
        # the text in a paragraph of its own: an entry that is only its head line is
        # the compiler's words, which recall neither ranks nor counts
        text = _line(e.text(), PROMPT_CHARS)
        body = f"\n\n{_code(text)}" if text else ""
        return f"{_clock(e.head)} · {e.what}{body}\n\n^{e.block}"
    if e.block in linked:
        return f"{_clock(e.head)} · {e.what} · condensed\n\n^{e.block}"
    return None


def is_cold(meta: dict[str, Any], now: float, older_than_seconds: float) -> bool:
    """True for a session page (frontmatter ``meta``) that ended, was last updated more
    than ``older_than_seconds`` before ``now`` (UTC epoch seconds), and is not condensed
    yet. Reads ``ended`` and ``updated`` only (replicated values, so every replica
    decides alike); a page without them is never cold, nor one a person uncondensed
    (``uncondensed``: it stays whole until that key is removed)."""
    if meta.get("type") != "session" or meta.get("condensed") or meta.get("status") == "active":
        return False
    if meta.get("uncondensed"):
        return False
    times = [_epoch(meta.get("ended")), _epoch(meta.get("updated"))]
    if any(t is None for t in times):
        return False
    return all(now - t > older_than_seconds for t in times if t is not None)


def _epoch(value: Any) -> float | None:
    if isinstance(value, datetime):
        d = value
    elif isinstance(value, str) and value:
        try:
            d = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    else:
        return None
    return (d if d.tzinfo else d.replace(tzinfo=UTC)).timestamp()


def condense_page(
    raw: bytes, linked: set[str], now: float, path: str
) -> tuple[bytes, Facts, int] | None:
    """``raw`` (a session page) condensed: its timeline rewritten (see the module's text)
    and frontmatter ``condensed`` (``now``, ISO-8601 UTC) and ``last_entry`` set.
    ``linked``: block ids (``t7``) some page links to; ``path`` is named in the note (the
    ``uncondense`` command). Returns ``(new bytes, facts, entries before)``, or None for
    a page with no timeline entries, one that would keep more than :data:`KEEP_RATIO` of
    its characters (a chat of short prompts: little to gain) or whose frontmatter cannot
    be set."""
    text = raw.decode("utf-8", "surrogateescape")
    span = timeline_span(text)
    if span is None:
        return None
    entries = entries_of(text[span[0] : span[1]])
    if not entries:
        return None
    meta = parse_metadata(raw)
    files = meta.get("files") if isinstance(meta.get("files"), list) else []
    facts = facts_of(entries, files or [])
    when = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    note = (
        f"Condensed on {when[:10]} from {len(entries)} entries: the full timeline is in "
        f"the page's git history (`wiki-memory uncondense {path}`)."
    )
    kept = [k for e in entries if (k := _kept(e, linked)) is not None]
    body = "\n\n".join([*kept, _facts_text(facts, note)])
    eol = "\r\n" if "\r\n" in text[: span[0]] else "\n"
    new = text[: span[0]] + eol + body.replace("\n", eol) + eol + eol * (span[1] < len(text))
    new += text[span[1] :]
    if len(new) > len(text) * KEEP_RATIO:
        return None  # little to gain: the page stays as it is
    try:
        out = set_keys(
            new.encode("utf-8", "surrogateescape"),
            {"condensed": when, "last_entry": max(e.n for e in entries)},
        )
    except FrontmatterError:
        return None
    return out, facts, len(entries)


def restore_timeline(current: bytes, before: bytes) -> bytes | None:
    """``current`` (a condensed page) with the timeline section of ``before`` (the same
    page before it was condensed) put back byte for byte, and frontmatter ``condensed``
    removed; every other byte of ``current`` (a person's later edits) kept. None when
    either has no timeline section."""
    cur = current.decode("utf-8", "surrogateescape")
    old = before.decode("utf-8", "surrogateescape")
    a, b = timeline_span(cur), timeline_span(old)
    if a is None or b is None:
        return None
    text = cur[: a[0]] + old[b[0] : b[1]] + cur[a[1] :]
    try:
        return set_keys(text.encode("utf-8", "surrogateescape"), {}, remove=["condensed"])
    except FrontmatterError:
        return None
