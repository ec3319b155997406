"""The session-page compiler: a session's observations → one markdown page (zero LLM).

Page: ``projects/<project>/sessions/<YYYY-MM-DD>-<short id>.md`` (earlier releases'
pages, ``<date>-<slug>-<short id>.md``, keep their names) with
frontmatter (``type: session``, attribution, times, status, files, tools, tags), an extractive
``## Summary`` and a verbatim ``## Timeline``. Each timeline entry ends with a
standalone Obsidian block id line ``^t<N>``; ``N`` is the arrival number of the
entry's first event, so anchors stay stable when late events are inserted by
timestamp. Verbatim text (prompts, tool input and output) sits in tilde fences
longer than any tilde run inside it, so nothing in it is read as markdown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from wiki_memory.capture.echo import ECHO_KEY
from wiki_memory.capture.observation import Observation, SessionMeta, iso
from wiki_memory.wiki.entrytime import local_iso as _local_iso
from wiki_memory.wiki.entrytime import started_line as _started_line
from wiki_memory.wiki.sessionparts import Part, parts_line, split_memo
from wiki_memory.wiki.timelinemarks import SHELL_TOOLS, TIMELINE_HEADING
from wiki_memory.wiki.timelinememo import Rules, TimelineMemo
from wiki_memory.wiki.verbatim import (
    clip_bytes,
    cut_words,
    escape_controls,
    escape_value,
    fence,
    slugify,
)

__all__ = ["clip_bytes", "cut_words", "escape_controls", "fence", "slugify"]

_PATCH_FILE_RE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$", re.M)


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        parts = []
        for k in ("stdout", "stderr", "llmContent", "output", "content", "error", "returnDisplay"):
            v = value.get(k)
            if isinstance(v, str) and v.strip():
                parts.append(
                    v if k in ("stdout", "llmContent", "output", "content") else f"{k}: {v}"
                )
        if parts:
            return "\n".join(parts)
    return json.dumps(value, ensure_ascii=False, indent=1)


@dataclass
class Entry:
    """One timeline entry (a prompt, a tool call, a reply ...)."""

    n: int
    ts: float
    kind: str
    head: str
    blocks: list[str] = field(default_factory=list)
    suffix: str = ""
    #: arrival numbers of the later events merged into this entry (a tool call's result)
    events: list[int] = field(default_factory=list)

    @property
    def block_id(self) -> str:
        """The entry's Obsidian block id: ``t<N>`` (``t<N>r`` for the reply carried by the
        same event as a prompt, as in Codex's agent-turn-complete)."""
        return f"t{self.n}{self.suffix}"


@dataclass
class Compiled:
    """A rendered session page: its path, frontmatter values and body text."""

    path: str
    metadata: dict[str, Any]
    body: str
    summary: str
    timeline: str
    count: int
    #: spool records of the events rendered as placeholders (they could not be compiled)
    unrendered: list[str] = field(default_factory=list)
    #: what the next compile of the session may start from (None: nothing kept)
    memo: TimelineMemo | None = None
    #: the timeline's later parts (a session past ``part_events``; wiki/sessionparts.py)
    parts: list[Part] = field(default_factory=list)


def sessions_folder(project: str, user: str) -> str:
    """Where a session's page lives: ``projects/<project>/sessions``, or for a session
    with no project (``project`` "") its user's own ``people/<user>/sessions``."""
    return f"projects/{project}/sessions" if project else f"people/{user}/sessions"


def page_path(meta: SessionMeta, observations: list[Observation]) -> str:
    """``<sessions folder>/<date>-<short id>.md`` for a new session page
    (:func:`sessions_folder`). The title (the first prompt) is in the frontmatter only:
    a file name shows in listings, commits and the hub's trees. Pages named
    ``<date>-<slug>-<short id>.md`` by earlier releases keep their names (the spool
    state and the compile's lookup by short id find them)."""
    del observations  # the name no longer depends on what was said
    date = datetime.fromtimestamp(meta.started, UTC).strftime("%Y-%m-%d")
    folder = sessions_folder(meta.project, meta.user)
    return f"{folder}/{date}-{meta.key[:8]}.md"


def prompt_text(o: Observation) -> str:
    """The prompt an event carries ("" for none)."""
    return _prompt_text(o)


def _prompt_text(o: Observation) -> str:
    p = o.payload
    if o.kind == "prompt":
        v = p.get("prompt")
        return v if isinstance(v, str) else ""
    if o.kind == "turn":
        msgs = p.get("input-messages")
        if isinstance(msgs, list):
            return "\n\n".join(m for m in msgs if isinstance(m, str))
    return ""


