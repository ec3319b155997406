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
    bullets,
    clip,
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

#: commands whose exit status 1 answers a question ("no match", "files differ", "not
#: found") rather than reporting an error: grep and friends, find piped to grep, diff,
#: cmp, test, which (exit 2 and above stay failures)
_PROBE_RE = re.compile(
    r"(?:^|[|;&(]\s*)(?:grep|egrep|fgrep|rg|ag|ack|diff|cmp|test|\[|which|command\s+-v|"
    r"git\s+(?:diff|grep)|pgrep|find)\b"
)

#: a reply that reports work still broken or not done (English, German, French)
_REPLY_FAIL_RE = re.compile(
    r"""still\s+(?:fail|failing|broken|red|erroring)|\bfails?\b(?!\s+as\s+expected)
      |\bfailing\b|\bcould\s*(?:n['’]t|\s+not)\b|\bunable\s+to\b|\bblocked\b
      |\brejected\b|\bnot\s+(?:yet\s+)?(?:working|passing|fixed|done|finished)\b
      |\berror\s+persists\b|\bgave\s+up\b|échoue|schlägt\s+fehl|fehlgeschlagen
      |\bbloqué""",
    re.X | re.I,
)

#: a reply that reports success
_REPLY_OK_RE = re.compile(
    r"""\b(?:pass(?:es|ed|ing)?|green|clean|done|fixed|works|succeeded|success(?:ful)?
      |all\s+set|resolved|behoben|erledigt|laufen\s+durch|terminé|réussi)\b|✅""",
    re.X | re.I,
)

#: a next-step line that says there are none ("Next steps: none", "TODO: nothing left")
_NONE_LEFT_RE = re.compile(r"[:：]\s*(?:none|nothing|n/a|-|—)\b", re.I)

#: a table row with a cell that marks work still open (``| /v1/upload | pending: … |``)
_OPEN_CELL_RE = re.compile(r"^\s*(?:pending|todo|open|not\s+done|wip|missing)\b", re.I)

#: the closing question of a reply that waits for the user's decision
_ASK_RE = re.compile(
    r"\b(?:should|shall|do|would|can|could|may)\s+(?:i|we|you)\b|\bor\b|\bwhich\b", re.I
)


def reply_outcome(text: str) -> str:
    """``"failure"``, ``"success"`` or ``"neutral"``: what a reply says about the work.

    Failure wins over success ("fixed the pip step, but the build now fails"); "fails as
    expected" is not a failure. Word lists in English, German and French
    (:data:`_REPLY_FAIL_RE`, :data:`_REPLY_OK_RE`)."""
    if _REPLY_FAIL_RE.search(text):
        return "failure"
    if _REPLY_OK_RE.search(text):
        return "success"
    return "neutral"


def is_probe(command: str, code: int | None) -> bool:
    """True when a failed shell ``command`` was a question answered "no": exit status 1
    of grep, rg, find … | grep, diff, cmp, test or which (:data:`_PROBE_RE`). A missing
    exit code counts as 1 only for these commands' bare ``Exit code 1`` failures."""
    return code == 1 and bool(_PROBE_RE.search(command))


@dataclass
class SessionSignals:
    """Signs of unfinished work in a session's observations (all zero-LLM).

    ``failed_tool`` is the first of ``failures``: the tool calls that failed and were
    neither repeated with success later nor followed by a reply reporting success,
    each ``(tool, command or "", error)``; ``resolved`` are failures that were."""

    failed_tool: tuple[str, str, str] | None = None  # (tool, command or "", error)
    failures: list[tuple[str, str, str]] = field(default_factory=list)
    resolved: list[tuple[str, str, str]] = field(default_factory=list)
    unanswered_prompt: str | None = None
    next_steps: list[str] = field(default_factory=list)
    late_compaction: bool = False
    last_prompt: str = ""
    last_reply: str = ""
    open_questions: list[str] = field(default_factory=list)
    waits_for_user: bool = False
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
        if self.waits_for_user:
            out.append("question")
        if self.late_compaction:
            out.append("late_compaction")
        return out


_REPLY_KINDS = {"stop", "turn"}
_TOOL_RESULT_KINDS = {"tool_post", "tool_failure"}


def _tool_key(o: Observation) -> str:
    """What identifies "the same command" again: the shell command with its whitespace
    folded, else the tool's name and the file it is about."""
    cmd = compiler._command_of(o)
    if cmd:
        return "$ " + " ".join(cmd.split())
    files = compiler._files_of(o)
    return f"{o.payload.get('tool_name') or o.event} {files[0] if files else ''}"


