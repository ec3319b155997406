"""Topic pages: what a project's sessions keep coming back to, compiled with no language
model (docs/sessions.md, "Topic pages").

:func:`compile_topics` reads the session pages (and notes, for values) of one project as
bytes and returns the compiled part of every topic page; :func:`merge_page` puts a
compiled part below the marker of a page's current bytes (a person's text above it is
kept as it is). The output depends on the pages alone: no clock, no use record, sorted
everywhere, so two replicas holding the same pages compile the same bytes. A topic page
holds links to timeline entries, dates, other topics' names and note paths, never a
sentence of a session, so forgetting or purging a session leaves nothing of it here
once the project compiles again.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from wiki_memory.wiki.copies import marks
from wiki_memory.wiki.page import parse_page
from wiki_memory.wiki.sessionparts import session_of_part
from wiki_memory.wiki.timelinemarks import (
    ENTRY_ID_RE,
    ENTRY_LINE_RE,
    FENCE_RUN_RE,
    SHELL_TOOLS,
    TIMELINE_HEADING,
)

MARKER = "<!-- wiki-memory: topic compiled below this line; edit above it -->"
"""The line that separates a person's part of a topic page (above) from the compiler's."""
MAX_TOPICS = 300
"""At most this many topic pages per project: those seen in the most sessions."""
MAX_PHRASES = 120
"""Of which at most this many are noun phrases or n-grams (names and files go first)."""
MAX_ENTRIES = 60
"""Entries linked per topic page, oldest first (the count says how many there are)."""
RELATED = 6
"""Related topics named per page: those sharing the most entries with it."""

_TOOL = re.compile(r"^\*\*[\d:]+\*\* · tool \*\*([^*\n]{1,60})\*\*", re.M)
_HEAD = re.compile(r"^\*\*[\d:]+\*\* · ([^\n]*)$", re.M)
_PROSE_HEADS = ("prompt", "reply", "subagent reply")
_WIKILINK = re.compile(r"!?\[\[[^\]\n]*\]\]")
_FILE = re.compile(
    r"(?<![\w/.@:-])((?:[\w.-]+/)+[\w-][\w.-]*|[\w-]+\.(?:py|js|ts|tsx|jsx|go|rs|rb|java|c|h|"
    r"cpp|hpp|cs|md|json|ya?ml|toml|ini|cfg|txt|sh|sql|html|css|lock|env|xml|csv|ipynb))"
    r"(?![\w/])"
)
_ERROR = re.compile(r"\b(?:[A-Z][A-Z0-9]{1,9}-\d{2,6}|[A-Z]{1,4}\d{3,5}|E[A-Z]{3,10})\b")
_CAP_RUN = re.compile(r"[A-Z][\w'’-]*(?:[ \t]+(?:of[ \t]+)?[A-Z][\w'’-]*){0,3}")
_WORD = re.compile(r"[^\W\d_][\w'’-]*")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]{2,}")
_SENT_END = re.compile(r"(?:^|[.!?:;\"“(\n]\s*|[-*>#]\s+)$")
_SUBCOMMANDS = {"git", "npm", "pnpm", "yarn", "make", "docker", "cargo", "uv", "pip", "go"}
_KINDS = ("file", "command", "error", "tool", "name", "phrase")

STOP = frozenset(
    """a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing don down during each
    even ever every few for from further get got had has have having he her here hers
    herself him himself his how i if in into is it its itself just let like me more most my
    myself no nor not now of off oh ok okay on once only or other our ours ourselves out over
    own really same she should so some such than thanks thank that the their theirs them
    themselves then there these they this those through to too under until up very was we
    were what when where which while who whom why will with would yeah yes you your yours
    yourself yourselves hey hi hello wow great good nice sure well thing things something
    lot lots much many one two way still always never maybe pretty kind sounds sound awesome
    amazing glad love know think feel going want make made see say said time times really
    day days new last next today yesterday tomorrow week year years ago since far gonna
    super huge totally definitely agree wait keep come came went take took part best fun
    anything everything nothing someone everyone tough easy hard important special
    grateful lucky ready inspiring gorgeous beautiful cool happy sorry excited proud""".split()
)
"""Words that never make a topic alone or start or end a phrase (English function words
and chat fillers, lower-cased)."""


@dataclass
class Session:
    """One session page as the compiler reads it: its path, date (``YYYY-MM-DD``) and
    entries (block id, text) in page order."""

    path: str
    date: str
    entries: list[tuple[str, str]]
    #: the frontmatter ``started`` as written (a UTC time): the order within one day
    started: str = ""


@dataclass
class Note:
    """A note of the project that a supersession names (docs/knowledge.md)."""

    path: str
    title: str
    state: str
    superseded_by: str


@dataclass
class Topic:
    """One compiled topic: its name, kind and where it was seen."""

    name: str
    kind: str
    #: (session index, block id) in page order of sessions sorted by date and path
    entries: list[tuple[int, str]] = field(default_factory=list)
    related: list[str] = field(default_factory=list)
    values: list[tuple[str, str]] = field(default_factory=list)


def read_session(path: str, raw: bytes) -> Session | None:
    """The session page ``raw`` at ``path`` as a :class:`Session`; None for a page that is
    no session, forgotten, personal (``visibility: personal``) or a conflict copy (its
    entries are the page's it copies)."""
    page = parse_page(raw, path)
    md = page.metadata if isinstance(page.metadata, dict) else {}
    if md.get("type") != "session" or md.get("state") == "forgotten" or _copy(path, md):
        return None
    if str(md.get("visibility") or "").lower() == "personal":
        return None
    when = md.get("started") or md.get("created") or ""
    started = when.isoformat() if hasattr(when, "isoformat") else str(when)
    date = started[:10]
    body = page.body
    start = body.find(f"\n{TIMELINE_HEADING}")
    if start < 0:
        return Session(path, date, [], started)
    text = body[start:]
    entries: list[tuple[str, str]] = []
    last = 0
    for m in ENTRY_LINE_RE.finditer(text):
        entries.append((m.group(1), text[last : m.start()]))
        last = m.end()
    return Session(path, date, entries, started)


def read_note(path: str, raw: bytes) -> Note | None:
    """A current or superseded note (any page but a session, a topic or a conflict copy)
    of the project."""
    page = parse_page(raw, path)
    md = page.metadata if isinstance(page.metadata, dict) else {}
    if md.get("type") in ("session", "topic") or md.get("state") == "forgotten":
        return None
    if _copy(path, md):
        return None
    if str(md.get("visibility") or "").lower() == "personal":
        return None
    title = str(md.get("title") or path.rsplit("/", 1)[-1].removesuffix(".md"))
    by = md.get("superseded_by")
    return Note(path, title, str(md.get("state") or "current"), str(by) if by else "")


def _copy(path: str, md: Mapping[str, Any]) -> bool:
    """True for a conflict copy: the server's ``.server-copy.md`` or a sync's copy."""
    return path.endswith(".server-copy.md") or marks(path, md) is not None


def _prose(text: str) -> str:
    """An entry's text without its head line's markup (prose and fenced text kept)."""
    lines = []
    for ln in text.splitlines():
        if FENCE_RUN_RE.match(ln.strip()) or ln.startswith("**") and "** · " in ln:
            lines.append("")
            continue
        lines.append(ln)
    return "\n".join(lines)


def _command(text: str) -> str | None:
    """The command a shell tool entry ran: its first word, with a known subcommand."""
    m = re.search(r"input:\s*\n\s*(?:~{3,}|`{3,})[^\n]*\n([^\n]+)", text)
    if not m:
        return None
    words = m.group(1).split()
    if not words or not re.fullmatch(r"[\w.-]+", words[0]):
        return None
    first = words[0].rsplit("/", 1)[-1]
    if first in _SUBCOMMANDS and len(words) > 1 and re.fullmatch(r"[a-z][a-z-]*", words[1]):
        return f"{first} {words[1]}"
    return first


def _names(prose: str) -> tuple[set[str], set[str]]:
    """Capitalised names in ``prose``: (seen mid-sentence, seen only at a sentence start)."""
    mid: set[str] = set()
    initial: set[str] = set()
    for m in _CAP_RUN.finditer(prose):
        words = m.group(0).replace("’", "'").split()
        while words and (words[0].lower().split("'")[0] in STOP or words[0] == "I"):
            words.pop(0)
        while words and words[-1].lower().split("'")[0] in STOP:
            words.pop()
        if not words or len(words[0]) < 2:
            continue
        name = " ".join(w.rstrip("'-").removesuffix("'s") for w in words)
        if len(name) < 2 or name.isupper() and len(name) < 3:
            continue
        at_start = bool(_SENT_END.search(prose[: m.start()]))
        (initial if at_start and len(words) == 1 else mid).add(name)
    return mid, initial


def _phrases(prose: str) -> set[str]:
    """Lower-case word pairs of non-stop words (recurring noun phrases), and runs of two
    to six characters of scripts written without case or spaces."""
    out: set[str] = set()
    for sent in re.split(r"[.!?;:,\n()\"“”]+", prose):
        words = [w.lower() for w in _WORD.findall(sent)]
        for a, b in zip(words, words[1:], strict=False):
            if _phrase_word(a) and _phrase_word(b) and not b.endswith(("ing", "ed")):
                out.add(f"{a} {b}")
    for run in _CJK.findall(prose):
        for n in range(2, 7):
            out.update(run[i : i + n] for i in range(len(run) - n + 1))
    return out


def _phrase_word(w: str) -> bool:
    """A word that may be part of a noun phrase: three letters or more, no stop word, no
    contraction (``i'm``, ``it's``), no adverb in ``-ly``."""
    return len(w) > 2 and w not in STOP and "'" not in w and "’" not in w and not w.endswith("ly")


def entry_topics(text: str) -> dict[str, tuple[str, str]]:
    """The topics one timeline entry mentions: ``{key: (name, kind)}``, the key being the
    name case-folded and NFC; kind one of ``file``, ``command``, ``error``, ``tool``,
    ``name``, ``phrase``, or ``name?`` for a name seen here only at a sentence start.
    Names and phrases come only from an entry :func:`said`; a wikilink (``[[page]]``,
    as in "same prompt as [[…]]") gives nothing."""
    found: dict[str, tuple[str, str]] = {}

    def add(name: str, kind: str) -> None:
        key = unicodedata.normalize("NFC", name).casefold()
        old = found.get(key)
        if old is None or _rank(kind) < _rank(old[1]):
            found[key] = (name, kind)

    text = _WIKILINK.sub(" ", text)  # a link to a page of the wiki is no file it used
    tool = _TOOL.search(text)
    if tool:
        add(tool.group(1).strip(), "tool")
        if tool.group(1).strip().lower() in SHELL_TOOLS and (cmd := _command(text)):
            add(cmd, "command")
    for m in _FILE.finditer(text):
        path = m.group(1).strip(".-/")
        if ("/" in path or "." in path) and not re.fullmatch(r"[\d./-]+", path):
            add(path, "file")
    for m in _ERROR.finditer(text):
        add(m.group(0), "error")
    if not said(text):
        return found
    prose = _FILE.sub(" ", _prose(text))
    mid, initial = _names(prose)
    for n in sorted(mid):
        add(n, "name")
    for n in sorted(initial - mid):
        add(n, "name?")
    for p in sorted(_phrases(prose)):
        add(p, "phrase")
    return found


def said(text: str) -> bool:
    """True when the timeline entry ``text`` is what a person or an agent said (a
    prompt, a reply, a subagent's reply) or has no head line: only these give names and
    word pairs. A tool's input and output, a notification, a session's start, end or
    compaction give files, commands, error codes and tools alone (``Begin Patch``,
    ``home user``, ``exit code`` are what tools print, not what a session is about)."""
    head = _HEAD.search(text)
    if head is None:
        return True
    kind = head.group(1).split(" · ", 1)[0].strip()
    return kind in _PROSE_HEADS


def _rank(kind: str) -> int:
    return _KINDS.index(kind.rstrip("?")) * 2 + kind.endswith("?")


def compile_topics(sessions: Iterable[Session], notes: Iterable[Note] = ()) -> list[Topic]:
    """The topics of one project's ``sessions``: every name seen in two or more of them,
    at most :data:`MAX_TOPICS` (most sessions first, then by kind: files, commands, error
    codes, tools, names, phrases), each with its entries (sessions by date and path,
    entries in page order), related topics and the supersession values of ``notes``
    whose title names it. Deterministic: the same pages give the same list, sorted by
    key. ``Topic.entries`` name sessions by their index in :func:`order_sessions`."""
    ordered = order_sessions(sessions)
    where: dict[str, list[tuple[int, str]]] = defaultdict(list)
    names: dict[str, Counter[str]] = defaultdict(Counter)
    kinds: dict[str, str] = {}
    for si, s in enumerate(ordered):
        for block, text in s.entries:
            for key, (name, kind) in entry_topics(text).items():
                where[key].append((si, block))
                names[key][name] += 1
                if key not in kinds or _rank(kind) < _rank(kinds[key]):
                    kinds[key] = kind
    chosen: list[tuple[int, int, str]] = []
    for key, places in where.items():
        kind = kinds[key]
        if kind == "name?":
            continue  # only ever a sentence's first word: "Thanks", "Sure"
        # a long session's parts are one session (wiki/sessionparts.py)
        n_sessions = len({session_of_part(ordered[si].path)[0] for si, _ in places})
        if n_sessions >= 2 and len(key) >= 2:
            chosen.append((-n_sessions, _rank(kind), key))
    chosen = _maximal(chosen, where)
    chosen.sort()
    keep: list[str] = []
    phrases = 0
    for _, _, key in chosen:
        if kinds[key] == "phrase":
            if phrases >= MAX_PHRASES:
                continue
            phrases += 1
        keep.append(key)
        if len(keep) >= MAX_TOPICS:
            break
    kept = set(keep)
    by_entry: dict[tuple[int, str], list[str]] = defaultdict(list)
    for key in keep:
        for place in where[key]:
            by_entry[place].append(key)
    display = {k: min(names[k].items(), key=lambda kv: (-kv[1], kv[0]))[0] for k in keep}
    note_list = sorted(notes, key=lambda n: n.path)
    out = []
    for key in sorted(keep):
        co: Counter[str] = Counter()
        for place in where[key]:
            co.update(k for k in by_entry[place] if k != key and k in kept)
        related = sorted(co.items(), key=lambda kv: (-kv[1], kv[0]))[:RELATED]
        pattern = re.compile(rf"(?<!\w){re.escape(key)}(?!\w)")
        values = [
            (n.path, n.superseded_by if n.state == "superseded" else "")
            for n in note_list
            if n.state in ("current", "superseded") and pattern.search(n.title.casefold())
        ]
        out.append(
            Topic(
                display[key], kinds[key], list(where[key]), [display[k] for k, _ in related], values
            )
        )
    return out


def _maximal(
    chosen: list[tuple[int, int, str]], where: Mapping[str, list[tuple[int, str]]]
) -> list[tuple[int, int, str]]:
    """``chosen`` without a name that is part of a longer chosen name seen in exactly the
    same entries (``東京`` beside ``東京タワー``, ``Nova`` beside ``Nova Scotia``)."""
    groups: dict[tuple[tuple[int, str], ...], list[str]] = defaultdict(list)
    for _, _, key in chosen:
        groups[tuple(where[key])].append(key)
    drop: set[str] = set()
    for keys in groups.values():
        if len(keys) > 1:
            drop.update(k for k in keys if any(k != o and k in o for o in keys))
    return [c for c in chosen if c[2] not in drop]


def order_sessions(sessions: Iterable[Session]) -> list[Session]:
    """Sessions by their start (``started``; the date when it has no time), then path:
    the order topic pages list entries in, so first and last seen are the earliest and
    the latest session also within one day."""
    return sorted(sessions, key=lambda s: (s.started or s.date, s.path))


def file_name(name: str) -> str:
    """A topic's file name in ``projects/<p>/topics/``: its name with the characters a
    file name or a wikilink cannot hold replaced, plus 8 hex digits of its key's sha256
    when anything was replaced or the name is long (so two names never share a file)."""
    key = unicodedata.normalize("NFC", name).casefold()
    safe = re.sub(r"[\\/:*?\"<>|#^\[\]\x00-\x1f]+", "-", name).strip(" .-") or "topic"
    if safe != name or len(safe) > 60:
        safe = f"{safe[:60].rstrip(' .-')} {hashlib.sha256(key.encode()).hexdigest()[:8]}"
    return safe + ".md"


def head_for(t: Topic) -> str:
    """A new topic page's text above the marker: frontmatter and heading."""
    import json

    return (
        f"---\ntype: topic\ntitle: {json.dumps(t.name, ensure_ascii=False)}\n"
        f"topic: {t.kind}\ntags: [topic]\n---\n# {_heading(t.name)}\n\n"
    )


def _heading(name: str) -> str:
    """The H1 text: the name without what would make a link, tag, block id or markup
    (an underscore inside a word, as in a file name, stays: it emphasises nothing)."""
    text = re.sub(r"[\[\]#^|*`<>\\]+|(?<!\w)_|_(?!\w)", " ", name)
    return " ".join(text.split()) or "Topic"


def render(t: Topic, sessions: list[Session], folder: str) -> str:
    """The compiled part of topic ``t`` (below the marker), ``folder`` being the
    project's topics folder (related topics are linked there)."""
    seen = sorted({si for si, _ in t.entries})
    first, last = sessions[seen[0]], sessions[seen[-1]]
    lines = [
        f"- **Kind:** {t.kind}",
        f"- **Seen in:** {len({session_of_part(sessions[i].path)[0] for i in seen})} sessions,"
        f" {len(t.entries)} entries",
        f"- **First seen:** {first.date} in [[{first.path}]]",
        f"- **Last seen:** {last.date} in [[{last.path}]]",
    ]
    if t.related:
        rel = ", ".join(f"[[{folder}/{file_name(r)}|{_alias(r)}]]" for r in t.related)
        lines.append(f"- **Related:** {rel}")
    for path, by in t.values:
        if by:
            lines.append(f"- **Superseded:** [[{path}]] by [[{by}]]")
        else:
            lines.append(f"- **Current:** [[{path}]]")
    lines += ["", "## Entries", ""]
    for si, block in t.entries[:MAX_ENTRIES]:
        lines.append(f"- {sessions[si].date} ![[{sessions[si].path}#^{block}]]")
    if len(t.entries) > MAX_ENTRIES:
        lines.append(f"- and {len(t.entries) - MAX_ENTRIES} more entries")
    return "\n".join(lines) + "\n"


def _alias(name: str) -> str:
    return re.sub(r"[\[\]|]+", " ", name).strip() or "topic"


def merge_page(current: bytes | None, head: str, compiled: str) -> bytes | None:
    """The topic page's new bytes: ``current``'s text above :data:`MARKER` (a person's,
    kept byte for byte; ``head`` when the page is new), the marker, ``compiled``. None
    when ``current`` has no marker line: a person took the page over."""
    if current is None:
        return (head + MARKER + "\n\n" + compiled).encode()
    text = current.decode("utf-8", "surrogateescape")
    pos = _marker_at(text)
    if pos < 0:
        return None
    return (text[:pos] + MARKER + "\n\n" + compiled).encode("utf-8", "surrogateescape")


def _marker_at(text: str) -> int:
    at = 0
    while True:
        pos = text.find(MARKER, at)
        if pos < 0:
            return -1
        if pos == 0 or text[pos - 1] == "\n":
            return pos
        at = pos + 1


def untouched(current: bytes, head: str) -> bool:
    """True when ``current``'s part above the marker is exactly ``head`` (no person
    edited it): such a page may be removed when its topic is no longer seen."""
    text = current.decode("utf-8", "surrogateescape")
    pos = _marker_at(text)
    return pos >= 0 and text[:pos] == head


def compiled_pages(
    sessions: Iterable[Session], notes: Iterable[Note], folder: str
) -> dict[str, tuple[str, str]]:
    """Every topic page of a project: ``{path: (head, compiled part)}`` under ``folder``."""
    ordered = order_sessions(sessions)
    out: dict[str, tuple[str, str]] = {}
    for t in compile_topics(ordered, notes):
        out[f"{folder}/{file_name(t.name)}"] = (head_for(t), render(t, ordered, folder))
    return out


def is_topic_path(path: str) -> bool:
    """True for a page in a project's topics folder (``projects/<p>/topics/…``)."""
    parts = path.split("/")
    return len(parts) >= 4 and parts[0] == "projects" and parts[2] == "topics"


def is_topic_page(raw: bytes, rel: str = "topic.md") -> bool:
    """True for a page whose frontmatter says ``type: topic``: the pages the compiler
    keeps (a compile and a sync's merge both judge a page by this, so a person's page that
    only quotes the marker line is never rewritten)."""
    md: Any = parse_page(raw, rel).metadata
    return isinstance(md, dict) and md.get("type") == "topic"


def linked_entries(links: Iterable[Mapping[str, Any]]) -> list[str]:
    """The timeline entries a topic page links, as recall anchors (``path#^tN``), in page
    order: its embeds whose fragment is a block id ``^t…`` (``links_from`` rows)."""
    out: list[str] = []
    for ln in links:
        frag = str(ln.get("fragment") or "")
        target = str(ln.get("target") or "")
        if ln.get("embed") and target and frag[:1] == "^" and ENTRY_ID_RE.fullmatch(frag, 1):
            out.append(f"{target}#{frag}")
    return out