def reply_text(o: Observation) -> str:
    """The assistant's reply an event carries ("" for none)."""
    return _reply_text(o)


def _reply_text(o: Observation) -> str:
    p = o.payload
    for k in ("last_assistant_message", "prompt_response", "last-assistant-message"):
        v = p.get(k)
        if isinstance(v, str) and v.strip():
            return v
    return ""


def _rel(path: str, cwd: str | None) -> str:
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path


def _files_of(o: Observation) -> list[str]:
    ti = o.payload.get("tool_input")
    out: list[str] = []
    if isinstance(ti, dict):
        for k in ("file_path", "absolute_path", "path", "notebook_path", "filePath"):
            v = ti.get(k)
            if isinstance(v, str) and v and "\n" not in v:
                out.append(v)
        cmd = ti.get("command") or ti.get("patch") or ti.get("input")
        if isinstance(cmd, str) and "*** " in cmd:
            out.extend(m.strip() for m in _PATCH_FILE_RE.findall(cmd))
    return [_rel(f, o.cwd) for f in out]


def _command_of(o: Observation) -> str | None:
    name = str(o.payload.get("tool_name") or "")
    ti = o.payload.get("tool_input")
    if name.lower() in SHELL_TOOLS and isinstance(ti, dict):
        cmd = ti.get("command")
        if isinstance(cmd, list):
            cmd = " ".join(str(c) for c in cmd)
        if isinstance(cmd, str) and cmd.strip():
            return cmd.strip()
    return None


#: Codex's shell tool reports its result as text that starts ``Exit code: N``
_CODEX_EXIT_RE = re.compile(r"\AExit code:\s*(-?\d+)\b")
#: Claude Code's failure ``error`` text starts ``Exit code N`` for a shell command
_ERROR_EXIT_RE = re.compile(r"\AExit code:?\s*(-?\d+)\b")


def exit_code_of(o: Observation) -> int | None:
    """The exit code a tool result reports, when it reports one: ``exit_code`` or
    ``exitCode`` of a dict response, the ``Exit code N`` that starts Claude Code's failure
    ``error``, or the ``Exit code: N`` that starts Codex's shell output; else None."""
    p = o.payload
    if o.kind == "tool_failure":
        m = _ERROR_EXIT_RE.match(p.get("error") or "") if isinstance(p.get("error"), str) else None
        return int(m.group(1)) if m else None
    tr = p.get("tool_response")
    if isinstance(tr, dict):
        code = tr.get("exit_code", tr.get("exitCode"))
        return code if isinstance(code, int) and not isinstance(code, bool) else None
    if isinstance(tr, str):
        m = _CODEX_EXIT_RE.match(tr)
        return int(m.group(1)) if m else None
    return None


#: the last lines of a test run or build that failed (pytest, unittest, jest, cargo, go,
#: make, npm, gradle/maven, tsc and compilers)
_FAILED_TAIL_RE = re.compile(
    r"(?im)^(?:=+ )?.*\b\d+ (?:failed|errors?)\b.*$"
    r"|^FAILED\b.*$|^FAIL\b.*$|^Tests?:.*\b\d+ failed\b.*$|^test result: FAILED\b.*$"
    r"|^make(?:\[\d+\])?: \*\*\* .*Error \d+$|^npm ERR!.*$|^BUILD FAILED\b.*$"
    r"|^error(?:\[E\d+\])?: .*$|^Found \d+ errors?\b.*$"
)


def _ends_in_failure(text: str) -> bool:
    """True when the last few lines of a shell command's output say a test run or a
    build failed (``FAILED … 1 failed``), whatever the exit code the harness reported."""
    lines = [ln for ln in text[-4000:].splitlines() if ln.strip()][-4:]
    tail = "\n".join(lines)
    if re.search(r"(?i)\b0 (?:failed|errors?)\b", tail) and not re.search(
        r"(?i)\b[1-9]\d* (?:failed|errors?)\b", tail
    ):
        return False
    return bool(_FAILED_TAIL_RE.search(tail))


def _failure_of(o: Observation) -> str | None:
    p = o.payload
    if o.kind == "tool_failure":
        err = p.get("error")
        return _as_text(err) if err else "failed"
    if o.kind == "tool_post":
        tr = p.get("tool_response")
        if _command_of(o) is not None:
            out = _as_text(tr) if not isinstance(tr, str) else tr
            if isinstance(tr, dict):
                out = "\n".join(str(tr.get(k) or "") for k in ("stdout", "stderr", "output"))
            if _ends_in_failure(out):
                return out
        if isinstance(tr, str):
            code = exit_code_of(o)
            return tr if code else None
        if isinstance(tr, dict):
            if tr.get("error"):
                return _as_text(tr.get("error"))
            if tr.get("is_error") is True or tr.get("success") is False:
                return _as_text(tr)
            code = tr.get("exit_code", tr.get("exitCode"))
            if isinstance(code, int) and code != 0:
                return _as_text(tr)
    return None


