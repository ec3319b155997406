"""Automatic handoffs (zero LLM): the session-end hook and the signs of unfinished work.

Owns :func:`session_signals` (a failed last tool call, an unanswered last prompt, next
steps in the last reply, a late compaction), :func:`next_step_lines`, and
:func:`open_automatic`: when a session ends with any signal and left no handoff itself,
it opens one for the session's project that links the session page and quotes where the
work stopped; a newer automatic handoff of the same project and user supersedes an older
one still open. The service's :meth:`HandoffService.on_session_end
<wiki_memory.core.handoffs.service.HandoffService.on_session_end>` is the hook the core
calls on the writer thread; it runs :func:`open_automatic`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from wiki_memory.capture.observation import Observation, iso
from wiki_memory.capture.spool import SessionInfo
from wiki_memory.core.handoffs.model import (
    Claimant,
    Handoff,
    _bullets,
    _clip,
    parse_handoff,
    session_link,
)
from wiki_memory.core.handoffs.pages import HandoffPages
from wiki_memory.wiki import compiler
from wiki_memory.wiki.frontmatter import FrontmatterError, set_keys

log = logging.getLogger("wiki_memory.core.handoffs")


#: a line of an assistant message that announces work still to do (anchored at the line
#: start, with a colon, so that chat such as "I'll go there next week" never matches)
NEXT_STEP_RE = re.compile(
    r"""^\s*(?:[-*+]\s+|\d+[.)]\s+)?(?:\#{1,6}\s*)?(?:\*\*|__)?(?:
        (?:next\s+steps?|to-?do|remaining(?:\s+(?:work|steps|tasks))?|still\s+to\s+do
          |left\s+to\s+do|open\s+items|follow[- ]?ups?|not\s+(?:yet\s+)?done)
        (?:\*\*|__)?\s*[:：]
      | (?-i:TODO)\b
      | \[\s\]\s+\S
    )""",
    re.X | re.I,
)


def next_step_lines(text: str, limit: int = 12) -> list[str]:
    """Lines of ``text`` that announce work still to do (``Next steps:``, ``TODO``,
    ``- [ ] …``), with the lines that follow a ``Next steps:`` heading; at most ``limit``."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines) and len(out) < limit:
        ln = lines[i]
        if NEXT_STEP_RE.match(ln):
            out.append(ln.strip())
            # a heading-like "Next steps:" with nothing after the colon: take its list
            if ln.rstrip().endswith((":", "：")):
                j = i + 1
                while j < len(lines) and len(out) < limit:
                    nxt = lines[j].strip()
                    if not nxt:
                        if j > i + 1:
                            break
                        j += 1
                        continue
                    if not re.match(r"^(?:[-*+]|\d+[.)])\s+", nxt):
                        break
                    out.append(nxt)
                    j += 1
                i = j
                continue
        i += 1
    return out


# --------------------------------------------------------------------------- signals


@dataclass
class SessionSignals:
    """Signs of unfinished work in a session's observations (all zero-LLM)."""

    failed_tool: tuple[str, str, str] | None = None  # (tool, command or "", error)
    unanswered_prompt: str | None = None
    next_steps: list[str] = field(default_factory=list)
    late_compaction: bool = False
    last_prompt: str = ""
    last_reply: str = ""
    open_questions: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        out = []
        if self.failed_tool:
            out.append("tool_failed")
        if self.unanswered_prompt is not None:
            out.append("unanswered_prompt")
        if self.next_steps:
            out.append("next_steps")
        if self.late_compaction:
            out.append("late_compaction")
        return out


_REPLY_KINDS = {"stop", "turn"}
_TOOL_RESULT_KINDS = {"tool_post", "tool_failure"}


def session_signals(observations: Sequence[Observation]) -> SessionSignals:
    """Look for signs of unfinished work, in event-time order:

    - the last tool result is a failure (``PostToolUseFailure``, ``StopFailure``, or a
      tool response carrying an error / non-zero exit code);
    - the last prompt got no answer (no ``Stop``/turn after it) while the session shows
      agent activity (a tool call or a reply); prompts with a ``speaker`` are dialogue
      transcripts, not requests to the agent, and never count;
    - lines in the last assistant message that announce work still to do
      (:data:`NEXT_STEP_RE`);
    - the context was compacted and no turn finished after it.
    """
    sig = SessionSignals()
    order = sorted(enumerate(observations), key=lambda t: (t[1].ts, t[0]))
    obs = [o for _, o in order]
    last_tool: Observation | None = None
    last_prompt_i: int | None = None
    last_reply_i: int | None = None
    last_compact_i: int | None = None
    activity = False
    for i, o in enumerate(obs):
        k = o.kind
        if k in _TOOL_RESULT_KINDS:
            last_tool = o
            activity = True
        elif k == "tool_pre":
            activity = True
        elif k == "prompt":
            speaker = o.payload.get("speaker")
            if not (isinstance(speaker, str) and speaker):
                last_prompt_i = i
                sig.last_prompt = _prompt_of(o)
        elif k in _REPLY_KINDS:
            activity = True
            last_reply_i = i
            text = compiler._reply_text(o)
            if k == "turn":
                p = compiler._prompt_text(o)
                if p:
                    sig.last_prompt = p
            if text:
                sig.last_reply = text
        elif k == "compact":
            last_compact_i = i
        for f in compiler._files_of(o):
            if f not in sig.files:
                sig.files.append(f)
    if last_tool is not None:
        err = compiler._failure_of(last_tool)
        if err:
            name = str(last_tool.payload.get("tool_name") or last_tool.event)
            sig.failed_tool = (name, compiler._command_of(last_tool) or "", err)
    if (
        last_prompt_i is not None
        and activity
        and (last_reply_i is None or last_reply_i < last_prompt_i)
    ):
        sig.unanswered_prompt = sig.last_prompt
    if sig.last_reply and last_reply_i is not None:
        # only the reply that ended the session's last turn counts
        sig.next_steps = next_step_lines(sig.last_reply)
        sig.open_questions = [
            ln.strip()
            for ln in sig.last_reply.splitlines()
            if ln.strip().endswith("?") and len(ln.strip()) > 3
        ][:5]
    if last_compact_i is not None and (last_reply_i is None or last_reply_i < last_compact_i):
        sig.late_compaction = True
    return sig