def session_signals(observations: Sequence[Observation]) -> SessionSignals:
    """Look for signs of unfinished work, in event-time order, and weigh what came after
    each failure (see docs/handoffs.md, "Automatic handoffs"):

    - a failed tool call counts only when nothing resolved it: a later successful run
      of the same command (or tool on the same file) resolves it, and so does a later
      final reply that reports success (:func:`reply_outcome`) without reporting a
      failure; a probe that answered "no" (``grep`` without a match, ``diff`` of files
      that differ, :func:`is_probe`) is no failure at all. A failure after the last
      reply (``StopFailure`` included) always counts;
    - the last prompt got no answer (no ``Stop``/turn after it) while the session shows
      agent activity (a tool call or a reply); prompts with a ``speaker`` are dialogue
      transcripts, not requests to the agent, and never count;
    - lines in the last assistant message that announce work still to do
      (:data:`NEXT_STEP_RE`, a table cell marked pending), unless they say there is
      none ("Next steps: none");
    - the last reply ends by asking the user to decide (``Should I … or …?``);
    - the context was compacted and no turn finished after it.
    """
    sig = SessionSignals()
    order = sorted(enumerate(observations), key=lambda t: (t[1].ts, t[0]))
    obs = [o for _, o in order]
    last_prompt_i: int | None = None
    last_reply_i: int | None = None
    last_compact_i: int | None = None
    activity = False
    dialogue_reply = False
    # failures not yet resolved: tool key -> (index, (tool, command, error))
    open_fail: dict[str, tuple[int, tuple[str, str, str]]] = {}
    for i, o in enumerate(obs):
        k = o.kind
        if k in _TOOL_RESULT_KINDS:
            activity = True
            key = _tool_key(o)
            err = compiler._failure_of(o)
            cmd = compiler._command_of(o) or ""
            if err and not is_probe(cmd, compiler.exit_code_of(o)):
                name = str(o.payload.get("tool_name") or o.event)
                open_fail[key] = (i, (name, cmd, err))
            elif not err and key in open_fail:
                sig.resolved.append(open_fail.pop(key)[1])
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
            speaker = o.payload.get("speaker")
            dialogue_reply = isinstance(speaker, str) and bool(speaker)
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
    outcome = reply_outcome(sig.last_reply) if sig.last_reply else "neutral"
    last_result_i = max(
        (i for i, o in enumerate(obs) if o.kind in _TOOL_RESULT_KINDS and i < (last_reply_i or 0)),
        default=None,
    )
    for i, failure in sorted(open_fail.values()):
        if last_reply_i is None or i > last_reply_i or outcome == "failure":
            sig.failures.append(failure)
        elif outcome == "neutral" and i == last_result_i:
            # the reply neither claims success nor admits failure, and nothing was
            # done after the failure: it still stands
            sig.failures.append(failure)
        else:
            sig.resolved.append(failure)
    if sig.failures:
        sig.failed_tool = sig.failures[-1]
    if (
        last_prompt_i is not None
        and activity
        and (last_reply_i is None or last_reply_i < last_prompt_i)
    ):
        sig.unanswered_prompt = sig.last_prompt
    if sig.last_reply and last_reply_i is not None and not dialogue_reply:
        # only the reply that ended the session's last turn counts
        sig.next_steps = [
            ln for ln in next_step_lines(sig.last_reply) if not _NONE_LEFT_RE.search(ln)
        ]
        sig.next_steps += [
            ln.strip()
            for ln in sig.last_reply.splitlines()
            if ln.lstrip().startswith("|")
            and any(_OPEN_CELL_RE.match(c) for c in ln.strip().strip("|").split("|"))
        ]
        sig.open_questions = [
            ln.strip()
            for ln in sig.last_reply.splitlines()
            if ln.strip().endswith("?") and len(ln.strip()) > 3
        ][:5]
        last_line = next(
            (ln.strip() for ln in reversed(sig.last_reply.splitlines()) if ln.strip()), ""
        )
        sig.waits_for_user = last_line.endswith("?") and bool(_ASK_RE.search(last_line))
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
    # a session with no project (a scratch folder, $HOME) hands off too: personal to its
    # user, under people/<user>/handoffs/, with no project
    personal = not info.project
    sig = session_signals(observations)
    if not sig.names:
        return
    # the server's own job for the session's recorded user: judged as that user is now
    who = Claimant(info.user, info.harness, info.session_id, svc.memory.scope.named(info.user))
    now = svc.clock()
    older: list[Handoff] = []
    for r in svc._indexed(info.project or None):
        m = r.get("meta") or {}
        if m.get("user") != info.user or (personal and m.get("project")):
            continue
        if m.get("harness") == info.harness and m.get("session") == info.session_id:
            return  # the session left a handoff itself (or this hook already ran)
        if m.get("auto") and m.get("status") in ("open", "offered", None):
            h = svc._fresh(r["path"], who)
            if h is not None and h.meta.get("auto") and h.stored_status in ("open", "offered"):
                older.append(h)
    title_src = sig.last_prompt or (page.rsplit("/", 1)[-1].removesuffix(".md"))
    title = "Unfinished: " + compiler.cut_words(" ".join(title_src.split()), 80)
    sections = _auto_sections(sig, page, title_src, info, now)
    h = svc._write_new(
        who,
        project=info.project,
        title=title,
        to="any",
        visibility="personal" if personal else "project",
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


def _error_tail(err: str, keep: int = 1800) -> str:
    """The end of a long error text (where a build's or test run's error is), marked."""
    return err if len(err) <= keep else "…\n" + err[-keep:]


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
        "tool_failed": "a tool call failed and nothing after it resolved it",
        "question": "its last reply asks the user to decide",
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
        where.append("Last prompt:\n\n" + compiler.fence(clip(sig.last_prompt, 1500)))
    if sig.last_reply:
        where.append("Last reply:\n\n" + compiler.fence(clip(sig.last_reply, 2000)))
    parts = []
    for name, cmd, err in sig.failures[-3:]:
        one = f"Tool **{name}** failed"
        if cmd:
            one += ":\n\n" + compiler.fence(clip(cmd, 1000), "sh")
        one += "\n\nerror:\n\n" + compiler.fence(clip(_error_tail(err), 2000))
        parts.append(one)
    if sig.resolved:
        fixed = ", ".join(f"`{(c or n).replace('`', '')[:80]}`" for n, c, _ in sig.resolved[-5:])
        parts.append(f"Failed earlier but resolved later in the session: {fixed}.")
    failed = "\n\n".join(parts)
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
        "open_questions": bullets(questions),
        "next_steps": bullets(steps),
        "files": bullets([f"`{f.replace('`', '')}`" for f in sig.files[:50]]),
    }