def build_entries(
    observations: list[Observation], excerpt_bytes: int, repeats: dict[int, str] | None = None
) -> list[Entry]:
    """Timeline entries in time order. Pre/Post events of one tool call merge into one."""
    entries: list[Entry] = []
    tool_entries: dict[str, Entry] = {}
    last_reply = None
    for n, o in enumerate(observations, start=1):
        try:
            if repeats and n in repeats:
                # a fork's copy of a prompt its origin holds: a link, not the text again
                link = repeats[n]
                entries.append(
                    Entry(n, o.ts, "prompt", "prompt · repeated", [f"same prompt as [[{link}]]"])
                )
                continue
            last_reply = add_entry(entries, tool_entries, n, o, excerpt_bytes, last_reply)
        except Exception as exc:  # noqa: BLE001 - one event never hides the others
            entries.append(placeholder(n, o, exc))
    entries.sort(key=lambda e: (e.ts, e.n))
    return entries


def _echo_of(payload: dict[str, Any]) -> dict[str, Any] | None:
    for k in ("tool_response", "tool_output", "output", "result"):
        v = payload.get(k)
        if isinstance(v, dict) and isinstance(v.get(ECHO_KEY), dict):
            return v[ECHO_KEY]  # type: ignore[no-any-return]
    return None


def echo_line(ref: dict[str, Any]) -> str:
    """What a session page shows for the memory's own output (invariant 15): the tool,
    what it was asked and the ids it returned, never the text."""
    parts = [f"returned by the memory ({_inline(str(ref.get('tool') or '?'))}), not stored"]
    q = ref.get("query")
    if isinstance(q, str) and q:
        parts.append(f"asked: {_inline(_one_line(q, 200))}")
    ids = ref.get("ids")
    if isinstance(ids, list) and ids:
        parts.append("ids: " + ", ".join(_inline(str(i)) for i in ids[:20]))
    chars = ref.get("chars")
    if isinstance(chars, int):
        parts.append(f"{chars:,} characters")
    return " · ".join(parts)


def placeholder(n: int, o: Observation, exc: BaseException) -> Entry:
    """The entry written in place of an event the compiler could not render: it names
    the event's spool record and the cause, so a person sees what is missing."""
    cause = _one_line(f"{type(exc).__name__}: {exc}", 200)
    rec = o.obs_id or f"#{n}"
    return Entry(
        n,
        o.ts,
        "unrendered",
        f"unrendered event `{_code(o.event)}` · spool record `{rec}`",
        [f"cause: {_inline(cause)}"],
    )