def _prompt_of(o: Observation) -> str:
    return compiler._prompt_text(o)


# --------------------------------------------------------------------------- the hook


def open_automatic(
    svc: HandoffPages, info: SessionInfo, observations: list[Observation], page: str
) -> None:
    """Open an automatic handoff when the ended session shows signs of unfinished work
    (:func:`session_signals`) and left none itself (writer thread)."""
    if not svc.config.auto:
        return
    sig = session_signals(observations)
    if not sig.names:
        return
    who = Claimant(info.user, info.harness, info.session_id)
    now = svc.clock()
    older: list[Handoff] = []
    for r in svc._indexed(info.project):
        m = r.get("meta") or {}
        if m.get("user") != info.user:
            continue
        if m.get("harness") == info.harness and m.get("session") == info.session_id:
            return  # the session left a handoff itself (or this hook already ran)
        if m.get("auto") and m.get("status") in ("open", "offered", None):
            h = svc._fresh(r["path"], who)
            if h is not None and h.meta.get("auto") and h.stored_status in ("open", "offered"):
                older.append(h)
    title_src = sig.last_prompt or (page.rsplit("/", 1)[-1].removesuffix(".md"))
    title = "Unfinished: " + " ".join(title_src.split())[:80]
    sections = _auto_sections(sig, page, title_src, info, now)
    h = svc._write_new(
        who,
        project=info.project,
        title=title,
        to="any",
        visibility="project",
        expires=now + svc.config.expires_seconds,
        sections=sections,
        session_page=page,
        now=now,
        auto=True,
        signals=sig.names,
        supersedes=[o.id for o in older] or None,
    )
    for o in older:
        _supersede_inline(svc, o.path, h.id, info.user)
    log.info("automatic handoff %s for %s (%s)", h.id, page, ", ".join(sig.names))


def _supersede_inline(svc: HandoffPages, path: str, new_id: str, user: str) -> None:
    """Cancel the older automatic handoff at ``path``, ``superseded_by`` ``new_id``."""

    def fn(current: bytes | None) -> bytes | None:
        if current is None:
            return None
        h = parse_handoff(current, path)
        if h is None or h.stored_status not in ("open", "offered"):
            return None
        now = svc.clock()
        svc.leases.drop(h.id)
        try:
            return set_keys(
                current,
                {
                    "status": "cancelled",
                    "superseded_by": new_id,
                    "cancelled_at": iso(now),
                    "cancelled_by": user,
                    "updated": iso(now),
                },
            )
        except FrontmatterError:
            return None

    svc.memory.update_page(path, fn, user=user, message=f"Handoff superseded by {new_id}: {path}")


def _auto_sections(
    sig: SessionSignals, page: str, title: str, info: SessionInfo, now: float
) -> dict[str, str]:
    why = {
        "tool_failed": "its last tool call failed",
        "unanswered_prompt": "its last prompt got no answer",
        "next_steps": "its last reply lists work still to do",
        "late_compaction": "its context was compacted and no turn finished after that",
    }
    reasons = "; ".join(why[n] for n in sig.names)
    where = [
        f"Session {session_link(page, title)} ({info.harness}, {info.user}) ended at"
        f" {iso(now)} with signs of unfinished work: {reasons}.",
    ]
    if sig.last_prompt:
        where.append("Last prompt:\n\n" + compiler.fence(_clip(sig.last_prompt, 1500)))
    if sig.last_reply:
        where.append("Last reply:\n\n" + compiler.fence(_clip(sig.last_reply, 2000)))
    failed = ""
    if sig.failed_tool:
        name, cmd, err = sig.failed_tool
        failed = f"Tool **{name}** failed"
        if cmd:
            failed += ":\n\n" + compiler.fence(_clip(cmd, 1000), "sh")
        failed += "\n\nerror:\n\n" + compiler.fence(_clip(err, 2000))
    questions = []
    if sig.unanswered_prompt:
        questions.append("The last prompt was not answered (quoted above).")
    questions.extend(f"`{q.replace('`', '')}`" for q in sig.open_questions)
    steps = [f"`{s.replace('`', '')}`" for s in sig.next_steps]
    if sig.late_compaction:
        steps.append("The context was compacted near the end: re-read the session page first.")
    return {
        "where_we_left_off": "\n\n".join(where),
        "what_failed": failed,
        "open_questions": _bullets(questions),
        "next_steps": _bullets(steps),
        "files": _bullets([f"`{f.replace('`', '')}`" for f in sig.files[:50]]),
    }