def add_entry(
    entries: list[Entry],
    tool_entries: dict[str, Entry],
    n: int,
    o: Observation,
    excerpt_bytes: int,
    last_reply: str | None,
) -> str | None:
    """Add the timeline entry (or merge the tool event) of observation ``n``; returns the
    last reply seen."""
    p = o.payload
    kind = o.kind
    if kind in ("tool_pre", "tool_post", "tool_failure") and p.get("tool_name"):
        tuid = p.get("tool_use_id")
        key = str(tuid) if tuid else f"#{n}"
        e = tool_entries.get(key)
        if e is None:
            e = Entry(n, o.ts, "tool", "")
            tool_entries[key] = e
            entries.append(e)
        e.events.append(n)
        e.ts = min(e.ts, o.ts)
        name = str(p.get("tool_name"))
        ti = p.get("tool_input")
        cmd = _command_of(o)
        inp = cmd if cmd else (_as_text(ti) if ti not in (None, {}, "") else "")
        failure = _failure_of(o)
        status = {"tool_pre": "called", "tool_post": "ok", "tool_failure": "failed"}[kind]
        if failure and kind == "tool_post":
            status = "failed"
        if kind != "tool_pre" or not e.head:
            e.head = f"tool **{name}** · {status}"
            e.kind = "tool-failed" if status == "failed" else "tool"
        blocks = []
        if inp:
            blocks.append("input:\n\n" + fence(clip_bytes(inp, excerpt_bytes * 2)))
        echo = _echo_of(p)
        if echo is not None:
            if kind != "tool_pre":
                blocks.append(echo_line(echo))
        elif kind == "tool_post":
            out = _as_text(p.get("tool_response"))
            if out.strip():
                blocks.append("output:\n\n" + fence(clip_bytes(out, excerpt_bytes)))
        if failure:
            blocks.append("error:\n\n" + fence(clip_bytes(failure, excerpt_bytes)))
        if kind == "tool_pre" and e.blocks:
            return last_reply
        e.blocks = blocks
        return last_reply
    if kind in ("prompt", "turn"):
        text = _prompt_text(o)
        who = p.get("speaker")
        head = f"prompt · {who}" if isinstance(who, str) and who else "prompt"
        dia = p.get("dia_id")
        if isinstance(dia, str) and dia:
            head += f" · {dia}"
        blocks = [fence(text)] if text else []
        injected = p.get("wiki_memory_injected")
        if isinstance(injected, int) and injected:
            blocks.append(f"({injected} memory block(s) injected by the harness: not stored)")
        e = Entry(n, o.ts, "prompt", head, blocks)
        entries.append(e)
        if kind == "turn" and _reply_text(o):
            last_reply = _reply_text(o)
            entries.append(Entry(n, o.ts, "reply", "reply", [fence(_reply_text(o))], suffix="r"))
        return last_reply
    if kind in ("stop", "subagent_stop"):
        text = _reply_text(o)
        if not text or (kind == "stop" and text == last_reply):
            return last_reply
        if kind == "stop":
            last_reply = text
        agent = p.get("agent_type")
        head = (
            f"subagent reply · {agent}"
            if kind == "subagent_stop" and agent
            else ("subagent reply" if kind == "subagent_stop" else "reply")
        )
        entries.append(Entry(n, o.ts, "reply", head, [fence(text)]))
        return last_reply
    if kind == "session_start":
        src = p.get("source")
        entries.append(Entry(n, o.ts, "start", f"session start{f' · {src}' if src else ''}"))
        return last_reply
    if kind == "session_end":
        reason = p.get("reason")
        entries.append(Entry(n, o.ts, "end", f"session end{f' · {reason}' if reason else ''}"))
        return last_reply
    if kind == "compact":
        trig = p.get("trigger")
        chars = p.get("compact_summary_chars")
        blocks = []
        if isinstance(chars, int):
            blocks.append(
                f"the harness's summary of the conversation so far ({chars:,} characters) "
                "is not stored: it restates this timeline"
            )
        entries.append(
            Entry(n, o.ts, "compact", f"context compaction{f' · {trig}' if trig else ''}", blocks)
        )
        return last_reply
    if kind == "notification":
        msg = p.get("message")
        entries.append(Entry(n, o.ts, "note", "notification", [fence(str(msg))] if msg else []))
        return last_reply
    entries.append(Entry(n, o.ts, "other", f"event `{o.event}`"))
    return last_reply


def _safe(fn: Any, o: Observation, default: Any) -> Any:
    try:
        return fn(o)
    except Exception:  # noqa: BLE001 - its placeholder entry says why
        return default


def summarize_into(
    o: Observation,
    files: list[str],
    tools: list[str],
    commands: list[str],
    failures: list[tuple[str, str]],
) -> str:
    """Add what one observation brings to the summary's lists; returns its reply text."""
    for f in _files_of(o):
        if f not in files:
            files.append(f)
    name = o.payload.get("tool_name")
    if isinstance(name, str) and name and name not in tools:
        tools.append(name)
    if o.kind == "tool_pre" or o.kind == "tool_post":
        cmd = _command_of(o)
        if cmd and cmd not in commands:
            commands.append(cmd)
    fail = _failure_of(o)
    if fail:
        failures.append((str(name or o.event), fail))
    return _reply_text(o)


def compile_session(
    meta: SessionMeta,
    observations: list[Observation],
    *,
    status: str,
    ended: float | None,
    now: float,
    created: float | None = None,
    path: str | None = None,
    excerpt_bytes: int = 2000,
    previous: str | None = None,
    repeats: dict[int, str] | None = None,
    forgotten: Collection[str] = (),
    memo: TimelineMemo | None = None,
    part_events: int = 0,
) -> Compiled:
    """Render a session page. ``observations`` in arrival order; times are UTC epoch seconds.
    ``previous``: the page of the session this one continues (after a ``clear``). An event
    that cannot be rendered becomes a placeholder entry (:func:`placeholder`); the others
    are written (``Compiled.unrendered`` names it). ``repeats``: arrival number → the
    ``page#^tN`` a fork's repeated prompt links to instead of its text. ``forgotten``:
    block ids (``t7``) of forgotten entries, each rendered as a stub
    (:mod:`wiki_memory.wiki.entryforget`); their events leave the summary and title.
    ``memo``: what the last compile of this session kept (``Compiled.memo``): only the
    events after those it holds are rendered when it fits
    (:mod:`wiki_memory.wiki.timelinememo`). ``part_events`` (0: none): the entries of
    later arrival numbers go to part pages (``Compiled.parts``, :mod:`.sessionparts`)."""
    repeats = repeats or {}
    gone = frozenset(forgotten)
    if memo is None or not memo.fits(meta.key, excerpt_bytes, previous, repeats, gone):
        memo = TimelineMemo(meta.key, excerpt_bytes, previous, _RULES, forgotten=gone)
    if not memo.extend(observations, repeats):
        memo = TimelineMemo(meta.key, excerpt_bytes, previous, _RULES, forgotten=gone)
        memo.extend(observations, repeats)
    files, tools, commands, failures = memo.files, memo.tools, memo.commands, memo.failures
    last_reply = memo.last_reply
    prompts = [memo.first_prompt] if memo.first_prompt else []
    title_src = prompts[0] if prompts else ""
    title = cut_words(" ".join(title_src.split()), 80) or f"Session {meta.session_id[:24]}"
    path = path or page_path(meta, observations)
    start = min(meta.started, memo.min_ts)
    # the offset the first event that wrote one was sent at (the user's zone then)
    start_offset = memo.start_offset
    md: dict[str, Any] = {
        "type": "session",
        "id": f"ses_{meta.key[:16]}",
        "title": title,
        "created": iso(created if created is not None else now),
        "updated": iso(now),
        "project": meta.project or None,
        "harness": meta.harness,
        "session_id": meta.session_id,
        "user": meta.user,
        "started": _local_iso(start, start_offset),
        "ended": iso(ended) if ended is not None else None,
        "status": status,
        "files": files[:200],
        "tools": tools,
        "tags": ["session", meta.harness],
    }
    if previous:
        md["continues"] = previous
    lines = []
    if (started_line := _started_line(start, start_offset)) is not None:
        lines.append(started_line)
    if prompts:
        lines.append(f"- **Goal:** {_inline(_one_line(prompts[0], 300))}")
    if files:
        lines.append("- **Files touched:** " + ", ".join(f"`{_code(f)}`" for f in files[:30]))
    if commands:
        lines.append(
            "- **Commands run:** "
            + ", ".join(f"`{_code(_one_line(c, 120))}`" for c in commands[:15])
        )
    for name, err in failures[-5:]:
        lines.append(f"- **Failed:** {_inline(name)}: {_inline(_one_line(err, 200))}")
    if last_reply:
        lines.append(f"- **Last reply:** {_inline(_one_line(last_reply, 400))}")
    split = part_events > 0 and memo.n > part_events
    if split:
        timeline, parts = split_memo(memo, md, path, _escape_heading(title), part_events, ended)
        if (line := parts_line(path, [p.part for p in parts])) is not None:
            lines.append(line)
    else:
        timeline, parts = memo.timeline(), []  # escaped already, entry by entry
    summary = "\n".join(lines) if lines else "- (no prompts or tool calls yet)"
    head = f"# {_escape_heading(title)}\n\n## Summary\n\n{summary}\n\n{TIMELINE_HEADING}\n\n"
    # captured text may hold NUL and other control characters: shown, never raw bytes
    md = {k: escape_value(v) for k, v in md.items()}
    summary = escape_controls(summary)
    body = escape_controls(head) + timeline + "\n"
    unrendered = list(memo.unrendered)
    return Compiled(path, md, body, summary, timeline, len(observations), unrendered, memo, parts)


def _one_line(text: str, limit: int) -> str:
    s = " ".join(text.split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _code(text: str) -> str:
    return text.replace("`", "'")


def _inline(text: str) -> str:
    """User text as an inline code span, so nothing in it becomes a link, tag or block id."""
    return f"`{_code(text)}`" if text else ""


_HEADING_UNSAFE = re.compile(r"[\[\]#^|*_`<>\\]+")


def _escape_heading(title: str) -> str:
    """The H1 text: the title without characters that would make links, tags or block ids
    (the exact title is kept in frontmatter)."""
    return " ".join(_HEADING_UNSAFE.sub(" ", title).split()) or "Session"


def _repeated(n: int, o: Observation, link: str) -> Entry:
    """A fork's copy of a prompt its origin holds: a link, not the text again."""
    return Entry(n, o.ts, "prompt", "prompt · repeated", [f"same prompt as [[{link}]]"])


_RULES = Rules(add_entry, placeholder, _repeated, prompt_text, summarize_into)
